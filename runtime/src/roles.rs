//! The least-privilege roles a queue's processes connect as, and exactly the commands each role's code paths send.
//!
//! `queuegen generate --deploy-out` turns these into `redis/users.acl`, and
//! the failure suite runs its workers as the worker role. Two tests keep the
//! lists true: one finds every command literal in a module and requires it in
//! the roles that run that module (and every command a role's Functions call
//! inside the library, since ACL rules apply inside Functions too), and one
//! runs each role's operations against a server loaded with the generated
//! users and requires an empty `ACL LOG`.
//!
//! A command is named as ACL rules name it: `xadd`, or `command|subcommand`
//! (`xinfo|groups`), lowercase.

use crate::functions::Function;

/// Who connects: one ACL user per role and service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Publishes jobs: `Producer` (`XADD`, or with `dedup` and for delayed
    /// jobs the library's publish functions), its admission check.
    Producer,
    /// Runs handlers: intake, acks, recovery, the retry scheduler, leases,
    /// in-process trimming and the result store.
    Worker,
    /// Operates the queues by hand or from the trim CronJob: `trim`,
    /// `dlq replay`, `pause`, `resume`, and every read-only command.
    Operator,
    /// Deploys from CI: `apply` (loads the Function library on every
    /// primary, creates streams and groups). The only role that may
    /// `FUNCTION LOAD`: code every worker then runs, so its credentials
    /// belong to the deploy pipeline, not to a person's shell.
    Deployer,
    /// Reads only: `status`, `pending`, `runs`, `dlq list` and the `monitor` exporter.
    Monitor,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Producer,
        Role::Worker,
        Role::Operator,
        Role::Monitor,
        Role::Deployer,
    ];

    /// `producer`, `worker`, `operator`, `monitor`, `deployer`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Producer => "producer",
            Role::Worker => "worker",
            Role::Operator => "operator",
            Role::Monitor => "monitor",
            Role::Deployer => "deployer",
        }
    }

    /// What the role is for, in one line (the users file says it above each user).
    pub fn purpose(self) -> &'static str {
        match self {
            Role::Producer => "publishes jobs to the ready streams (XADD, publish_once) or the delayed sets after the admission check",
            Role::Worker => {
                "runs handlers: intake, acks, recovery, retries, dead letters, leases, in-process trims, results"
            }
            Role::Operator => {
                "trim, dlq replay, pause and resume (CLI, dashboard or the trim CronJob), and every read"
            }
            Role::Deployer => "apply from CI: load the Function library, create streams and groups",
            Role::Monitor => "read-only: status, pending, runs, dlq list, the monitor's exporter and a read-only dashboard",
        }
    }

    /// Every command the role sends, itself or inside the Functions it calls.
    pub fn commands(self) -> Vec<&'static str> {
        let groups: &[&[&str]] = match self {
            Role::Producer => &[CONNECT, PUBLISH, ADMISSION, &["fcall"], PUBLISH_INTERNALS],
            Role::Worker => &[
                CONNECT,
                WORKER_DIRECT,
                FUNCTION_CALLS,
                INVENTORY,
                TRIM_DIRECT,
                LEASES,
                RESULTS,
                FEATURE_PROBES,
                LIBRARY_INTERNALS,
            ],
            Role::Operator => &[
                CONNECT,
                FUNCTION_CALLS,
                INVENTORY,
                TRIM_DIRECT,
                LEASES,
                READS,
                RUN_READS,
                PAUSE,
                FEATURE_PROBES,
                LIBRARY_INTERNALS,
            ],
            Role::Monitor => &[CONNECT, INVENTORY, READS, RUN_READS, &["fcall_ro"]],
            Role::Deployer => &[CONNECT, APPLY, FUNCTION_CALLS, LEASES, LEASE_INTERNALS],
        };
        let mut commands: Vec<&'static str> =
            groups.iter().flat_map(|g| g.iter().copied()).collect();
        commands.sort_unstable();
        commands.dedup();
        commands
    }

    /// The library functions the role calls, by the name after the library
    /// prefix (`ack` is `FCALL qg_<service>_v<N>_ack`). `FCALL` and
    /// `FCALL_RO` are allowed for these names only.
    pub(crate) fn functions(self) -> &'static [Function] {
        match self {
            Role::Producer => &[Function::PublishOnce, Function::DelaySchedule],
            Role::Worker => &[
                Function::Ack,
                // `retention.on_ack: delete` on a server with XACKDEL.
                Function::AckDelete,
                Function::Claim,
                Function::ConsumersPrune,
                Function::Renew,
                Function::RateTake,
                Function::RetrySchedule,
                Function::Defer,
                Function::RetryPromote,
                Function::DelayedPromote,
                // Handlers publish follow-up jobs, and the outbox publisher
                // runs as the worker: a producer's functions too.
                Function::PublishOnce,
                Function::DelaySchedule,
                // A pipeline stage's hand-off.
                Function::PublishBatch,
                Function::DeadLetter,
                Function::ScheduleTick,
                Function::RunSettle,
                Function::LeaseAcquire,
                Function::LeaseRelease,
                Function::Trim,
                Function::Version,
            ],
            Role::Operator => &[
                Function::Replay,
                Function::Trim,
                Function::LeaseAcquire,
                Function::LeaseRelease,
                Function::Version,
            ],
            Role::Monitor => &[Function::Version],
            Role::Deployer => &[
                Function::LeaseAcquire,
                Function::LeaseRelease,
                Function::Version,
            ],
        }
    }

    /// Whether the role only reads keys (`%R~` key patterns in the users file).
    #[cfg(test)]
    pub(crate) fn reads_only(self) -> bool {
        self == Role::Monitor
    }
}

