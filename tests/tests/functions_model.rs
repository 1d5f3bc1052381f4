//! A model-based test of the Function library: seeded random sequences of valid and invalid calls against a small model, checked after every call.
//!
//! Each step calls one library function (or reads, as a worker would) on a
//! real `redis-server` with the committed library (`tests/deploy/functions.lua`)
//! loaded. The calls are valid ones, whose reply the model predicts exactly,
//! and invalid ones: wrong key types (a partition whose keys are squatted),
//! keys of another partition's hash tag, malformed, out-of-range, oversized
//! and huge arguments, envelopes over `max_bytes` or the field limit, and
//! replays of earlier calls. Members that can never be promoted (stored
//! before library v7's limits, or by hand) are planted now and then.
//!
//! After every call:
//! - a refused call (an error reply) wrote nothing: a fingerprint of what it
//!   could write (the number of keys; value, or a stream's length, last ID
//!   and added and deleted counts, and expiry of each of its KEYS, the only
//!   keys a library function touches; each stream's groups,
//!   consumers and pending entries) is the same before and after, so no call
//!   failed after its first write;
//! - every error reply is a `QG_` code, and where the model knows which, that one;
//! - an accepted call answered what the model predicted.
//!
//! Every [`CHECK_EVERY`] steps, and at the end, every job's place is read
//! from the server: each job is in exactly one of the ready stream (pending
//! or not yet delivered), the retry set, the delayed set or the dead-letter
//! stream, or was acknowledged; and the places equal the model's.
//!
//! `QUEUEGEN_MODEL_STEPS` sets the number of steps (default
//! [`DEFAULT_STEPS`], about 15 s in a debug build; the long form is e.g.
//! `QUEUEGEN_MODEL_STEPS=50000`, minutes: the data, and so each place check,
//! grows with the steps), `QUEUEGEN_MODEL_SEED` the seed (default: from the
//! clock), `QUEUEGEN_MODEL_LIBRARY` another library file to load (a changed
//! library under test; default the committed `tests/deploy/functions.lua`). The seed is printed first, so a failure reproduces with
//! `QUEUEGEN_MODEL_SEED=<seed> cargo test -p queuegen-tests --test functions_model -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use queuegen_tests::library;
use queuegen_tests::support::unique_prefix;
use queuegen_tests::RedisServer;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use redis::Value;

/// Steps of a CI run.
const DEFAULT_STEPS: u64 = 4_000;
/// How often every job's place is read back and compared.
const CHECK_EVERY: u64 = 50;

const GROUP: &str = "workers";
const CONSUMERS: [&str; 2] = ["c1", "c2"];
const ACCEPTED: &str = "1,2";
/// Markers outlive the run: a replay always finds them.
const TTL: &str = "3600000";
/// The queue's payload.max_bytes as the runtime would pass it.
const MAX_BYTES: usize = 4096;
/// Dead-letter streams are never trimmed here.
const DEAD_MAX_LEN: &str = "1000000";
const MAX_BATCH: usize = 8;
/// The library's field limit (MAX_ENVELOPE_FIELDS).
const MAX_FIELDS: usize = 1000;
/// Partitions the model runs; `SQUATTED` has keys of the wrong type.
const LIVE: [u16; 2] = [0, 1];
const SQUATTED: u16 = 2;
/// How many accepted calls are kept to replay.
const HISTORY: usize = 200;

#[test]
fn the_library_keeps_its_invariants_under_random_calls() {
    let steps = env_u64("QUEUEGEN_MODEL_STEPS").unwrap_or(DEFAULT_STEPS);
    let seed = env_u64("QUEUEGEN_MODEL_SEED").unwrap_or_else(clock_seed);
    println!("functions_model: seed {seed}, {steps} steps (QUEUEGEN_MODEL_SEED={seed} reproduces)");
    let started = Instant::now();
    let mut run = Run::start(seed);
    for step in 1..=steps {
        run.step = step;
        run.now += 10;
        run.one_step();
        if step % CHECK_EVERY == 0 {
            run.check_places();
        }
    }
    run.check_places();
    println!(
        "functions_model: seed {seed}, {steps} steps in {:.1?}; calls (accepted/refused): {}",
        started.elapsed(),
        run.stats()
    );
}

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.parse()
            .unwrap_or_else(|_| panic!("{name}={text:?}: expected a number")),
    )
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

// ---------------------------------------------------------------------------
// Calls and replies

/// One function call: name (without the library prefix), KEYS and ARGV.
#[derive(Clone, Debug)]
struct Call {
    function: &'static str,
    keys: Vec<String>,
    args: Vec<String>,
}

impl Call {
    fn new(function: &'static str, keys: Vec<String>, args: Vec<String>) -> Call {
        Call {
            function,
            keys,
            args,
        }
    }

    /// The call as a failure message shows it: long arguments shortened.
    fn shown(&self) -> String {
        let short = |text: &String| {
            if text.len() > 80 {
                format!("{}...({} bytes)", &text[..40.min(text.len())], text.len())
            } else {
                text.clone()
            }
        };
        let args: Vec<String> = self.args.iter().take(16).map(short).collect();
        let more = self.args.len().saturating_sub(16);
        format!(
            "{} KEYS {:?} ARGV {:?}{}",
            self.function,
            self.keys.iter().map(short).collect::<Vec<_>>(),
            args,
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    }
}

fn strings<const N: usize>(items: [&str; N]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        Value::Int(n) => n.to_string(),
        other => panic!("expected text, got {other:?}"),
    }
}

fn int(value: &Value) -> u64 {
    match value {
        Value::Int(n) => u64::try_from(*n).unwrap(),
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn array(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) => items,
        other => panic!("expected an array, got {other:?}"),
    }
}

/// A `[status, id]` reply.
fn status_pair(value: &Value) -> (String, String) {
    let items = array(value);
    assert_eq!(items.len(), 2, "{value:?}");
    (text(&items[0]), text(&items[1]))
}

// ---------------------------------------------------------------------------
// Stream IDs

type Id = (u64, u64);

fn parse_id(text: &str) -> Id {
    let (ms, seq) = text
        .split_once('-')
        .unwrap_or_else(|| panic!("a stream ID: {text}"));
    (ms.parse().unwrap(), seq.parse().unwrap())
}

fn id_text(id: Id) -> String {
    format!("{}-{}", id.0, id.1)
}

// ---------------------------------------------------------------------------
// The model

/// How a stored envelope that can never be promoted is broken.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Broken {
    /// More fields than the library allows.
    Huge,
    /// An odd-length array.
    Odd,
    /// No envelope in the hash at all.
    Missing,
}

/// A job as the model knows it: its identity (the envelope's `token`, or
/// `missing:<member>` for a planted member without envelope), job_id,
/// whether its schema is one the calls accept, and how it is broken.
#[derive(Clone, Debug)]
struct Job {
    ident: String,
    job_id: String,
    schema_ok: bool,
    broken: Option<Broken>,
}

/// A member of the retry or delayed set.
#[derive(Clone, Debug)]
struct Due {
    due: u64,
    job: Job,
}

/// A dead letter: the job it holds; `replayed` once a replay took it.
#[derive(Clone, Debug)]
struct Dead {
    job: Job,
}

#[derive(Default)]
struct Partition {
    /// Every entry ever appended (nothing deletes one here).
    ready: BTreeMap<Id, Job>,
    last_delivered: Option<Id>,
    /// Pending entries and their owner.
    pending: BTreeMap<Id, String>,
    retry: BTreeMap<String, Due>,
    delayed: BTreeMap<String, Due>,
    dead: BTreeMap<Id, Dead>,
    /// `kind:id` -> the marker's value.
    markers: HashMap<String, String>,
    epoch: u64,
    lease: Option<String>,
}

impl Partition {
    fn last_ready(&self) -> Option<Id> {
        self.ready.keys().next_back().copied()
    }

    fn owner(&self, id: Id) -> Option<&str> {
        self.pending.get(&id).map(String::as_str)
    }

    fn undelivered(&self) -> Vec<Id> {
        self.ready
            .keys()
            .filter(|id| Some(**id) > self.last_delivered)
            .copied()
            .collect()
    }
}

/// The run: the server, the model and the random source.
struct Run {
    _server: RedisServer,
    conn: redis::Connection,
    rng: StdRng,
    lib: String,
    prefix: String,
    parts: BTreeMap<u16, Partition>,
    /// Server time stand-in for due times (`now_ms` of the promote calls).
    now: u64,
    step: u64,
    next_token: u64,
    /// Whether the last call changed what its fingerprint covers.
    last_call_wrote: bool,
    /// Accepted calls, to replay.
    history: Vec<Call>,
    /// function -> (accepted, refused).
    counts: BTreeMap<&'static str, (u64, u64)>,
}

