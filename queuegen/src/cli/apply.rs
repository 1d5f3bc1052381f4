//! `queuegen apply`: load and verify the service's Function library on a
//! Redis server, and create every partition's stream and consumer group there.

use std::process::ExitCode;

use anyhow::Context;
use queuegen::gen;
use queuegen::runtime_config::queue_config;
use queuegen::spec::model;
use queuegen_runtime::admin::LibraryLoad;
use queuegen_runtime::{admin, functions, Redis};

use super::common;

#[derive(Debug, clap::Args)]
#[command(
    about = "Create the streams and consumer groups of a spec on Redis and load its Function library",
    after_help = "Creating a group that already exists is reported and is not an error; any other \
Redis error stops the run, naming the key and group. Each partition's group is created under \
the partition's trim lease (waiting while a trimmer holds it), so no trim plans against a \
group set that changes under it.

The service's Function library, loaded first, (the same code `queuegen generate --deploy-out` writes to \
functions.lua) is loaded with FUNCTION LOAD REPLACE and verified by calling its version \
function. Its name carries the library version, so REPLACE only replaces that same \
version; other versions stay loaded beside it. --queue does not limit it.

Examples:
  queuegen apply queues.yaml --redis redis://127.0.0.1:6379
  REDIS_URL=redis://cache:6379 queuegen apply queues.yaml --queue ocr --json"
)]
pub struct Args {
    #[command(flatten)]
    pub target: common::SpecQueuesOnRedis,

    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec(&args.target.spec, "applying")? else {
        return Ok(ExitCode::from(1));
    };
    let selected = common::selected_queues(&spec, &args.target.spec, &args.target.queues)?;

    let library_code =
        gen::functions::generate(&spec, &args.target.spec.display().to_string())?.contents;

    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let (rows, loads) = runtime.block_on(async {
        let redis = args.target.redis.connect().await?;
        check_deployment(&spec, &args.target.spec, &redis)?;
        // The library first: creating groups takes the partitions' trim
        // leases, which are released through it.
        let loads = admin::load_library(&redis, &library_code)
            .await
            .context("loading the Function library")?;
        let library = loads
            .first()
            .map(|load| load.library.clone())
            .unwrap_or_default();
        functions::verify_library(&redis, &library)
            .await
            .context("verifying the Function library")?;
        let mut rows = Vec::new();
        for queue in &selected {
            let config = queue_config(&spec, queue);
            let setups = admin::ensure_groups(&redis, &config)
                .await
                .with_context(|| format!("queue {}", queue.name))?;
            rows.extend(setups.into_iter().map(|setup| Row {
                queue: queue.name.clone(),
                key: setup.key,
                group: setup.group,
                start: config.group_start.to_string(),
                created: setup.created,
            }));
        }
        anyhow::Ok((rows, loads))
    })?;

    if args.json {
        let json = serde_json::json!({
            "groups": rows,
            "library": {
                "name": loads.first().map(|load| load.library.as_str()),
                // One entry per primary: a Cluster loads it on each.
                "servers": loads.iter().map(|load| serde_json::json!({
                    "server": load.server,
                    "result": library_result(load),
                })).collect::<Vec<_>>(),
                "verified": true,
            },
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print_table(&rows);
        for load in &loads {
            println!(
                "function library {} on {}: {}, verified",
                load.library,
                load.server,
                match library_result(load) {
                    "replaced" => "replaced (this version was already loaded)",
                    _ => "loaded (new on this server)",
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The reviewed spec says which kind of deployment the queues live on:
/// applying a Cluster spec to a lone server (or the reverse) is a wrong URL
/// or a wrong spec, and nothing is changed.
fn check_deployment(
    spec: &model::Spec,
    path: &std::path::Path,
    redis: &Redis,
) -> anyhow::Result<()> {
    let (declared, found) = match (spec.redis.deployment, redis.is_cluster()) {
        (model::Deployment::Cluster, false) => ("cluster", "a standalone server"),
        (model::Deployment::Standalone, true) => ("standalone", "a Redis Cluster node"),
        _ => return Ok(()),
    };
    anyhow::bail!(
        "{}: redis.deployment is {declared}, but {} is {found}; nothing was changed. \
         Point --redis at the deployment the spec describes, or correct redis.deployment",
        path.display(),
        redis.addr()
    )
}

/// `loaded` (new on the server) or `replaced` (the same version was there).
fn library_result(load: &LibraryLoad) -> &'static str {
    if load.replaced {
        "replaced"
    } else {
        "loaded"
    }
}

#[derive(Debug, serde::Serialize)]
struct Row {
    queue: String,
    key: String,
    group: String,
    start: String,
    created: bool,
}

fn print_table(rows: &[Row]) {
    let key_width = rows.iter().map(|r| r.key.len()).max().unwrap_or(3).max(3);
    let group_width = rows.iter().map(|r| r.group.len()).max().unwrap_or(5).max(5);
    println!(
        "{:key_width$}  {:group_width$}  {:5}  RESULT",
        "KEY", "GROUP", "START"
    );
    for row in rows {
        let result = if row.created {
            "created"
        } else {
            "already existed"
        };
        println!(
            "{:key_width$}  {:group_width$}  {:5}  {result}",
            row.key, row.group, row.start
        );
    }
    let created = rows.iter().filter(|r| r.created).count();
    println!(
        "{} group(s) created, {} already existed",
        created,
        rows.len() - created
    );
}
