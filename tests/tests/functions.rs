//! The generated Function library (docs/functions.md) loaded into a real redis-server and called:
//! every function's happy path, re-runs, and every refusal leaving the keyspace untouched.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use queuegen_runtime::error::SetupError;
use queuegen_runtime::{admin, functions, Error, Redis};
use queuegen_tests::support::{init_tracing, unique_prefix};
use queuegen_tests::RedisServer;
use redis::aio::MultiplexedConnection;

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/queues.yaml");
const COMMITTED_LIBRARY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/functions.lua");
const GROUP: &str = "workers";
/// The consumer `Fixture::pending` reads entries with: their owner.
const ME: &str = "consumer-1";
const TTL_MS: i64 = 60_000;
const ACCEPTED: &str = "1,2";

// ---------------------------------------------------------------------------
// Setup

fn spec() -> queuegen::spec::model::Spec {
    let checked = queuegen::spec::check_file(Path::new(SPEC)).expect("tests/queues.yaml reads");
    checked
        .spec
        .unwrap_or_else(|| panic!("tests/queues.yaml is valid: {:?}", checked.diagnostics))
}

/// The library of tests/queues.yaml at `version`, and its name.
fn library(version: u32) -> (String, String) {
    let code = queuegen::gen::functions::render_library(&spec(), "../queues.yaml", version)
        .expect("the library renders");
    let name = code
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("#!lua name="))
        .expect("line 1 names the library")
        .to_owned();
    (code, name)
}

/// A private server with the current library loaded; `lib` prefixes function names.
struct Fixture {
    server: RedisServer,
    conn: MultiplexedConnection,
    lib: String,
    prefix: String,
}

impl Fixture {
    async fn start() -> Fixture {
        init_tracing();
        let server = RedisServer::start();
        let mut conn = server
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let (code, lib) = library(queuegen::gen::functions::LIBRARY_VERSION);
        let loaded: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(&code)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(loaded, lib);
        Fixture {
            server,
            conn,
            lib,
            prefix: unique_prefix("fn"),
        }
    }

    /// The keys of partition `n` of the `jobs` queue.
    fn part(&self, n: u16) -> Part {
        Part {
            base: format!("{}:{{jobs-{n:02}}}", self.prefix),
        }
    }

    async fn call(&mut self, function: &str, keys: &[String], args: &[&str]) -> Reply {
        self.call_bytes(function, keys, &as_bytes(args)).await
    }

    /// [`Fixture::call`] with arguments that may not be text (packed envelopes).
    async fn call_bytes(&mut self, function: &str, keys: &[String], args: &[&[u8]]) -> Reply {
        fcall(
            &mut self.conn,
            &format!("{}_{function}", self.lib),
            keys,
            args,
        )
        .await
    }

    /// Calls `ack` on several streams: one reply per stream, its answer or
    /// its error. (A plain query turns an error nested in a reply into the
    /// whole call's error; a pipeline that ignores errors keeps it in place.)
    async fn ack_streams(&mut self, keys: &[String], args: &[&str]) -> Vec<Reply> {
        let mut pipe = redis::pipe();
        pipe.cmd("FCALL")
            .arg(format!("{}_ack", self.lib))
            .arg(keys.len())
            .arg(keys)
            .arg(args);
        pipe.ignore_errors();
        let replies: Vec<Reply> = pipe
            .query_async(&mut self.conn)
            .await
            .unwrap_or_else(|err| panic!("ack {keys:?} {args:?}: {err}"));
        let [reply] = <[Reply; 1]>::try_from(replies).expect("one command, one reply");
        match reply {
            Ok(redis::Value::Array(streams)) => streams
                .into_iter()
                .map(|stream| match stream {
                    redis::Value::ServerError(err) => Err(err.into()),
                    answer => Ok(answer),
                })
                .collect(),
            other => panic!("ack {keys:?} {args:?}: expected one reply per stream, got {other:?}"),
        }
    }

    async fn dump(&mut self) -> Keyspace {
        keyspace(&mut self.conn).await
    }

    /// Calls `function`, asserts it was refused with `code` and changed nothing.
    async fn assert_refused(
        &mut self,
        function: &str,
        keys: &[String],
        args: &[&str],
        code: &str,
    ) -> String {
        self.assert_refused_bytes(function, keys, &as_bytes(args), code)
            .await
    }

    /// [`Fixture::assert_refused`] with arguments that may not be text.
    async fn assert_refused_bytes(
        &mut self,
        function: &str,
        keys: &[String],
        args: &[&[u8]],
        code: &str,
    ) -> String {
        let before = self.dump().await;
        let reply = self.call_bytes(function, keys, args).await;
        let after = self.dump().await;
        let err = match reply {
            Err(err) => err,
            Ok(value) => {
                panic!("{function} {keys:?} {args:?}: expected {code}, got the reply {value:?}")
            }
        };
        assert_eq!(
            err.code(),
            Some(code),
            "{function} {keys:?} {args:?}: {err}"
        );
        assert_keyspace_eq(&before, &after, &format!("{function} {keys:?} {args:?}"));
        err.detail().unwrap_or_default().to_owned()
    }

    async fn cmd<T: redis::FromRedisValue>(&mut self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        cmd.arg(&args[1..]);
        cmd.query_async(&mut self.conn)
            .await
            .unwrap_or_else(|err| panic!("{args:?}: {err}"))
    }

    /// Creates the group on `ready` (and the stream).
    async fn group(&mut self, ready: &str) {
        let () = self
            .cmd(&["XGROUP", "CREATE", ready, GROUP, "0", "MKSTREAM"])
            .await;
    }

    /// Appends an entry with `fields` and reads it into the group: pending.
    async fn pending(&mut self, ready: &str, fields: &[(&str, &str)]) -> String {
        let mut args = vec!["XADD", ready, "*"];
        for (name, value) in fields {
            args.extend([*name, *value]);
        }
        let id: String = self.cmd(&args).await;
        let _: redis::Value = self
            .cmd(&[
                "XREADGROUP",
                "GROUP",
                GROUP,
                "consumer-1",
                "COUNT",
                "1000",
                "STREAMS",
                ready,
                ">",
            ])
            .await;
        id
    }

    /// A pending job as the runtime writes it (schema 2, `attempt`).
    async fn pending_job(&mut self, ready: &str, job_id: &str, attempt: &str) -> String {
        self.pending(ready, &job_fields(job_id, "2", attempt)).await
    }

    async fn pending_ids(&mut self, ready: &str) -> Vec<String> {
        let reply: Vec<(String, String, u64, u64)> = self
            .cmd(&["XPENDING", ready, GROUP, "-", "+", "1000"])
            .await;
        reply.into_iter().map(|(id, ..)| id).collect()
    }

    async fn entries(&mut self, stream: &str) -> Vec<(String, Vec<(String, String)>)> {
        let raw: Vec<(String, Vec<String>)> = self.cmd(&["XRANGE", stream, "-", "+"]).await;
        raw.into_iter()
            .map(|(id, flat)| (id, pairs(&flat)))
            .collect()
    }

    /// The marker's value, after checking its TTL is in (0, TTL_MS].
    async fn marker(&mut self, key: &str) -> String {
        let ttl: i64 = self.cmd(&["PTTL", key]).await;
        assert!(ttl > 0 && ttl <= TTL_MS, "marker {key} has PTTL {ttl}");
        self.cmd(&["GET", key]).await
    }
}

/// The keys of one partition.
struct Part {
    base: String,
}

impl Part {
    fn ready(&self) -> String {
        format!("{}:ready", self.base)
    }
    fn dead(&self) -> String {
        format!("{}:dead", self.base)
    }
    fn claims(&self) -> String {
        format!("{}:claims", self.base)
    }
    fn ack_keys(&self) -> Vec<String> {
        vec![self.ready(), self.claims()]
    }
    fn retry(&self) -> String {
        format!("{}:retry", self.base)
    }
    fn retry_jobs(&self) -> String {
        format!("{}:retry-jobs", self.base)
    }
    fn marker(&self, kind: &str, id: &str) -> String {
        format!("{}:marker:{kind}:{id}", self.base)
    }
    fn schedule_keys(&self, id: &str) -> Vec<String> {
        vec![
            self.ready(),
            self.retry(),
            self.retry_jobs(),
            self.marker("retry", id),
        ]
    }
    fn promote_keys(&self, members: &[&str]) -> Vec<String> {
        let mut keys = vec![self.retry(), self.retry_jobs(), self.ready(), self.dead()];
        keys.extend(members.iter().map(|m| self.marker("promote", m)));
        keys
    }
    fn dead_keys(&self, id: &str) -> Vec<String> {
        vec![self.ready(), self.dead(), self.marker("dead", id)]
    }
    fn replay_keys(&self, dead_id: &str) -> Vec<String> {
        vec![self.dead(), self.ready(), self.marker("replay", dead_id)]
    }
}

type Reply = redis::RedisResult<redis::Value>;

fn as_bytes<'a>(args: &[&'a str]) -> Vec<&'a [u8]> {
    args.iter().map(|arg| arg.as_bytes()).collect()
}

async fn fcall(
    conn: &mut MultiplexedConnection,
    function: &str,
    keys: &[String],
    args: &[&[u8]],
) -> Reply {
    redis::cmd("FCALL")
        .arg(function)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query_async(conn)
        .await
}

/// Header fields in the runtime's order, then the body of a `TestJob`.
fn job_fields<'a>(job_id: &'a str, schema: &'a str, attempt: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("job_id", job_id),
        ("type", "TestJob"),
        ("tenant", "acme"),
        ("schema", schema),
        ("created_at", "1700000000000"),
        ("trace_id", "trace-1"),
        ("attempt", attempt),
        ("subject_ref", "doc-7"),
        ("pages", "3"),
    ]
}

fn pairs(flat: &[String]) -> Vec<(String, String)> {
    flat.chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
}

fn owned(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// A `[status, id]` reply.
fn moved(reply: Reply) -> (String, String) {
    let value = reply.unwrap_or_else(|err| panic!("the call failed: {err}"));
    redis::from_redis_value(value).expect("a [status, id] reply")
}

fn counts(reply: Reply) -> (u64, u64, u64, u64) {
    let value = reply.unwrap_or_else(|err| panic!("the call failed: {err}"));
    redis::from_redis_value(value).expect("a [promoted, already, skipped, dead_lettered] reply")
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// Every key with its type, serialized value and absolute expiry.
type Keyspace = BTreeMap<String, (String, Vec<u8>, i64)>;

async fn keyspace(conn: &mut MultiplexedConnection) -> Keyspace {
    let mut keys = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .unwrap();
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut space = Keyspace::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        // Absolute, so that it does not tick while we compare (-1: no expiry).
        let expires: i64 = redis::cmd("PEXPIRETIME")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        space.insert(key, (kind, dump, expires));
    }
    space
}

fn assert_keyspace_eq(before: &Keyspace, after: &Keyspace, what: &str) {
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|key| before.get(*key) != after.get(*key))
        .collect();
    assert!(changed.is_empty(), "{what} wrote to {changed:?}");
}

// ---------------------------------------------------------------------------
// The registered functions

/// The text of a reply value (RESP2 bulk or simple string).
fn text_of(value: &redis::Value) -> Option<String> {
    redis::from_redis_value(value.clone()).ok()
}

/// The value under `name` in a RESP2 reply of flat name/value pairs.
fn entry<'a>(pairs: &'a [redis::Value], name: &str) -> Option<&'a redis::Value> {
    pairs
        .chunks(2)
        .find(|pair| text_of(&pair[0]).as_deref() == Some(name))
        .and_then(|pair| pair.get(1))
}

/// The loaded library registers exactly the runtime's list of its functions
/// (`functions::Function::ALL`), with the flags the list gives each: the
/// names the runtime calls are the names Redis knows.
#[tokio::test]
async fn the_library_registers_exactly_the_runtimes_functions_and_flags() {
    use queuegen_runtime::functions::Function;

    let mut f = Fixture::start().await;
    let listed: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(&f.lib)
        .query_async(&mut f.conn)
        .await
        .unwrap();
    let redis::Value::Array(libraries) = listed else {
        panic!("FUNCTION LIST answered {listed:?}");
    };
    let [redis::Value::Array(library)] = &libraries[..] else {
        panic!("one library named {}: {libraries:?}", f.lib);
    };
    let Some(redis::Value::Array(functions)) = entry(library, "functions") else {
        panic!("no functions in {library:?}");
    };
    let mut registered: Vec<(String, Vec<String>)> = functions
        .iter()
        .map(|function| {
            let redis::Value::Array(fields) = function else {
                panic!("a function is {function:?}");
            };
            let name = entry(fields, "name").and_then(text_of).expect("a name");
            let flags: Vec<String> = entry(fields, "flags")
                .map(|flags| redis::from_redis_value(flags.clone()).expect("flags"))
                .unwrap_or_default();
            (name, flags)
        })
        .collect();
    registered.sort();
    let mut expected: Vec<(String, Vec<String>)> = Function::ALL
        .iter()
        .map(|function| {
            let flags = function
                .runs()
                .flags()
                .iter()
                .map(|flag| (*flag).to_owned());
            (function.in_library(&f.lib), flags.collect())
        })
        .collect();
    expected.sort();
    assert_eq!(registered, expected);
}

// ---------------------------------------------------------------------------
// retry_schedule

#[tokio::test]
async fn retry_schedule_moves_a_pending_entry_to_the_retry_set_once() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    let due = (now_ms() + 5_000).to_string();
    let args = [
        GROUP,
        ME,
        id.as_str(),
        due.as_str(),
        "timeout",
        "60000",
        ACCEPTED,
    ];

    let first = moved(f.call("retry_schedule", &p.schedule_keys(&id), &args).await);
    assert_eq!(first, ("scheduled".to_owned(), id.clone()));

    let stored: String = f.cmd(&["HGET", &p.retry_jobs(), &id]).await;
    let stored: Vec<String> = serde_json::from_str(&stored).unwrap();
    let mut expected = job_fields("job-1", "2", "2");
    expected.insert(7, ("prev_id", &id));
    expected.insert(8, ("reason", "timeout"));
    assert_eq!(pairs(&stored), owned(&expected));
    let score: String = f.cmd(&["ZSCORE", &p.retry(), &id]).await;
    assert_eq!(score, due);
    assert_eq!(f.pending_ids(&p.ready()).await, Vec::<String>::new());
    assert_eq!(f.marker(&p.marker("retry", &id)).await, id);

    let after_first = f.dump().await;
    let second = moved(f.call("retry_schedule", &p.schedule_keys(&id), &args).await);
    assert_eq!(second, ("already".to_owned(), id.clone()));
    assert_keyspace_eq(&after_first, &f.dump().await, "the re-run");
    let zcard: u64 = f.cmd(&["ZCARD", &p.retry()]).await;
    let hlen: u64 = f.cmd(&["HLEN", &p.retry_jobs()]).await;
    assert_eq!((zcard, hlen), (1, 1));
}

