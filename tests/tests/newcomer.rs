//! The newcomer path: a service crate outside the workspace, built from the
//! README's Quickstart alone, runs one job through a real redis-server.
//!
//! The README is the script: the test runs the Quickstart's shell lines
//! (`cargo new`, `queuegen init`, `generate`, `apply`…), writes its `toml`
//! block into the crate's manifest (taking the path-dependency alternative
//! the block shows, pointed at this workspace's runtime) and each `rust`
//! block to the file its first comment names. So the README cannot drift
//! from what works: a changed command, dependency line or example that no
//! longer builds fails here.
//!
//! Slow on a first run, by nature: it builds the queuegen CLI (the
//! Quickstart's `cargo install`) and a fresh crate that compiles redis,
//! tokio and rustls once. Both go to `target/newcomer`, a target directory
//! of their own, because the `cargo test` running this holds the lock on
//! the workspace's usual one. The CLI builds `--locked`, as the README
//! installs it. The crate resolves its dependencies afresh, as a newcomer's
//! does: the newest versions compatible with the runtime's requirements, not
//! this workspace's lock (so this needs the crates.io index). A deprecation or
//! a break that only newer dependencies bring shows here, as a warning this
//! test refuses. Later runs reuse `target/newcomer` and take seconds.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use queuegen_tests::support::{pending_count, wait_until};
use queuegen_tests::RedisServer;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

/// The cargo running this test (falls back to `cargo` on PATH).
fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.env("CARGO_TARGET_DIR", workspace().join("target/newcomer"));
    // No debug info: nothing here is debugged, and it halves the disk the
    // first build takes and its link times.
    command.env("CARGO_PROFILE_DEV_DEBUG", "0");
    command
}

/// Runs `command`, panicking with its output when it fails; returns stdout and stderr.
fn run(mut command: Command, what: &str) -> (String, String) {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|err| panic!("{what}: cannot start: {err}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{what}: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    (stdout, stderr)
}

/// The README's Quickstart section, up to its first subsection.
fn quickstart() -> String {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let start = readme
        .find("\n## Quickstart\n")
        .expect("README has a Quickstart section");
    let body = &readme[start + "\n## Quickstart\n".len()..];
    let end = body.find("\n##").unwrap_or(body.len());
    body[..end].to_owned()
}

/// Fenced code blocks of `markdown` as `(language, body)`.
fn code_blocks(markdown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in markdown.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(language)) => open = Some((language.trim().to_owned(), String::new())),
            (Some(_), Some("")) => blocks.push(open.take().unwrap()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "an unclosed code block in the Quickstart");
    blocks
}

fn only_block<'a>(blocks: &'a [(String, String)], language: &str) -> &'a str {
    let found: Vec<&str> = blocks
        .iter()
        .filter(|(lang, _)| lang == language)
        .map(|(_, body)| body.as_str())
        .collect();
    assert_eq!(found.len(), 1, "the Quickstart has one {language} block");
    found[0]
}

/// The Quickstart's `[dependencies]` with the runtime as a path dependency
/// on this workspace: the commented alternative it shows, instead of the
/// git line (whose URL is a placeholder for the reader's).
fn dependencies(block: &str) -> String {
    assert!(
        block.starts_with("[dependencies]\n"),
        "the toml block is the [dependencies] section:\n{block}"
    );
    let runtime = workspace().join("runtime");
    let mut saw_git = false;
    let mut saw_path = false;
    let lines: Vec<String> = block
        .lines()
        .filter_map(|line| {
            if line.starts_with("queuegen-runtime = { git = ") {
                saw_git = true;
                return None;
            }
            if let Some(path_line) = line.strip_prefix("# queuegen-runtime = { path = ") {
                saw_path = true;
                assert!(path_line.ends_with(" }"), "{line}");
                return Some(format!(
                    "queuegen-runtime = {{ path = {:?} }}",
                    runtime.display().to_string()
                ));
            }
            Some(line.to_owned())
        })
        .collect();
    assert!(
        saw_git && saw_path,
        "the toml block shows the git dependency and the path alternative:\n{block}"
    );
    lines.join("\n") + "\n"
}

/// Each `rust` block whose first line is `// <path>`: `(path, contents)`.
fn source_files(blocks: &[(String, String)]) -> Vec<(String, String)> {
    blocks
        .iter()
        .filter(|(lang, _)| lang == "rust")
        .map(|(_, body)| {
            let (first, rest) = body.split_once('\n').unwrap();
            let path = first
                .strip_prefix("// ")
                .filter(|path| path.starts_with("src/") && path.ends_with(".rs"))
                .unwrap_or_else(|| panic!("a Quickstart rust block names its file first:\n{body}"));
            (path.to_owned(), rest.to_owned())
        })
        .collect()
}

