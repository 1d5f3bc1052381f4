//! Small helpers for tests: unique key prefixes, log setup and capture, polling, and reading queue state back.

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use queuegen_runtime::packed;
use queuegen_runtime::transitions::DueSet;
use queuegen_runtime::{QueueConfig, StreamSlot};
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

/// Installs the subscriber of the tests' worker processes (`suite-worker`,
/// `pg-process`): plain text on stderr, which the test shows; `RUST_LOG`
/// filters, default `info`.
pub fn init_process_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
}

/// The `main` of the tests' process binaries: tracing on stderr, then
/// `run`; an error is printed after `name` and exits 1.
pub async fn process_main(
    name: &str,
    run: impl Future<Output = Result<(), String>>,
) -> std::process::ExitCode {
    init_process_tracing();
    match run.await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("{name}: {problem}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Polls `condition` every 20 ms until it holds; panics naming `what` after `timeout`.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    if !eventually(timeout, condition).await {
        panic!("timed out after {timeout:?} waiting until {what}");
    }
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes; whether it held.
pub async fn eventually<F, Fut>(timeout: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
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
    capture_logs_at("info")
}

/// As [`capture_logs`], at the level (or `EnvFilter` directives) of
/// `filter`, e.g. `"debug"` for the per-job events.
pub fn capture_logs_at(filter: &str) -> (LogCapture, tracing::subscriber::DefaultGuard) {
    keep_callsite_interest_per_thread();
    let capture = LogCapture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_ansi(false)
        .with_writer(capture.clone())
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    (capture, guard)
}

/// Keeps a second dispatcher registered for the life of the process.
///
/// With exactly one dispatcher registered, tracing-core takes a shortcut: a
/// callsite first hit on another thread caches the interest of *that*
/// thread's subscriber (none, in a parallel test) for every thread, so a
/// capturing test loses those events. With two or more it asks all of them.
fn keep_callsite_interest_per_thread() {
    static SECOND: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    SECOND.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
}

/// Entries pending in `group` on `key` (the `XPENDING key group` summary count).
pub async fn pending_count(
    conn: &mut impl redis::aio::ConnectionLike,
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
    conn: &mut impl redis::aio::ConnectionLike,
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

/// Every entry of the stream `key`, oldest first, as `(id, fields)`: a
/// packed entry's fields unpacked, and a dead letter's `envelope` as the JSON
/// array `[field, value, ...]` whatever its stored form, so a test reads
/// either shape alike.
pub async fn stream_entries(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
) -> Vec<(String, HashMap<String, String>)> {
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XRANGE {key}: {err}"));
    reply
        .ids
        .into_iter()
        .map(|entry| {
            let raw: Vec<(String, Vec<u8>)> = entry
                .map
                .iter()
                .map(|(name, value)| {
                    let value: Vec<u8> = redis::from_redis_value_ref(value)
                        .unwrap_or_else(|err| panic!("{key} {} {name}: {err}", entry.id));
                    (name.clone(), value)
                })
                .collect();
            let pairs: Vec<(String, Vec<u8>)> = match packed::packed_value(&raw) {
                Some(value) => packed::unpack(value)
                    .unwrap_or_else(|err| panic!("{key} {}: the packed field {err}", entry.id))
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value.to_vec()))
                    .collect(),
                None => raw,
            };
            let fields = pairs
                .into_iter()
                .map(|(name, value)| {
                    let text = if name == "envelope" && value.first() != Some(&b'[') {
                        match packed::unpack(&value) {
                            Ok(_) => stored_as_json(&value),
                            // A packed entry that did not unpack, kept as it was.
                            Err(_) => String::from_utf8_lossy(&value).into_owned(),
                        }
                    } else {
                        String::from_utf8(value).unwrap_or_else(|err| {
                            panic!("{key} {} {name}: not UTF-8: {err}", entry.id)
                        })
                    };
                    (name, text)
                })
                .collect();
            (entry.id, fields)
        })
        .collect()
}

