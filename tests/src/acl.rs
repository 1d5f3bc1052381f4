//! ACL users for tests that run a worker or a CLI as a non-default user (`redis://user:pass@...`), on a server, a pair or every node of a cluster.
//!
//! A user given to a server at start ([`AclUser::server_args`]) is part of
//! its configuration and survives `restart`; one added later
//! (`add_user`) lasts until the process ends. ACLs are per process: Redis
//! replicates neither to replicas nor across a cluster, so the pair and
//! the cluster add a user to every node.

/// A user with a password and ACL rules (key patterns, channels, commands).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclUser {
    name: String,
    password: String,
    rules: Vec<String>,
}

impl AclUser {
    /// A user allowed every key, channel and command: what a test needs to
    /// run a worker as someone other than `default`.
    pub fn new(name: &str, password: &str) -> AclUser {
        AclUser::with_rules(name, password, &["~*", "&*", "+@all"])
    }

    /// A user with exactly `rules` (ACL SETUSER syntax, e.g. `~work:*`,
    /// `+@read`, `-xack`); `on` and the password are added.
    pub fn with_rules(name: &str, password: &str, rules: &[&str]) -> AclUser {
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "user name {name:?}: letters, digits and `-` keep it valid in a URL"
        );
        assert!(
            !password.is_empty() && password.chars().all(|c| c.is_ascii_alphanumeric()),
            "password {password:?}: letters and digits keep it valid in a URL"
        );
        AclUser {
            name: name.to_owned(),
            password: password.to_owned(),
            rules: rules.iter().map(|rule| (*rule).to_owned()).collect(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn password(&self) -> &str {
        &self.password
    }

    /// The `ACL SETUSER` rules after the name: `on >password rules...`.
    pub fn setuser_rules(&self) -> Vec<String> {
        let mut rules = vec!["on".to_owned(), format!(">{}", self.password)];
        rules.extend(self.rules.iter().cloned());
        rules
    }

    /// Server arguments that define the user at start (`--user name on >pass ...`),
    /// to pass among a server's, a pair's or a cluster's extra arguments.
    pub fn server_args(&self) -> Vec<String> {
        let mut args = vec!["--user".to_owned(), self.name.clone()];
        args.extend(self.setuser_rules());
        args
    }

    /// `redis://name:password@127.0.0.1:{port}/`
    pub fn url_for(&self, port: u16) -> String {
        format!("redis://{}:{}@127.0.0.1:{port}/", self.name, self.password)
    }

    /// Runs `ACL SETUSER` for this user on `conn` (the server at `addr`).
    pub fn create(&self, conn: &mut redis::Connection, addr: &str) {
        let () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&self.name)
            .arg(self.setuser_rules())
            .query(conn)
            .unwrap_or_else(|err| panic!("ACL SETUSER {} on {addr}: {err}", self.name));
    }
}

/// Which of the commands the roles may name (`roles::ServerCommands`) the
/// test's server binary has: asked once of a throwaway instance, as
/// `queuegen acl render --server` asks a deployment's server.
pub fn server_commands() -> queuegen_runtime::roles::ServerCommands {
    static ASKED: std::sync::OnceLock<queuegen_runtime::roles::ServerCommands> =
        std::sync::OnceLock::new();
    *ASKED.get_or_init(|| {
        let server = crate::RedisServer::start();
        let mut conn = server.connection();
        let mut has = |command: &str| {
            let reply: Vec<redis::Value> = redis::cmd("COMMAND")
                .arg("INFO")
                .arg(command)
                .query(&mut conn)
                .unwrap_or_else(|err| panic!("COMMAND INFO {command}: {err}"));
            reply
                .first()
                .is_some_and(|value| *value != redis::Value::Nil)
        };
        queuegen_runtime::roles::ServerCommands {
            client_setinfo: has("client|setinfo"),
            xackdel: has("xackdel"),
        }
    })
}

/// Every `ACL LOG` entry of the server `conn` talks to, as
/// `user: reason object (context, client-info)`: a test that runs a role's
/// work requires none.
pub fn acl_log(conn: &mut redis::Connection) -> Vec<String> {
    let entries: Vec<std::collections::BTreeMap<String, redis::Value>> =
        redis::cmd("ACL").arg("LOG").arg(1000).query(conn).unwrap();
    entries
        .iter()
        .map(|entry| {
            let text = |field: &str| match entry.get(field) {
                Some(redis::Value::BulkString(bytes)) => {
                    String::from_utf8_lossy(bytes).into_owned()
                }
                other => format!("{other:?}"),
            };
            format!(
                "{}: {} {} ({}, {})",
                text("username"),
                text("reason"),
                text("object"),
                text("context"),
                text("client-info")
            )
        })
        .collect()
}
