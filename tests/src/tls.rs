//! TLS for the harness: a test certificate authority made in the test (rcgen), and a redis-server with a TLS port whose certificates can be swapped while it runs.
//!
//! The server keeps its plain loopback port for the harness's own control
//! connection ([`RedisServer::connection`]: `CONFIG SET`, `CLIENT KILL`,
//! `ACL`), so the test's setup never depends on the TLS code under test; the
//! code under test gets only the `rediss://` URL of the TLS port, and
//! [`TlsServer::tls_clients`] tells the two kinds of client apart by the
//! port they came in on.
//!
//! Not every build has TLS (the PyPI builds of Redis 8.2 and Valkey 9.1 have
//! none): a test that needs it starts with [`skip_without_tls`].

use std::io::Write;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::acl::AclUser;
use crate::redis_cluster::RedisCluster;
use crate::redis_server::{free_cluster_port, free_port, RedisServer};

/// The line a test prints where it cannot run for want of TLS; `scripts/test`
/// counts these lines as skipped tests (and not as passed ones).
pub const SKIPPED_WITHOUT_TLS: &str = "skipped: server built without TLS";

/// Whether the calling test must stop here because the server binary has no
/// TLS ([`crate::server_kind::tls_support`], asked of the binary). When it
/// has none, this writes `skipped: server built without TLS: <test> (<what
/// the binary said>)` on the test's stderr and returns true; the test then
/// returns at once (cargo test has no run-time skip, so it shows as passed
/// there; `scripts/test` subtracts these lines from the passed count and adds
/// them to the skipped one):
///
/// ```ignore
/// if queuegen_tests::tls::skip_without_tls() {
///     return;
/// }
/// ```
pub fn skip_without_tls() -> bool {
    let Err(why) = crate::server_kind::tls_support() else {
        return false;
    };
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // Straight to the process's stderr, past the test harness's capture
    // (which takes only `print!`/`eprint!`), so the line shows for a test
    // that passes too; one write, so it is not interleaved with other output.
    let line = format!("{SKIPPED_WITHOUT_TLS}: {test} ({why})\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    true
}

/// A certificate authority of its own, made fresh for one test.
pub struct TestCa {
    name: String,
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

/// A certificate and its private key, both PEM.
pub struct CertifiedKey {
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCa {
    /// A new self-signed CA called `name` (it shows in handshake errors).
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("generating the CA key");
        let pem = params.self_signed(&key).expect("self-signing the CA").pem();
        TestCa {
            name: name.to_owned(),
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A server certificate for `127.0.0.1` and `localhost`, signed by this CA.
    pub fn server_cert(&self) -> CertifiedKey {
        self.leaf(
            &format!("redis-server ({})", self.name),
            vec![ExtendedKeyUsagePurpose::ServerAuth],
        )
    }

    /// A Cluster node's certificate: a server's, and a client's too, since
    /// a node presents it when it dials another node's bus or its primary
    /// (`tls-cluster`, `tls-replication`) and `tls-auth-clients yes` checks it.
    pub fn node_cert(&self) -> CertifiedKey {
        self.leaf(
            &format!("cluster node ({})", self.name),
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    /// A client certificate for `name`, signed by this CA.
    pub fn client_cert(&self, name: &str) -> CertifiedKey {
        self.leaf(name, vec![ExtendedKeyUsagePurpose::ClientAuth])
    }

    fn leaf(&self, common_name: &str, usages: Vec<ExtendedKeyUsagePurpose>) -> CertifiedKey {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .expect("certificate parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = usages;
        let key = KeyPair::generate().expect("generating a key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("signing a certificate");
        CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// The PEM files a TLS client or server reads: CA, certificate and key.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// Connection options that trust these files' CA and present their
    /// client certificate, read from the files at each connection.
    pub fn mutual_tls_options(&self) -> queuegen_runtime::ConnectOptions {
        queuegen_runtime::ConnectOptions::new()
            .tls_ca_file(&self.ca)
            .tls_client_cert(&self.cert, &self.key)
    }

    /// Writes `ca`'s certificate and a new `cert` of it into `dir` as
    /// `{name}-ca.pem`, `{name}-cert.pem` and `{name}-key.pem`.
    pub fn write(dir: &Path, name: &str, ca: &TestCa, cert: &CertifiedKey) -> TlsFiles {
        let files = TlsFiles {
            ca: dir.join(format!("{name}-ca.pem")),
            cert: dir.join(format!("{name}-cert.pem")),
            key: dir.join(format!("{name}-key.pem")),
        };
        files.replace(ca, cert);
        files
    }

    /// Replaces the three files' contents, each by a rename (as a
    /// Kubernetes Secret volume swaps its files): a reader sees the old
    /// file or the new one, never half of one.
    pub fn replace(&self, ca: &TestCa, cert: &CertifiedKey) {
        for (path, text) in [
            (&self.ca, ca.pem()),
            (&self.cert, cert.cert_pem.as_str()),
            (&self.key, cert.key_pem.as_str()),
        ] {
            write_by_rename(path, text);
        }
    }
}

/// A worker's client certificate files for a rotation test: the CA the
/// servers start on, the CA they rotate to, the worker's files (of the old
/// CA, replaced in place later) and a `stale` copy of the old ones that
/// stays, to show that the servers no longer take them.
pub struct ClientRotation {
    pub old_ca: TestCa,
    pub new_ca: TestCa,
    pub files: TlsFiles,
    pub stale: TlsFiles,
    _dir: tempfile::TempDir,
}

impl ClientRotation {
    /// Two new CAs named `old` and `new`, and the worker's and the stale
    /// files of `old` in a directory of their own.
    pub fn write(old: &str, new: &str) -> ClientRotation {
        let old_ca = TestCa::new(old);
        let new_ca = TestCa::new(new);
        let dir = certificates_dir("queuegen-client-rotation-");
        let files = TlsFiles::write(dir.path(), "worker", &old_ca, &old_ca.client_cert("worker"));
        let stale = TlsFiles::write(dir.path(), "stale", &old_ca, &old_ca.client_cert("stale"));
        ClientRotation {
            old_ca,
            new_ca,
            files,
            stale,
            _dir: dir,
        }
    }

    /// Replaces the worker's files on disk by the new CA and a certificate of it.
    pub fn replace_files(&self) {
        self.files
            .replace(&self.new_ca, &self.new_ca.client_cert("worker"));
    }

    /// Checks that a connection to `url` made from the stale files is refused,
    /// naming the stale CA file.
    pub async fn assert_stale_refused(&self, url: String) {
        let err = queuegen_runtime::Redis::connect_with(url, self.stale.mutual_tls_options())
            .await
            .expect_err("the old CA and certificate no longer work");
        assert!(err.to_string().contains("stale-ca.pem"), "{err}");
    }
}

/// Writes `text` to `path` through a temporary file and a rename.
pub fn write_by_rename(path: &Path, text: &str) {
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text)
        .unwrap_or_else(|err| panic!("writing {}: {err}", staged.display()));
    std::fs::rename(&staged, path)
        .unwrap_or_else(|err| panic!("renaming {} into place: {err}", path.display()));
}

/// Whether the TLS server asks clients for a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// `tls-auth-clients no`: the server's certificate only.
    None,
    /// `tls-auth-clients yes`: mutual TLS, a client certificate of a CA the
    /// server trusts is required.
    Required,
}

impl ClientAuth {
    /// The value of `tls-auth-clients`.
    fn config_value(self) -> &'static str {
        match self {
            ClientAuth::None => "no",
            ClientAuth::Required => "yes",
        }
    }
}

impl TlsFiles {
    /// A server's arguments presenting these files (certificate and key) and
    /// trusting their CA, for clients as `client_auth` says.
    fn server_args(&self, client_auth: ClientAuth) -> Vec<String> {
        let path = |path: &Path| path.to_str().expect("a UTF-8 temp path").to_owned();
        vec![
            "--tls-cert-file".to_owned(),
            path(&self.cert),
            "--tls-key-file".to_owned(),
            path(&self.key),
            "--tls-ca-cert-file".to_owned(),
            path(&self.ca),
            "--tls-auth-clients".to_owned(),
            client_auth.config_value().to_owned(),
        ]
    }
}

/// Panics where the server binary has no TLS: a test that starts a
/// `harness` (`TlsServer`, `TlsCluster`) asks [`skip_without_tls`] first.
fn require_tls_support(harness: &str) {
    if let Err(why) = crate::server_kind::tls_support() {
        panic!(
            "a {harness} on a server without TLS ({why}): a test that starts \
             one calls queuegen_tests::tls::skip_without_tls() first"
        );
    }
}

/// A new temporary directory for a server's certificate files.
fn certificates_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("a temporary directory")
}

/// The lines of a `CLIENT LIST` reply of the clients that came in on `port`.
fn clients_on_port(list: &str, port: u16) -> Vec<String> {
    let laddr = format!("laddr=127.0.0.1:{port}");
    list.lines()
        .filter(|line| line.split(' ').any(|field| field == laddr))
        .map(str::to_owned)
        .collect()
}

/// A private redis-server with a TLS port as well as its plain one.
pub struct TlsServer {
    pub server: RedisServer,
    tls_port: u16,
    /// The server's own certificate files, one set per [`TlsServer::use_ca`].
    dir: tempfile::TempDir,
    generation: std::cell::Cell<u32>,
}

impl TlsServer {
    /// Starts a server whose TLS port presents a certificate of `ca` and
    /// trusts `ca` for client certificates.
    pub fn start(ca: &TestCa, client_auth: ClientAuth) -> TlsServer {
        require_tls_support("TlsServer");
        let dir = certificates_dir("queuegen-tls-");
        let files = TlsFiles::write(dir.path(), "server-0", ca, &ca.server_cert());
        let tls_port = free_port();
        let mut args = vec!["--tls-port".to_owned(), tls_port.to_string()];
        args.extend(files.server_args(client_auth));
        let server = RedisServer::start_with(&args);
        TlsServer {
            server,
            tls_port,
            dir,
            generation: std::cell::Cell::new(0),
        }
    }

    /// `rediss://127.0.0.1:{tls port}/`
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.tls_port)
    }

    /// `rediss://{user}:{password}@127.0.0.1:{tls port}/`
    pub fn url_with(&self, user: &str, password: &str) -> String {
        format!("rediss://{user}:{password}@127.0.0.1:{}/", self.tls_port)
    }

    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// Presents a new certificate of `ca` from now on and trusts `ca` for
    /// client certificates (`CONFIG SET` of the three files, applied
    /// together). Connections made before keep their session.
    pub fn use_ca(&self, ca: &TestCa) {
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        let files = TlsFiles::write(
            self.dir.path(),
            &format!("server-{generation}"),
            ca,
            &ca.server_cert(),
        );
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("tls-cert-file")
            .arg(files.cert.as_os_str().as_encoded_bytes())
            .arg("tls-key-file")
            .arg(files.key.as_os_str().as_encoded_bytes())
            .arg("tls-ca-cert-file")
            .arg(files.ca.as_os_str().as_encoded_bytes())
            .query(&mut self.server.connection())
            .unwrap_or_else(|err| panic!("CONFIG SET of the TLS files: {err}"));
    }

    /// The `CLIENT LIST` lines of the clients that came in on the TLS port.
    pub fn tls_clients(&self) -> Vec<String> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut self.server.connection())
            .unwrap_or_else(|err| panic!("CLIENT LIST: {err}"));
        clients_on_port(&list, self.tls_port)
    }

    /// Closes every connection that came in on the TLS port (as a server
    /// restart or a network cut would): each client must reconnect, and
    /// with it make a new TLS handshake. Returns how many were closed.
    pub fn kill_tls_clients(&self) -> u64 {
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("LADDR")
            .arg(format!("127.0.0.1:{}", self.tls_port))
            .query(&mut self.server.connection())
            .unwrap_or_else(|err| panic!("CLIENT KILL LADDR: {err}"))
    }
}

/// A 6-node Cluster ([`RedisCluster`]: 3 primaries, 3 replicas) whose nodes
/// also listen on TLS ports, talk to each other over TLS (`tls-cluster`,
/// `tls-replication`), and can have their certificates and ACL users
/// changed on every node while they run.
///
/// Each node keeps its plain port for the harness's control connections
/// (`CONFIG SET`, `ACL`, `CLIENT KILL`, [`RedisCluster`]'s own checks). With
/// `tls-cluster yes`, Redis 7.0 and Valkey 8.0 answer `CLUSTER SLOTS` (and
/// `CLUSTER NODES`, `MOVED`) with each node's TLS port to a client that came
/// in over TLS and with its plain port to a plain one: the code under test,
/// given [`TlsCluster::url`], stays on TLS ports throughout, and the
/// harness on plain ones.
pub struct TlsCluster {
    pub cluster: RedisCluster,
    /// Plain port → TLS port, per node.
    tls_ports: BTreeMap<u16, u16>,
    /// The nodes' certificate files, one set per [`TlsCluster::use_ca`].
    dir: tempfile::TempDir,
    generation: AtomicU32,
}

impl TlsCluster {
    /// Starts the cluster with every node presenting a certificate of `ca`
    /// and trusting `ca` (for clients and for the other nodes).
    pub fn start(ca: &TestCa, client_auth: ClientAuth) -> TlsCluster {
        require_tls_support("TlsCluster");
        let dir = certificates_dir("queuegen-tls-cluster-");
        let files = TlsFiles::write(dir.path(), "nodes-0", ca, &ca.node_cert());
        let mut common = files.server_args(client_auth);
        common.extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(str::to_owned));
        // A TLS port whose +10000 is free: with tls-cluster the bus port
        // is the TLS port + 10000.
        let cluster = RedisCluster::start_with_per_node(&common, || {
            vec!["--tls-port".to_owned(), free_cluster_port().to_string()]
        });
        let tls_ports = cluster
            .servers()
            .iter()
            .map(|node| {
                let reply: Vec<String> = redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("tls-port")
                    .query(&mut node.connection())
                    .unwrap_or_else(|err| panic!("CONFIG GET tls-port: {err}"));
                let port = reply[1].parse().expect("a TLS port");
                (node.port(), port)
            })
            .collect();
        TlsCluster {
            cluster,
            tls_ports,
            dir,
            generation: AtomicU32::new(0),
        }
    }

    /// `rediss://127.0.0.1:{TLS port of the first node}/`: a seed.
    pub fn url(&self) -> String {
        let first = self.cluster.servers()[0].port();
        format!("rediss://127.0.0.1:{}/", self.tls_port(first))
    }

    /// The TLS port of the node whose plain port is `plain_port`.
    pub fn tls_port(&self, plain_port: u16) -> u16 {
        self.tls_ports[&plain_port]
    }

    /// Every node's TLS port.
    pub fn tls_ports(&self) -> Vec<u16> {
        self.tls_ports.values().copied().collect()
    }

    /// Adds `user` on every node.
    pub fn add_user(&self, user: &AclUser) {
        self.cluster.add_user(user);
    }

    /// `ACL SETUSER name rules...` on every node (`>new` adds a password,
    /// `<old` removes one): a password rotation is three of these.
    pub fn set_user(&self, name: &str, rules: &[&str]) {
        for node in self.cluster.servers() {
            let () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg(name)
                .arg(rules)
                .query(&mut node.connection())
                .unwrap_or_else(|err| panic!("ACL SETUSER {name} on {}: {err}", node.addr()));
        }
    }

    /// Rotates every node to `ca` the way a rolling rotation keeps the
    /// cluster bus and replication up: all nodes trust the old CAs and `ca`,
    /// then each presents a new certificate of `ca`, then all trust only
    /// `ca`. Connections made before keep their sessions.
    pub fn use_ca(&self, ca: &TestCa) {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let files = TlsFiles::write(
            self.dir.path(),
            &format!("nodes-{generation}"),
            ca,
            &ca.node_cert(),
        );
        let old_ca = self
            .dir
            .path()
            .join(format!("nodes-{}-ca.pem", generation - 1));
        let old = std::fs::read_to_string(&old_ca)
            .unwrap_or_else(|err| panic!("reading {}: {err}", old_ca.display()));
        let both = self.dir.path().join(format!("nodes-{generation}-both.pem"));
        write_by_rename(&both, &format!("{old}{}", ca.pem()));
        self.config_set(&[("tls-ca-cert-file", &both)]);
        self.config_set(&[("tls-cert-file", &files.cert), ("tls-key-file", &files.key)]);
        self.config_set(&[("tls-ca-cert-file", &files.ca)]);
    }

    /// `CONFIG SET` of file parameters on every node.
    fn config_set(&self, pairs: &[(&str, &Path)]) {
        for node in self.cluster.servers() {
            let mut set = redis::cmd("CONFIG");
            set.arg("SET");
            for (name, path) in pairs {
                set.arg(*name).arg(path.as_os_str().as_encoded_bytes());
            }
            let () = set
                .query(&mut node.connection())
                .unwrap_or_else(|err| panic!("CONFIG SET {pairs:?} on {}: {err}", node.addr()));
        }
    }

    /// Per node (plain port), the `CLIENT LIST` lines of the normal clients
    /// that came in on its TLS port (replication links left out).
    pub fn tls_clients(&self) -> BTreeMap<u16, Vec<String>> {
        self.cluster
            .servers()
            .iter()
            .map(|node| {
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .arg("TYPE")
                    .arg("normal")
                    .query(&mut node.connection())
                    .unwrap_or_else(|err| panic!("CLIENT LIST on {}: {err}", node.addr()));
                let lines = clients_on_port(&list, self.tls_port(node.port()));
                (node.port(), lines)
            })
            .collect()
    }

    /// Closes, on every node, the normal clients that came in on its TLS
    /// port (and, with `user`, only that user's): each must reconnect, with
    /// a new handshake and login. Returns how many were closed.
    pub fn kill_tls_clients(&self, user: Option<&str>) -> u64 {
        self.cluster
            .servers()
            .iter()
            .map(|node| {
                let mut kill = redis::cmd("CLIENT");
                kill.arg("KILL")
                    .arg("LADDR")
                    .arg(format!("127.0.0.1:{}", self.tls_port(node.port())))
                    .arg("TYPE")
                    .arg("normal");
                if let Some(user) = user {
                    kill.arg("USER").arg(user);
                }
                kill.query::<u64>(&mut node.connection())
                    .unwrap_or_else(|err| panic!("CLIENT KILL on {}: {err}", node.addr()))
            })
            .sum()
    }

    /// Per node (plain port), how many times it ran `command` (`INFO
    /// commandstats`; 0 before the first time).
    pub fn command_calls(&self, command: &str) -> BTreeMap<u16, u64> {
        let field = format!("cmdstat_{}:calls=", command.to_ascii_lowercase());
        self.cluster
            .servers()
            .iter()
            .map(|node| {
                let stats = node.info("commandstats");
                let calls = stats
                    .lines()
                    .find_map(|line| line.strip_prefix(&field))
                    .and_then(|rest| rest.split(',').next())
                    .and_then(|calls| calls.parse().ok())
                    .unwrap_or(0);
                (node.port(), calls)
            })
            .collect()
    }
}