/// The dead letters of every stream of `config` (each lane of each partition), as `(stream, id, fields)`.
pub async fn dead_letters(
    conn: &mut impl redis::aio::ConnectionLike,
    config: &QueueConfig,
) -> Vec<(StreamSlot, String, HashMap<String, String>)> {
    let mut all = Vec::new();
    for stream in StreamSlot::all(config.streams()) {
        let key = config.dead_key(stream);
        for (id, fields) in stream_entries(conn, &key).await {
            all.push((stream, id, fields));
        }
    }
    all
}

/// Waits up to `timeout` until `config`'s queue holds `count` dead letters
/// (read on `conn`, the harness's own connection).
pub async fn wait_for_dead_letters<C>(
    conn: &C,
    config: &QueueConfig,
    count: usize,
    timeout: Duration,
) where
    C: redis::aio::ConnectionLike + Clone + Send,
{
    let what = format!("{count} job(s) are dead-lettered");
    wait_until(timeout, &what, || {
        let mut conn = conn.clone();
        async move { dead_letters(&mut conn, config).await.len() == count }
    })
    .await;
}

/// Every job waiting in a delayed set of `config`'s partitions:
/// `(stream, job_id, due ms, envelope fields)`.
pub async fn delayed_jobs(
    conn: &mut impl redis::aio::ConnectionLike,
    config: &QueueConfig,
) -> Vec<(StreamSlot, String, u64, HashMap<String, String>)> {
    scheduled_members(conn, config, DueSet::Delayed).await
}

/// Scheduled retries of every stream (lane and partition): `(stream, retry id, due ms, envelope fields)`.
pub async fn scheduled_retries(
    conn: &mut impl redis::aio::ConnectionLike,
    config: &QueueConfig,
) -> Vec<(StreamSlot, String, u64, HashMap<String, String>)> {
    scheduled_members(conn, config, DueSet::Retries).await
}

/// A set's envelope store: member -> envelope as stored (JSON or MessagePack).
type StoredEnvelopes = HashMap<String, Vec<u8>>;

/// The members of `set` in every partition, each with its due time and
/// envelope, from the set and its envelope store together (checked to agree).
async fn scheduled_members(
    conn: &mut impl redis::aio::ConnectionLike,
    config: &QueueConfig,
    set: DueSet,
) -> Vec<(StreamSlot, String, u64, HashMap<String, String>)> {
    let mut all = Vec::new();
    for partition in StreamSlot::all(config.streams()) {
        // One MULTI/EXEC: a scheduler running meanwhile cannot come between the two reads.
        let (due, stored): (Vec<(String, u64)>, StoredEnvelopes) = redis::pipe()
            .atomic()
            .cmd("ZRANGE")
            .arg(set.key(config, partition))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .cmd("HGETALL")
            .arg(set.jobs_key(config, partition))
            .query_async(conn)
            .await
            .unwrap();
        assert_eq!(
            due.len(),
            stored.len(),
            "partition {partition}: {set:?} and its envelope store agree: {due:?} / {stored:?}"
        );
        for (member, due_ms) in due {
            let envelope = stored
                .get(&member)
                .unwrap_or_else(|| panic!("{set:?} member {member} has no stored envelope"));
            all.push((partition, member, due_ms, envelope_fields(envelope)));
        }
    }
    all
}

/// The fields of an envelope stored by the Function library: a JSON array
/// `[field, value, ...]`, or the MessagePack array of a packed job.
pub fn envelope_fields(stored: impl AsRef<[u8]>) -> HashMap<String, String> {
    let stored = stored.as_ref();
    let json;
    let stored = if stored.first() == Some(&b'[') {
        std::str::from_utf8(stored).expect("a JSON envelope is UTF-8")
    } else {
        json = stored_as_json(stored);
        &json
    };
    let flat: Vec<String> = serde_json::from_str(stored)
        .unwrap_or_else(|err| panic!("stored envelope {stored:?}: {err}"));
    assert!(flat.len() % 2 == 0, "odd envelope {flat:?}");
    flat.chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
}