impl Role {
    /// The key patterns of this role: the producer touches only the ready
    /// streams, the publish markers of `dedup`, the delayed sets and the
    /// delayed jobs' promotion markers (`delay_schedule` reads them), the
    /// monitor reads everything of the service and writes nothing, the
    /// others own every key under the prefix (results and leases included).
    pub(crate) fn key_patterns(self, key_prefix: &str) -> Vec<String> {
        match self {
            Role::Producer => [
                "ready",
                "marker:publish:*",
                "delayed",
                "delayed-jobs",
                "marker:delayed:*",
            ]
            .iter()
            .map(|suffix| format!("~{key_prefix}:*:{suffix}"))
            .collect(),
            Role::Monitor => vec![format!("%R~{key_prefix}:*")],
            Role::Worker | Role::Operator | Role::Deployer => vec![format!("~{key_prefix}:*")],
        }
    }

    /// The Pub/Sub channels of this role (`&pattern`; Redis 7 users start
    /// with none): the queues' pause channels
    /// ([`QueueConfig::pause_channel`](crate::QueueConfig::pause_channel)),
    /// which the worker subscribes to and the operator publishes to.
    pub(crate) fn channel_patterns(self, key_prefix: &str) -> Vec<String> {
        match self {
            Role::Worker | Role::Operator => vec![format!("&{key_prefix}:{PAUSE_CHANNELS}")],
            Role::Producer | Role::Monitor | Role::Deployer => Vec::new(),
        }
    }

    /// The keys the role may send [`KEY_REPLACING`] commands to: strings and
    /// counters of its work (markers, leases, results, schedule hints, pause
    /// flags, rate buckets), never a stream, retry set or delayed set. The
    /// producer's are its publish and delayed markers only.
    pub(crate) fn replaceable_key_patterns(self, key_prefix: &str) -> Vec<String> {
        let shapes: &[&str] = match self {
            Role::Producer => &["*:marker:publish:*", "*:marker:delayed:*"],
            Role::Monitor => &[],
            Role::Worker | Role::Operator | Role::Deployer => REPLACEABLE_KEYS,
        };
        shapes
            .iter()
            .map(|shape| format!("~{key_prefix}:{shape}"))
            .collect()
    }