impl Run {
    fn start(seed: u64) -> Run {
        let server = RedisServer::start_with(&["--enable-debug-command", "local"]);
        let mut conn = server.connection();
        let path = std::env::var_os("QUEUEGEN_MODEL_LIBRARY")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(library::tests_library_path);
        let code = library::code(&path);
        let lib: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(&code)
            .query(&mut conn)
            .expect("the committed library loads");
        let mut run = Run {
            _server: server,
            conn,
            rng: StdRng::seed_from_u64(seed),
            lib,
            prefix: unique_prefix("model"),
            parts: LIVE.iter().map(|p| (*p, Partition::default())).collect(),
            now: 1_000_000,
            step: 0,
            next_token: 0,
            last_call_wrote: false,
            history: Vec::new(),
            counts: BTreeMap::new(),
        };
        for p in LIVE {
            let () = run.raw(&[
                "XGROUP",
                "CREATE",
                &run.key(p, "ready"),
                GROUP,
                "0",
                "MKSTREAM",
            ]);
        }
        run.squat();
        run
    }

    fn key(&self, p: u16, role: &str) -> String {
        format!("{}:{{jobs-{p:02}}}:{role}", self.prefix)
    }

    fn marker_key(&self, p: u16, kind: &str, id: &str) -> String {
        self.key(p, &format!("marker:{kind}:{id}"))
    }

    fn raw<T: redis::FromRedisValue>(&mut self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        cmd.arg(&args[1..]);
        cmd.query(&mut self.conn)
            .unwrap_or_else(|err| panic!("{args:?}: {err}"))
    }

    /// The squatted partition: every key of another type than its role's.
    fn squat(&mut self) {
        let p = SQUATTED;
        for (role, kind) in [
            ("ready", "hash"),
            ("dead", "string"),
            ("retry", "string"),
            ("retry-jobs", "string"),
            ("delayed", "hash"),
            ("delayed-jobs", "zset"),
            ("claims", "hash"),
            ("lease:trim", "hash"),
        ] {
            let key = self.key(p, role);
            let () = match kind {
                "hash" => self.raw(&["HSET", &key, "squatter", "1"]),
                "zset" => {
                    let _: u64 = self.raw(&["ZADD", &key, "1", "squatter"]);
                }
                _ => self.raw(&["SET", &key, "squatter"]),
            };
        }
    }

    fn part(&self, p: u16) -> &Partition {
        &self.parts[&p]
    }

    fn part_mut(&mut self, p: u16) -> &mut Partition {
        self.parts.get_mut(&p).unwrap()
    }

    fn live_partition(&mut self) -> u16 {
        LIVE[self.rng.random_range(0..LIVE.len())]
    }