#[tokio::test]
async fn retry_schedule_keeps_a_later_attempts_order_and_replaces_its_reason() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let mut fields = job_fields("job-1", "1", "2");
    fields.insert(7, ("prev_id", "1-1"));
    fields.insert(8, ("reason", "earlier"));
    let id = f.pending(&p.ready(), &fields).await;
    let args = [GROUP, ME, id.as_str(), "1", "again", "60000", ACCEPTED];
    moved(f.call("retry_schedule", &p.schedule_keys(&id), &args).await);

    let stored: String = f.cmd(&["HGET", &p.retry_jobs(), &id]).await;
    let stored: Vec<String> = serde_json::from_str(&stored).unwrap();
    let mut expected = job_fields("job-1", "1", "3");
    expected.insert(7, ("prev_id", &id));
    expected.insert(8, ("reason", "again"));
    assert_eq!(pairs(&stored), owned(&expected));
}

/// `defer` is `retry_schedule` with the attempt kept, under its own marker kind.
#[tokio::test]
async fn defer_sets_a_pending_entry_aside_with_its_attempt_kept_once() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    let due = (now_ms() + 2_000).to_string();
    let args = [
        GROUP,
        ME,
        id.as_str(),
        due.as_str(),
        "tenant_rate",
        "60000",
        ACCEPTED,
    ];
    let mut keys = p.schedule_keys(&id);
    // A retry marker in defer's place is refused: each kind has its own.
    let wrong = f.call("defer", &keys, &args).await;
    assert!(format!("{wrong:?}").contains("QG_BADARG"), "{wrong:?}");
    keys[3] = p.marker("defer", &id);

    let first = moved(f.call("defer", &keys, &args).await);
    assert_eq!(first, ("scheduled".to_owned(), id.clone()));
    let stored: String = f.cmd(&["HGET", &p.retry_jobs(), &id]).await;
    let stored: Vec<String> = serde_json::from_str(&stored).unwrap();
    let mut expected = job_fields("job-1", "2", "1");
    expected.insert(7, ("prev_id", &id));
    expected.insert(8, ("reason", "tenant_rate"));
    assert_eq!(pairs(&stored), owned(&expected), "attempt 1 kept");
    let score: String = f.cmd(&["ZSCORE", &p.retry(), &id]).await;
    assert_eq!(score, due);
    assert_eq!(f.pending_ids(&p.ready()).await, Vec::<String>::new());
    assert_eq!(f.marker(&p.marker("defer", &id)).await, id);

    let after_first = f.dump().await;
    let second = moved(f.call("defer", &keys, &args).await);
    assert_eq!(second, ("already".to_owned(), id.clone()));
    assert_keyspace_eq(&after_first, &f.dump().await, "the re-run");
}

#[tokio::test]
async fn a_retry_schedule_rerun_finds_the_marker_and_only_acks() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    // An earlier run wrote destination and marker, but the source is still pending.
    let () = f
        .cmd(&["SET", &p.marker("retry", &id), &id, "PX", "60000"])
        .await;

    let reply = moved(
        f.call(
            "retry_schedule",
            &p.schedule_keys(&id),
            &[GROUP, ME, &id, "1", "r", "60000", ACCEPTED],
        )
        .await,
    );
    assert_eq!(reply, ("already".to_owned(), id.clone()));
    assert_eq!(f.pending_ids(&p.ready()).await, Vec::<String>::new());
    let exists: u64 = f.cmd(&["EXISTS", &p.retry(), &p.retry_jobs()]).await;
    assert_eq!(exists, 0, "a re-run writes no second destination");
}

#[tokio::test]
async fn retry_schedule_refuses_a_key_of_the_wrong_type_at_every_position() {
    let mut f = Fixture::start().await;
    // Each case: its own partition; the squatter at one KEYS position.
    for position in 0..4 {
        let p = f.part(position as u16);
        let id = if position == 0 {
            "1-1".to_owned()
        } else {
            f.group(&p.ready()).await;
            f.pending_job(&p.ready(), "job-1", "1").await
        };
        let keys = p.schedule_keys(&id);
        let (squat, kind) = squat(&mut f, &keys[position], position == 3).await;
        let args = [GROUP, ME, id.as_str(), "1", "r", "60000", ACCEPTED];
        let detail = f
            .assert_refused("retry_schedule", &keys, &args, "QG_WRONGTYPE")
            .await;
        assert_eq!(detail, format!("{squat} {kind}"));
        if position > 0 {
            // Without the squatter the same call goes through.
            let () = f.cmd(&["DEL", &squat]).await;
            moved(f.call("retry_schedule", &keys, &args).await);
        }
    }
}

/// Puts a key of the wrong type at `key`: a hash for a marker, else a string.
async fn squat(f: &mut Fixture, key: &str, is_marker: bool) -> (String, &'static str) {
    if is_marker {
        let () = f.cmd(&["HSET", key, "not", "a marker"]).await;
        (key.to_owned(), "hash")
    } else {
        let () = f.cmd(&["SET", key, "squatter"]).await;
        (key.to_owned(), "string")
    }
}

#[tokio::test]
async fn retry_schedule_refuses_bad_arguments_keys_and_envelopes_without_writing() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    let keys = p.schedule_keys(&id);
    let good = [GROUP, ME, id.as_str(), "1", "r", "60000", ACCEPTED];

    let with = |i: usize, value: &'static str| {
        let mut args = good.map(str::to_owned).to_vec();
        args[i] = value.to_owned();
        args
    };
    let bad_args = [
        (with(0, ""), "QG_BADARG"),
        (with(1, ""), "QG_BADARG"),
        (with(2, "abc"), "QG_BADARG"),
        (with(2, "1-"), "QG_BADARG"),
        (with(3, "soon"), "QG_BADARG"),
        (with(3, "-5"), "QG_BADARG"),
        (with(3, "1.5"), "QG_BADARG"),
        (with(3, "12345678901234567890"), "QG_BADARG"),
        (with(5, "0"), "QG_BADARG"),
        (with(5, "ten"), "QG_BADARG"),
        (with(6, ""), "QG_BADARG"),
        (with(6, "1,,2"), "QG_BADARG"),
        (with(6, "two"), "QG_BADARG"),
        (with(6, "1,"), "QG_BADARG"),
        (with(0, "no-such-group"), "QG_BADARG"),
        (with(6, "1"), "QG_BADSCHEMA"),
    ];
    for (args, code) in &bad_args {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        f.assert_refused("retry_schedule", &keys, &args, code).await;
    }
    // Too few or too many arguments and keys.
    f.assert_refused("retry_schedule", &keys, &good[..6], "QG_BADARG")
        .await;
    let mut more = good.to_vec();
    more.push("extra");
    f.assert_refused("retry_schedule", &keys, &more, "QG_BADARG")
        .await;
    f.assert_refused("retry_schedule", &keys[..3], &good, "QG_BADARG")
        .await;
    // Keys of another partition, another role, or the marker of another entry.
    let other = f.part(1);
    let mut mixed = keys.clone();
    mixed[1] = other.retry();
    let detail = f
        .assert_refused("retry_schedule", &mixed, &good, "QG_BADARG")
        .await;
    assert!(detail.contains("KEYS[2]"), "{detail}");
    let mut swapped = keys.clone();
    swapped.swap(1, 2);
    f.assert_refused("retry_schedule", &swapped, &good, "QG_BADARG")
        .await;
    let mut wrong_marker = keys.clone();
    wrong_marker[3] = p.marker("retry", "1-1");
    f.assert_refused("retry_schedule", &wrong_marker, &good, "QG_BADARG")
        .await;
    let mut dead_marker = keys.clone();
    dead_marker[3] = p.marker("dead", &id);
    f.assert_refused("retry_schedule", &dead_marker, &good, "QG_BADARG")
        .await;

    // The source: absent, or no longer pending in the group (settled).
    let missing = "1-1";
    f.assert_refused(
        "retry_schedule",
        &p.schedule_keys(missing),
        &[GROUP, ME, missing, "1", "r", "60000", ACCEPTED],
        "QG_NOSOURCE",
    )
    .await;
    let acked = f.pending_job(&p.ready(), "job-2", "1").await;
    let _: u64 = f.cmd(&["XACK", &p.ready(), GROUP, &acked]).await;
    let detail = f
        .assert_refused(
            "retry_schedule",
            &p.schedule_keys(&acked),
            &[GROUP, ME, &acked, "1", "r", "60000", ACCEPTED],
            "QG_NOT_OWNER",
        )
        .await;
    assert!(detail.contains("no longer pending"), "{detail}");

    // Envelopes: schema missing or unknown, attempt missing or not a positive number.
    let envelopes: [(Vec<(&str, &str)>, &str); 6] = [
        (
            job_fields("j", "2", "1")
                .into_iter()
                .filter(|(n, _)| *n != "schema")
                .collect(),
            "QG_BADENVELOPE",
        ),
        (job_fields("j", "v2", "1"), "QG_BADSCHEMA"),
        (job_fields("j", "3", "1"), "QG_BADSCHEMA"),
        (
            job_fields("j", "2", "1")
                .into_iter()
                .filter(|(n, _)| *n != "attempt")
                .collect(),
            "QG_BADENVELOPE",
        ),
        (job_fields("j", "2", "first"), "QG_BADENVELOPE"),
        (job_fields("j", "2", "0"), "QG_BADENVELOPE"),
    ];
    for (fields, code) in &envelopes {
        let bad = f.pending(&p.ready(), fields).await;
        f.assert_refused(
            "retry_schedule",
            &p.schedule_keys(&bad),
            &[GROUP, ME, &bad, "1", "r", "60000", ACCEPTED],
            code,
        )
        .await;
    }

    // After all that, the good call still works.
    assert_eq!(
        moved(f.call("retry_schedule", &keys, &good).await).0,
        "scheduled"
    );
}

// ---------------------------------------------------------------------------
// retry_promote

/// Schedules `n` pending jobs of partition `p` due at `due` (Unix ms); their retry ids.
async fn scheduled(f: &mut Fixture, p: &Part, n: usize, due: u64) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = f.pending_job(&p.ready(), &format!("job-{i}"), "1").await;
        let due = due.to_string();
        let reply = moved(
            f.call(
                "retry_schedule",
                &p.schedule_keys(&id),
                &[GROUP, ME, &id, &due, "later", "60000", ACCEPTED],
            )
            .await,
        );
        assert_eq!(reply.0, "scheduled");
        ids.push(id);
    }
    ids
}

#[tokio::test]
async fn retry_promote_moves_due_retries_to_ready_and_skips_the_rest() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let now = now_ms();
    let due = scheduled(&mut f, &p, 2, now - 1_000).await;
    let later = scheduled(&mut f, &p, 1, now + 60_000).await;
    let members: Vec<&str> = due.iter().chain(&later).map(String::as_str).collect();
    let now_arg = now.to_string();
    let mut args = vec![now_arg.as_str(), "10", "60000", "1000"];
    args.extend(&members);

    let ready_before = f.entries(&p.ready()).await.len();
    let first = counts(
        f.call("retry_promote", &p.promote_keys(&members), &args)
            .await,
    );
    assert_eq!(first, (2, 0, 1, 0));
    let entries = f.entries(&p.ready()).await;
    assert_eq!(entries.len(), ready_before + 2);
    for (source, (ready_id, fields)) in due.iter().zip(&entries[ready_before..]) {
        assert_eq!(field(fields, "prev_id"), Some(source.as_str()));
        assert_eq!(field(fields, "attempt"), Some("2"));
        assert_eq!(field(fields, "reason"), Some("later"));
        assert_eq!(field(fields, "subject_ref"), Some("doc-7"));
        assert_eq!(&f.marker(&p.marker("promote", source)).await, ready_id);
    }
    let left: Vec<String> = f.cmd(&["ZRANGE", &p.retry(), "0", "-1"]).await;
    assert_eq!(left, later);
    let left_jobs: Vec<String> = f.cmd(&["HKEYS", &p.retry_jobs()]).await;
    assert_eq!(left_jobs, later);

    // Again with the same members: nothing is promoted twice.
    let after_first = f.dump().await;
    let second = counts(
        f.call("retry_promote", &p.promote_keys(&members), &args)
            .await,
    );
    assert_eq!(second, (0, 2, 1, 0));
    assert_keyspace_eq(&after_first, &f.dump().await, "the second promote");
}

#[tokio::test]
async fn a_retry_promote_rerun_finds_the_marker_and_only_cleans_up() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let ids = scheduled(&mut f, &p, 1, 1).await;
    let () = f
        .cmd(&["SET", &p.marker("promote", &ids[0]), "5-5", "PX", "60000"])
        .await;
    let ready_before = f.entries(&p.ready()).await.len();
    let reply = counts(
        f.call(
            "retry_promote",
            &p.promote_keys(&[&ids[0]]),
            &["2", "10", "60000", "1000", &ids[0]],
        )
        .await,
    );
    assert_eq!(reply, (0, 1, 0, 0));
    assert_eq!(f.entries(&p.ready()).await.len(), ready_before);
    let exists: u64 = f.cmd(&["EXISTS", &p.retry(), &p.retry_jobs()]).await;
    assert_eq!(exists, 0);
}

#[tokio::test]
async fn retry_promote_enforces_its_batch_bound() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let ids = scheduled(&mut f, &p, 3, 1).await;
    let members: Vec<&str> = ids.iter().map(String::as_str).collect();

    let mut args = vec!["2", "2", "60000", "1000"];
    args.extend(&members);
    let detail = f
        .assert_refused(
            "retry_promote",
            &p.promote_keys(&members),
            &args,
            "QG_BATCH",
        )
        .await;
    assert_eq!(detail, "3 > 2");

    let mut args = vec!["2", "2", "60000", "1000"];
    args.extend(&members[..2]);
    let reply = counts(
        f.call("retry_promote", &p.promote_keys(&members[..2]), &args)
            .await,
    );
    assert_eq!(reply, (2, 0, 0, 0));
    let reply = counts(
        f.call(
            "retry_promote",
            &p.promote_keys(&[]),
            &["2", "2", "60000", "1000"],
        )
        .await,
    );
    assert_eq!(reply, (0, 0, 0, 0));
}