/// A packed stored envelope as the JSON array a fields job's is stored as.
fn stored_as_json(stored: &[u8]) -> String {
    let pairs = packed::unpack(stored).unwrap_or_else(|err| {
        panic!("stored envelope {stored:?} is not JSON, and as MessagePack it {err}")
    });
    let flat: Vec<String> = pairs
        .into_iter()
        .flat_map(|(name, value)| [name.to_owned(), String::from_utf8(value.to_vec()).unwrap()])
        .collect();
    serde_json::to_string(&flat).unwrap()
}

/// Pending entries of every partition of `config`.
pub async fn all_pending(
    conn: &mut impl redis::aio::ConnectionLike,
    config: &QueueConfig,
) -> Vec<redis::streams::StreamPendingId> {
    let mut all = Vec::new();
    for key in config.ready_keys() {
        all.extend(pending_entries(conn, &key, &config.group).await);
    }
    all
}

/// Waits up to `timeout` until every job of `ids` is among the job IDs
/// `handled` returns and nothing of `config` is pending on `admin` (the
/// harness's own connection): each published job handled and acknowledged.
pub async fn wait_handled_and_acked<C>(
    admin: &C,
    config: &QueueConfig,
    ids: &[String],
    timeout: Duration,
    handled: impl Fn() -> std::collections::BTreeSet<String>,
) where
    C: redis::aio::ConnectionLike + Clone + Send,
{
    let expected: std::collections::BTreeSet<String> = ids.iter().cloned().collect();
    let what = format!("all {} jobs are handled and acknowledged", ids.len());
    wait_until(timeout, &what, || {
        let handled = handled();
        let mut admin = admin.clone();
        let expected = &expected;
        async move {
            handled.is_superset(expected) && all_pending(&mut admin, config).await.is_empty()
        }
    })
    .await;
}

/// Makes entry `id` of `key`, pending with `consumer` in `group`, look
/// abandoned ten minutes ago (`XCLAIM` to the same consumer with `IDLE
/// 600000`), as a consumer that vanished long ago leaves it.
pub async fn age_pending(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    group: &str,
    consumer: &str,
    id: &str,
) {
    let _: redis::Value = redis::cmd("XCLAIM")
        .arg(key)
        .arg(group)
        .arg(consumer)
        .arg(0)
        .arg(id)
        .arg("IDLE")
        .arg(600_000)
        .arg("JUSTID")
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XCLAIM {key} {id}: {err}"));
}

/// Delivers every new entry of `key` to `consumer` in `group`, as a worker
/// that read them and then vanished would leave them: pending, owned by it.
pub async fn deliver_to(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    group: &str,
    consumer: &str,
) {
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(group)
        .arg(consumer)
        .arg("STREAMS")
        .arg(key)
        .arg(">")
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XREADGROUP {key} as {consumer}: {err}"));
}

/// Creates ACL user `no-<command>` on `server`, allowed every command but
/// `command`, and returns a URL that logs in as it: for tests of a refused
/// command (an XACK the server will not take, say).
pub async fn url_of_user_without(server: &crate::RedisServer, command: &str) -> String {
    let user = format!("no-{command}");
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("connecting to the test server");
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("+@all")
        .arg(format!("-{command}"))
        .query_async(&mut conn)
        .await
        .unwrap_or_else(|err| panic!("ACL SETUSER {user}: {err}"));
    format!("redis://{user}:secret@127.0.0.1:{}/", server.port())
}

