//! `queuegen acl render`: turn the generated `redis/users.acl` into the file redis-server loads, with password hashes from the environment.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use queuegen::gen::deploy::acl;

#[derive(Debug, clap::Args)]
#[command(about = "Work with the generated Redis ACL users")]
pub struct Args {
    #[command(subcommand)]
    pub command: AclCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum AclCommand {
    Render(RenderArgs),
}

#[derive(Debug, clap::Args)]
#[command(
    about = "Render the generated users.acl into a file redis-server can load",
    long_about = "Render the generated users.acl into a file redis-server can load.

Drops the comments (Redis refuses them in an ACL file) and replaces each
#<sha256:VARIABLE> placeholder with the SHA-256 of the password in that
environment variable. A variable holding several lines gives its user
several passwords: add the new one beside the old, roll the clients over,
then render again with the new one alone. Nothing secret is written but
hashes; the output file is created readable by its owner only.

Every role may run CLIENT SETINFO, which the redis crate and KEDA's client
send on connecting, but Redis 7.0 refuses an ACL file that names a command it
does not know, and only Redis 8.2+ has XACKDEL (for `retention.on_ack:
delete`): say which server the file is for. --server asks it (COMMAND INFO,
as any user allowed to, e.g. an administrator or the default user before the
file is installed); --server-has says which of those commands it has.",
    after_help = "Examples:
  DOCS_PIPELINE_PRODUCER_PASSWORD=... DOCS_PIPELINE_WORKER_PASSWORD=... \\
  DOCS_PIPELINE_OPERATOR_PASSWORD=... DOCS_PIPELINE_MONITOR_PASSWORD=... \\
    queuegen acl render deploy/redis/users.acl --server redis://admin@redis:6379 \\
      --extra admins.acl --out /etc/redis/users.acl
  redis-cli ACL LOAD     # on a server started with `aclfile /etc/redis/users.acl`
  queuegen acl render deploy/redis/users.acl --server-has none                      # Redis 7.0
  queuegen acl render deploy/redis/users.acl --server-has client|setinfo,xackdel   # Redis 8.2"
)]
pub struct RenderArgs {
    /// The generated users file (deploy/redis/users.acl).
    pub file: PathBuf,

    /// Write here (mode 0600) instead of standard output.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// An ACL file of your own users (administrators, other services) to
    /// append; the generated file switches the default user off.
    #[arg(long, value_name = "FILE")]
    pub extra: Vec<PathBuf>,

    /// The server (or any node of the Cluster) the file is for: asked which
    /// commands it has. A password may come from REDIS_PASSWORD.
    #[arg(long, value_name = "URL", required_unless_present = "server_has")]
    pub server: Option<String>,

    /// Say instead of asking which of the commands not every server has the
    /// target server has: a comma-separated list of `client|setinfo` (Redis
    /// 7.2+, Valkey) and `xackdel` (Redis 8.2+), or `none`.
    #[arg(long, value_name = "COMMANDS", conflicts_with = "server")]
    pub server_has: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        AclCommand::Render(args) => render(args),
    }
}

fn render(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let generated = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let extra = args
        .extra
        .iter()
        .map(|path| {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let server = match (&args.server_has, &args.server) {
        (Some(list), _) => told(list)?,
        (None, Some(url)) => ask_server(url)?,
        (None, None) => anyhow::bail!(
            "say which server the file is for: --server URL, or --server-has COMMANDS"
        ),
    };
    let rendered = acl::render(&generated, &extra, server, |variable| {
        std::env::var(variable).ok()
    })
    .with_context(|| format!("rendering {}", args.file.display()))?;
    match &args.out {
        None => std::io::stdout().write_all(rendered.as_bytes())?,
        Some(path) => {
            write_private(path, &rendered).with_context(|| format!("writing {}", path.display()))?
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--server-has`: `none`, or names from `ServerCommands::OPTIONAL`.
fn told(list: &str) -> anyhow::Result<acl::ServerCommands> {
    let names: Vec<&str> = match list.trim() {
        "none" => Vec::new(),
        list => list.split(',').map(str::trim).collect(),
    };
    acl::ServerCommands::with(&names).map_err(|unknown| {
        anyhow::anyhow!(
            "--server-has names {unknown:?}; it takes `none` or a comma-separated list of {}",
            acl::ServerCommands::OPTIONAL.join(", ")
        )
    })
}

/// What the server at `url` has, asked with `COMMAND INFO`.
fn ask_server(url: &str) -> anyhow::Result<acl::ServerCommands> {
    let shown = super::connection::redacted(url);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let mut options = queuegen_runtime::ConnectOptions::new();
        if let Ok(password) = std::env::var("REDIS_PASSWORD") {
            options = options.password(password);
        }
        let redis = queuegen_runtime::Redis::connect_with(url, options)
            .await
            .with_context(|| format!("connecting to {shown} to ask which commands it has"))?;
        let client_setinfo =
            queuegen_runtime::connect::server_has_command(&mut redis.shared(), "client|setinfo")
                .await
                .with_context(|| format!("asking {shown} for COMMAND INFO CLIENT|SETINFO"))?;
        let xackdel = queuegen_runtime::connect::every_primary_has_command(&redis, "xackdel")
            .await
            .with_context(|| format!("asking {shown} for COMMAND INFO XACKDEL"))?;
        Ok(acl::ServerCommands {
            client_setinfo,
            xackdel,
        })
    })
}

/// Writes `contents` to `path`, created (or truncated) readable by its owner
/// only: an existing file is narrowed to 0600 before anything is written.
fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(contents.as_bytes())
}