#[tokio::test]
async fn concurrent_promoters_promote_each_retry_once() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let ids = scheduled(&mut f, &p, 40, 1).await;
    let ready_before = f.entries(&p.ready()).await.len();

    let function = format!("{}_retry_promote", f.lib);
    let mut promoters = Vec::new();
    for _ in 0..2 {
        // Each promoter on its own connection, as separate scheduler processes.
        let mut conn = f
            .server
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let (function, retry) = (function.clone(), p.retry());
        let part = Part {
            base: p.base.clone(),
        };
        promoters.push(tokio::spawn(async move {
            let mut promoted = 0;
            loop {
                let due: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                    .arg(&retry)
                    .arg("-inf")
                    .arg(2)
                    .arg("LIMIT")
                    .arg(0)
                    .arg(7)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if due.is_empty() {
                    return promoted;
                }
                let members: Vec<&str> = due.iter().map(String::as_str).collect();
                let mut args = vec!["2", "7", "60000", "1000"];
                args.extend(&members);
                let reply = fcall(
                    &mut conn,
                    &function,
                    &part.promote_keys(&members),
                    &as_bytes(&args),
                )
                .await;
                promoted += counts(reply).0;
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut total = 0;
    for promoter in promoters {
        total += promoter.await.unwrap();
    }
    assert_eq!(total, 40);
    let entries = f.entries(&p.ready()).await;
    let mut sources: Vec<&str> = entries[ready_before..]
        .iter()
        .map(|(_, fields)| field(fields, "prev_id").unwrap())
        .collect();
    sources.sort_unstable();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(sources, expected, "each retry promoted exactly once");
}

#[tokio::test]
async fn retry_promote_refuses_wrong_types_and_bad_arguments_without_writing() {
    let mut f = Fixture::start().await;
    // Wrong types, one partition per KEYS position (4 = the first marker).
    for position in 0..5 {
        let p = f.part(position as u16);
        f.group(&p.ready()).await;
        let ids = scheduled(&mut f, &p, 1, 1).await;
        let keys = p.promote_keys(&[&ids[0]]);
        let squatted = if position == 2 {
            // The ready stream is a stream here: make it something else.
            let () = f.cmd(&["DEL", &keys[2]]).await;
            squat(&mut f, &keys[2], false).await
        } else if position < 2 {
            let () = f
                .cmd(&["RENAME", &keys[position], &format!("{}-saved", p.base)])
                .await;
            squat(&mut f, &keys[position], false).await
        } else {
            squat(&mut f, &keys[position], position == 4).await
        };
        let args = ["2", "10", "60000", "1000", ids[0].as_str()];
        let detail = f
            .assert_refused("retry_promote", &keys, &args, "QG_WRONGTYPE")
            .await;
        assert_eq!(detail, format!("{} {}", squatted.0, squatted.1));
        if position >= 3 {
            let () = f.cmd(&["DEL", &keys[position]]).await;
            assert_eq!(
                counts(f.call("retry_promote", &keys, &args).await),
                (1, 0, 0, 0)
            );
        }
    }

    let p = f.part(10);
    f.group(&p.ready()).await;
    let ids = scheduled(&mut f, &p, 2, 1).await;
    let (a, b) = (ids[0].as_str(), ids[1].as_str());
    let keys = p.promote_keys(&[a, b]);
    let bad: [(Vec<&str>, &str); 12] = [
        (vec!["now", "10", "60000", "1000", a, b], "QG_BADARG"),
        (vec!["-1", "10", "60000", "1000", a, b], "QG_BADARG"),
        (vec!["2", "0", "60000", "1000", a, b], "QG_BADARG"),
        (vec!["2", "many", "60000", "1000", a, b], "QG_BADARG"),
        (vec!["2", "10", "0", "1000", a, b], "QG_BADARG"),
        (vec!["2", "10", "60000", "0", a, b], "QG_BADARG"),
        (vec!["2", "10", "60000", "all", a, b], "QG_BADARG"),
        (vec!["2", "10", "60000", "1000", a, "member"], "QG_BADARG"),
        // A bare `<ms>` is not a retry id.
        (
            vec!["2", "10", "60000", "1000", a, "1700000000000"],
            "QG_BADARG",
        ),
        (vec!["2", "10", "60000", "1000", b, a], "QG_BADARG"),
        (vec!["2", "10", "60000", "1000", a], "QG_BADARG"),
        (vec!["2", "10", "60000"], "QG_BADARG"),
    ];
    for (args, code) in &bad {
        f.assert_refused("retry_promote", &keys, args, code).await;
    }
    let mut other_partition = keys.clone();
    other_partition[5] = f.part(11).marker("promote", b);
    f.assert_refused(
        "retry_promote",
        &other_partition,
        &["2", "10", "60000", "1000", a, b],
        "QG_BADARG",
    )
    .await;
    let mut other_dead = keys.clone();
    other_dead[3] = f.part(11).dead();
    f.assert_refused(
        "retry_promote",
        &other_dead,
        &["2", "10", "60000", "1000", a, b],
        "QG_BADARG",
    )
    .await;
    assert_eq!(
        counts(
            f.call("retry_promote", &keys, &["2", "10", "60000", "1000", a, b])
                .await
        ),
        (2, 0, 0, 0)
    );
}

#[tokio::test]
async fn retry_promote_dead_letters_a_member_whose_envelope_is_missing_or_broken() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let broken = ["not json", "[]", "[\"odd\"]", "{\"a\":1}", "[1,2]"];
    // One good member first and last, a broken one between, per call.
    for (n, envelope) in broken.iter().map(Some).chain([None]).enumerate() {
        let ids = scheduled(&mut f, &p, 3, 1).await;
        match envelope {
            Some(text) => {
                let () = f.cmd(&["HSET", &p.retry_jobs(), &ids[1], text]).await;
            }
            None => {
                let _: u64 = f.cmd(&["HDEL", &p.retry_jobs(), &ids[1]]).await;
            }
        }
        let members: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut args = vec!["2", "10", "60000", "1000"];
        args.extend(&members);
        let reply = call_atomic(&mut f, "retry_promote", &p.promote_keys(&members), &args).await;
        assert_eq!(counts(reply), (2, 0, 0, 1), "{envelope:?}");

        let dead = f.entries(&p.dead()).await;
        assert_eq!(dead.len(), n + 1);
        let (_, letter) = dead.last().unwrap();
        assert_eq!(field(letter, "reason"), Some("decode_error"));
        assert_eq!(field(letter, "source_id"), Some(ids[1].as_str()));
        assert_eq!(
            field(letter, "envelope"),
            Some(envelope.copied().unwrap_or(""))
        );
        let detail = field(letter, "detail").unwrap();
        assert!(
            detail.starts_with(&format!(
                "{} member {} cannot be promoted: its ",
                p.retry(),
                ids[1]
            )),
            "{detail}"
        );
        // Nothing is left to fail the next call.
        let left: u64 = f.cmd(&["ZCARD", &p.retry()]).await;
        assert_eq!(left, 0);
        let no_marker: u64 = f.cmd(&["EXISTS", &p.marker("promote", &ids[1])]).await;
        assert_eq!(
            no_marker, 0,
            "a dead-lettered member leaves no promotion marker"
        );
    }
}

// ---------------------------------------------------------------------------
// dead_letter

#[tokio::test]
async fn dead_letter_records_a_pending_entry_once_and_acks_it() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "3").await;
    let args = [
        GROUP,
        ME,
        id.as_str(),
        "retries_exhausted",
        "timeout after 10s",
        "4",
        "60000",
        "1000",
    ];
    let before = now_ms();
    let (status, dead_id) = moved(f.call("dead_letter", &p.dead_keys(&id), &args).await);
    assert_eq!(status, "dead_lettered");

    let dead = f.entries(&p.dead()).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].0, dead_id);
    let fields = &dead[0].1;
    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "job_id",
            "type",
            "tenant",
            "schema",
            "attempt",
            "source_id",
            "deliveries",
            "reason",
            "detail",
            "dead_at",
            "envelope"
        ]
    );
    assert_eq!(field(fields, "job_id"), Some("job-1"));
    assert_eq!(field(fields, "type"), Some("TestJob"));
    assert_eq!(field(fields, "tenant"), Some("acme"));
    assert_eq!(field(fields, "schema"), Some("2"));
    assert_eq!(field(fields, "attempt"), Some("3"));
    assert_eq!(field(fields, "source_id"), Some(id.as_str()));
    assert_eq!(field(fields, "deliveries"), Some("4"));
    assert_eq!(field(fields, "reason"), Some("retries_exhausted"));
    assert_eq!(field(fields, "detail"), Some("timeout after 10s"));
    let dead_at: u64 = field(fields, "dead_at").unwrap().parse().unwrap();
    assert!(
        dead_at >= before - 1_000 && dead_at <= now_ms() + 1_000,
        "{dead_at}"
    );
    let envelope: Vec<String> = serde_json::from_str(field(fields, "envelope").unwrap()).unwrap();
    assert_eq!(pairs(&envelope), owned(&job_fields("job-1", "2", "3")));
    assert_eq!(f.pending_ids(&p.ready()).await, Vec::<String>::new());
    assert_eq!(f.marker(&p.marker("dead", &id)).await, dead_id);

    let after_first = f.dump().await;
    let second = moved(f.call("dead_letter", &p.dead_keys(&id), &args).await);
    assert_eq!(second, ("already".to_owned(), dead_id));
    assert_keyspace_eq(&after_first, &f.dump().await, "the re-run");
}

#[tokio::test]
async fn dead_letter_takes_entries_that_do_not_decode() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f
        .pending(
            &p.ready(),
            &[("subject_ref", "doc-7"), ("junk", "\u{1}\n\"")],
        )
        .await;
    let (status, dead_id) = moved(
        f.call(
            "dead_letter",
            &p.dead_keys(&id),
            &[
                GROUP,
                ME,
                &id,
                "decode_error",
                "field `job_id` is missing",
                "1",
                "60000",
                "1000",
            ],
        )
        .await,
    );
    assert_eq!(status, "dead_lettered");
    let dead = f.entries(&p.dead()).await;
    let fields = &dead[0].1;
    assert_eq!(dead[0].0, dead_id);
    for header in ["job_id", "type", "tenant", "schema", "attempt"] {
        assert_eq!(field(fields, header), Some(""), "{header}");
    }
    assert_eq!(field(fields, "reason"), Some("decode_error"));
    assert_eq!(field(fields, "detail"), Some("field `job_id` is missing"));
    assert_eq!(field(fields, "deliveries"), Some("1"));
    let envelope: Vec<String> = serde_json::from_str(field(fields, "envelope").unwrap()).unwrap();
    assert_eq!(
        pairs(&envelope),
        owned(&[("subject_ref", "doc-7"), ("junk", "\u{1}\n\"")])
    );
    assert_eq!(f.pending_ids(&p.ready()).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_dead_letter_rerun_finds_the_marker_and_only_acks() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    let () = f
        .cmd(&["SET", &p.marker("dead", &id), "9-9", "PX", "60000"])
        .await;
    let reply = moved(
        f.call(
            "dead_letter",
            &p.dead_keys(&id),
            &[GROUP, ME, &id, "poison", "", "5", "60000", "1000"],
        )
        .await,
    );
    assert_eq!(reply, ("already".to_owned(), "9-9".to_owned()));
    assert_eq!(f.pending_ids(&p.ready()).await, Vec::<String>::new());
    let exists: u64 = f.cmd(&["EXISTS", &p.dead()]).await;
    assert_eq!(exists, 0);
}

#[tokio::test]
async fn dead_letter_refuses_wrong_types_and_bad_arguments_without_writing() {
    let mut f = Fixture::start().await;
    for position in 0..3 {
        let p = f.part(position as u16);
        let id = if position == 0 {
            "1-1".to_owned()
        } else {
            f.group(&p.ready()).await;
            f.pending_job(&p.ready(), "job-1", "1").await
        };
        let keys = p.dead_keys(&id);
        let (squatted, kind) = squat(&mut f, &keys[position], position == 2).await;
        let args = [
            GROUP,
            ME,
            id.as_str(),
            "permanent",
            "",
            "1",
            "60000",
            "1000",
        ];
        let detail = f
            .assert_refused("dead_letter", &keys, &args, "QG_WRONGTYPE")
            .await;
        assert_eq!(detail, format!("{squatted} {kind}"));
        if position > 0 {
            let () = f.cmd(&["DEL", &squatted]).await;
            moved(f.call("dead_letter", &keys, &args).await);
        }
    }

    let p = f.part(5);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    let keys = p.dead_keys(&id);
    let good = [
        GROUP,
        ME,
        id.as_str(),
        "handler",
        "bad input",
        "2",
        "60000",
        "1000",
    ];
    let with = |i: usize, value: &'static str| {
        let mut args = good.map(str::to_owned).to_vec();
        args[i] = value.to_owned();
        args
    };
    let bad = [
        with(0, ""),
        with(0, "no-such-group"),
        with(1, ""),
        with(2, "one"),
        with(3, "oops"),
        with(3, ""),
        with(5, "many"),
        with(5, "-1"),
        with(6, "0"),
        with(7, "0"),
        with(7, "all"),
    ];
    for args in &bad {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        f.assert_refused("dead_letter", &keys, &args, "QG_BADARG")
            .await;
    }
    f.assert_refused("dead_letter", &keys, &good[..7], "QG_BADARG")
        .await;
    f.assert_refused("dead_letter", &keys[..2], &good, "QG_BADARG")
        .await;
    let mut wrong_marker = keys.clone();
    wrong_marker[2] = p.marker("retry", &id);
    f.assert_refused("dead_letter", &wrong_marker, &good, "QG_BADARG")
        .await;
    let mut swapped = keys.clone();
    swapped.swap(0, 1);
    f.assert_refused("dead_letter", &swapped, &good, "QG_BADARG")
        .await;
    f.assert_refused(
        "dead_letter",
        &p.dead_keys("1-1"),
        &[GROUP, ME, "1-1", "handler", "", "1", "60000", "1000"],
        "QG_NOSOURCE",
    )
    .await;
    let acked = f.pending_job(&p.ready(), "job-2", "1").await;
    let _: u64 = f.cmd(&["XACK", &p.ready(), GROUP, &acked]).await;
    f.assert_refused(
        "dead_letter",
        &p.dead_keys(&acked),
        &[GROUP, ME, &acked, "handler", "", "1", "60000", "1000"],
        "QG_NOT_OWNER",
    )
    .await;
    assert_eq!(
        moved(f.call("dead_letter", &keys, &good).await).0,
        "dead_lettered"
    );
}

