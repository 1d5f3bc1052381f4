//! Small helpers for tests: unique key prefixes, log setup and capture, polling until a condition holds.

use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// A key prefix no other test in any process uses: `t{pid}x{n}-{name}`.
/// Letters, digits and `-` only, so it is safe inside a hash-tagged key.
pub fn unique_prefix(name: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("t{}x{n}-{name}", std::process::id())
}

/// Installs a global subscriber writing through the test harness (shown for
/// failing tests only); `RUST_LOG` filters, default `info`. Safe to call often.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_test_writer()
        .try_init();
}

/// Polls `condition` every 20 ms until it holds; panics naming `what` after `timeout`.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Log lines captured by [`capture_logs`].
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }

    /// Captured lines containing every one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| needles.iter().all(|needle| line.contains(needle)))
            .map(str::to_owned)
            .collect()
    }
}

impl Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogCapture {
    type Writer = LogCapture;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Captures `info` and above, without colours, for the current thread until
/// the guard drops. Use in a current-thread runtime (the `#[tokio::test]`
/// default) so that spawned tasks log on the capturing thread.
pub fn capture_logs() -> (LogCapture, tracing::subscriber::DefaultGuard) {
    let capture = LogCapture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new("info"))
        .with_ansi(false)
        .with_writer(capture.clone())
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    (capture, guard)
}

/// Entries pending in `group` on `key` (the `XPENDING key group` summary count).
pub async fn pending_count(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    group: &str,
) -> usize {
    let reply: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
        .arg(key)
        .arg(group)
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XPENDING {key} {group}: {err}"));
    reply.count()
}

/// Every pending entry of `group` on `key`, with owner and delivery count
/// (the extended `XPENDING key group - + count` form).
pub async fn pending_entries(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    group: &str,
) -> Vec<redis::streams::StreamPendingId> {
    let reply: redis::streams::StreamPendingCountReply = redis::cmd("XPENDING")
        .arg(key)
        .arg(group)
        .arg("-")
        .arg("+")
        .arg(10_000)
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XPENDING {key} {group} - +: {err}"));
    reply.ids
}