    /// The ACL rules of this role after the user's name and password:
    /// `resetkeys`, the key pattern, no channels, `-@all`, then each
    /// command, with `FCALL`/`FCALL_RO` limited to the role's functions of
    /// each library in `libraries` (`qg_<service>_v<N>`).
    /// The role's `KEY_REPLACING` commands come last, in a selector
    /// limited to `Role::replaceable_key_patterns`, so that `SET`, `DEL`
    /// and `PEXPIRE` never reach a stream or a retry set.
    /// Commands `server` lacks are left out: an ACL rule naming a command
    /// the server does not know makes it refuse the rule (and a whole file).
    pub fn acl_rules(
        self,
        key_prefix: &str,
        libraries: &[String],
        server: ServerCommands,
    ) -> Vec<String> {
        let mut rules = vec!["resetkeys".to_owned()];
        rules.extend(self.key_patterns(key_prefix));
        rules.push("resetchannels".to_owned());
        rules.extend(self.channel_patterns(key_prefix));
        rules.push("-@all".to_owned());
        let mut scoped = Vec::new();
        for command in self.commands() {
            if !server.has(command) {
                continue;
            }
            if KEY_REPLACING.contains(&command) {
                scoped.push(format!("+{command}"));
            } else if command == "fcall" || command == "fcall_ro" {
                for library in libraries {
                    for function in self.functions() {
                        rules.push(format!("+{command}|{}", function.in_library(library)));
                    }
                }
            } else {
                rules.push(format!("+{command}"));
            }
        }
        if !scoped.is_empty() {
            let mut selector = self.replaceable_key_patterns(key_prefix);
            selector.extend(scoped);
            rules.push(format!("({})", selector.join(" ")));
        }
        rules
    }
}

/// Which of the commands a role's rules may name the server has, where
/// servers differ: asked of the server (`connect::server_has_command`),
/// never inferred from a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerCommands {
    /// `CLIENT SETINFO`: Redis 7.2 and later, Valkey; not Redis 7.0.
    pub client_setinfo: bool,
    /// `XACKDEL`: Redis 8.2 and later; not Redis 7.x, Valkey 8 or 9.1.
    pub xackdel: bool,
}

impl ServerCommands {
    /// A server with every command the roles name (the generated users
    /// file; `queuegen acl render` drops what the target server lacks).
    pub const ALL: ServerCommands = ServerCommands {
        client_setinfo: true,
        xackdel: true,
    };

    /// The commands that are not on every supported server.
    pub const OPTIONAL: &'static [&'static str] = &["client|setinfo", "xackdel"];

    /// A server with exactly the optional commands `names` (ACL names from
    /// [`ServerCommands::OPTIONAL`]); `Err` names one that is not optional.
    pub fn with<'a>(names: &[&'a str]) -> Result<ServerCommands, &'a str> {
        if let Some(unknown) = names.iter().find(|name| !Self::OPTIONAL.contains(name)) {
            return Err(unknown);
        }
        Ok(ServerCommands {
            client_setinfo: names.contains(&"client|setinfo"),
            xackdel: names.contains(&"xackdel"),
        })
    }

    /// Whether the server has `command` (an ACL name, `client|setinfo`).
    pub fn has(self, command: &str) -> bool {
        match command {
            "client|setinfo" => self.client_setinfo,
            "xackdel" => self.xackdel,
            _ => true,
        }
    }
}

/// Commands that replace or remove a key whatever its type: `SET`
/// overwrites a stream with a string, `DEL`/`GETDEL` delete it, `PEXPIRE`
/// makes it vanish. Each role sends them only to the keys of
/// `Role::replaceable_key_patterns` (a Redis 7 ACL selector).
pub(crate) const KEY_REPLACING: &[&str] = &["set", "del", "getdel", "pexpire"];

/// The key shapes (after `{prefix}:`) that hold strings, counters or small
/// hashes the roles may replace: transition markers, leases, stored
/// results, schedule hints, pause flags, rate buckets, and a pipeline run's
/// state at a join (which `run_settle` expires once the run has ended).
const REPLACEABLE_KEYS: &[&str] = &[
    "*:marker:*",
    "*:run:*",
    "*:lease:*",
    "results:*",
    "schedule:*",
    "*:paused",
    "*:rate",
];

/// The shape (after `{prefix}:`) of every queue's pause channel,
/// `QueueConfig::pause_channel`.
const PAUSE_CHANNELS: &str = "*:paused";

/// Every connection: the deployment probe (`INFO cluster`), the Cluster
/// client's slot map (`CLUSTER SLOTS`, again after a MOVED), `ASKING`
/// during a slot migration, and `CLIENT SETINFO`, which the redis crate (and
/// KEDA's go-redis) send on connecting. Redis 7.0 does not know that command
/// and refuses an ACL file naming it, so `queuegen acl render` keeps the rule
/// only for a server that has it (it asks the server).
const CONNECT: &[&str] = &["ping", "info", "cluster|slots", "asking", "client|setinfo"];