// ---------------------------------------------------------------------------
// replay

/// Dead-letters a fresh pending job of `p`; its dead-letter ID.
async fn dead_lettered(f: &mut Fixture, p: &Part, fields: &[(&str, &str)]) -> String {
    let id = f.pending(&p.ready(), fields).await;
    let (status, dead_id) = moved(
        f.call(
            "dead_letter",
            &p.dead_keys(&id),
            &[
                GROUP,
                ME,
                &id,
                "permanent",
                "rejected",
                "1",
                "60000",
                "1000",
            ],
        )
        .await,
    );
    assert_eq!(status, "dead_lettered");
    dead_id
}

#[tokio::test]
async fn replay_puts_a_dead_letter_back_as_attempt_one_once() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let mut fields = job_fields("job-1", "1", "4");
    fields.insert(7, ("prev_id", "1-1"));
    fields.insert(8, ("reason", "timeout"));
    let dead_id = dead_lettered(&mut f, &p, &fields).await;
    let dead_before = f.entries(&p.dead()).await;

    let args = [dead_id.as_str(), "", "60000", ACCEPTED];
    let (status, ready_id) = moved(f.call("replay", &p.replay_keys(&dead_id), &args).await);
    assert_eq!(status, "replayed");
    let entries = f.entries(&p.ready()).await;
    let (last_id, replayed) = entries.last().unwrap();
    assert_eq!(last_id, &ready_id);
    let mut expected = job_fields("job-1", "1", "1");
    expected.insert(7, ("reason", "replay"));
    expected.insert(8, ("replay_of", &dead_id));
    assert_eq!(replayed, &owned(&expected), "no prev_id, attempt 1");
    assert_eq!(f.marker(&p.marker("replay", &dead_id)).await, ready_id);
    assert_eq!(
        f.entries(&p.dead()).await,
        dead_before,
        "the dead letter stays"
    );

    let after_first = f.dump().await;
    let second = moved(f.call("replay", &p.replay_keys(&dead_id), &args).await);
    assert_eq!(second, ("already".to_owned(), ready_id));
    assert_keyspace_eq(&after_first, &f.dump().await, "the re-run");
}

#[tokio::test]
async fn replay_with_a_new_job_id() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let dead_id = dead_lettered(&mut f, &p, &job_fields("job-1", "2", "1")).await;
    let (_, ready_id) = moved(
        f.call(
            "replay",
            &p.replay_keys(&dead_id),
            &[&dead_id, "job-1-again", "60000", ACCEPTED],
        )
        .await,
    );
    let entries = f.entries(&p.ready()).await;
    let (_, replayed) = entries.iter().find(|(id, _)| *id == ready_id).unwrap();
    assert_eq!(field(replayed, "job_id"), Some("job-1-again"));
    assert_eq!(field(replayed, "attempt"), Some("1"));
    assert_eq!(field(replayed, "replay_of"), Some(dead_id.as_str()));

    // A dead letter without a job_id needs a new one.
    let mut fields = job_fields("", "2", "1");
    fields.remove(0);
    let anonymous = dead_lettered(&mut f, &p, &fields).await;
    f.assert_refused(
        "replay",
        &p.replay_keys(&anonymous),
        &[&anonymous, "", "60000", ACCEPTED],
        "QG_BADENVELOPE",
    )
    .await;
    let (_, ready_id) = moved(
        f.call(
            "replay",
            &p.replay_keys(&anonymous),
            &[&anonymous, "job-named", "60000", ACCEPTED],
        )
        .await,
    );
    let entries = f.entries(&p.ready()).await;
    let (_, replayed) = entries.iter().find(|(id, _)| *id == ready_id).unwrap();
    assert_eq!(replayed[0], ("job_id".to_owned(), "job-named".to_owned()));
}

#[tokio::test]
async fn replay_refuses_wrong_types_and_bad_arguments_without_writing() {
    let mut f = Fixture::start().await;
    for position in 0..3 {
        let p = f.part(position as u16);
        f.group(&p.ready()).await;
        let dead_id = if position == 0 {
            "1-1".to_owned()
        } else {
            dead_lettered(&mut f, &p, &job_fields("job-1", "2", "1")).await
        };
        let keys = p.replay_keys(&dead_id);
        if position == 1 {
            let () = f.cmd(&["DEL", &keys[1]]).await;
        }
        let (squatted, kind) = squat(&mut f, &keys[position], position == 2).await;
        let args = [dead_id.as_str(), "", "60000", ACCEPTED];
        let detail = f
            .assert_refused("replay", &keys, &args, "QG_WRONGTYPE")
            .await;
        assert_eq!(detail, format!("{squatted} {kind}"));
        if position > 0 {
            let () = f.cmd(&["DEL", &squatted]).await;
            moved(f.call("replay", &keys, &args).await);
        }
    }

    let p = f.part(5);
    f.group(&p.ready()).await;
    let dead_id = dead_lettered(&mut f, &p, &job_fields("job-1", "2", "1")).await;
    let keys = p.replay_keys(&dead_id);
    let d = dead_id.as_str();
    let bad: [(Vec<&str>, &str); 8] = [
        (vec!["dead", "", "60000", ACCEPTED], "QG_BADARG"),
        (vec![d, "", "0", ACCEPTED], "QG_BADARG"),
        (vec![d, "", "1h", ACCEPTED], "QG_BADARG"),
        (vec![d, "", "60000", ""], "QG_BADARG"),
        (vec![d, "", "60000", "1;2"], "QG_BADARG"),
        (vec![d, "", "60000"], "QG_BADARG"),
        (vec![d, "", "60000", ACCEPTED, "x"], "QG_BADARG"),
        (vec![d, "", "60000", "1"], "QG_BADSCHEMA"),
    ];
    for (args, code) in &bad {
        f.assert_refused("replay", &keys, args, code).await;
    }
    let mut wrong_marker = keys.clone();
    wrong_marker[2] = p.marker("replay", "1-1");
    f.assert_refused(
        "replay",
        &wrong_marker,
        &[d, "", "60000", ACCEPTED],
        "QG_BADARG",
    )
    .await;
    f.assert_refused(
        "replay",
        &p.replay_keys("1-1"),
        &["1-1", "", "60000", ACCEPTED],
        "QG_NOSOURCE",
    )
    .await;

    // Dead letters whose envelope is missing, not JSON, or lacks a schema.
    for (name, value) in [
        ("detail", "no envelope field"),
        ("envelope", "{not json"),
        ("envelope", "[\"job_id\",\"j\",\"attempt\",\"1\"]"),
    ] {
        let broken: String = f.cmd(&["XADD", &p.dead(), "*", name, value]).await;
        f.assert_refused(
            "replay",
            &p.replay_keys(&broken),
            &[&broken, "", "60000", ACCEPTED],
            "QG_BADENVELOPE",
        )
        .await;
    }
    assert_eq!(
        moved(f.call("replay", &keys, &[d, "", "60000", ACCEPTED]).await).0,
        "replayed"
    );
}

// ---------------------------------------------------------------------------
// ownership: retry_schedule and dead_letter settle only the caller's entry; ack, renew

/// Another consumer takes `id` over with a raw `XCLAIM` (the library's
/// `claim` takes whatever is idle; these tests need one given entry).
async fn claim_to(f: &mut Fixture, ready: &str, id: &str, consumer: &str) {
    let claimed: Vec<String> = f
        .cmd(&["XCLAIM", ready, GROUP, consumer, "0", id, "JUSTID"])
        .await;
    assert_eq!(claimed, [id]);
}

/// Every pending entry as (id, owner, delivery count).
async fn owners(f: &mut Fixture, ready: &str) -> Vec<(String, String, u64)> {
    let reply: Vec<(String, String, u64, u64)> =
        f.cmd(&["XPENDING", ready, GROUP, "-", "+", "1000"]).await;
    reply
        .into_iter()
        .map(|(id, owner, _idle, count)| (id, owner, count))
        .collect()
}

/// An `ack` reply on the checked path: (acked, [(refused id, its owner or "")]).
fn acked(reply: Reply) -> (u64, Vec<(String, String)>) {
    let (count, refused, unaccounted, _epoch) = ack_reply(reply);
    assert_eq!(
        unaccounted, 0,
        "the checked path names every entry it refuses"
    );
    (count, refused)
}

/// An `ack` reply: (acked, [(refused id, its owner or "")], unaccounted, current epoch).
fn ack_reply(reply: Reply) -> (u64, Vec<(String, String)>, u64, u64) {
    let value = reply.unwrap_or_else(|err| panic!("the call failed: {err}"));
    let (count, flat, unaccounted, epoch): (u64, Vec<String>, u64, u64) =
        redis::from_redis_value(value).expect("an [acked, refused, unaccounted, epoch] reply");
    (count, pairs(&flat), unaccounted, epoch)
}

/// A raw `claim` reply: next cursor, claimed entries (ID and flat fields),
/// deleted IDs, epoch.
type ClaimReply = (String, Vec<(String, Vec<String>)>, Vec<String>, u64);

/// A `claim` reply: (next cursor, claimed IDs, deleted IDs, epoch).
fn claimed(reply: Reply) -> (String, Vec<String>, Vec<String>, u64) {
    let value = reply.unwrap_or_else(|err| panic!("the call failed: {err}"));
    let (next, entries, deleted, epoch): ClaimReply =
        redis::from_redis_value(value).expect("a [next, entries, deleted, epoch] reply");
    let ids = entries.into_iter().map(|(id, _)| id).collect();
    (next, ids, deleted, epoch)
}

#[tokio::test]
async fn retry_schedule_and_dead_letter_refuse_an_entry_another_consumer_claimed() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    claim_to(&mut f, &p.ready(), &id, "consumer-2").await;

    let retry = [GROUP, ME, id.as_str(), "1", "r", "60000", ACCEPTED];
    let detail = f
        .assert_refused(
            "retry_schedule",
            &p.schedule_keys(&id),
            &retry,
            "QG_NOT_OWNER",
        )
        .await;
    assert_eq!(detail, format!("{id} is pending for consumer consumer-2"));
    let dead = [GROUP, ME, id.as_str(), "handler", "", "1", "60000", "1000"];
    let detail = f
        .assert_refused("dead_letter", &p.dead_keys(&id), &dead, "QG_NOT_OWNER")
        .await;
    assert_eq!(detail, format!("{id} is pending for consumer consumer-2"));
    // A marker from an earlier run does not let the stale caller ack it either.
    let () = f
        .cmd(&["SET", &p.marker("dead", &id), "9-9", "PX", "60000"])
        .await;
    f.assert_refused("dead_letter", &p.dead_keys(&id), &dead, "QG_NOT_OWNER")
        .await;
    let () = f.cmd(&["DEL", &p.marker("dead", &id)]).await;
    assert_eq!(
        owners(&mut f, &p.ready()).await,
        [(id.clone(), "consumer-2".to_owned(), 1)]
    );

    // The new owner settles it.
    let retry = [
        GROUP,
        "consumer-2",
        id.as_str(),
        "1",
        "r",
        "60000",
        ACCEPTED,
    ];
    let reply = moved(
        f.call("retry_schedule", &p.schedule_keys(&id), &retry)
            .await,
    );
    assert_eq!(reply, ("scheduled".to_owned(), id.clone()));
    assert_eq!(owners(&mut f, &p.ready()).await, []);
    // Afterwards the stale caller's late retry answers from the marker, and
    // its dead letter finds the entry settled: neither writes anything.
    let before = f.dump().await;
    let retry = [GROUP, ME, id.as_str(), "1", "r", "60000", ACCEPTED];
    let late = moved(
        f.call("retry_schedule", &p.schedule_keys(&id), &retry)
            .await,
    );
    assert_eq!(late, ("already".to_owned(), id.clone()));
    assert_keyspace_eq(&before, &f.dump().await, "the late retry");
    let detail = f
        .assert_refused("dead_letter", &p.dead_keys(&id), &dead, "QG_NOT_OWNER")
        .await;
    assert!(detail.contains("is no longer pending in group"), "{detail}");
}

#[tokio::test]
async fn ack_acknowledges_the_callers_entries_and_names_the_owner_of_the_others() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(f.pending_job(&p.ready(), &format!("job-{n}"), "1").await);
    }
    claim_to(&mut f, &p.ready(), &ids[1], "consumer-2").await;
    let _: u64 = f.cmd(&["XACK", &p.ready(), GROUP, &ids[2]]).await;

    // Out of order on purpose: every ID is decided however it comes.
    let batch = [&ids[3], &ids[0], &ids[1], &ids[2]];
    let mut args = vec![GROUP, ME, "-"];
    args.extend(batch.iter().map(|id| id.as_str()));
    let (count, refused) = acked(f.call("ack", &p.ack_keys(), &args).await);
    assert_eq!(count, 2);
    assert_eq!(
        refused,
        owned(&[(&ids[1], "consumer-2"), (&ids[2], "")]),
        "refused in the order given, with their owners"
    );
    assert_eq!(
        owners(&mut f, &p.ready()).await,
        [
            (ids[1].clone(), "consumer-2".to_owned(), 1),
            (ids[4].clone(), ME.to_owned(), 1),
        ],
        "the claimed entry stays with its new owner; the unlisted one stays"
    );

    // Many of the caller's entries between the first and the last ID: past
    // what one listing returns, each unlisted ID is looked up on its own.
    let mut more = Vec::new();
    for n in 0..300 {
        more.push(f.pending_job(&p.ready(), &format!("more-{n}"), "1").await);
    }
    let (first, last) = (&more[0], &more[299]);
    let (count, refused) = acked(
        f.call("ack", &p.ack_keys(), &[GROUP, ME, "-", first, last])
            .await,
    );
    assert_eq!((count, refused), (2, vec![]));
    let left = owners(&mut f, &p.ready()).await;
    assert_eq!(left.len(), 2 + 298);
    assert!(left.iter().all(|(id, ..)| id != first && id != last));
}