/// A shell line of the Quickstart without its trailing `# comment`.
fn command_of(line: &str) -> &str {
    line.split(" #").next().unwrap().trim()
}

#[tokio::test]
async fn a_crate_built_from_the_readme_alone_runs_one_job() {
    let started = std::time::Instant::now();
    let blocks = code_blocks(&quickstart());
    let commands: Vec<&str> = only_block(&blocks, "sh")
        .lines()
        .map(command_of)
        .filter(|line| !line.is_empty())
        .collect();
    let manifest_dependencies = dependencies(only_block(&blocks, "toml"));
    let files = source_files(&blocks);
    let server = RedisServer::start();
    let home = tempfile::Builder::new()
        .prefix("queuegen-newcomer-")
        .tempdir()
        .unwrap();

    // The shell lines, in order. The crate lives in the temp dir (the
    // README's "beside the checkout"), outside the workspace as a newcomer's is.
    let mut queuegen: Option<PathBuf> = None;
    let mut crate_dir: Option<PathBuf> = None;
    let mut redis_url_exported = false;
    for line in &commands {
        if *line == "cargo install --locked --path queuegen" {
            // Built, not installed: the test must not touch ~/.cargo/bin.
            let mut build = cargo();
            build.current_dir(workspace()).args([
                "build",
                "--locked",
                "--offline",
                "-p",
                "queuegen",
                "--bin",
                "queuegen",
            ]);
            run(build, "building the queuegen CLI");
            queuegen = Some(workspace().join("target/newcomer/debug/queuegen"));
        } else if let Some(name) = line
            .strip_prefix("cd .. && cargo new ")
            .and_then(|rest| rest.split_once(" && cd "))
            .filter(|(name, cd)| name == cd)
            .map(|(name, _)| name)
        {
            let mut new = cargo();
            new.current_dir(home.path())
                .args(["new", "--vcs", "none", name]);
            run(new, line);
            crate_dir = Some(home.path().join(name));
        } else if line.starts_with("export REDIS_URL=") {
            // The README's local Redis is the harness's private server here.
            redis_url_exported = true;
        } else if let Some(args) = line.strip_prefix("queuegen ") {
            let binary = queuegen.as_ref().expect("the CLI is installed first");
            let dir = crate_dir.as_ref().expect("the crate is created first");
            let mut command = Command::new(binary);
            command.current_dir(dir).env_remove("REDIS_URL");
            if redis_url_exported {
                command.env("REDIS_URL", server.url());
            }
            for arg in args.split_whitespace() {
                // The README's local Redis is the harness's private server here.
                if arg == "redis://127.0.0.1:6379" {
                    command.arg(server.url());
                } else {
                    command.arg(arg);
                }
            }
            run(command, line);
        } else {
            panic!("the Quickstart runs a command this test does not know: {line}");
        }
    }
    let crate_dir = crate_dir.expect("the Quickstart creates a crate");
    let name = crate_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for step in ["init", "generate", "apply"] {
        assert!(
            commands
                .iter()
                .any(|c| c.starts_with(&format!("queuegen {step} "))),
            "the Quickstart runs `queuegen {step}`: {commands:?}"
        );
    }

    // Its manifest: what `cargo new` wrote, with the README's dependencies.
    let manifest_path = crate_dir.join("Cargo.toml");
    let manifest = std::fs::read_to_string(&manifest_path).unwrap();
    let (package, empty) = manifest
        .split_once("[dependencies]")
        .expect("cargo new writes a [dependencies] section");
    assert_eq!(empty.trim(), "", "{manifest}");
    std::fs::write(&manifest_path, format!("{package}{manifest_dependencies}")).unwrap();

    let build = || {
        let mut build = cargo();
        build.current_dir(&crate_dir).arg("build");
        let (_, stderr) = run(build, "building the newcomer crate");
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|line| line.starts_with("warning"))
            .collect();
        assert!(
            warnings.is_empty(),
            "a newcomer's first build warns:\n{stderr}"
        );
    };
    // First with the handler stub exactly as `generate --stubs` wrote it and
    // its mod.rs: the README's main must build against those too.
    let (stubbed, edited): (Vec<_>, Vec<_>) = files
        .iter()
        .partition(|(path, _)| crate_dir.join(path).exists() && path.starts_with("src/handlers/"));
    assert!(!stubbed.is_empty(), "the README edits a generated stub");
    for (path, contents) in &edited {
        std::fs::write(crate_dir.join(path), contents).unwrap();
    }
    assert!(crate_dir.join("src/handlers/mod.rs").exists());
    build();
    for (path, contents) in &stubbed {
        std::fs::write(crate_dir.join(path), contents).unwrap();
    }
    build();
    eprintln!("built in {:?}", started.elapsed());

    // The queue's keys, as the CLI reads them from the crate's spec.
    let spec = queuegen::spec::check_file(&crate_dir.join("queues.yaml"))
        .unwrap()
        .spec
        .expect("the starter spec is valid");
    let [queue] = spec.queues.as_slice() else {
        panic!("the starter spec has one queue");
    };
    let config = queuegen::runtime_config::queue_config(&spec, queue);

    assert!(
        redis_url_exported,
        "the Quickstart exports REDIS_URL for the CLI and the service"
    );
    let mut service = Service::start(
        Command::new(workspace().join("target/newcomer/debug").join(&name))
            .env("REDIS_URL", server.url())
            .env("RUST_LOG", "info"),
    );
    let handled = service.line_starting("handled job-1", Duration::from_secs(60));
    assert_eq!(handled, "handled job-1: welcome for user-42");

    // Acknowledged: nothing pending in any partition, exactly one entry published.
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    wait_until(Duration::from_secs(10), "job-1 is acknowledged", || {
        let mut conn = conn.clone();
        let keys = config.ready_keys();
        let group = config.group.clone();
        async move {
            let mut pending = 0;
            for key in &keys {
                pending += pending_count(&mut conn, key, &group).await;
            }
            pending == 0
        }
    })
    .await;
    let mut entries = 0;
    for key in config.ready_keys() {
        let len: usize = redis::cmd("XLEN")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        entries += len;
    }
    assert_eq!(entries, 1, "one job published");

    // SIGTERM, as an orchestrator stops it: a clean exit with its report.
    let (status, printed, log) = service.terminate(Duration::from_secs(30));
    assert!(status.success(), "{status}: {printed:?}\n{log}");
    // Not silent: the README's subscriber shows the worker's own log.
    for said in ["worker starting", "shutdown requested"] {
        assert!(log.contains(said), "the worker's log says {said:?}:\n{log}");
    }
    let report = printed.last().expect("the report is printed last");
    assert!(
        report.starts_with("WorkerReport { handled: 1, done: 1, retried: 0, dead_lettered: 0,"),
        "{printed:?}"
    );
    eprintln!("newcomer path took {:?}", started.elapsed());
}