/// `Producer::publish` and `publish_many`: the append, and `WAIT` when the
/// spec sets `redis.wait_replicas` or a publish asks for durability.
const PUBLISH: &[&str] = &["xadd", "wait"];

/// What the producer's functions call: `publish_once` (`dedup`: the marker's
/// `GET`/`SET`, the `XADD`) and `delay_schedule` (the delayed set and its
/// envelopes), with their preflight's `TYPE`.
const PUBLISH_INTERNALS: &[&str] = &["type", "get", "set", "xadd", "zscore", "zadd", "hset"];

/// The producer's admission check reads each partition's group inventory
/// (`inventory`).
const ADMISSION: &[&str] = &["xinfo|groups", "xlen", "xpending", "xrange"];

/// What the worker sends outside the library: the read (`XREADGROUP`; on a
/// Cluster the per-partition watchers' `XREAD` and `XINFO GROUPS`), the start
/// checks (`INFO memory`, the library's `version`), ownership checks
/// (`XPENDING`), recovery's fallbacks (`XCLAIM`, `XRANGE`, the claim epoch's
/// `INCR`), the scheduler's due scan (`ZRANGEBYSCORE`), the followers' lease
/// read (`MGET`), `TIME`, `WAIT` after commits that ask for durability, and
/// the pause flags' refresh (`EXISTS`, `worker::pause`) and its
/// subscription to the queue's pause channel (`SUBSCRIBE`; `PING` is in
/// [`CONNECT`]), and a pipeline join's summary of its run (`HGETALL` of the
/// run's settled hash, `runs::summary`).
const WORKER_DIRECT: &[&str] = &[
    "exists",
    "hgetall",
    "subscribe",
    "xreadgroup",
    "xread",
    "xinfo|groups",
    "xpending",
    "xclaim",
    "xrange",
    "incr",
    "zrangebyscore",
    "mget",
    "time",
    "wait",
];

/// What the worker and the trim (worker or operator) ask of every primary
/// before choosing a path that not every server has: `COMMAND INFO xackdel`
/// (acks on `XACKDEL`), `COMMAND DOCS xtrim` (`XTRIM … ACKED`).
const FEATURE_PROBES: &[&str] = &["command|info", "command|docs"];

/// The calls themselves; which functions is limited per role (`fcall|name`).
const FUNCTION_CALLS: &[&str] = &["fcall", "fcall_ro"];

/// `inventory`: the groups, length, pending summary and oldest entries
/// of a stream, read by trims, `status` and the monitor.
const INVENTORY: &[&str] = &["xinfo|groups", "xlen", "xpending", "xrange", "type"];

/// `trim` outside its Function: the server's clock and version, the
/// bounds of what it may trim, and the memory estimate it reports.
const TRIM_DIRECT: &[&str] = &["time", "info", "xrange", "xrevrange", "memory|usage"];

/// `lease` (trim leases and the loops leases): take with `SET NX PX`
/// (while an older library without `lease_acquire` is loaded), renew with
/// `GET` + `PEXPIRE` in `MULTI`, release with the library's `lease_release`.
/// No `EVAL`: a role runs the library's reviewed functions, never a script
/// of its own.
const LEASES: &[&str] = &["set", "get", "pexpire", "multi", "exec"];

/// `RedisResults`: the stored result of a job, written once (`SET NX GET PX`)
/// and read back on redelivery; `WAIT` for its durability.
const RESULTS: &[&str] = &["get", "set", "wait"];

/// `apply`: loads the library on every primary and creates the groups.
/// `FUNCTION DELETE`, `FLUSH` and `RESTORE` stay out: a version is retired by
/// loading the next one beside it.
const APPLY: &[&str] = &[
    "function|load",
    "function|list",
    "xgroup|create",
    "xinfo|stream",
];

/// `queuegen pause` and `resume` (`ops::pause`): set a partition's pause
/// flag with the server's clock (`TIME`, `SET … GET`), delete it (`GETDEL`),
/// then tell the workers (`PUBLISH` to the queue's pause channel).
const PAUSE: &[&str] = &["time", "set", "getdel", "publish"];