#[tokio::test]
async fn ack_refuses_bad_arguments_and_keys_without_writing() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    let keys = p.ack_keys();
    let i = id.as_str();
    let bad: [(Vec<&str>, &str); 12] = [
        (vec![GROUP, ME, "-"], "QG_BADARG"),
        (vec!["", ME, "-", i], "QG_BADARG"),
        (vec![GROUP, "", "-", i], "QG_BADARG"),
        (vec![GROUP, ME, "x", i], "QG_BADARG"),
        (vec![GROUP, ME, "", i], "QG_BADARG"),
        (vec!["no-such-group", ME, "-", i], "QG_BADARG"),
        // The fast path (epoch 0 = no claim yet) refuses a missing group too.
        (vec!["no-such-group", ME, "0", i], "QG_BADARG"),
        (vec![GROUP, ME, "-", "first"], "QG_BADARG"),
        (vec![GROUP, ME, "-", i, "1-"], "QG_BADARG"),
        (vec![GROUP, ME, "-", i, "x", i], "QG_BADARG"),
        (vec![GROUP, ME, "0", i, "x", i], "QG_BADARG"),
        (vec![GROUP, ME, "-", "0-1", "x", i], "QG_BADARG"),
    ];
    for (args, code) in &bad {
        f.assert_refused("ack", &keys, args, code).await;
    }
    f.assert_refused("ack", &[p.ready()], &[GROUP, ME, "-", i], "QG_BADARG")
        .await;
    f.assert_refused(
        "ack",
        &[p.ready(), p.dead()],
        &[GROUP, ME, "-", i],
        "QG_BADARG",
    )
    .await;
    let too_many: Vec<String> = (1..=4097).map(|n| format!("1-{n}")).collect();
    let mut args = vec![GROUP, ME, "-"];
    args.extend(too_many.iter().map(String::as_str));
    let detail = f.assert_refused("ack", &keys, &args, "QG_BATCH").await;
    assert_eq!(detail, "4097 > 4096");
    let q = f.part(1);
    let _: String = f.cmd(&["SET", &q.ready(), "squatter"]).await;
    let detail = f
        .assert_refused("ack", &q.ack_keys(), &[GROUP, ME, "-", i], "QG_WRONGTYPE")
        .await;
    assert_eq!(detail, format!("{} string", q.ready()));
    f.assert_refused("ack", &q.ack_keys(), &[GROUP, ME, "0", i], "QG_BADARG")
        .await;
    let _: u64 = f.cmd(&["HSET", &p.claims(), "squatter", "1"]).await;
    let detail = f
        .assert_refused("ack", &keys, &[GROUP, ME, "0", i], "QG_WRONGTYPE")
        .await;
    assert_eq!(detail, format!("{} hash", p.claims()));
    let _: u64 = f.cmd(&["DEL", &p.claims()]).await;
    let () = f.cmd(&["SET", &p.claims(), "many"]).await;
    f.assert_refused("ack", &keys, &[GROUP, ME, "0", i], "QG_BADARG")
        .await;
    let _: u64 = f.cmd(&["DEL", &p.claims()]).await;

    let (count, refused) = acked(f.call("ack", &keys, &[GROUP, ME, "-", i]).await);
    assert_eq!((count, refused), (1, vec![]));
}

#[tokio::test]
async fn ack_skips_the_ownership_listing_while_the_claim_epoch_stands_still() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let mut ids = Vec::new();
    for n in 0..4 {
        ids.push(f.pending_job(&p.ready(), &format!("job-{n}"), "1").await);
    }
    // The caller read its entries at epoch 0 (no claim yet: no key).
    let epoch: Option<u64> = f.cmd(&["GET", &p.claims()]).await;
    assert_eq!(epoch, None);

    // Fast path: one XACK. An entry someone else already acknowledged is
    // counted, not named (the fast path does not look entries up).
    let _: u64 = f.cmd(&["XACK", &p.ready(), GROUP, &ids[0]]).await;
    let reply = ack_reply(
        f.call("ack", &p.ack_keys(), &[GROUP, ME, "0", &ids[0], &ids[1]])
            .await,
    );
    assert_eq!(reply, (1, vec![], 1, 0));

    // The fast path trusts the epoch: a raw XCLAIM outside the library
    // (which does not raise it) goes unseen, as docs/functions.md says.
    // This is what tells the fast path from the checked one here.
    claim_to(&mut f, &p.ready(), &ids[2], "outsider").await;
    let reply = ack_reply(
        f.call("ack", &p.ack_keys(), &[GROUP, ME, "0", &ids[2]])
            .await,
    );
    assert_eq!(reply, (1, vec![], 0, 0));

    // A claim through the library raises the epoch: the same stale epoch
    // now takes the checked path, which refuses the claimed entry by name.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (_, taken, _, epoch) = claimed(
        f.call(
            "claim",
            &p.ack_keys(),
            &[GROUP, "consumer-2", "10", "0-0", "10"],
        )
        .await,
    );
    assert_eq!((taken, epoch), (vec![ids[3].clone()], 1));
    let before = f.dump().await;
    let (count, refused) = acked(
        f.call("ack", &p.ack_keys(), &[GROUP, ME, "0", &ids[3]])
            .await,
    );
    assert_eq!((count, refused), (0, owned(&[(&ids[3], "consumer-2")])));
    assert_keyspace_eq(&before, &f.dump().await, "the refused ack");
    // The refusal told the current epoch; the new owner, reading after the
    // claim, acks on the fast path.
    let reply = ack_reply(
        f.call("ack", &p.ack_keys(), &[GROUP, "consumer-2", "1", &ids[3]])
            .await,
    );
    assert_eq!(reply, (1, vec![], 0, 1));
    assert_eq!(owners(&mut f, &p.ready()).await, []);
}

/// The `ack` keys of several partitions, in order.
fn ack_keys_of(parts: &[&Part]) -> Vec<String> {
    parts.iter().flat_map(|p| p.ack_keys()).collect()
}

#[tokio::test]
async fn ack_settles_several_partitions_in_one_call_each_on_its_own_path() {
    let mut f = Fixture::start().await;
    let (p0, p1, p2) = (f.part(0), f.part(1), f.part(2));
    let mut ids = Vec::new();
    for (n, p) in [&p0, &p1, &p2].into_iter().enumerate() {
        f.group(&p.ready()).await;
        let mut mine = Vec::new();
        for k in 0..3 {
            mine.push(
                f.pending_job(&p.ready(), &format!("job-{n}-{k}"), "1")
                    .await,
            );
        }
        ids.push(mine);
    }
    claim_to(&mut f, &p1.ready(), &ids[1][1], "consumer-2").await;
    let _: u64 = f.cmd(&["XACK", &p2.ready(), GROUP, &ids[2][0]]).await;

    // Partition 0 and 2 on the fast path (epoch 0, unchanged), 1 on the
    // checked one; two IDs for the first, three for the second, the rest
    // (two) for the last.
    let args = [
        GROUP, ME, "0", "-", "0", "2", "3", &ids[0][0], &ids[0][1], &ids[1][0], &ids[1][1],
        &ids[1][2], &ids[2][0], &ids[2][1],
    ];
    let replies = f.ack_streams(&ack_keys_of(&[&p0, &p1, &p2]), &args).await;
    let replies: Vec<_> = replies.into_iter().map(ack_reply).collect();
    assert_eq!(
        replies,
        [
            (2, vec![], 0, 0),
            (2, owned(&[(&ids[1][1], "consumer-2")]), 0, 0),
            // The entry acknowledged beforehand is counted, not named.
            (1, vec![], 1, 0),
        ]
    );
    assert_eq!(
        owners(&mut f, &p0.ready()).await,
        [(ids[0][2].clone(), ME.to_owned(), 1)]
    );
    assert_eq!(
        owners(&mut f, &p1.ready()).await,
        [(ids[1][1].clone(), "consumer-2".to_owned(), 1)]
    );
    assert_eq!(
        owners(&mut f, &p2.ready()).await,
        [(ids[2][2].clone(), ME.to_owned(), 1)]
    );

    // Safe to re-run: the same call again acknowledges nothing more.
    let again: Vec<_> = f
        .ack_streams(&ack_keys_of(&[&p0, &p1, &p2]), &args)
        .await
        .into_iter()
        .map(ack_reply)
        .collect();
    assert_eq!(
        again,
        [
            (0, vec![], 2, 0),
            (
                0,
                owned(&[
                    (&ids[1][0], ""),
                    (&ids[1][1], "consumer-2"),
                    (&ids[1][2], "")
                ]),
                0,
                0
            ),
            (0, vec![], 2, 0),
        ]
    );
}

#[tokio::test]
async fn ack_over_several_partitions_checks_every_argument_before_its_first_write() {
    let mut f = Fixture::start().await;
    let (p0, p1) = (f.part(0), f.part(1));
    let mut ids = Vec::new();
    for p in [&p0, &p1] {
        f.group(&p.ready()).await;
        ids.push(f.pending_job(&p.ready(), "job", "1").await);
    }
    let keys = ack_keys_of(&[&p0, &p1]);
    let (a, b) = (ids[0].as_str(), ids[1].as_str());
    // Each is wrong only in what the second partition's part of it says
    // (or in how the parts add up), and partition 0's ack would be fine.
    let bad: [(Vec<&str>, &str, &str); 9] = [
        // No ID left for the last stream.
        (
            vec![GROUP, ME, "0", "0", "1", a],
            "QG_BADARG",
            "ARGV expected 7",
        ),
        (
            vec![GROUP, ME, "0", "0", "2", a, b],
            "QG_BADARG",
            "the last",
        ),
        (vec![GROUP, ME, "0", "x", "1", a, b], "QG_BADARG", "epoch_2"),
        (vec![GROUP, ME, "0", "0", "0", a, b], "QG_BADARG", "count_1"),
        (vec![GROUP, ME, "0", "0", "y", a, b], "QG_BADARG", "count_1"),
        (vec![GROUP, ME, "0", "0", "1", a, "1-"], "QG_BADARG", "id 2"),
        (
            vec![GROUP, ME, "0", "0", "1", a, b, "z"],
            "QG_BADARG",
            "id 3",
        ),
        (vec!["", ME, "0", "0", "1", a, b], "QG_BADARG", "group"),
        (
            vec![GROUP, "", "0", "0", "1", a, b],
            "QG_BADARG",
            "consumer",
        ),
    ];
    for (args, code, named) in &bad {
        let detail = f.assert_refused("ack", &keys, args, code).await;
        assert!(detail.contains(named), "{args:?}: {detail}");
    }
    let args = [GROUP, ME, "0", "0", "1", a, b];
    // Keys: an odd count, and a pair whose keys name two partitions.
    let odd = [p0.ready(), p0.claims(), p1.ready()];
    f.assert_refused("ack", &odd, &args, "QG_BADARG").await;
    let crossed = [p0.ready(), p0.claims(), p1.ready(), p0.claims()];
    let detail = f.assert_refused("ack", &crossed, &args, "QG_BADARG").await;
    assert!(detail.contains("KEYS[4]"), "{detail}");
    // The batch limit counts the IDs of every stream.
    let many: Vec<String> = (1..=4096).map(|n| format!("1-{n}")).collect();
    let mut args = vec![GROUP, ME, "0", "0", "1", a];
    args.extend(many.iter().map(String::as_str));
    let detail = f.assert_refused("ack", &keys, &args, "QG_BATCH").await;
    assert_eq!(detail, "4097 > 4096");
}

#[tokio::test]
async fn a_damaged_partition_answers_with_its_error_and_the_others_are_acked() {
    let mut f = Fixture::start().await;
    let (p0, p1, p2) = (f.part(0), f.part(1), f.part(2));
    let mut ids = Vec::new();
    for p in [&p0, &p1, &p2] {
        f.group(&p.ready()).await;
        ids.push(f.pending_job(&p.ready(), "job", "1").await);
    }
    // Partition 1's claim epoch key holds a hash; partition 2's group is gone.
    let _: u64 = f.cmd(&["HSET", &p1.claims(), "squatter", "1"]).await;
    let _: u64 = f.cmd(&["XGROUP", "DESTROY", &p2.ready(), GROUP]).await;
    let damaged = (
        f.entries(&p1.ready()).await,
        owners(&mut f, &p1.ready()).await,
        f.entries(&p2.ready()).await,
    );

    let keys = ack_keys_of(&[&p0, &p1, &p2]);
    let args = [
        GROUP, ME, "0", "0", "0", "1", "1", &ids[0], &ids[1], &ids[2],
    ];
    let mut replies = f.ack_streams(&keys, &args).await.into_iter();
    assert_eq!(ack_reply(replies.next().unwrap()), (1, vec![], 0, 0));
    let err = replies.next().unwrap().unwrap_err();
    assert_eq!(err.code(), Some("QG_WRONGTYPE"), "{err}");
    assert_eq!(err.detail(), Some(format!("{} hash", p1.claims()).as_str()));
    let err = replies.next().unwrap().unwrap_err();
    assert_eq!(err.code(), Some("QG_BADARG"), "{err}");
    assert!(
        err.detail().unwrap().contains("is not a consumer group of"),
        "{err}"
    );

    assert_eq!(owners(&mut f, &p0.ready()).await, []);
    assert_eq!(
        (
            f.entries(&p1.ready()).await,
            owners(&mut f, &p1.ready()).await,
            f.entries(&p2.ready()).await,
        ),
        damaged,
        "the damaged partitions are untouched"
    );
}

