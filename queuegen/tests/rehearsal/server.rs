//! The queues' Redis as the deploy artefacts set it up: `redis/queue.conf` included, the users file rendered by `queuegen acl render --server` and loaded with `ACL LOAD`, and an administrator of the rehearsal's own (`--extra`, as docs/deploy.md says) that reads `ACL LOG`.

use std::path::Path;
use std::process::Command;

use queuegen::gen::deploy::acl;
use queuegen_runtime::roles::Role;
use queuegen_tests::RedisServer;

use super::binaries;

/// The rehearsal's own administrator, brought in with `acl render --extra`.
const ADMIN: &str = "rehearsal-admin";
const ADMIN_PASSWORD: &str = "rehearsalAdmin42";

/// A server holding the service's queues, its users loaded.
pub struct QueueRedis {
    pub server: RedisServer,
    service: String,
}

/// The test password of `role`.
pub fn password(role: Role) -> String {
    format!("{}Rehearsal42", role.name())
}

impl QueueRedis {
    /// Starts a server with `deploy/redis/queue.conf` and an `aclfile`,
    /// renders `deploy/redis/users.acl` into that file asking the server
    /// (`--server`), and loads it (`ACL LOAD`).
    pub fn start(root: &Path, deploy: &Path, service: &str) -> QueueRedis {
        let conf = deploy.join("redis/queue.conf");
        let users = root.join("users.acl");
        // Empty until rendered: the server starts with the default user,
        // which the rendered file then switches off.
        std::fs::write(&users, "").unwrap();
        let server = RedisServer::start_with(&[
            "--include",
            conf.to_str().unwrap(),
            "--aclfile",
            users.to_str().unwrap(),
        ]);
        let admins = root.join("admins.acl");
        std::fs::write(
            &admins,
            format!("user {ADMIN} on >{ADMIN_PASSWORD} ~* &* +@all\n"),
        )
        .unwrap();
        let mut render = Command::new(binaries::queuegen());
        render
            .args(["acl", "render"])
            .arg(deploy.join("redis/users.acl"))
            .arg("--server")
            .arg(server.url())
            .arg("--extra")
            .arg(&admins)
            .arg("--out")
            .arg(&users);
        for role in Role::ALL {
            render.env(acl::password_variable(service, role), password(role));
        }
        let out = render.output().unwrap();
        assert!(
            out.status.success(),
            "queuegen acl render: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _: () = redis::cmd("ACL")
            .arg("LOAD")
            .query(&mut server.connection())
            .unwrap_or_else(|err| panic!("ACL LOAD of the rendered users file: {err}"));
        QueueRedis {
            server,
            service: service.to_owned(),
        }
    }

    /// Which implementation and version it is, asked as the administrator.
    pub fn describe(&self) -> String {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.admin())
            .unwrap();
        queuegen_tests::server_kind::describe(&info)
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        self.server.addr()
    }

    /// The URL that logs in as `role`'s generated user.
    pub fn url(&self, role: Role) -> String {
        self.url_of(&acl::user_name(&self.service, role), &password(role))
    }

    fn url_of(&self, user: &str, password: &str) -> String {
        format!("redis://{user}:{password}@{}/", self.address())
    }

    /// The user whose name is `user`: one of the service's roles.
    pub fn role_named(&self, user: &str) -> Option<Role> {
        Role::ALL
            .into_iter()
            .find(|&role| acl::user_name(&self.service, role) == user)
    }

    /// A connection as the rehearsal's administrator.
    pub fn admin(&self) -> redis::Connection {
        redis::Client::open(self.url_of(ADMIN, ADMIN_PASSWORD))
            .unwrap()
            .get_connection()
            .unwrap_or_else(|err| panic!("the administrator's login: {err}"))
    }

    /// Every `ACL LOG` entry (`queuegen_tests::acl::acl_log`).
    pub fn acl_log(&self) -> Vec<String> {
        queuegen_tests::acl::acl_log(&mut self.admin())
    }
}