    fn consumer(&mut self) -> &'static str {
        CONSUMERS[self.rng.random_range(0..CONSUMERS.len())]
    }

    fn new_job(&mut self) -> Job {
        self.next_token += 1;
        Job {
            ident: format!("t{}", self.next_token),
            job_id: format!("j{}", self.next_token),
            schema_ok: !self.rng.random_bool(0.05),
            broken: None,
        }
    }

    /// A job's envelope as the runtime writes it, `token` among its fields.
    fn envelope(&mut self, job: &Job) -> Vec<String> {
        let body = "b".repeat(self.rng.random_range(0..200));
        let schema = if job.schema_ok { "2" } else { "9" };
        strings([
            "job_id",
            &job.job_id,
            "type",
            "TestJob",
            "tenant",
            "acme",
            "schema",
            schema,
            "created_at",
            "1700000000000",
            "trace_id",
            "trace",
            "attempt",
            "1",
            "token",
            &job.ident,
            "body",
            &body,
        ])
    }

    // -----------------------------------------------------------------------
    // Sending, and the checks every call gets

    /// Sends `call`, checks that a refusal is a `QG_` code that wrote
    /// nothing, and returns the reply.
    fn send(&mut self, call: &Call) -> redis::RedisResult<Value> {
        let before = self.fingerprint(&call.keys);
        // A pipeline that ignores errors keeps an error nested in a reply
        // (one stream's of a several-stream `ack`) in place; a plain query
        // would make it the whole call's.
        let mut pipe = redis::pipe();
        pipe.cmd("FCALL")
            .arg(format!("{}_{}", self.lib, call.function))
            .arg(call.keys.len())
            .arg(&call.keys)
            .arg(&call.args);
        pipe.ignore_errors();
        let reply = pipe
            .query::<Vec<redis::RedisResult<Value>>>(&mut self.conn)
            .and_then(|mut replies| replies.remove(0));
        let after = self.fingerprint(&call.keys);
        self.last_call_wrote = after != before;
        let entry = self.counts.entry(call.function).or_default();
        match &reply {
            Ok(_) => entry.0 += 1,
            Err(err) => {
                entry.1 += 1;
                let code = err.code().unwrap_or("");
                assert!(
                    code.starts_with("QG_"),
                    "step {}: {} failed without a QG_ code: {err}",
                    self.step,
                    call.shown()
                );
                assert!(
                    after == before,
                    "step {}: {} was refused ({err}) but wrote:\nbefore: {before}\nafter:  {after}",
                    self.step,
                    call.shown(),
                );
            }
        }
        reply
    }

    /// Sends a call the model expects refused with `code` (any `QG_` code when None).
    fn refused(&mut self, call: &Call, code: Option<&str>) {
        match self.send(call) {
            Ok(value) => panic!(
                "step {}: {} expected a refusal ({code:?}), got {value:?}",
                self.step,
                call.shown()
            ),
            Err(err) => {
                if let Some(code) = code {
                    assert_eq!(
                        err.code(),
                        Some(code),
                        "step {}: {}: {err}",
                        self.step,
                        call.shown()
                    );
                }
            }
        }
    }

    /// Sends a call the model expects accepted; its reply.
    fn accepted(&mut self, call: &Call) -> Value {
        let value = self.send(call).unwrap_or_else(|err| {
            panic!(
                "step {}: {} expected to be accepted: {err}",
                self.step,
                call.shown()
            )
        });
        if self.history.len() == HISTORY {
            self.history.remove(0);
        }
        self.history.push(call.clone());
        value
    }

    /// Sends a call the model expects accepted or refused with `refusal`.
    fn expect(&mut self, call: &Call, refusal: Option<&'static str>) -> Option<Value> {
        match refusal {
            Some(code) => {
                self.refused(call, Some(code));
                None
            }
            None => Some(self.accepted(call)),
        }
    }

    /// A fingerprint of everything a call of `keys` could write: the number
    /// of keys on the server, the value (`DEBUG DIGEST-VALUE`) and expiry of
    /// each of `keys` (a function touches only its KEYS, which a queuegen
    /// test enforces on the library's text), and of each stream the parts of
    /// its groups the digest leaves out (idle times left out: they tick by
    /// themselves). Not `DEBUG DIGEST` of everything: its cost grows with the
    /// data, and made the run quadratic.
    fn fingerprint(&mut self, keys: &[String]) -> String {
        let mut pipe = redis::pipe();
        pipe.cmd("DBSIZE");
        for key in keys {
            if is_live_stream(key) {
                // Entries never change in place: length, last ID and counts
                // of added and deleted entries tell every write, at a cost
                // that does not grow with the stream.
                pipe.cmd("XINFO").arg("STREAM").arg(key);
            } else {
                pipe.cmd("DEBUG").arg("DIGEST-VALUE").arg(key);
            }
            pipe.cmd("PEXPIRETIME").arg(key);
        }
        let mut streams = Vec::new();
        for p in LIVE {
            for role in ["ready", "dead"] {
                streams.push(self.key(p, role));
            }
        }
        for stream in &streams {
            pipe.cmd("XINFO").arg("GROUPS").arg(stream);
            pipe.cmd("XPENDING")
                .arg(stream)
                .arg(GROUP)
                .arg("-")
                .arg("+")
                .arg(100_000);
            pipe.cmd("XINFO").arg("CONSUMERS").arg(stream).arg(GROUP);
        }
        let replies: Vec<Value> = pipe.ignore_errors().query(&mut self.conn).unwrap();
        let (head, groups_of) = replies.split_at(1 + 2 * keys.len());
        let mut out: String = head.iter().map(|reply| format!("{reply:?} ")).collect();
        for (i, stream) in streams.iter().enumerate() {
            let groups = &groups_of[3 * i];
            let pending = &groups_of[1 + 3 * i];
            let consumers = &groups_of[2 + 3 * i];
            out.push_str(&format!(
                " | {stream}: groups {} pending {} consumers {}",
                without_times(groups),
                pel(pending),
                without_times(consumers)
            ));
        }
        out
    }

    fn stats(&self) -> String {
        self.counts
            .iter()
            .map(|(function, (ok, refused))| format!("{function} {ok}/{refused}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    // -----------------------------------------------------------------------
    // Steps

    fn one_step(&mut self) {
        match self.rng.random_range(0..100) {
            0..=9 => self.publish(),
            10..=11 => self.publish_batch(),
            12..=14 => self.publish_again(),
            15..=20 => self.delay(),
            21..=22 => self.delay_again(),
            23..=25 => self.tick(),
            26..=37 => self.read(),
            38..=47 => self.ack(),
            48..=53 => self.schedule_again("retry_schedule"),
            54..=56 => self.schedule_again("defer"),
            57..=61 => self.dead_letter(),
            62..=67 => self.promote("retry"),
            68..=73 => self.promote("delayed"),
            74..=77 => self.replay(),
            78..=80 => self.claim(),
            81..=82 => self.renew(),
            83..=84 => self.lease(),
            85 => self.plant(),
            86..=94 => self.invalid(),
            _ => self.replay_earlier_call(),
        }
    }

    /// Appends that the server made to `p`'s ready stream since the model's
    /// last entry: exactly `jobs`, in order; returns their IDs.
    fn sync_ready(&mut self, p: u16, jobs: Vec<Job>) -> Vec<Id> {
        let start = match self.part(p).last_ready() {
            Some(last) => format!("({}", id_text(last)),
            None => "-".to_owned(),
        };
        let key = self.key(p, "ready");
        let entries: Vec<(String, Vec<String>)> =
            self.raw(&["XRANGE", &key, &start, "+", "COUNT", "10000"]);
        let tokens: Vec<String> = entries
            .iter()
            .map(|(_, fields)| field_of(fields, "token").unwrap_or_default())
            .collect();
        let expected: Vec<String> = jobs.iter().map(|job| job.ident.clone()).collect();
        assert_eq!(
            tokens, expected,
            "step {}: the entries appended to {key}",
            self.step
        );
        let mut ids = Vec::new();
        for ((id, fields), job) in entries.iter().zip(jobs) {
            assert_eq!(
                field_of(fields, "job_id").as_deref(),
                Some(job.job_id.as_str())
            );
            let id = parse_id(id);
            self.part_mut(p).ready.insert(id, job);
            ids.push(id);
        }
        ids
    }

    fn publish_call(&self, p: u16, job_id: &str, max_bytes: usize, envelope: &[String]) -> Call {
        let mut args = vec![TTL.to_owned(), max_bytes.to_string()];
        args.extend(envelope.iter().cloned());
        Call::new(
            "publish_once",
            vec![self.key(p, "ready"), self.marker_key(p, "publish", job_id)],
            args,
        )
    }

    fn publish(&mut self) {
        let p = self.live_partition();
        let job = self.new_job();
        let envelope = self.envelope(&job);
        let call = self.publish_call(p, &job.job_id, MAX_BYTES, &envelope);
        let (status, id) = status_pair(&self.accepted(&call));
        assert_eq!(status, "published");
        let ids = self.sync_ready(p, vec![job.clone()]);
        assert_eq!(id, id_text(ids[0]));
        self.part_mut(p)
            .markers
            .insert(format!("publish:{}", job.job_id), id);
    }

    /// A `publish_batch` call (a pipeline stage's hand-off) of `envelopes`
    /// (job_id, envelope) to `p`'s stream.
    fn publish_batch_call(
        &self,
        p: u16,
        max_bytes: usize,
        envelopes: &[(String, Vec<String>)],
    ) -> Call {
        let mut keys = vec![self.key(p, "ready")];
        let mut args = vec![TTL.to_owned(), max_bytes.to_string()];
        for (job_id, envelope) in envelopes {
            keys.push(self.marker_key(p, "publish", job_id));
            args.push(envelope.len().to_string());
            args.extend(envelope.iter().cloned());
        }
        Call::new("publish_batch", keys, args)
    }

    /// Job IDs published to `p` before, with the stream ID of their entry.
    fn published(&self, p: u16) -> Vec<(String, String)> {
        let mut earlier: Vec<(String, String)> = self
            .part(p)
            .markers
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("publish:")?.to_owned(), v.clone())))
            .collect();
        // HashMap order is not the seed's: sort, so a seed replays the run.
        earlier.sort();
        earlier
    }

    /// A hand-off of 1..=MAX_BATCH envelopes to one partition: new jobs,
    /// jobs published before (duplicates of their first entry) and a job
    /// twice in the call (published once, its repeat a duplicate of it).
    fn publish_batch(&mut self) {
        /// What the model expects of one envelope of the call.
        enum Expect {
            /// Appended: the `n`th new entry.
            New(usize),
            /// A duplicate of the `n`th new entry of this call.
            Repeat(usize),
            /// A duplicate of an entry published before.
            Before(String),
        }
        let p = self.live_partition();
        let earlier = self.published(p);
        let mut envelopes = Vec::new();
        let mut expected = Vec::new();
        let mut appended: Vec<Job> = Vec::new();
        for _ in 0..self.rng.random_range(1..=MAX_BATCH) {
            let roll = self.rng.random_range(0..10);
            let mut job = self.new_job();
            if roll < 2 && !earlier.is_empty() {
                let (job_id, first) = earlier[self.rng.random_range(0..earlier.len())].clone();
                job.job_id = job_id;
                expected.push(Expect::Before(first));
            } else if roll < 3 && !appended.is_empty() {
                let n = self.rng.random_range(0..appended.len());
                job.job_id = appended[n].job_id.clone();
                expected.push(Expect::Repeat(n));
            } else {
                expected.push(Expect::New(appended.len()));
                appended.push(job.clone());
            }
            let envelope = self.envelope(&job);
            envelopes.push((job.job_id, envelope));
        }
        let call = self.publish_batch_call(p, MAX_BYTES, &envelopes);
        let reply = self.accepted(&call);
        let ids = self.sync_ready(p, appended.clone());
        let answers: Vec<(String, String)> = array(&reply).iter().map(status_pair).collect();
        let predicted: Vec<(String, String)> = expected
            .iter()
            .map(|expect| match expect {
                Expect::New(n) => ("published".to_owned(), id_text(ids[*n])),
                Expect::Repeat(n) => ("duplicate".to_owned(), id_text(ids[*n])),
                Expect::Before(first) => ("duplicate".to_owned(), first.clone()),
            })
            .collect();
        assert_eq!(answers, predicted, "step {}: {}", self.step, call.shown());
        for (job, id) in appended.iter().zip(ids) {
            self.part_mut(p)
                .markers
                .insert(format!("publish:{}", job.job_id), id_text(id));
        }
    }

    /// A publish of a job_id published before: a duplicate, nothing written.
    fn publish_again(&mut self) {
        let p = self.live_partition();
        let earlier: Vec<(String, String)> = self
            .part(p)
            .markers
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("publish:")?.to_owned(), v.clone())))
            .collect();
        if earlier.is_empty() {
            return self.publish();
        }
        let (job_id, first) = earlier[self.rng.random_range(0..earlier.len())].clone();
        let mut job = self.new_job();
        job.job_id = job_id.clone();
        let envelope = self.envelope(&job);
        let call = self.publish_call(p, &job_id, MAX_BYTES, &envelope);
        assert_eq!(
            status_pair(&self.accepted(&call)),
            ("duplicate".to_owned(), first)
        );
    }

    fn delay_call(
        &self,
        p: u16,
        job_id: &str,
        due: u64,
        max_bytes: usize,
        envelope: &[String],
    ) -> Call {
        let mut args = vec![due.to_string(), max_bytes.to_string()];
        args.extend(envelope.iter().cloned());
        Call::new(
            "delay_schedule",
            vec![
                self.key(p, "delayed"),
                self.key(p, "delayed-jobs"),
                self.marker_key(p, "delayed", job_id),
            ],
            args,
        )
    }

    fn delay(&mut self) {
        let p = self.live_partition();
        let job = self.new_job();
        let due = self.now + self.rng.random_range(0..400);
        self.delay_job(p, job, due);
    }

    fn delay_job(&mut self, p: u16, job: Job, due: u64) {
        let envelope = self.envelope(&job);
        let call = self.delay_call(p, &job.job_id, due, MAX_BYTES, &envelope);
        let reply = status_pair(&self.accepted(&call));
        let part = self.part_mut(p);
        if let Some(waiting) = part.delayed.get(&job.job_id) {
            assert_eq!(reply, ("duplicate".to_owned(), waiting.due.to_string()));
        } else if let Some(promoted) = part.markers.get(&format!("delayed:{}", job.job_id)) {
            let ms = promoted.split('-').next().unwrap().to_owned();
            assert_eq!(reply, ("duplicate".to_owned(), ms));
        } else {
            assert_eq!(reply, ("scheduled".to_owned(), due.to_string()));
            part.delayed.insert(job.job_id.clone(), Due { due, job });
        }
    }

    /// A delayed publish of a job_id delayed before (waiting or promoted).
    fn delay_again(&mut self) {
        let p = self.live_partition();
        let part = self.part(p);
        let mut known: Vec<String> = part.delayed.keys().cloned().collect();
        known.extend(
            part.markers
                .keys()
                .filter_map(|k| k.strip_prefix("delayed:").map(str::to_owned)),
        );
        if known.is_empty() {
            return self.delay();
        }
        let job_id = known[self.rng.random_range(0..known.len())].clone();
        let mut job = self.new_job();
        job.job_id = job_id;
        let due = self.now + self.rng.random_range(0..400);
        self.delay_job(p, job, due);
    }

    fn tick_call(&self, p: u16, schedule: &str, tick: u64, envelope: &[String]) -> Call {
        let mut args = vec![schedule.to_owned(), tick.to_string(), TTL.to_owned()];
        args.extend(envelope.iter().cloned());
        Call::new(
            "schedule_tick",
            vec![
                self.key(p, "ready"),
                self.marker_key(p, "tick", &format!("{schedule}:{tick}")),
            ],
            args,
        )
    }

    /// A schedule's tick: published once, however often it is called.
    fn tick(&mut self) {
        let p = self.live_partition();
        let tick = self.rng.random_range(0..20u64);
        let mut job = self.new_job();
        job.job_id = format!("daily@{tick}");
        job.schema_ok = true;
        let envelope = self.envelope(&job);
        let call = self.tick_call(p, "daily", tick, &envelope);
        let reply = status_pair(&self.accepted(&call));
        let marker = format!("tick:daily:{tick}");
        match self.part(p).markers.get(&marker).cloned() {
            Some(earlier) => assert_eq!(reply, ("already".to_owned(), earlier)),
            None => {
                assert_eq!(reply.0, "published");
                let ids = self.sync_ready(p, vec![job]);
                assert_eq!(reply.1, id_text(ids[0]));
                self.part_mut(p).markers.insert(marker, reply.1);
            }
        }
    }

    /// A worker's read (`XREADGROUP ... >`): the next undelivered entries
    /// become pending for the reader.
    fn read(&mut self) {
        let p = self.live_partition();
        let consumer = self.consumer();
        let count = self.rng.random_range(1..6usize);
        let key = self.key(p, "ready");
        let reply: Value = self.raw(&[
            "XREADGROUP",
            "GROUP",
            GROUP,
            consumer,
            "COUNT",
            &count.to_string(),
            "STREAMS",
            &key,
            ">",
        ]);
        let got: Vec<Id> = match reply {
            Value::Nil => Vec::new(),
            Value::Array(streams) => array(&array(&streams[0])[1])
                .iter()
                .map(|entry| parse_id(&text(&array(entry)[0])))
                .collect(),
            Value::Map(streams) => array(&streams[0].1)
                .iter()
                .map(|entry| parse_id(&text(&array(entry)[0])))
                .collect(),
            other => panic!("XREADGROUP: {other:?}"),
        };
        let part = self.part_mut(p);
        let expected: Vec<Id> = part.undelivered().into_iter().take(count).collect();
        assert_eq!(got, expected, "XREADGROUP of {key}");
        for id in got {
            part.pending.insert(id, consumer.to_owned());
            part.last_delivered = Some(id);
        }
    }

    /// Entry IDs of `p` to name in a call: mostly pending ones (the
    /// caller's, then others'), some acknowledged, some never appended.
    fn some_ids(&mut self, p: u16, consumer: &str, n: usize) -> Vec<Id> {
        let part = self.part(p);
        let mine: Vec<Id> = part
            .pending
            .iter()
            .filter(|(_, owner)| *owner == consumer)
            .map(|(id, _)| *id)
            .collect();
        let others: Vec<Id> = part
            .pending
            .iter()
            .filter(|(_, owner)| *owner != consumer)
            .map(|(id, _)| *id)
            .collect();
        let all: Vec<Id> = part.ready.keys().copied().collect();
        let mut ids = Vec::new();
        for _ in 0..n {
            let roll = self.rng.random_range(0..10);
            let pool = match roll {
                0..=5 if !mine.is_empty() => &mine,
                6..=7 if !others.is_empty() => &others,
                8 if !all.is_empty() => &all,
                _ => {
                    ids.push((1, self.rng.random_range(1..1000)));
                    continue;
                }
            };
            ids.push(pool[self.rng.random_range(0..pool.len())]);
        }
        ids
    }

    /// One `ack` call over `streams` (partition, epoch, IDs), in that order.
    fn ack_call(&self, consumer: &str, streams: &[(u16, String, Vec<String>)]) -> Call {
        let mut keys = Vec::new();
        let mut args = strings([GROUP, consumer]);
        for (p, epoch, _) in streams {
            keys.extend([self.key(*p, "ready"), self.key(*p, "claims")]);
            args.push(epoch.clone());
        }
        if let Some((_, leading)) = streams.split_last() {
            args.extend(leading.iter().map(|(_, _, ids)| ids.len().to_string()));
        }
        for (_, _, ids) in streams {
            args.extend(ids.iter().cloned());
        }
        Call::new("ack", keys, args)
    }

    /// An `ack` of partition `p` alone, on the checked path (epoch `-`).
    fn ack_one(&self, p: u16, consumer: &str, ids: &[String]) -> Call {
        self.ack_call(consumer, &[(p, "-".to_owned(), ids.to_vec())])
    }

    /// An `ack` of one or both live partitions in one call, in either
    /// order, now and then with the squatted one among them: each stream is
    /// settled on its own, the squatted one answers with its error and is
    /// left as it was.
    fn ack(&mut self) {
        let consumer = self.consumer();
        let mut parts = LIVE.to_vec();
        parts.shuffle(&mut self.rng);
        parts.truncate(self.rng.random_range(1..=LIVE.len()));
        if self.rng.random_bool(0.1) {
            let at = self.rng.random_range(0..=parts.len());
            parts.insert(at, SQUATTED);
        }
        let mut streams = Vec::new();
        for &p in &parts {
            let (ids, epoch) = if p == SQUATTED {
                (vec![(1, self.rng.random_range(1..1000))], "0".to_owned())
            } else {
                self.ack_plan(p, consumer)
            };
            let texts: Vec<String> = ids.iter().map(|id| id_text(*id)).collect();
            streams.push((p, epoch, ids, texts));
        }
        let shape: Vec<(u16, String, Vec<String>)> = streams
            .iter()
            .map(|(p, epoch, _, texts)| (*p, epoch.clone(), texts.clone()))
            .collect();
        let call = self.ack_call(consumer, &shape);
        let squatted_keys = [self.key(SQUATTED, "ready"), self.key(SQUATTED, "claims")];
        // The squatted keys' part of the fingerprint, before the live streams'.
        let squatted_state = |fingerprint: String| {
            fingerprint
                .split(" | ")
                .next()
                .unwrap_or_default()
                .to_owned()
        };
        let squatted_before = squatted_state(self.fingerprint(&squatted_keys));
        let reply = self.accepted(&call);
        let replies: Vec<Value> = if streams.len() == 1 {
            vec![reply]
        } else {
            let items = array(&reply);
            assert_eq!(
                items.len(),
                streams.len(),
                "step {}: {}",
                self.step,
                call.shown()
            );
            items.to_vec()
        };
        for ((p, epoch, ids, _), reply) in streams.into_iter().zip(replies) {
            if p == SQUATTED {
                let Value::ServerError(err) = &reply else {
                    panic!(
                        "step {}: {}: the squatted stream answered {reply:?}",
                        self.step,
                        call.shown()
                    );
                };
                assert_eq!(
                    err.code(),
                    "QG_WRONGTYPE",
                    "step {}: {}",
                    self.step,
                    call.shown()
                );
                assert_eq!(
                    squatted_state(self.fingerprint(&squatted_keys)),
                    squatted_before,
                    "step {}: {}: the squatted stream was written",
                    self.step,
                    call.shown()
                );
            } else {
                self.check_ack(p, consumer, &epoch, &ids, &reply, &call);
            }
        }
    }

    /// The IDs of partition `p` an `ack` names, and the epoch it sends.
    fn ack_plan(&mut self, p: u16, consumer: &str) -> (Vec<Id>, String) {
        let n = self.rng.random_range(1..6);
        let ids = self.some_ids(p, consumer, n);
        let part = self.part(p);
        let current = part.epoch;
        let all_mine = ids
            .iter()
            .all(|id| part.owner(*id).map_or(true, |owner| owner == consumer));
        let epoch = match self.rng.random_range(0..3) {
            0 if all_mine => current.to_string(),
            1 if current > 0 => (current - 1).to_string(),
            _ => "-".to_owned(),
        };
        (ids, epoch)
    }

    /// Checks one stream's `ack` reply against the model, and applies it.
    fn check_ack(
        &mut self,
        p: u16,
        consumer: &str,
        epoch: &str,
        ids: &[Id],
        reply: &Value,
        call: &Call,
    ) {
        let step = self.step;
        let items = array(reply);
        let part = self.part_mut(p);
        let current = part.epoch;
        let fast = epoch == current.to_string();
        // What the model expects: the distinct IDs acknowledged, and the refused ones.
        let mut acked = BTreeSet::new();
        let mut refused = Vec::new();
        for id in ids {
            match part.pending.get(id) {
                Some(owner) if fast || owner == consumer => {
                    acked.insert(*id);
                }
                Some(_) if acked.contains(id) => {}
                owner => {
                    if !fast {
                        refused.push(id_text(*id));
                        refused.push(owner.cloned().unwrap_or_default());
                    }
                }
            }
        }
        let unaccounted = if fast { ids.len() - acked.len() } else { 0 };
        let got_refused: Vec<String> = array(&items[1]).iter().map(text).collect();
        assert_eq!(
            (int(&items[0]), got_refused, int(&items[2]), int(&items[3])),
            (acked.len() as u64, refused, unaccounted as u64, current),
            "step {step}: partition {p} of {}",
            call.shown()
        );
        for id in acked {
            part.pending.remove(&id);
        }
    }

    fn schedule_call(
        &self,
        function: &'static str,
        p: u16,
        consumer: &str,
        id: &str,
        due: u64,
        reason: &str,
    ) -> Call {
        let kind = if function == "defer" {
            "defer"
        } else {
            "retry"
        };
        Call::new(
            function,
            vec![
                self.key(p, "ready"),
                self.key(p, "retry"),
                self.key(p, "retry-jobs"),
                self.marker_key(p, kind, id),
            ],
            strings([GROUP, consumer, id, &due.to_string(), reason, TTL, ACCEPTED]),
        )
    }

    /// What a transition of entry `id` by `consumer` under marker `kind`
    /// will answer: Err(refusal code), Ok(Some(earlier)) for a re-run, Ok(None) to move it.
    fn transition_plan(
        &self,
        p: u16,
        kind: &str,
        consumer: &str,
        id: Id,
    ) -> Result<Option<String>, &'static str> {
        let part = self.part(p);
        if let Some(earlier) = part.markers.get(&format!("{kind}:{}", id_text(id))) {
            return match part.owner(id) {
                Some(owner) if owner != consumer => Err("QG_NOT_OWNER"),
                _ => Ok(Some(earlier.clone())),
            };
        }
        if !part.ready.contains_key(&id) {
            return Err("QG_NOSOURCE");
        }
        if part.owner(id) != Some(consumer) {
            return Err("QG_NOT_OWNER");
        }
        Ok(None)
    }

    /// `retry_schedule` or `defer` of an entry, sometimes with a huge reason.
    fn schedule_again(&mut self, function: &'static str) {
        let p = self.live_partition();
        let consumer = self.consumer();
        let id = self.some_ids(p, consumer, 1)[0];
        let due = self.now + self.rng.random_range(0..400);
        let reason = if self.rng.random_bool(0.05) {
            "r".repeat(1 << 20)
        } else {
            "transient".to_owned()
        };
        let kind = if function == "defer" {
            "defer"
        } else {
            "retry"
        };
        let call = self.schedule_call(function, p, consumer, &id_text(id), due, &reason);
        let mut plan = self.transition_plan(p, kind, consumer, id);
        if plan == Ok(None) && !self.part(p).ready[&id].schema_ok {
            plan = Err("QG_BADSCHEMA");
        }
        let refusal = plan.clone().err();
        let Some(reply) = self.expect(&call, refusal) else {
            return;
        };
        let reply = status_pair(&reply);
        match plan {
            Ok(Some(earlier)) => assert_eq!(reply, ("already".to_owned(), earlier)),
            Ok(None) => {
                assert_eq!(reply, ("scheduled".to_owned(), id_text(id)));
                let part = self.part_mut(p);
                let job = part.ready[&id].clone();
                part.pending.remove(&id);
                part.retry.insert(id_text(id), Due { due, job });
                part.markers
                    .insert(format!("{kind}:{}", id_text(id)), id_text(id));
                if reason.len() > 1024 {
                    let stored: String =
                        self.raw(&["HGET", &self.key(p, "retry-jobs"), &id_text(id)]);
                    assert!(
                        stored.len() < 4096,
                        "a huge reason is cut: {} bytes",
                        stored.len()
                    );
                }
            }
            Err(_) => unreachable!(),
        }
    }

    fn dead_call(&self, p: u16, consumer: &str, id: &str, reason: &str, detail: &str) -> Call {
        Call::new(
            "dead_letter",
            vec![
                self.key(p, "ready"),
                self.key(p, "dead"),
                self.marker_key(p, "dead", id),
            ],
            strings([GROUP, consumer, id, reason, detail, "1", TTL, DEAD_MAX_LEN]),
        )
    }

    fn dead_letter(&mut self) {
        let p = self.live_partition();
        let consumer = self.consumer();
        let id = self.some_ids(p, consumer, 1)[0];
        let detail = if self.rng.random_bool(0.05) {
            "d".repeat(1 << 20)
        } else {
            "failed".to_owned()
        };
        let call = self.dead_call(p, consumer, &id_text(id), "permanent", &detail);
        let plan = self.transition_plan(p, "dead", consumer, id);
        let Some(reply) = self.expect(&call, plan.clone().err()) else {
            return;
        };
        let reply = status_pair(&reply);
        match plan {
            Ok(Some(earlier)) => assert_eq!(reply, ("already".to_owned(), earlier)),
            Ok(None) => {
                assert_eq!(reply.0, "dead_lettered");
                let dead_id = parse_id(&reply.1);
                let part = self.part_mut(p);
                let job = part.ready[&id].clone();
                part.pending.remove(&id);
                part.dead.insert(dead_id, Dead { job });
                part.markers
                    .insert(format!("dead:{}", id_text(id)), reply.1);
            }
            Err(_) => unreachable!(),
        }
    }

    fn promote_call(&self, set: &str, p: u16, members: &[String], max_batch: usize) -> Call {
        let (function, jobs, kind) = promote_roles(set);
        let mut keys = vec![
            self.key(p, set),
            self.key(p, jobs),
            self.key(p, "ready"),
            self.key(p, "dead"),
        ];
        keys.extend(members.iter().map(|m| self.marker_key(p, kind, m)));
        let mut args = vec![
            self.now.to_string(),
            max_batch.to_string(),
            TTL.to_owned(),
            DEAD_MAX_LEN.to_owned(),
        ];
        args.extend(members.iter().cloned());
        Call::new(function, keys, args)
    }

    /// Members to promote: due ones first (as the scheduler reads them),
    /// then some not yet due, gone, or repeated.
    fn some_members(&mut self, set: &str, p: u16) -> Vec<String> {
        let part = self.part(p);
        let members = if set == "retry" {
            &part.retry
        } else {
            &part.delayed
        };
        let mut due: Vec<(u64, String)> = members
            .iter()
            .filter(|(_, d)| d.due <= self.now)
            .map(|(m, d)| (d.due, m.clone()))
            .collect();
        due.sort();
        let all: Vec<String> = members.keys().cloned().collect();
        let (_, _, kind) = promote_roles(set);
        let gone: Vec<String> = part
            .markers
            .keys()
            .filter_map(|k| k.strip_prefix(&format!("{kind}:")).map(str::to_owned))
            .collect();
        let mut chosen: Vec<String> = due
            .into_iter()
            .map(|(_, m)| m)
            .take(MAX_BATCH - 2)
            .collect();
        for _ in 0..self.rng.random_range(0..3) {
            let roll = self.rng.random_range(0..3);
            let pool = match roll {
                0 if !all.is_empty() => &all,
                1 if !gone.is_empty() => &gone,
                _ if !chosen.is_empty() => &chosen.clone(),
                _ => continue,
            };
            chosen.push(pool[self.rng.random_range(0..pool.len())].clone());
        }
        chosen
    }

    fn promote(&mut self, set: &'static str) {
        let p = self.live_partition();
        let members = self.some_members(set, p);
        let call = self.promote_call(set, p, &members, MAX_BATCH);
        let reply = self.accepted(&call);
        let (_, _, kind) = promote_roles(set);
        // The model's plan, member by member, as the function makes it.
        let (mut promoted, mut already, mut skipped, mut dead) = (Vec::new(), 0, 0, Vec::new());
        let mut seen = BTreeSet::new();
        let now = self.now;
        {
            let part = self.part_mut(p);
            for member in &members {
                let marker = format!("{kind}:{member}");
                let waiting = if set == "retry" {
                    &mut part.retry
                } else {
                    &mut part.delayed
                };
                if !seen.insert(member.clone()) {
                    skipped += 1;
                } else if part.markers.contains_key(&marker) {
                    already += 1;
                    waiting.remove(member);
                } else if waiting.get(member).map_or(true, |d| d.due > now) {
                    skipped += 1;
                } else {
                    let entry = waiting.remove(member).unwrap();
                    if entry.job.broken.is_some() {
                        dead.push(entry.job);
                    } else {
                        promoted.push((member.clone(), entry.job));
                    }
                }
            }
        }
        let counts: Vec<u64> = array(&reply).iter().map(int).collect();
        assert_eq!(
            counts,
            [promoted.len() as u64, already, skipped, dead.len() as u64],
            "step {}: {}",
            self.step,
            call.shown()
        );
        let jobs: Vec<Job> = promoted.iter().map(|(_, job)| job.clone()).collect();
        let ids = self.sync_ready(p, jobs);
        for ((member, _), id) in promoted.iter().zip(ids) {
            self.part_mut(p)
                .markers
                .insert(format!("{kind}:{member}"), id_text(id));
        }
        if !dead.is_empty() {
            self.sync_dead(p, dead);
        }
    }

    /// Dead letters the promote function appended: exactly `jobs`, in order.
    fn sync_dead(&mut self, p: u16, jobs: Vec<Job>) {
        let start = match self.part(p).dead.keys().next_back() {
            Some(last) => format!("({}", id_text(*last)),
            None => "-".to_owned(),
        };
        let key = self.key(p, "dead");
        let entries: Vec<(String, Vec<String>)> = self.raw(&["XRANGE", &key, &start, "+"]);
        assert_eq!(
            entries.len(),
            jobs.len(),
            "step {}: dead letters appended",
            self.step
        );
        for ((id, fields), job) in entries.into_iter().zip(jobs) {
            assert_eq!(field_of(&fields, "reason").as_deref(), Some("decode_error"));
            assert_eq!(ident_of_dead(&fields), job.ident);
            let id = parse_id(&id);
            self.part_mut(p).dead.insert(id, Dead { job });
        }
    }

    fn replay_call(&self, p: u16, dead_id: &str, new_job_id: &str) -> Call {
        Call::new(
            "replay",
            vec![
                self.key(p, "dead"),
                self.key(p, "ready"),
                self.marker_key(p, "replay", dead_id),
            ],
            strings([dead_id, new_job_id, TTL, ACCEPTED]),
        )
    }

    fn replay(&mut self) {
        let p = self.live_partition();
        let dead_ids: Vec<Id> = self.part(p).dead.keys().copied().collect();
        let dead_id = if dead_ids.is_empty() || self.rng.random_bool(0.1) {
            (2, self.rng.random_range(0..100))
        } else {
            dead_ids[self.rng.random_range(0..dead_ids.len())]
        };
        let new_job_id = if self.rng.random_bool(0.5) {
            String::new()
        } else {
            format!("again-{}", self.step)
        };
        let call = self.replay_call(p, &id_text(dead_id), &new_job_id);
        let part = self.part(p);
        let marker = format!("replay:{}", id_text(dead_id));
        let earlier = part.markers.get(&marker).cloned();
        let refusal = match (&earlier, part.dead.get(&dead_id)) {
            (Some(_), _) => None,
            (None, None) => Some("QG_NOSOURCE"),
            (None, Some(dead)) if dead.job.broken.is_some() => Some("QG_BADENVELOPE"),
            (None, Some(dead)) if !dead.job.schema_ok => Some("QG_BADSCHEMA"),
            _ => None,
        };
        let Some(reply) = self.expect(&call, refusal) else {
            return;
        };
        let reply = status_pair(&reply);
        if let Some(earlier) = earlier {
            assert_eq!(reply, ("already".to_owned(), earlier));
            return;
        }
        assert_eq!(reply.0, "replayed");
        let mut job = self.part(p).dead[&dead_id].job.clone();
        if !new_job_id.is_empty() {
            job.job_id = new_job_id;
        }
        let ids = self.sync_ready(p, vec![job]);
        assert_eq!(reply.1, id_text(ids[0]));
        self.part_mut(p).markers.insert(marker, reply.1);
    }

    fn claim_call(&self, p: u16, consumer: &str, count: &str) -> Call {
        Call::new(
            "claim",
            vec![self.key(p, "ready"), self.key(p, "claims")],
            strings([GROUP, consumer, "0", "0-0", count]),
        )
    }

    /// Recovery's claim of everything idle (min_idle 0), in ID order.
    fn claim(&mut self) {
        let p = self.live_partition();
        let consumer = self.consumer();
        let count = self.rng.random_range(1..5usize);
        let call = self.claim_call(p, consumer, &count.to_string());
        let reply = self.accepted(&call);
        let items = array(&reply);
        let taken: Vec<Id> = array(&items[1])
            .iter()
            .map(|entry| parse_id(&text(&array(entry)[0])))
            .collect();
        let part = self.part_mut(p);
        let expected: Vec<Id> = part.pending.keys().take(count).copied().collect();
        assert_eq!(taken, expected, "step {}: claimed", self.step);
        for id in &taken {
            part.pending.insert(*id, consumer.to_owned());
        }
        if !taken.is_empty() {
            part.epoch += 1;
        }
        assert_eq!(int(&items[3]), part.epoch, "the claim epoch");
    }

    fn renew(&mut self) {
        let p = self.live_partition();
        let consumer = self.consumer();
        let id = self.some_ids(p, consumer, 1)[0];
        let call = Call::new(
            "renew",
            vec![self.key(p, "ready")],
            strings([GROUP, consumer, &id_text(id)]),
        );
        let reply = self.accepted(&call);
        let items = array(&reply);
        let owner = self.part(p).owner(id).unwrap_or("").to_owned();
        let renewed = u64::from(owner == consumer);
        assert_eq!((int(&items[0]), text(&items[1])), (renewed, owner));
    }

    fn lease(&mut self) {
        let p = self.live_partition();
        let holder = ["worker:c1", "worker:c2"][self.rng.random_range(0..2)];
        let key = self.key(p, "lease:trim");
        if self.rng.random_bool(0.5) {
            let call = Call::new("lease_acquire", vec![key], strings([holder, TTL]));
            let reply = self.accepted(&call);
            let items = array(&reply);
            let part = self.part_mut(p);
            // SET NX: taken only when nobody (not even this holder) holds it.
            let taken = part.lease.is_none();
            let current = part.lease.get_or_insert_with(|| holder.to_owned()).clone();
            assert_eq!(
                (int(&items[0]), text(&items[1])),
                (u64::from(taken), current)
            );
        } else {
            let call = Call::new("lease_release", vec![key], strings([holder]));
            let released = int(&self.accepted(&call));
            let part = self.part_mut(p);
            let held = part.lease.as_deref() == Some(holder);
            assert_eq!(released, u64::from(held));
            if held {
                part.lease = None;
            }
        }
    }

    /// A member that can never be promoted, as stored before library v7 or
    /// by hand: an envelope over the field limit, an odd array, or none.
    fn plant(&mut self) {
        let p = self.live_partition();
        let set = if self.rng.random_bool(0.5) {
            "retry"
        } else {
            "delayed"
        };
        let (_, jobs_role, _) = promote_roles(set);
        let mut job = self.new_job();
        let broken = [Broken::Huge, Broken::Odd, Broken::Missing][self.rng.random_range(0..3)];
        job.broken = Some(broken);
        // Its replay is refused for the envelope, never first for the schema.
        job.schema_ok = true;
        let member = if set == "retry" {
            format!("1-{}", self.next_token)
        } else {
            job.job_id.clone()
        };
        let stored = match broken {
            Broken::Huge => {
                let mut envelope = self.envelope(&job);
                for n in 0..4_500 {
                    envelope.extend([format!("extra_{n}"), "x".to_owned()]);
                }
                Some(serde_json::to_string(&envelope).unwrap())
            }
            Broken::Odd => Some(serde_json::to_string(&["token", &job.ident, "x"]).unwrap()),
            Broken::Missing => {
                job.ident = format!("missing:{member}");
                None
            }
        };
        if broken != Broken::Huge {
            // Its dead letter carries no job_id of its own but the member's (delayed).
            job.job_id = if set == "delayed" {
                member.clone()
            } else {
                String::new()
            };
        }
        let (set_key, jobs_key) = (self.key(p, set), self.key(p, jobs_role));
        if let Some(stored) = &stored {
            let _: u64 = self.raw(&["HSET", &jobs_key, &member, stored]);
        }
        let due = self.now.to_string();
        let _: u64 = self.raw(&["ZADD", &set_key, &due, &member]);
        let due = Due { due: self.now, job };
        let part = self.part_mut(p);
        if set == "retry" {
            part.retry.insert(member, due);
        } else {
            part.delayed.insert(member, due);
        }
    }

    /// For a `delay_schedule`, whether its job_id is still waiting or was
    /// promoted (its marker stands): only then is a repeat a duplicate. A
    /// repeat of one answered `duplicate` because a planted broken member of
    /// that job_id was waiting, which a promote has dead-lettered since
    /// (no marker), schedules the job anew, as it should. Other calls: true.
    fn delayed_or_promoted(&self, call: &Call) -> bool {
        if call.function != "delay_schedule" {
            return true;
        }
        let job_id = call
            .args
            .chunks(2)
            .skip(1)
            .find(|pair| pair[0] == "job_id")
            .map(|pair| pair[1].as_str())
            .unwrap_or_default();
        let marker = format!("delayed:{job_id}");
        self.parts
            .values()
            .any(|part| part.delayed.contains_key(job_id) || part.markers.contains_key(&marker))
    }

    /// An accepted transition or publish made again, as a client retries
    /// after a lost reply: answered from its marker (`already` or
    /// `duplicate`), writing nothing. (`ack`, `claim`, the promote functions
    /// and the rest are called again by the random steps themselves, with
    /// the model's prediction.)
    fn replay_earlier_call(&mut self) {
        let again: Vec<Call> = self
            .history
            .iter()
            .filter(|call| {
                [
                    "publish_once",
                    "publish_batch",
                    "delay_schedule",
                    "schedule_tick",
                    "replay",
                    "retry_schedule",
                    "defer",
                    "dead_letter",
                ]
                .contains(&call.function)
                    && self.delayed_or_promoted(call)
            })
            .cloned()
            .collect();
        if again.is_empty() {
            return self.publish();
        }
        let call = again[self.rng.random_range(0..again.len())].clone();
        let reply = self.accepted(&call);
        // A hand-off answers per envelope.
        let statuses: Vec<String> = if call.function == "publish_batch" {
            array(&reply).iter().map(|one| status_pair(one).0).collect()
        } else {
            vec![status_pair(&reply).0]
        };
        assert!(
            statuses
                .iter()
                .all(|status| ["duplicate", "already"].contains(&status.as_str())),
            "step {}: the replay of {} answered {statuses:?}",
            self.step,
            call.shown()
        );
        assert!(
            !self.last_call_wrote,
            "step {}: the replay of {} wrote",
            self.step,
            call.shown()
        );
    }

    // -----------------------------------------------------------------------
    // Invalid calls: each is refused, and writes nothing

    /// `call` with one of its KEYS (after the first) taken from partition
    /// `other`: another hash tag.
    fn foreign(&mut self, mut call: Call, p: u16, other: u16) -> Call {
        let i = self.rng.random_range(1..call.keys.len());
        call.keys[i] =
            call.keys[i].replace(&format!("{{jobs-{p:02}}}"), &format!("{{jobs-{other:02}}}"));
        call
    }

    /// A call the library must refuse, and the code when the model knows it.
    fn invalid(&mut self) {
        let p = self.live_partition();
        let other = LIVE.iter().copied().find(|q| *q != p).unwrap();
        let consumer = self.consumer();
        let id = id_text(self.some_ids(p, consumer, 1)[0]);
        // A job that is never accepted: its token is never placed.
        let job = self.new_job();
        let envelope = self.envelope(&job);
        // Built only for the cases that send them (a megabyte each).
        let huge_envelope = || -> Vec<String> {
            envelope
                .iter()
                .cloned()
                .chain((0..2 * MAX_FIELDS).flat_map(|n| [format!("x{n}"), "x".to_owned()]))
                .collect()
        };
        let oversized = || -> Vec<String> {
            let mut oversized = envelope.clone();
            oversized.extend(["blob".to_owned(), "x".repeat(1 << 20)]);
            oversized
        };
        let huge = || "h".repeat(1 << 20);
        let (call, code): (Call, Option<&'static str>) = match self.rng.random_range(0..34) {
            0 => {
                let call = self.schedule_call("retry_schedule", p, consumer, &id, 1, "r");
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            1 => {
                let call = self.dead_call(p, consumer, &id, "permanent", "d");
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            2 => {
                let members = self.some_members("retry", p);
                let call = self.promote_call("retry", p, &members, MAX_BATCH);
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            3 => {
                let call = self.publish_call(p, &job.job_id, MAX_BYTES, &envelope);
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            4 => {
                let call = self.delay_call(p, &job.job_id, 1, MAX_BYTES, &envelope);
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            5 => {
                let call = self.ack_one(p, consumer, std::slice::from_ref(&id));
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            6 => {
                let call = self.claim_call(p, consumer, "10");
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            7 => {
                let call = self.replay_call(p, &id, "");
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            8 => {
                let call = self.tick_call(p, "daily", 99, &envelope);
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            9 => (
                self.squatted_call(consumer, &id, &envelope),
                Some("QG_WRONGTYPE"),
            ),
            10 => {
                // Half the time a bare `<ms>`, which Redis itself accepts as `<ms>-0`.
                let bare = if self.rng.random_bool(0.5) {
                    "1700000000000"
                } else {
                    ["1-", "-1", "x", "", "99999999999999999999-0"][self.rng.random_range(0..5)]
                };
                let call = match self.rng.random_range(0..4) {
                    0 => self.schedule_call("retry_schedule", p, consumer, bare, 1, "r"),
                    1 => self.dead_call(p, consumer, bare, "permanent", "d"),
                    2 => self.ack_one(p, consumer, &[id.clone(), bare.to_owned()]),
                    _ => Call::new(
                        "renew",
                        vec![self.key(p, "ready")],
                        strings([GROUP, consumer, bare]),
                    ),
                };
                (call, Some("QG_BADARG"))
            }
            11 => {
                let count =
                    ["0", "100001", "999999999999999", "-1", "ten"][self.rng.random_range(0..5)];
                (self.claim_call(p, consumer, count), Some("QG_BADARG"))
            }
            12 => (
                self.publish_call(p, &job.job_id, MAX_BYTES, &oversized()),
                Some("QG_BADENVELOPE"),
            ),
            13 => (
                self.publish_call(p, &job.job_id, 1 << 30, &huge_envelope()),
                Some("QG_BADENVELOPE"),
            ),
            14 => (
                self.delay_call(p, &job.job_id, 1, MAX_BYTES, &oversized()),
                Some("QG_BADENVELOPE"),
            ),
            15 => (
                self.delay_call(p, &job.job_id, 1, 1 << 30, &huge_envelope()),
                Some("QG_BADENVELOPE"),
            ),
            16 => (
                self.tick_call(p, "daily", 98, &huge_envelope()),
                Some("QG_BADENVELOPE"),
            ),
            17 => {
                let odd = &envelope[..envelope.len() - 1];
                (
                    self.publish_call(p, &job.job_id, MAX_BYTES, odd),
                    Some("QG_BADARG"),
                )
            }
            18 => {
                let without: Vec<String> = envelope[2..].to_vec();
                (
                    self.delay_call(p, &job.job_id, 1, MAX_BYTES, &without),
                    Some("QG_BADENVELOPE"),
                )
            }
            19 => {
                let reason = ["oops", "", "Permanent"][self.rng.random_range(0..3)];
                (
                    self.dead_call(p, consumer, &id, reason, "d"),
                    Some("QG_BADARG"),
                )
            }
            20 => {
                let two = [id.clone(), format!("1-{}", self.step)];
                (self.promote_call("retry", p, &two, 1), Some("QG_BATCH"))
            }
            21 => {
                let ids: Vec<String> = (1..=4097).map(|n| format!("1-{n}")).collect();
                (self.ack_one(p, consumer, &ids), Some("QG_BATCH"))
            }
            22 => {
                let due = ["-1", "1.5", "1e3", "9999999999999999", ""][self.rng.random_range(0..5)];
                let mut call = self.schedule_call("defer", p, consumer, &id, 1, "r");
                call.args[3] = due.to_owned();
                (call, Some("QG_BADARG"))
            }
            23 => {
                let mut call = self.dead_call(p, consumer, &id, "permanent", "d");
                let (at, value) =
                    [(0, ""), (1, ""), (6, "0"), (7, "0")][self.rng.random_range(0..4)];
                call.args[at] = value.to_owned();
                (call, Some("QG_BADARG"))
            }
            24 => {
                let mut call = match self.rng.random_range(0..3) {
                    0 => self.schedule_call("retry_schedule", p, consumer, &id, 1, "r"),
                    1 => self.dead_call(p, consumer, &id, "permanent", "d"),
                    _ => self.replay_call(p, &id, ""),
                };
                if self.rng.random_bool(0.5) {
                    call.keys.pop();
                } else {
                    call.args.pop();
                }
                (call, Some("QG_BADARG"))
            }
            25 => {
                // Not a rate key (a partition's stream), or a zero limit.
                let (role, limit) = [("ready", "10"), ("rate", "0")][self.rng.random_range(0..2)];
                let key = format!("{}:{{jobs}}:{role}", self.prefix);
                let call = Call::new("rate_take", vec![key], strings([limit, "1000", "1", "0"]));
                (call, Some("QG_BADARG"))
            }
            26 => {
                let call = Call::new(
                    "trim",
                    vec![self.key(p, "ready"), self.key(p, "lease:trim")],
                    strings(["ready", "nobody", "0-1", "0", "0", "1", GROUP, "0-0"]),
                );
                (call, Some("QG_LEASE"))
            }
            27 => {
                let (holder, ttl) = [("", TTL), ("worker:c1", "0")][self.rng.random_range(0..2)];
                let call = Call::new(
                    "lease_acquire",
                    vec![self.key(p, "lease:trim")],
                    strings([holder, ttl]),
                );
                (call, Some("QG_BADARG"))
            }
            28 => {
                // A huge value where a name or an ID goes.
                let call = match self.rng.random_range(0..3) {
                    0 => self.schedule_call("retry_schedule", p, consumer, &huge(), 1, "r"),
                    1 => self.claim_call(p, consumer, &huge()),
                    _ => self.replay_call(p, &huge(), ""),
                };
                (call, Some("QG_BADARG"))
            }
            29 => {
                let call = self.hand_off(p, &envelope, None);
                (self.foreign(call, p, other), Some("QG_BADARG"))
            }
            30 => (
                self.hand_off(p, &envelope, Some(oversized())),
                Some("QG_BADENVELOPE"),
            ),
            31 => {
                // A marker that names another job than its envelope.
                let mut call = self.hand_off(p, &envelope, None);
                let last = call.keys.len() - 1;
                call.keys[last] = self.marker_key(p, "publish", "someone-else");
                (call, Some("QG_BADARG"))
            }
            32 => {
                let many = queuegen_core::wire::library::MAX_PUBLISH_BATCH as usize + 1;
                let envelopes: Vec<(String, Vec<String>)> = (0..many)
                    .map(|n| {
                        let mut envelope = envelope.clone();
                        envelope[1] = format!("{}-{n}", job.job_id);
                        (envelope[1].clone(), envelope)
                    })
                    .collect();
                (
                    self.publish_batch_call(p, MAX_BYTES, &envelopes),
                    Some("QG_BADARG"),
                )
            }
            _ => {
                let mut call = self.replay_call(p, &id, "");
                call.args[3] = ["", "1;2", "x"][self.rng.random_range(0..3)].to_owned();
                (call, Some("QG_BADARG"))
            }
        };
        self.refused(&call, code);
    }

    /// A `publish_batch` of a few valid new envelopes to `p` with
    /// `envelope` (a job never accepted) last, or `last` in its place: a
    /// refusal must leave the valid ones unwritten too.
    fn hand_off(&mut self, p: u16, envelope: &[String], last: Option<Vec<String>>) -> Call {
        let mut envelopes = Vec::new();
        for _ in 0..self.rng.random_range(0..3) {
            let job = self.new_job();
            let valid = self.envelope(&job);
            envelopes.push((job.job_id, valid));
        }
        let last = last.unwrap_or_else(|| envelope.to_vec());
        envelopes.push((envelope[1].clone(), last));
        self.publish_batch_call(p, MAX_BYTES, &envelopes)
    }

    /// A call of the squatted partition, whose keys all have other types.
    fn squatted_call(&mut self, consumer: &str, id: &str, envelope: &[String]) -> Call {
        let p = SQUATTED;
        match self.rng.random_range(0..9) {
            0 => self.schedule_call("retry_schedule", p, consumer, id, 1, "r"),
            1 => self.dead_call(p, consumer, id, "permanent", "d"),
            2 => self.promote_call("retry", p, &[id.to_owned()], MAX_BATCH),
            3 => self.promote_call("delayed", p, &["j1".to_owned()], MAX_BATCH),
            4 if self.rng.random_bool(0.5) => {
                let envelopes = [(envelope[1].clone(), envelope.to_vec())];
                self.publish_batch_call(p, MAX_BYTES, &envelopes)
            }
            4 => self.publish_call(p, &envelope[1], MAX_BYTES, envelope),
            5 => self.delay_call(p, &envelope[1], 1, MAX_BYTES, envelope),
            6 => self.ack_one(p, consumer, &[id.to_owned()]),
            7 => self.claim_call(p, consumer, "10"),
            _ => self.replay_call(p, id, ""),
        }
    }
}

/// The promote function, envelope hash and marker kind of `set`.
fn promote_roles(set: &str) -> (&'static str, &'static str, &'static str) {
    if set == "retry" {
        ("retry_promote", "retry-jobs", "promote")
    } else {
        ("delayed_promote", "delayed-jobs", "delayed")
    }
}

fn field_of(flat: &[String], name: &str) -> Option<String> {
    flat.chunks(2)
        .find(|pair| pair[0] == name)
        .and_then(|pair| pair.get(1).cloned())
}

/// The `token` in a stored envelope (a JSON array, even a broken one).
fn token_in(stored: &str) -> Option<String> {
    let items: Vec<serde_json::Value> = serde_json::from_str(stored).ok()?;
    let at = items.iter().position(|item| item == "token")?;
    items.get(at + 1)?.as_str().map(str::to_owned)
}

/// The job a dead letter holds: its envelope's token, or for one without
/// envelope `missing:<member>` (the source_id of a retry, the job_id of a
/// delayed job).
fn ident_of_dead(fields: &[String]) -> String {
    let envelope = field_of(fields, "envelope").unwrap_or_default();
    if let Some(token) = token_in(&envelope) {
        return token;
    }
    let source = field_of(fields, "source_id").unwrap_or_default();
    let member = if source.is_empty() {
        field_of(fields, "job_id").unwrap_or_default()
    } else {
        source
    };
    format!("missing:{member}")
}

/// Whether `key` is a ready or dead-letter stream of a live partition.
fn is_live_stream(key: &str) -> bool {
    LIVE.iter()
        .any(|p| key.contains(&format!("{{jobs-{p:02}}}:")))
        && (key.ends_with(":ready") || key.ends_with(":dead"))
}

/// The XPENDING lines without idle times: `id owner deliveries`.
fn pel(value: &Value) -> String {
    match value {
        Value::Array(entries) => entries
            .iter()
            .map(|entry| {
                let items = array(entry);
                format!("{} {} {}", text(&items[0]), text(&items[1]), int(&items[3]))
            })
            .collect::<Vec<_>>()
            .join(","),
        other => format!("{other:?}"),
    }
}

/// An XINFO reply without the fields that tick by themselves.
fn without_times(value: &Value) -> String {
    let timed = ["idle", "inactive", "seen-time", "active-time"];
    match value {
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Array(pairs) => pairs
                    .chunks(2)
                    .filter(|pair| !timed.contains(&text(&pair[0]).as_str()))
                    .map(|pair| format!("{}={:?}", text(&pair[0]), pair[1]))
                    .collect::<Vec<_>>()
                    .join(" "),
                Value::Map(pairs) => pairs
                    .iter()
                    .filter(|(name, _)| !timed.contains(&text(name).as_str()))
                    .map(|(name, v)| format!("{}={v:?}", text(name)))
                    .collect::<Vec<_>>()
                    .join(" "),
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .join(";"),
        other => format!("{other:?}"),
    }
}

/// The model's place of every job of partition `p`, as `ident place`;
/// acknowledged entries and replayed dead letters are records, not places.
fn model_places(p: u16, part: &Partition, out: &mut Vec<String>) {
    for (id, job) in &part.ready {
        let place = match part.pending.get(id) {
            Some(owner) => format!("pending {owner}"),
            None if Some(*id) > part.last_delivered => "undelivered".to_owned(),
            None => "acked".to_owned(),
        };
        out.push(format!("{} p{p} ready {} {place}", job.ident, id_text(*id)));
    }
    for (member, due) in &part.retry {
        out.push(format!("{} p{p} retry {member} {}", due.job.ident, due.due));
    }
    for (member, due) in &part.delayed {
        out.push(format!(
            "{} p{p} delayed {member} {}",
            due.job.ident, due.due
        ));
    }
    for (id, dead) in &part.dead {
        let replayed = part
            .markers
            .contains_key(&format!("replay:{}", id_text(*id)));
        let place = if replayed { "replayed" } else { "dead" };
        out.push(format!(
            "{} p{p} dead {} {place}",
            dead.job.ident,
            id_text(*id)
        ));
    }
}

impl Run {
    /// Every job's place as the server holds it, compared with the model's;
    /// and each job in exactly one place, or acknowledged.
    fn check_places(&mut self) {
        let mut server = Vec::new();
        let mut model = Vec::new();
        for p in LIVE {
            self.server_places(p, &mut server);
            model_places(p, self.part(p), &mut model);
        }
        server.sort();
        model.sort();
        if server != model {
            let only_server: Vec<&String> = server.iter().filter(|s| !model.contains(s)).collect();
            let only_model: Vec<&String> = model.iter().filter(|m| !server.contains(m)).collect();
            panic!(
                "step {}: the server's places differ from the model's\nonly on the server: {only_server:?}\nonly in the model: {only_model:?}",
                self.step
            );
        }
        let mut live: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut done: BTreeSet<&str> = BTreeSet::new();
        for line in &server {
            let (ident, place) = line.split_once(' ').unwrap();
            if place.ends_with(" acked") || place.ends_with(" replayed") {
                done.insert(ident);
            } else {
                live.entry(ident).or_default().push(place);
            }
        }
        for (ident, places) in &live {
            assert_eq!(
                places.len(),
                1,
                "step {}: job {ident} is in {} places: {places:?}",
                self.step,
                places.len()
            );
        }
    }

    fn server_places(&mut self, p: u16, out: &mut Vec<String>) {
        let ready = self.key(p, "ready");
        let entries: Vec<(String, Vec<String>)> = self.raw(&["XRANGE", &ready, "-", "+"]);
        let pending: Vec<(String, String, u64, u64)> =
            self.raw(&["XPENDING", &ready, GROUP, "-", "+", "100000"]);
        let owners: HashMap<String, String> = pending
            .into_iter()
            .map(|(id, owner, ..)| (id, owner))
            .collect();
        let groups: Vec<HashMap<String, Value>> = self.raw(&["XINFO", "GROUPS", &ready]);
        let last = text(&groups[0]["last-delivered-id"]);
        for (id, fields) in &entries {
            let place = match owners.get(id) {
                Some(owner) => format!("pending {owner}"),
                None if parse_id(id) > parse_id(&last) => "undelivered".to_owned(),
                None => "acked".to_owned(),
            };
            let token = field_of(fields, "token").unwrap_or_default();
            out.push(format!("{token} p{p} ready {id} {place}"));
        }
        for set in ["retry", "delayed"] {
            let (_, jobs_role, _) = promote_roles(set);
            let members: Vec<(String, u64)> =
                self.raw(&["ZRANGE", &self.key(p, set), "0", "-1", "WITHSCORES"]);
            let stored: HashMap<String, String> = self.raw(&["HGETALL", &self.key(p, jobs_role)]);
            for (member, due) in &members {
                let ident = match stored.get(member) {
                    Some(envelope) => token_in(envelope).unwrap_or_default(),
                    None => format!("missing:{member}"),
                };
                out.push(format!("{ident} p{p} {set} {member} {due}"));
            }
            assert!(
                stored
                    .keys()
                    .all(|m| members.iter().any(|(member, _)| member == m)),
                "step {}: {jobs_role} holds envelopes of members not in {set}",
                self.step
            );
        }
        let dead: Vec<(String, Vec<String>)> =
            self.raw(&["XRANGE", &self.key(p, "dead"), "-", "+"]);
        for (id, fields) in &dead {
            let detail = field_of(fields, "detail").unwrap_or_default();
            assert!(
                detail.len() <= 1024,
                "dead letter {id}: {} bytes of detail",
                detail.len()
            );
            let replayed: u64 = self.raw(&["EXISTS", &self.marker_key(p, "replay", id)]);
            let place = if replayed == 1 { "replayed" } else { "dead" };
            out.push(format!("{} p{p} dead {id} {place}", ident_of_dead(fields)));
        }
    }
}