#[tokio::test]
async fn claim_takes_idle_entries_and_raises_the_epoch_only_when_it_took_some() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(f.pending_job(&p.ready(), &format!("job-{n}"), "1").await);
    }
    let keys = p.ack_keys();

    // Nothing idle for an hour: nothing taken, the epoch stays (and no key
    // is made). (XAUTOCLAIM itself may still record the claiming consumer in
    // the group: Valkey 8 does, Redis 7.0 does not; see docs/servers.md.)
    let owners_before = owners(&mut f, &p.ready()).await;
    let reply = claimed(
        f.call(
            "claim",
            &keys,
            &[GROUP, "consumer-2", "3600000", "0-0", "10"],
        )
        .await,
    );
    assert_eq!(reply, ("0-0".to_owned(), vec![], vec![], 0));
    assert_eq!(owners(&mut f, &p.ready()).await, owners_before);
    let epoch: Option<u64> = f.cmd(&["GET", &p.claims()]).await;
    assert_eq!(epoch, None, "a claim that took nothing raises no epoch");

    // A deleted pending entry is reported, not claimed; the others are taken,
    // with their fields, one page of COUNT at a time.
    let _: u64 = f.cmd(&["XDEL", &p.ready(), &ids[1]]).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let value = f
        .call("claim", &keys, &[GROUP, "consumer-2", "10", "0-0", "10"])
        .await
        .expect("claim");
    let (_, entries, deleted, epoch): ClaimReply = redis::from_redis_value(value).unwrap();
    let taken: Vec<&String> = entries.iter().map(|(id, _)| id).collect();
    assert_eq!(taken, [&ids[0], &ids[2]]);
    assert!(entries[0].1.contains(&"job-0".to_owned()), "{entries:?}");
    assert_eq!((deleted, epoch), (vec![ids[1].clone()], 1));
    assert_eq!(
        owners(&mut f, &p.ready()).await,
        [
            (ids[0].clone(), "consumer-2".to_owned(), 2),
            (ids[2].clone(), "consumer-2".to_owned(), 2),
        ]
    );

    let bad: [(Vec<String>, Vec<&str>, &str); 8] = [
        (keys.clone(), vec![GROUP, ME, "10", "0-0"], "QG_BADARG"),
        (keys.clone(), vec!["", ME, "10", "0-0", "10"], "QG_BADARG"),
        (
            keys.clone(),
            vec![GROUP, "", "10", "0-0", "10"],
            "QG_BADARG",
        ),
        (keys.clone(), vec![GROUP, ME, "x", "0-0", "10"], "QG_BADARG"),
        (
            keys.clone(),
            vec![GROUP, ME, "10", "zero", "10"],
            "QG_BADARG",
        ),
        (keys.clone(), vec![GROUP, ME, "10", "0-0", "0"], "QG_BADARG"),
        (
            keys.clone(),
            vec!["no-such-group", ME, "0", "0-0", "10"],
            "QG_BADARG",
        ),
        (
            vec![p.ready(), p.dead()],
            vec![GROUP, ME, "0", "0-0", "10"],
            "QG_BADARG",
        ),
    ];
    for (keys, args, code) in &bad {
        f.assert_refused("claim", keys, args, code).await;
    }
    let _: u64 = f.cmd(&["DEL", &p.claims()]).await;
    let _: u64 = f.cmd(&["HSET", &p.claims(), "squatter", "1"]).await;
    let detail = f
        .assert_refused(
            "claim",
            &keys,
            &[GROUP, ME, "0", "0-0", "10"],
            "QG_WRONGTYPE",
        )
        .await;
    assert_eq!(detail, format!("{} hash", p.claims()));
}

#[tokio::test]
async fn renew_resets_the_idle_time_of_the_callers_entry_only() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let idle = |reply: Vec<(String, String, u64, u64)>| reply[0].2;

    let reply: (u64, String) = redis::from_redis_value(
        f.call("renew", &[p.ready()], &[GROUP, ME, &id])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(reply, (1, ME.to_owned()));
    let pending: Vec<(String, String, u64, u64)> = f
        .cmd(&["XPENDING", &p.ready(), GROUP, "-", "+", "10"])
        .await;
    assert!(idle(pending.clone()) < 300, "{pending:?}");
    assert_eq!(
        owners(&mut f, &p.ready()).await,
        [(id.clone(), ME.to_owned(), 1)],
        "no delivery counted"
    );

    // Claimed by another consumer: renewing changes nothing, takes nothing back.
    claim_to(&mut f, &p.ready(), &id, "consumer-2").await;
    let before = f.dump().await;
    let reply: (u64, String) = redis::from_redis_value(
        f.call("renew", &[p.ready()], &[GROUP, ME, &id])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(reply, (0, "consumer-2".to_owned()));
    assert_keyspace_eq(&before, &f.dump().await, "a renew by a stale consumer");
    let _: u64 = f.cmd(&["XACK", &p.ready(), GROUP, &id]).await;
    let reply: (u64, String) = redis::from_redis_value(
        f.call("renew", &[p.ready()], &[GROUP, ME, &id])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(reply, (0, String::new()));

    // A pending entry deleted from the stream stays pending (for recovery to report).
    let gone = f.pending_job(&p.ready(), "job-2", "1").await;
    let _: u64 = f.cmd(&["XDEL", &p.ready(), &gone]).await;
    f.assert_refused("renew", &[p.ready()], &[GROUP, ME, &gone], "QG_NOSOURCE")
        .await;
    assert_eq!(f.pending_ids(&p.ready()).await, std::slice::from_ref(&gone));

    for args in [
        vec![GROUP, ME],
        vec![GROUP, ME, &gone, "extra"],
        vec!["", ME, &gone],
        vec![GROUP, "", &gone],
        vec![GROUP, ME, "soon"],
        vec!["no-such-group", ME, &gone],
    ] {
        f.assert_refused("renew", &[p.ready()], &args, "QG_BADARG")
            .await;
    }
    f.assert_refused("renew", &[p.dead()], &[GROUP, ME, &gone], "QG_BADARG")
        .await;
}

// ---------------------------------------------------------------------------
// version, two versions side by side, loading through the runtime

#[tokio::test]
async fn two_library_versions_load_side_by_side_and_both_answer() {
    let mut f = Fixture::start().await;
    let (v1, name1) = library(1);
    let (v2, name2) = library(2);
    assert_ne!(name1, name2);
    for code in [&v1, &v2] {
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(code)
            .query_async(&mut f.conn)
            .await
            .unwrap();
    }
    for name in [&name1, &name2] {
        let reply = fcall(&mut f.conn, &format!("{name}_version"), &[], &[])
            .await
            .unwrap();
        let answer: String = redis::from_redis_value(reply).unwrap();
        assert_eq!(&answer, name);
    }
    // Each version's transitions work on the same keys.
    let p = f.part(0);
    f.group(&p.ready()).await;
    for name in [&name1, &name2] {
        let id = f.pending_job(&p.ready(), "job-1", "1").await;
        let reply = fcall(
            &mut f.conn,
            &format!("{name}_retry_schedule"),
            &p.schedule_keys(&id),
            &as_bytes(&[GROUP, ME, &id, "1", "r", "60000", ACCEPTED]),
        )
        .await;
        assert_eq!(moved(reply), ("scheduled".to_owned(), id));
    }
    // `version` is read-only: it runs on a read-only replica's terms (no-writes).
    let flags: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(&name2)
        .query_async(&mut f.conn)
        .await
        .unwrap();
    assert!(format!("{flags:?}").contains("no-writes"), "{flags:?}");
}

#[tokio::test]
async fn the_runtime_loads_verifies_and_names_a_missing_library() {
    init_tracing();
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    let code = std::fs::read_to_string(COMMITTED_LIBRARY).expect("tests/deploy/functions.lua");
    let (_, name) = library(queuegen::gen::functions::LIBRARY_VERSION);

    let missing = functions::verify_library(&redis, &name).await.unwrap_err();
    let message = missing.to_string();
    assert!(
        matches!(missing, Error::Setup(SetupError::LibraryMissing { .. })),
        "{missing:?}"
    );
    assert!(message.contains(&name), "{message}");
    assert!(
        message.contains(&format!("127.0.0.1:{}", server.port())),
        "{message}"
    );

    let first = admin::load_library(&redis, &code).await.unwrap();
    assert_eq!(first.len(), 1, "a standalone server is the one primary");
    assert_eq!(first[0].library, name);
    assert!(!first[0].replaced);
    functions::verify_library(&redis, &name).await.unwrap();
    let second = admin::load_library(&redis, &code).await.unwrap();
    assert!(second[0].replaced);
    functions::verify_library(&redis, &name).await.unwrap();

    let other = functions::verify_library(&redis, "qg_queuegen_tests_v999")
        .await
        .unwrap_err();
    assert!(
        matches!(other, Error::Setup(SetupError::LibraryMissing { .. })),
        "{other:?}"
    );
    let invalid = admin::load_library(&redis, "return 1").await.unwrap_err();
    assert!(
        matches!(invalid, Error::Setup(SetupError::NoLibraryName { .. })),
        "{invalid:?}"
    );
}

#[test]
fn the_committed_library_is_what_the_spec_generates() {
    let committed = std::fs::read_to_string(COMMITTED_LIBRARY).expect("tests/deploy/functions.lua");
    let generated = queuegen::gen::functions::generate(&spec(), "../queues.yaml").unwrap();
    assert!(
        committed == generated.contents,
        "tests/deploy/functions.lua is stale: run `queuegen generate tests/queues.yaml --deploy-out tests/deploy`"
    );
}

// ---------------------------------------------------------------------------
// rate_take

/// `[granted, wait_ms]` of a `rate_take` reply.
fn grant(reply: Reply) -> (u64, u64) {
    redis::from_redis_value(reply.unwrap()).unwrap()
}

#[tokio::test]
async fn rate_take_grants_up_to_the_bucket_then_says_how_long_to_wait() {
    let mut f = Fixture::start().await;
    let bucket = vec![format!("{}:{{jobs}}:rate", f.prefix)];
    // An absent bucket is full: 10 tokens; 6 then 4 granted, then none.
    assert_eq!(
        grant(
            f.call("rate_take", &bucket, &["10", "1000", "6", "0"])
                .await
        ),
        (6, 0)
    );
    assert_eq!(
        grant(
            f.call("rate_take", &bucket, &["10", "1000", "8", "0"])
                .await
        )
        .0,
        4
    );
    let (granted, wait_ms) = grant(
        f.call("rate_take", &bucket, &["10", "1000", "5", "0"])
            .await,
    );
    assert_eq!(granted, 0);
    // 5 tokens at 10 per second: about half a second.
    assert!((400..=500).contains(&wait_ms), "{wait_ms}");
    // A refund of unused tokens is available at once; a debit is owed.
    assert_eq!(
        grant(
            f.call("rate_take", &bucket, &["10", "1000", "5", "3"])
                .await
        )
        .0,
        3
    );
    let (granted, wait_ms) = grant(
        f.call("rate_take", &bucket, &["10", "1000", "1", "-5"])
            .await,
    );
    assert_eq!(granted, 0);
    assert!((500..=600).contains(&wait_ms), "{wait_ms}");
    // The key holds the bucket and expires once it would be full again.
    let ttl: i64 = f.cmd(&["PTTL", &bucket[0]]).await;
    assert!((1000..=1600).contains(&ttl), "{ttl}");
    // It refills by the server's clock.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert!(
        grant(
            f.call("rate_take", &bucket, &["10", "1000", "10", "0"])
                .await
        )
        .0 >= 1
    );
    // wanted 0 only settles.
    assert_eq!(
        grant(
            f.call("rate_take", &bucket, &["10", "1000", "0", "0"])
                .await
        ),
        (0, 0)
    );
}

#[tokio::test]
async fn rate_take_refuses_bad_arguments_and_keys_without_writing() {
    let mut f = Fixture::start().await;
    let bucket = vec![format!("{}:{{jobs}}:rate", f.prefix)];
    // A bucket in use, so that a refused call could be seen changing it.
    assert_eq!(
        grant(
            f.call("rate_take", &bucket, &["10", "1000", "3", "0"])
                .await
        )
        .0,
        3
    );
    let cases: [(&[&str], &str); 9] = [
        (&["0", "1000", "1", "0"], "limit must be at least 1"),
        (&["10", "0", "1", "0"], "per_ms must be at least 1"),
        (
            &["ten", "1000", "1", "0"],
            "limit must be a decimal integer",
        ),
        (&["10", "1s", "1", "0"], "per_ms must be a decimal integer"),
        (
            &["10", "1000", "-1", "0"],
            "wanted must be a decimal integer",
        ),
        (
            &["10", "1000", "1", "1.5"],
            "adjust must be a decimal integer",
        ),
        (
            &["10", "1000", "1", "--1"],
            "adjust must be a decimal integer",
        ),
        (&["10", "1000", "1"], "ARGV expected 4 arguments"),
        (&["10", "1000", "1", "0", "x"], "ARGV expected 4 arguments"),
    ];
    for (args, why) in cases {
        let detail = f
            .assert_refused("rate_take", &bucket, args, "QG_BADARG")
            .await;
        assert!(detail.contains(why), "{args:?}: {detail}");
    }
    // A key that is not a queue's bucket, or a bucket of the wrong type.
    let partition_key = vec![format!("{}:{{jobs-00}}:ready", f.prefix)];
    let detail = f
        .assert_refused(
            "rate_take",
            &partition_key,
            &["10", "1000", "1", "0"],
            "QG_BADARG",
        )
        .await;
    assert!(detail.contains("<prefix>{<queue>}:rate"), "{detail}");
    let squatted = vec![format!("{}:{{other}}:rate", f.prefix)];
    let () = f.cmd(&["SET", &squatted[0], "x"]).await;
    f.assert_refused(
        "rate_take",
        &squatted,
        &["10", "1000", "1", "0"],
        "QG_WRONGTYPE",
    )
    .await;
    let corrupt = vec![format!("{}:{{third}}:rate", f.prefix)];
    let () = f
        .cmd(&["HSET", &corrupt[0], "tokens", "many", "at_ms", "1"])
        .await;
    let detail = f
        .assert_refused(
            "rate_take",
            &corrupt,
            &["10", "1000", "1", "0"],
            "QG_BADARG",
        )
        .await;
    assert!(detail.contains("not a token bucket"), "{detail}");
}

// ---------------------------------------------------------------------------
// One input never stalls a partition; sizes and counts are checked first (issue 26, item 5)

/// An envelope of `fields` field/value pairs in all (headers included), as
/// the runtime's pairs: more than the library's limit, and more than Lua's
/// `unpack` could pass to one XADD (about 8,000 items).
fn envelope_of(job_id: &str, fields: usize) -> Vec<String> {
    let mut flat: Vec<String> = job_fields(job_id, "2", "1")
        .into_iter()
        .flat_map(|(name, value)| [name.to_owned(), value.to_owned()])
        .collect();
    let mut n = 0;
    while flat.len() < 2 * fields {
        flat.extend([format!("extra_{n}"), "x".to_owned()]);
        n += 1;
    }
    flat
}

/// 4,500 fields: 9,000 items, past `unpack`'s limit.
const HUGE_FIELDS: usize = 4_500;

/// `envelope` as the promote functions store it: a cjson array.
fn stored(envelope: &[String]) -> String {
    serde_json::to_string(envelope).unwrap()
}

/// Calls `function`, and if it failed, asserts it wrote nothing: no call
/// may fail after its first write.
async fn call_atomic(f: &mut Fixture, function: &str, keys: &[String], args: &[&str]) -> Reply {
    let before = f.dump().await;
    let reply = f.call(function, keys, args).await;
    if let Err(err) = &reply {
        assert_keyspace_eq(
            &before,
            &f.dump().await,
            &format!("{function} failed ({err}) and"),
        );
    }
    reply
}

impl Part {
    fn delayed(&self) -> String {
        format!("{}:delayed", self.base)
    }
    fn delayed_jobs(&self) -> String {
        format!("{}:delayed-jobs", self.base)
    }
}

#[tokio::test]
async fn retry_promote_moves_an_unpromotable_member_aside_and_promotes_the_rest() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let ids = scheduled(&mut f, &p, 3, 1).await;
    // The middle one's envelope was stored before the library had a limit
    // (v6 promoted the first, then failed on it: a write before a failure).
    let huge = stored(&envelope_of("job-1", HUGE_FIELDS));
    let () = f.cmd(&["HSET", &p.retry_jobs(), &ids[1], &huge]).await;
    let members: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut args = vec!["2", "10", "60000", "1000"];
    args.extend(&members);

    let reply = call_atomic(&mut f, "retry_promote", &p.promote_keys(&members), &args).await;
    assert_eq!(counts(reply), (2, 0, 0, 1));
    let promoted: Vec<String> = f
        .entries(&p.ready())
        .await
        .iter()
        .filter_map(|(_, fields)| field(fields, "prev_id").map(str::to_owned))
        .collect();
    assert_eq!(promoted, [ids[0].clone(), ids[2].clone()]);
    let dead = f.entries(&p.dead()).await;
    assert_eq!(dead.len(), 1);
    let letter = &dead[0].1;
    assert_eq!(field(letter, "reason"), Some("decode_error"));
    assert_eq!(field(letter, "job_id"), Some("job-1"));
    assert_eq!(field(letter, "source_id"), Some(ids[1].as_str()));
    assert_eq!(field(letter, "deliveries"), Some("0"));
    assert_eq!(field(letter, "envelope"), Some(huge.as_str()));
    let detail = field(letter, "detail").unwrap();
    assert!(
        detail.ends_with(
            "envelope has 4500 fields, more than the library allows (MAX_ENVELOPE_FIELDS 1000)"
        ),
        "{detail}"
    );
    let exists: u64 = f.cmd(&["EXISTS", &p.retry(), &p.retry_jobs()]).await;
    assert_eq!(exists, 0, "nothing is left to stall the partition");
    // Its replay is refused, naming the limit, rather than failing in XADD.
    let detail = f
        .assert_refused(
            "replay",
            &p.replay_keys(&dead[0].0),
            &[&dead[0].0, "", "60000", ACCEPTED],
            "QG_BADENVELOPE",
        )
        .await;
    assert!(detail.contains("MAX_ENVELOPE_FIELDS 1000"), "{detail}");
}