/// The newcomer's binary, running; its stdout read line by line on a thread,
/// its stderr (the log) kept whole by another.
struct Service {
    child: Child,
    lines: mpsc::Receiver<String>,
    printed: Vec<String>,
    log: std::thread::JoinHandle<String>,
}

impl Service {
    fn start(command: &mut Command) -> Service {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the newcomer's binary starts");
        let mut stderr = child.stderr.take().unwrap();
        let log = std::thread::spawn(move || {
            let mut log = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut log);
            log
        });
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Service {
            child,
            lines,
            printed: Vec::new(),
            log,
        }
    }

    /// Waits for the first printed line starting with `prefix`.
    fn line_starting(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.printed.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line starting with {prefix:?} within {timeout:?}; printed: {:?}",
                    self.printed
                ),
            }
        }
    }

    /// Sends SIGTERM and waits for the exit; returns the status, everything
    /// printed and the log.
    fn terminate(mut self, timeout: Duration) -> (std::process::ExitStatus, Vec<String>, String) {
        let mut kill = Command::new("kill");
        kill.args(["-TERM", &self.child.id().to_string()]);
        run(kill, "kill -TERM");
        let deadline = std::time::Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the service did not stop within {timeout:?} of SIGTERM: {:?}",
                self.printed
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader thread ends at EOF; take everything it read.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.printed.push(line);
        }
        let printed = std::mem::take(&mut self.printed);
        // Exited: stderr is at EOF, so the log thread has finished or is about to.
        let log = std::mem::replace(&mut self.log, std::thread::spawn(String::new))
            .join()
            .unwrap_or_default();
        (status, printed, log)
    }
}

impl Drop for Service {
    /// A failing test must not leave the service running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
