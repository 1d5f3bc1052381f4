//! `suite-worker` processes: started from a worker spec, killed with SIGKILL or stopped with SIGTERM, their logs kept for the verdict.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use queuegen_tests::suite::{worker::SPEC_ENV, WorkerSpec};

/// A running (or ended) `suite-worker` process.
pub struct WorkerProcess {
    child: tokio::process::Child,
    pub consumer: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl WorkerProcess {
    /// Starts a worker process for `spec`; with `failpoint` it dies with
    /// SIGKILL the first time it reaches that point.
    pub fn spawn(spec: &WorkerSpec, failpoint: Option<&str>) -> WorkerProcess {
        let dir = tempfile::Builder::new()
            .prefix("queuegen-suite-worker-")
            .tempdir()
            .expect("a temp dir for the worker's log");
        let log = dir.path().join("worker.log");
        let file = std::fs::File::create(&log).expect("the worker's log file");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_suite-worker"));
        command
            .env(SPEC_ENV, spec.to_json())
            .env_remove(queuegen_runtime::failpoint::ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().expect("log file handle")))
            .stderr(Stdio::from(file))
            .kill_on_drop(true);
        if let Some(point) = failpoint {
            command.env(queuegen_runtime::failpoint::ENV, point);
        }
        let child = command.spawn().expect("spawning suite-worker");
        WorkerProcess {
            child,
            consumer: spec.consumer.clone(),
            log,
            _dir: dir,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the worker has not been reaped yet")
    }

    /// `kill -9`, then reaps it.
    pub async fn kill(&mut self) -> ExitStatus {
        self.child.start_kill().expect("sending SIGKILL");
        self.child.wait().await.expect("reaping the worker")
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the process.
    pub fn signal(&self, signal: &str) {
        let sent = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .is_ok_and(|status| status.success());
        assert!(sent, "kill -{signal} {}", self.pid());
    }

    /// Sends SIGTERM: the worker shuts down as on a deploy.
    pub fn terminate(&self) {
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .is_ok_and(|status| status.success());
        assert!(sent, "kill -TERM {}", self.pid());
    }

    /// Its exit status once it ended, if it does within `timeout`.
    pub async fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .map(|status| status.expect("reaping the worker"))
    }

    /// Its exit status if it has ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("polling the worker")
    }

    /// Everything it wrote so far (logs on stderr, its report on stdout).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines of its log, for a problem report.
    pub fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        let from = lines.len().saturating_sub(15);
        lines[from..].join("\n")
    }
}

/// Whether a worker died of SIGKILL (a `kill -9` or its failpoint).
pub fn killed(status: ExitStatus) -> bool {
    status.signal() == Some(9)
}