/// The KEYS and ARGV of `delay_schedule` for `envelope` (job_id among its
/// fields) due at `due`, under `max_bytes`.
fn delay_call(
    p: &Part,
    job_id: &str,
    due: &str,
    max_bytes: &str,
    envelope: &[String],
) -> (Vec<String>, Vec<String>) {
    let keys = vec![p.delayed(), p.delayed_jobs(), p.marker("delayed", job_id)];
    let mut args = vec![due.to_owned(), max_bytes.to_owned()];
    args.extend(envelope.iter().cloned());
    (keys, args)
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[tokio::test]
async fn delay_schedule_refuses_an_envelope_over_the_field_limit_or_max_bytes() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    let huge = envelope_of("job-big", HUGE_FIELDS);
    let (keys, args) = delay_call(&p, "job-big", "1", "100000000", &huge);
    let detail = f
        .assert_refused("delay_schedule", &keys, &strs(&args), "QG_BADENVELOPE")
        .await;
    assert_eq!(
        detail,
        "the envelope has 4500 fields, more than the library allows (MAX_ENVELOPE_FIELDS 1000)"
    );
    // At the limit it is accepted, and promotes.
    let most = envelope_of("job-most", 1000);
    let (keys, args) = delay_call(&p, "job-most", "1", "100000000", &most);
    assert_eq!(
        moved(f.call("delay_schedule", &keys, &strs(&args)).await).0,
        "scheduled"
    );

    // max_bytes counts field names and values, as the runtime does.
    let small = envelope_of("job-small", 9);
    let bytes: usize = small.iter().map(String::len).sum();
    let (keys, args) = delay_call(&p, "job-small", "1", &(bytes - 1).to_string(), &small);
    let detail = f
        .assert_refused("delay_schedule", &keys, &strs(&args), "QG_BADENVELOPE")
        .await;
    assert_eq!(
        detail,
        format!("the envelope has {bytes} bytes (field names and values), more than max_bytes {} (the queue's payload.max_bytes)", bytes - 1)
    );
    for bad_max in ["0", "big", ""] {
        let (keys, args) = delay_call(&p, "job-small", "1", bad_max, &small);
        f.assert_refused("delay_schedule", &keys, &strs(&args), "QG_BADARG")
            .await;
    }
    let (keys, args) = delay_call(&p, "job-small", "1", &bytes.to_string(), &small);
    assert_eq!(
        moved(f.call("delay_schedule", &keys, &strs(&args)).await).0,
        "scheduled"
    );

    f.group(&p.ready()).await;
    let keys = vec![
        p.delayed(),
        p.delayed_jobs(),
        p.ready(),
        p.dead(),
        p.marker("delayed", "job-most"),
        p.marker("delayed", "job-small"),
    ];
    let reply = call_atomic(
        &mut f,
        "delayed_promote",
        &keys,
        &["2", "10", "60000", "1000", "job-most", "job-small"],
    )
    .await;
    assert_eq!(counts(reply), (2, 0, 0, 0));
}

#[tokio::test]
async fn delayed_promote_dead_letters_a_member_stored_over_the_limit_and_promotes_the_rest() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    // Stored by v6's delay_schedule, which had no limit: v6's delayed_promote
    // then failed on every call, and the partition's delayed jobs never ran.
    let huge = stored(&envelope_of("job-big", HUGE_FIELDS));
    let () = f.cmd(&["HSET", &p.delayed_jobs(), "job-big", &huge]).await;
    let _: u64 = f.cmd(&["ZADD", &p.delayed(), "1", "job-big"]).await;
    let small = stored(&envelope_of("job-small", 9));
    let () = f
        .cmd(&["HSET", &p.delayed_jobs(), "job-small", &small])
        .await;
    let _: u64 = f.cmd(&["ZADD", &p.delayed(), "1", "job-small"]).await;
    let keys = vec![
        p.delayed(),
        p.delayed_jobs(),
        p.ready(),
        p.dead(),
        p.marker("delayed", "job-big"),
        p.marker("delayed", "job-small"),
    ];
    let args = ["2", "10", "60000", "1000", "job-big", "job-small"];
    let reply = call_atomic(&mut f, "delayed_promote", &keys, &args).await;
    assert_eq!(counts(reply), (1, 0, 0, 1));
    let ready = f.entries(&p.ready()).await;
    assert_eq!(ready.len(), 1);
    assert_eq!(field(&ready[0].1, "job_id"), Some("job-small"));
    let dead = f.entries(&p.dead()).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(field(&dead[0].1, "job_id"), Some("job-big"));
    assert_eq!(field(&dead[0].1, "source_id"), Some(""));
    assert_eq!(field(&dead[0].1, "reason"), Some("decode_error"));
    // No promotion marker: the job_id may be delayed again, corrected.
    let marker: u64 = f.cmd(&["EXISTS", &p.marker("delayed", "job-big")]).await;
    assert_eq!(marker, 0);
    let after = f.dump().await;
    assert_eq!(
        counts(f.call("delayed_promote", &keys, &args).await),
        (0, 1, 1, 0)
    );
    assert_keyspace_eq(&after, &f.dump().await, "the re-run");
}

/// The KEYS and ARGV of `publish_once` for `envelope` under `max_bytes`.
fn publish_call(
    p: &Part,
    job_id: &str,
    max_bytes: &str,
    envelope: &[String],
) -> (Vec<String>, Vec<String>) {
    let keys = vec![p.ready(), p.marker("publish", job_id)];
    let mut args = vec!["60000".to_owned(), max_bytes.to_owned()];
    args.extend(envelope.iter().cloned());
    (keys, args)
}

#[tokio::test]
async fn publish_once_refuses_a_payload_over_the_queues_limit() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    let mut envelope = envelope_of("job-1", 9);
    envelope.extend(["body".to_owned(), "x".repeat(1 << 20)]);
    let (keys, args) = publish_call(&p, "job-1", "1024", &envelope);
    let detail = f
        .assert_refused("publish_once", &keys, &strs(&args), "QG_BADENVELOPE")
        .await;
    assert!(
        detail.ends_with("more than max_bytes 1024 (the queue's payload.max_bytes)"),
        "{detail}"
    );

    let huge = envelope_of("job-1", HUGE_FIELDS);
    let (keys, args) = publish_call(&p, "job-1", "100000000", &huge);
    let detail = f
        .assert_refused("publish_once", &keys, &strs(&args), "QG_BADENVELOPE")
        .await;
    assert!(detail.contains("MAX_ENVELOPE_FIELDS 1000"), "{detail}");

    let small = envelope_of("job-1", 9);
    let bytes: usize = small.iter().map(String::len).sum();
    let (keys, args) = publish_call(&p, "job-1", &(bytes - 1).to_string(), &small);
    f.assert_refused("publish_once", &keys, &strs(&args), "QG_BADENVELOPE")
        .await;
    let (keys, args) = publish_call(&p, "job-1", "0", &small);
    f.assert_refused("publish_once", &keys, &strs(&args), "QG_BADARG")
        .await;
    let (keys, args) = publish_call(&p, "job-1", &bytes.to_string(), &small);
    assert_eq!(
        moved(f.call("publish_once", &keys, &strs(&args)).await).0,
        "published"
    );
}

#[tokio::test]
async fn schedule_tick_and_retry_schedule_refuse_an_envelope_over_the_field_limit() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let huge = envelope_of("daily@1", HUGE_FIELDS);
    let keys = vec![p.ready(), p.marker("tick", "daily:1")];
    let mut args = vec!["daily", "1", "60000"];
    args.extend(strs(&huge));
    let detail = f
        .assert_refused("schedule_tick", &keys, &args, "QG_BADENVELOPE")
        .await;
    assert!(detail.contains("MAX_ENVELOPE_FIELDS 1000"), "{detail}");

    // An entry appended by hand past the limit: its retry would store what
    // no promotion could append.
    let fields: Vec<(&str, &str)> = huge
        .chunks(2)
        .map(|pair| (pair[0].as_str(), pair[1].as_str()))
        .collect();
    let id = f.pending(&p.ready(), &fields).await;
    let detail = f
        .assert_refused(
            "retry_schedule",
            &p.schedule_keys(&id),
            &[GROUP, ME, &id, "1", "later", "60000", ACCEPTED],
            "QG_BADENVELOPE",
        )
        .await;
    assert!(
        detail.starts_with(&format!(
            "entry {id} (with prev_id and reason) has 4502 fields"
        )),
        "{detail}"
    );
}

#[tokio::test]
async fn dead_letter_and_retry_schedule_cut_long_text_with_a_marker() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    // Multi-byte characters, so a cut must not split one.
    let long = "é".repeat(1 << 19);
    moved(
        f.call(
            "dead_letter",
            &p.dead_keys(&id),
            &[GROUP, ME, &id, "handler", &long, "1", "60000", "1000"],
        )
        .await,
    );
    let entries = f.entries(&p.dead()).await;
    let recorded = field(&entries[0].1, "detail").unwrap();
    assert!(recorded.len() <= 1024, "{} bytes of detail", recorded.len());
    let kept = recorded.strip_suffix("...[truncated]").expect("the marker");
    assert!(
        kept.chars().all(|c| c == 'é') && kept.len() >= 1000,
        "{kept}"
    );
    // A short one is kept as it is.
    let id = f.pending_job(&p.ready(), "job-2", "1").await;
    moved(
        f.call(
            "dead_letter",
            &p.dead_keys(&id),
            &[GROUP, ME, &id, "handler", "short", "1", "60000", "1000"],
        )
        .await,
    );
    assert_eq!(
        field(&f.entries(&p.dead()).await[1].1, "detail"),
        Some("short")
    );

    let id = f.pending_job(&p.ready(), "job-3", "1").await;
    moved(
        f.call(
            "retry_schedule",
            &p.schedule_keys(&id),
            &[GROUP, ME, &id, "1", &long, "60000", ACCEPTED],
        )
        .await,
    );
    let stored: String = f.cmd(&["HGET", &p.retry_jobs(), &id]).await;
    let fields: Vec<String> = serde_json::from_str(&stored).unwrap();
    let reason = fields
        .chunks(2)
        .find(|pair| pair[0] == "reason")
        .map(|pair| pair[1].clone())
        .unwrap();
    assert!(
        reason.len() <= 1024 && reason.ends_with("...[truncated]"),
        "{reason}"
    );
}

#[tokio::test]
async fn ack_refuses_an_id_without_its_sequence_on_both_paths() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = f.pending_job(&p.ready(), "job-1", "1").await;
    // v6's checked path answered [1, ["1700000000000", ""], 0, 0]: as if
    // the ID named an entry no longer pending.
    for epoch in ["-", "0"] {
        for bad in [
            "1700000000000",
            "1-2-3",
            "99999999999999999999-0",
            "1-18446744073709551616",
        ] {
            let detail = f
                .assert_refused(
                    "ack",
                    &p.ack_keys(),
                    &[GROUP, ME, epoch, &id, bad],
                    "QG_BADARG",
                )
                .await;
            assert_eq!(
                detail,
                format!("id 2 must be a stream ID like 1700000000000-0, got \"{bad}\"")
            );
        }
    }
    let reply = ack_reply(
        f.call(
            "ack",
            &p.ack_keys(),
            &[GROUP, ME, "-", &id, "18446744073709551615-0"],
        )
        .await,
    );
    assert_eq!(reply.0, 1);
}