/// `status`, `pending`, `dlq list`, the monitor and the dashboard: the newest
/// entries, consumers, retry sets and the envelopes of the jobs in them
/// (`HMGET`, `ops::held`), the pause flags and replay markers (`GET`)
/// and the server clock.
const READS: &[&str] = &[
    "get",
    "hmget",
    "xrevrange",
    "xinfo|consumers",
    "xinfo|stream",
    "zcard",
    "zrange",
    "time",
];

/// `queuegen runs` (`ops::runs`): what a pipeline run's state at a join
/// holds beyond its hash's fields (`HMGET`, in [`READS`]) and the index of
/// runs in flight (`ZCARD`, `ZRANGE`): when an ended run's state expires
/// (`PTTL`), the count of its outstanding jobs and of its settled ones, and
/// a bounded sample of each.
const RUN_READS: &[&str] = &["pttl", "scard", "srandmember", "hlen", "hrandfield"];

/// What `lease_acquire` and `lease_release` call (with their preflight's
/// `TYPE`): all the deployer's functions need.
const LEASE_INTERNALS: &[&str] = &["type", "get", "set", "del"];

/// What the library's functions call, for the roles that call them: Redis
/// checks a Function's commands and keys against the caller's ACL.
const LIBRARY_INTERNALS: &[&str] = &[
    "del",
    "exists",
    "get",
    "hdel",
    "hexists",
    "hget",
    "hmget",
    "hset",
    "hsetnx",
    "incr",
    "incrby",
    "memory|usage",
    "mget",
    "pexpire",
    "sadd",
    "scard",
    "set",
    "sismember",
    "smismember",
    "srem",
    "time",
    "type",
    "xack",
    "xackdel",
    "xadd",
    "xautoclaim",
    "xclaim",
    "xgroup|delconsumer",
    "xinfo|consumers",
    "xinfo|groups",
    "xpending",
    "xrange",
    "xtrim",
    "zadd",
    "zrem",
    "zscore",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_role_is_given_a_dangerous_or_administrative_command() {
        let refused = [
            "flushall",
            "flushdb",
            "config",
            "keys",
            "debug",
            "shutdown",
            "acl",
            "module",
            "function|delete",
            "function|flush",
            "function|restore",
            "script",
            "save",
            "bgsave",
            "monitor",
            "replicaof",
            "migrate",
            "client|kill",
            "eval",
            "evalsha",
            "eval_ro",
            "script|load",
        ];
        for role in Role::ALL {
            for command in role.commands() {
                assert!(
                    !refused.contains(&command),
                    "{} is given {command}",
                    role.name()
                );
            }
        }
    }

    /// Which roles run the code of each source file that sends commands
    /// (a path prefix under the crate root; the first match wins).
    const RUN_BY: &[(&str, &[Role])] = &[
        ("src/producer", &[Role::Producer]),
        ("src/worker/", &[Role::Worker]),
        ("src/results/", &[Role::Worker]),
        // The schedule loop runs in the worker processes.
        ("src/schedule.rs", &[Role::Worker]),
        // The outbox publisher publishes (a producer's XADD); the generated
        // Deployment runs it with the workers' Secret, whose user has XADD
        // for the Function library's transitions.
        ("src/postgres/", &[Role::Producer, Role::Worker]),
        ("src/transitions.rs", &[Role::Worker, Role::Operator]),
        ("src/admin.rs", &[Role::Deployer]),
        (
            "src/inventory.rs",
            &[Role::Producer, Role::Worker, Role::Operator, Role::Monitor],
        ),
        ("src/trim/", &[Role::Worker, Role::Operator]),
        (
            "src/lease.rs",
            &[Role::Worker, Role::Operator, Role::Deployer],
        ),
        ("src/ops/pause.rs", &[Role::Operator]),
        ("src/ops/", &[Role::Operator, Role::Monitor]),
        (
            "src/connect/",
            &[Role::Producer, Role::Worker, Role::Operator, Role::Monitor],
        ),
        ("../queuegen/src/cli/apply.rs", &[Role::Deployer]),
        ("../queuegen/src/cli/", &[Role::Operator, Role::Monitor]),
    ];

    /// Commands named by their subcommand in ACL rules.
    const CONTAINERS: &[&str] = &[
        "xinfo", "function", "cluster", "memory", "xgroup", "client", "config",
    ];

    /// `(file, command)` for every `cmd("NAME")` in `text`, with the first
    /// `.arg("SUB")` after it for container commands.
    fn command_literals(text: &str) -> Vec<String> {
        let mut found = Vec::new();
        for (at, _) in text.match_indices("cmd(\"") {
            let rest = &text[at + 5..];
            let Some(end) = rest.find('"') else { continue };
            let name = rest[..end].to_lowercase();
            if !name.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
                continue;
            }
            if CONTAINERS.contains(&name.as_str()) {
                let sub = rest
                    .find(".arg(\"")
                    .map(|i| &rest[i + 6..])
                    .and_then(|r| r.find('"').map(|e| r[..e].to_lowercase()));
                found.push(format!("{name}|{}", sub.unwrap_or_default()));
            } else {
                found.push(name);
            }
        }
        found
    }

    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// A command sent from a file is in the commands of a role that runs
    /// that file: adding a command to a code path without adding it to its
    /// role fails here (and, for what the ACL test exercises, there too).
    #[test]
    fn every_command_the_code_sends_belongs_to_a_role_that_runs_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        sources(&root.join("src"), &mut files);
        sources(&root.join("../queuegen/src/cli"), &mut files);
        let mut missing = Vec::new();
        let mut seen = 0;
        for file in files {
            let relative = file
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&file).unwrap();
            // Test modules send what they like to their own servers.
            let text = text.split("#[cfg(test)]").next().unwrap();
            let literals = command_literals(text);
            if literals.is_empty() {
                continue;
            }
            let Some((_, roles)) = RUN_BY
                .iter()
                .find(|(prefix, _)| relative.starts_with(prefix))
            else {
                missing.push(format!(
                    "{relative}: sends {literals:?} but no role runs it (RUN_BY)"
                ));
                continue;
            };
            for command in literals {
                seen += 1;
                if !roles
                    .iter()
                    .any(|role| role.commands().contains(&command.as_str()))
                {
                    let names: Vec<_> = roles.iter().map(|r| r.name()).collect();
                    missing.push(format!("{relative}: {command} is in none of {names:?}"));
                }
            }
        }
        assert!(
            seen > 50,
            "found only {seen} command literals: is the scan broken?"
        );
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    #[test]
    fn server_commands_are_named_as_acl_rules_name_them() {
        assert_eq!(
            ServerCommands::with(&["client|setinfo", "xackdel"]),
            Ok(ServerCommands::ALL)
        );
        let seven_oh = ServerCommands::with(&[]).unwrap();
        assert!(!seven_oh.has("client|setinfo") && !seven_oh.has("xackdel"));
        assert!(seven_oh.has("xadd"));
        assert_eq!(ServerCommands::with(&["xack"]), Err("xack"));
        let rules = Role::Worker.acl_rules("work", &[], seven_oh).join(" ");
        assert!(!rules.contains("client|setinfo") && !rules.contains("xackdel"));
    }

    /// The worker may subscribe to and the operator publish on every
    /// queue's pause channel, and nobody else on any channel.
    #[test]
    fn the_pause_channel_is_the_workers_and_the_operators_only() {
        let channel = crate::config::tests::OCR.pause_channel();
        let pattern = Role::Worker.channel_patterns("work");
        let glob = pattern[0].strip_prefix('&').unwrap();
        let (head, tail) = glob.split_once('*').unwrap();
        assert!(
            channel.starts_with(head) && channel.ends_with(tail),
            "{channel} is not in {glob}"
        );
        assert_eq!(Role::Operator.channel_patterns("work"), pattern);
        assert!(Role::Worker.commands().contains(&"subscribe"));
        assert!(Role::Operator.commands().contains(&"publish"));
        for role in [Role::Producer, Role::Monitor, Role::Deployer] {
            assert!(role.channel_patterns("work").is_empty());
            assert!(!role.commands().contains(&"subscribe"));
        }
    }

    #[test]
    fn only_the_monitor_reads_only() {
        assert_eq!(
            Role::ALL.iter().filter(|r| r.reads_only()).count(),
            1,
            "the monitor's key patterns are read-only"
        );
        let monitor = Role::Monitor.commands();
        for write in ["xadd", "xack", "set", "del", "xtrim", "fcall", "eval"] {
            assert!(!monitor.contains(&write), "the monitor may {write}");
        }
    }
}