/// The queue's groups and the Function library on `server`, as `apply`
/// would make them; a worker's `Redis` and a plain connection for the
/// test's own commands.
pub async fn applied(
    server: &crate::RedisServer,
    config: &QueueConfig,
) -> (queuegen_runtime::Redis, redis::aio::MultiplexedConnection) {
    let redis = queuegen_runtime::Redis::connect(server.url())
        .await
        .unwrap_or_else(|err| panic!("connecting to {}: {err}", server.url()));
    crate::library::load(&redis).await;
    queuegen_runtime::admin::ensure_groups(&redis, config)
        .await
        .unwrap_or_else(|err| panic!("creating the groups of {}: {err}", config.queue));
    let conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|err| panic!("connecting to {}: {err}", server.url()));
    (redis, conn)
}

/// `name` calls counted by `INFO commandstats` since the last reset.
pub async fn command_calls(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{name}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |rest| {
            rest.split(',')
                .next()
                .and_then(|calls| calls.parse().ok())
                .expect("cmdstat calls=<n>")
        })
}

/// The ID of the last entry the queue's group was delivered in `stream`
/// (its `last-delivered-id`; empty when the group has none yet).
pub async fn last_delivered(
    conn: &mut impl redis::aio::ConnectionLike,
    config: &QueueConfig,
    stream: StreamSlot,
) -> String {
    let key = config.ready_key(stream);
    let groups: redis::streams::StreamInfoGroupsReply = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(&key)
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XINFO GROUPS {key}: {err}"));
    groups
        .groups
        .into_iter()
        .find(|group| group.name == config.group)
        .map(|group| group.last_delivered_id)
        .unwrap_or_default()
}

/// A worker running in a task of its own until [`RunningWorker::stop`].
pub struct RunningWorker {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<queuegen_runtime::Result<queuegen_runtime::WorkerReport>>,
}

/// Publishes `count` [`crate::fixtures::TestJob`]s with job IDs
/// `{name}-{n}` (tenant `acme`) in one `publish_many`; returns the IDs.
pub async fn publish_named(
    redis: &queuegen_runtime::Redis,
    config: &queuegen_runtime::QueueConfig,
    name: &str,
    count: usize,
) -> Vec<String> {
    use crate::fixtures::TestJob;
    let ids: Vec<String> = (0..count).map(|n| format!("{name}-{n}")).collect();
    let jobs = ids.iter().map(|id| {
        queuegen_runtime::NewJob::new(id.clone(), "acme", TestJob::new(id.clone(), None))
    });
    queuegen_runtime::Producer::<TestJob>::new(redis, config.clone())
        .publish_many(jobs)
        .await
        .unwrap_or_else(|err| panic!("publishing {name}: {err}"));
    ids
}

/// Runs `worker` (`run_until` a stop) in a task.
pub fn spawn_worker<E, H>(worker: queuegen_runtime::Worker<E, H>) -> RunningWorker
where
    E: queuegen_runtime::Envelope,
    H: queuegen_runtime::Handler<E>,
{
    let (stop, task) = run_until_told(worker);
    RunningWorker { stop, task }
}

/// Runs `worker` in a task until the returned sender fires (or is
/// dropped); the task gives the worker's own result, for tests that look
/// at how it ended ([`spawn_worker`] for those that only stop it).
pub fn run_until_told<E, H>(
    worker: queuegen_runtime::Worker<E, H>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<queuegen_runtime::Result<queuegen_runtime::WorkerReport>>,
)
where
    E: queuegen_runtime::Envelope,
    H: queuegen_runtime::Handler<E>,
{
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    (stop, task)
}

impl RunningWorker {
    /// Stops the worker and returns its report; panics if it failed.
    pub async fn stop(self) -> queuegen_runtime::WorkerReport {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("the worker task ends without panicking")
            .unwrap_or_else(|err| panic!("the worker failed: {err}"))
    }
}

/// Every key with its contents (`DUMP`), to prove a command wrote nothing.
pub fn keyspace(conn: &mut redis::Connection) -> std::collections::BTreeMap<String, String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(conn).unwrap();
            (key, format!("{dump:?}"))
        })
        .collect()
}