#[tokio::test]
async fn claim_refuses_an_out_of_range_count_naming_it() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    f.pending_job(&p.ready(), "job-1", "1").await;
    // v6 answered "group "workers" is not a consumer group of ...".
    for count in ["999999999999999", "100001"] {
        let detail = f
            .assert_refused(
                "claim",
                &p.ack_keys(),
                &[GROUP, ME, "0", "0-0", count],
                "QG_BADARG",
            )
            .await;
        assert_eq!(detail, format!("count must be 1 to 100000, got {count}"));
    }
    let (_, taken, _, _) = claimed(
        f.call(
            "claim",
            &p.ack_keys(),
            &[GROUP, "consumer-2", "0", "0-0", "100000"],
        )
        .await,
    );
    assert_eq!(taken.len(), 1);
}

// ---------------------------------------------------------------------------
// packed entries (`payload.shape: packed`): the same pairs in one MessagePack
// field; every function reads them unpacked and keeps the shape.

fn packed(fields: &[(&str, &str)]) -> Vec<u8> {
    queuegen_runtime::packed::pack(fields.iter().copied())
}

fn unpacked(value: &[u8]) -> Vec<(String, String)> {
    queuegen_runtime::packed::unpack(value)
        .unwrap_or_else(|err| panic!("{value:?} {err}"))
        .into_iter()
        .map(|(name, value)| (name.to_owned(), String::from_utf8(value.to_vec()).unwrap()))
        .collect()
}

/// Every entry of `stream` with its fields as bytes.
async fn raw_entries(f: &mut Fixture, stream: &str) -> Vec<(String, Vec<(String, Vec<u8>)>)> {
    let raw: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query_async(&mut f.conn)
        .await
        .unwrap();
    raw.into_iter()
        .map(|(id, flat)| {
            let fields = flat
                .chunks(2)
                .map(|pair| (String::from_utf8(pair[0].clone()).unwrap(), pair[1].clone()))
                .collect();
            (id, fields)
        })
        .collect()
}

/// The pairs of the last entry of `stream`, which must be packed.
async fn last_packed(f: &mut Fixture, stream: &str) -> (String, Vec<(String, String)>) {
    let (id, fields) = raw_entries(f, stream).await.pop().expect("an entry");
    assert_eq!(fields.len(), 1, "{stream} {id}: one field");
    assert_eq!(fields[0].0, "packed", "{stream} {id}");
    (id, unpacked(&fields[0].1))
}

/// Appends an entry whose one field `packed` is `value`, and reads it into
/// the group: pending.
async fn pending_packed(f: &mut Fixture, ready: &str, value: &[u8]) -> String {
    let id: String = redis::cmd("XADD")
        .arg(ready)
        .arg("*")
        .arg("packed")
        .arg(value)
        .query_async(&mut f.conn)
        .await
        .unwrap();
    let _: redis::Value = f
        .cmd(&[
            "XREADGROUP",
            "GROUP",
            GROUP,
            ME,
            "COUNT",
            "1000",
            "STREAMS",
            ready,
            ">",
        ])
        .await;
    id
}

async fn hget_bytes(f: &mut Fixture, key: &str, field: &str) -> Vec<u8> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query_async(&mut f.conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_packed_job_stays_packed_through_retry_promotion_dead_letter_and_replay() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let id = pending_packed(&mut f, &p.ready(), &packed(&job_fields("job-1", "2", "1"))).await;

    let due = (now_ms() - 1_000).to_string();
    let args = [
        GROUP,
        ME,
        id.as_str(),
        due.as_str(),
        "timeout",
        "60000",
        ACCEPTED,
    ];
    let (status, _) = moved(f.call("retry_schedule", &p.schedule_keys(&id), &args).await);
    assert_eq!(status, "scheduled");
    let stored = hget_bytes(&mut f, &p.retry_jobs(), &id).await;
    assert_ne!(stored[0], b'[', "a packed job is stored as MessagePack");
    let mut retried = job_fields("job-1", "2", "2");
    retried.insert(7, ("prev_id", &id));
    retried.insert(8, ("reason", "timeout"));
    assert_eq!(unpacked(&stored), owned(&retried));

    let now = now_ms().to_string();
    let promote = [now.as_str(), "10", "60000", "1000", id.as_str()];
    let promoted = counts(
        f.call("retry_promote", &p.promote_keys(&[&id]), &promote)
            .await,
    );
    assert_eq!(promoted, (1, 0, 0, 0));
    let (ready_id, fields) = last_packed(&mut f, &p.ready()).await;
    assert_eq!(fields, owned(&retried), "promoted packed, as rescheduled");

    let _: redis::Value = f
        .cmd(&[
            "XREADGROUP",
            "GROUP",
            GROUP,
            ME,
            "COUNT",
            "10",
            "STREAMS",
            &p.ready(),
            ">",
        ])
        .await;
    let dead_args = [
        GROUP,
        ME,
        ready_id.as_str(),
        "permanent",
        "rejected",
        "2",
        "60000",
        "1000",
    ];
    let (status, dead_id) = moved(
        f.call("dead_letter", &p.dead_keys(&ready_id), &dead_args)
            .await,
    );
    assert_eq!(status, "dead_lettered");
    let (_, letter) = raw_entries(&mut f, &p.dead()).await.pop().unwrap();
    let value = |name: &str| letter.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert_eq!(
        value("job_id"),
        b"job-1",
        "the header is read from the packed field"
    );
    assert_eq!(value("attempt"), b"2");
    assert_eq!(value("schema"), b"2");
    assert_eq!(unpacked(&value("envelope")), owned(&retried));

    let replay = [dead_id.as_str(), "", "60000", ACCEPTED];
    let (status, replayed_id) = moved(f.call("replay", &p.replay_keys(&dead_id), &replay).await);
    assert_eq!(status, "replayed");
    let (last, fields) = last_packed(&mut f, &p.ready()).await;
    assert_eq!(last, replayed_id);
    let mut expected = job_fields("job-1", "2", "1");
    expected.insert(7, ("reason", "replay"));
    expected.insert(8, ("replay_of", &dead_id));
    assert_eq!(fields, owned(&expected), "replayed packed as attempt 1");
}

#[tokio::test]
async fn publish_once_delay_schedule_and_schedule_tick_take_a_packed_envelope() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    let job = job_fields("job-1", "2", "1");
    let blob = packed(&job);
    let bytes: usize = job.iter().map(|(n, v)| n.len() + v.len()).sum();

    // Its limits count the unpacked names and values, as for fields.
    let keys = vec![p.ready(), p.marker("publish", "job-1")];
    let over = (bytes - 1).to_string();
    let too_small: [&[u8]; 4] = [b"60000", over.as_bytes(), b"packed", &blob];
    let detail = f
        .assert_refused_bytes("publish_once", &keys, &too_small, "QG_BADENVELOPE")
        .await;
    assert!(detail.contains(&format!("has {bytes} bytes")), "{detail}");
    let fits = bytes.to_string();
    let args: [&[u8]; 4] = [b"60000", fits.as_bytes(), b"packed", &blob];
    let (status, id) = moved(f.call_bytes("publish_once", &keys, &args).await);
    assert_eq!(status, "published");
    let (last, fields) = last_packed(&mut f, &p.ready()).await;
    assert_eq!((last, fields), (id.clone(), owned(&job)));
    assert_eq!(f.marker(&p.marker("publish", "job-1")).await, id);
    let again = moved(f.call_bytes("publish_once", &keys, &args).await);
    assert_eq!(again, ("duplicate".to_owned(), id));

    let delay_keys = vec![p.delayed(), p.delayed_jobs(), p.marker("delayed", "job-1")];
    let due = (now_ms() - 1_000).to_string();
    let delay: [&[u8]; 4] = [due.as_bytes(), fits.as_bytes(), b"packed", &blob];
    assert_eq!(
        moved(f.call_bytes("delay_schedule", &delay_keys, &delay).await).0,
        "scheduled"
    );
    let stored = hget_bytes(&mut f, &p.delayed_jobs(), "job-1").await;
    assert_eq!(unpacked(&stored), owned(&job));
    let promote_keys = vec![
        p.delayed(),
        p.delayed_jobs(),
        p.ready(),
        p.dead(),
        p.marker("delayed", "job-1"),
    ];
    let now = now_ms().to_string();
    let promoted = counts(
        f.call(
            "delayed_promote",
            &promote_keys,
            &[now.as_str(), "10", "60000", "1000", "job-1"],
        )
        .await,
    );
    assert_eq!(promoted, (1, 0, 0, 0));
    assert_eq!(last_packed(&mut f, &p.ready()).await.1, owned(&job));

    let tick_keys = vec![p.ready(), p.marker("tick", "daily:1000")];
    let tick: [&[u8]; 5] = [b"daily", b"1000", b"60000", b"packed", &blob];
    let (status, tick_id) = moved(f.call_bytes("schedule_tick", &tick_keys, &tick).await);
    assert_eq!(status, "published");
    assert_eq!(
        last_packed(&mut f, &p.ready()).await,
        (tick_id, owned(&job))
    );

    // Its first pair read without unpacking the rest: a value that starts as
    // the runtime writes it is appended, whatever follows (the worker's to
    // decode and dead-letter); one over max_bytes is checked exactly.
    let mut starts_right = packed(&[("job_id", "job-3"), ("x", "y")]);
    starts_right.truncate(starts_right.len() - 2);
    starts_right.extend([0x01, 0x02]);
    let keys = vec![p.ready(), p.marker("publish", "job-3")];
    let args: [&[u8]; 4] = [b"60000", b"100", b"packed", &starts_right];
    let (status, id) = moved(f.call_bytes("publish_once", &keys, &args).await);
    assert_eq!(status, "published");
    assert_eq!(f.marker(&p.marker("publish", "job-3")).await, id);
    let keys = vec![p.ready(), p.marker("publish", "job-4")];
    let over = packed(&[("job_id", "job-4"), ("body", &"x".repeat(200))]);
    let args: [&[u8]; 4] = [b"60000", b"100", b"packed", &over];
    let detail = f
        .assert_refused_bytes("publish_once", &keys, &args, "QG_BADENVELOPE")
        .await;
    assert!(detail.contains("more than max_bytes 100"), "{detail}");

    // A packed value that is not name/value strings: refused, nothing written.
    for broken in [
        &b"\x93\xa1a\xa1b\xa1c"[..],
        b"not msgpack",
        b"\x92\xa1a\x01",
        b"\x90",
    ] {
        let keys = vec![p.ready(), p.marker("publish", "job-2")];
        let args: [&[u8]; 4] = [b"60000", b"100000", b"packed", broken];
        let detail = f
            .assert_refused_bytes("publish_once", &keys, &args, "QG_BADENVELOPE")
            .await;
        assert!(detail.contains("packed field"), "{detail}");
        let keys = vec![p.delayed(), p.delayed_jobs(), p.marker("delayed", "job-2")];
        let args: [&[u8]; 4] = [b"0", b"100000", b"packed", broken];
        f.assert_refused_bytes("delay_schedule", &keys, &args, "QG_BADENVELOPE")
            .await;
        let args: [&[u8]; 5] = [b"daily", b"2000", b"60000", b"packed", broken];
        let keys = vec![p.ready(), p.marker("tick", "daily:2000")];
        f.assert_refused_bytes("schedule_tick", &keys, &args, "QG_BADENVELOPE")
            .await;
    }
}

#[tokio::test]
async fn a_packed_entry_that_does_not_unpack_is_refused_a_retry_and_kept_by_its_dead_letter() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    f.group(&p.ready()).await;
    let broken = b"\x92\xa1a\x01";
    let id = pending_packed(&mut f, &p.ready(), broken).await;
    let due = (now_ms() + 1_000).to_string();
    let args = [
        GROUP,
        ME,
        id.as_str(),
        due.as_str(),
        "timeout",
        "60000",
        ACCEPTED,
    ];
    let detail = f
        .assert_refused(
            "retry_schedule",
            &p.schedule_keys(&id),
            &args,
            "QG_BADENVELOPE",
        )
        .await;
    assert!(detail.contains("packed field"), "{detail}");

    let dead_args = [
        GROUP,
        ME,
        id.as_str(),
        "decode_error",
        "bad",
        "1",
        "60000",
        "1000",
    ];
    let (status, dead_id) = moved(f.call("dead_letter", &p.dead_keys(&id), &dead_args).await);
    assert_eq!(status, "dead_lettered");
    let (_, letter) = raw_entries(&mut f, &p.dead()).await.pop().unwrap();
    let value = |name: &str| letter.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert_eq!(value("envelope"), broken, "kept as it was packed");
    assert_eq!(value("job_id"), b"");
    assert!(f.pending_ids(&p.ready()).await.is_empty());
    f.assert_refused(
        "replay",
        &p.replay_keys(&dead_id),
        &[dead_id.as_str(), "", "60000", ACCEPTED],
        "QG_BADENVELOPE",
    )
    .await;
}

/// A library before v9 read a packed entry as fields: its dead letter holds
/// the JSON array `["packed", <MessagePack>]`. Replay unpacks it.
#[tokio::test]
async fn a_packed_job_dead_lettered_by_an_older_library_replays_packed() {
    let mut f = Fixture::start().await;
    let p = f.part(0);
    let job = job_fields("job-1", "2", "3");
    let blob = packed(&job);
    // What cjson wrote: the value's bytes as they are, but for the quote,
    // the backslash and control characters (the array's 16-bit length).
    let mut stored = b"[\"packed\",\"".to_vec();
    for &byte in &blob {
        match byte {
            b'"' | b'\\' => stored.extend([b'\\', byte]),
            0..=0x1f => stored.extend(format!("\\u{byte:04x}").bytes()),
            _ => stored.push(byte),
        }
    }
    stored.extend(b"\"]");
    let dead_id: String = redis::cmd("XADD")
        .arg(p.dead())
        .arg("*")
        .arg(&["job_id", "", "reason", "decode_error"][..])
        .arg("envelope")
        .arg(&stored)
        .query_async(&mut f.conn)
        .await
        .unwrap();
    let replay = [dead_id.as_str(), "", "60000", ACCEPTED];
    let (status, ready_id) = moved(f.call("replay", &p.replay_keys(&dead_id), &replay).await);
    assert_eq!(status, "replayed");
    let mut expected = job_fields("job-1", "2", "1");
    expected.insert(7, ("reason", "replay"));
    expected.insert(8, ("replay_of", &dead_id));
    assert_eq!(
        last_packed(&mut f, &p.ready()).await,
        (ready_id, owned(&expected))
    );
}
