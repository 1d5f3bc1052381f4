//! TLS on a 6-node Cluster: workers keep running while the password (live re-AUTH, then forced reconnections) and the certificates (mutual TLS) are rotated on every node and on disk; no job lost or done twice, no restart.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{
    ConnectOptions, Handler, JobContext, JobError, Outcome, QueueConfig, Redis, Worker,
};
use queuegen_tests::fixtures::{quick_recovery_config, TestJob};
use queuegen_tests::support::{
    init_tracing, publish_named, spawn_worker, unique_prefix, wait_handled_and_acked, wait_until,
};
use queuegen_tests::tls::{write_by_rename, ClientAuth, ClientRotation, TestCa, TlsCluster};
use queuegen_tests::{library, AclUser};

/// How long every wait for the jobs to settle may take.
const SETTLE: Duration = Duration::from_secs(30);

/// Counts how often each job was handled.
#[derive(Clone, Default)]
struct Tally {
    handled: Arc<Mutex<HashMap<String, u32>>>,
}

impl Tally {
    fn handled(&self) -> HashMap<String, u32> {
        self.handled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every job of `ids` handled exactly once: none lost, none done twice.
    fn assert_each_once(&self, ids: &[String]) {
        let handled = self.handled();
        let missing: Vec<&String> = ids.iter().filter(|id| !handled.contains_key(*id)).collect();
        let twice: BTreeMap<&String, &u32> = handled.iter().filter(|(_, &n)| n > 1).collect();
        assert!(missing.is_empty(), "jobs lost: {missing:?}");
        assert!(twice.is_empty(), "jobs handled more than once: {twice:?}");
        assert_eq!(handled.len(), ids.len(), "only the published jobs");
    }
}

impl Handler<TestJob> for Tally {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        *self
            .handled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(ctx.job_id().to_owned())
            .or_default() += 1;
        Ok(Outcome::Done)
    }
}

/// Six partitions (spread over the three primaries), quick recovery.
fn config(name: &str) -> QueueConfig {
    quick_recovery_config(&unique_prefix(name), 6)
}

/// Waits until every job of `ids` was handled and nothing of the queue is
/// pending, read through the harness's plain Cluster connection.
async fn wait_settled(tls: &TlsCluster, config: &QueueConfig, handler: &Tally, ids: &[String]) {
    let admin = tls
        .cluster
        .client()
        .get_async_connection()
        .await
        .expect("the harness's plain Cluster connection");
    wait_handled_and_acked(&admin, config, ids, SETTLE, || {
        handler.handled().into_keys().collect()
    })
    .await;
}

/// Per primary (plain port), the IDs of the clients logged in as `user`.
fn client_ids(tls: &TlsCluster, user: &str) -> BTreeMap<u16, BTreeSet<String>> {
    let user_field = format!("user={user}");
    tls.tls_clients()
        .into_iter()
        .map(|(port, lines)| {
            let ids = lines
                .iter()
                .filter(|line| line.split(' ').any(|field| field == user_field))
                .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
                .map(str::to_owned)
                .collect();
            (port, ids)
        })
        .collect()
}

/// [`client_ids`] once they stay the same for a second: the workers'
/// start (its checks open and close direct connections) is over.
async fn settled_client_ids(tls: &TlsCluster, user: &str) -> BTreeMap<u16, BTreeSet<String>> {
    let mut last = client_ids(tls, user);
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = client_ids(tls, user);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the clients of {user} kept changing: {last:?}");
}

fn primary_ports(tls: &TlsCluster) -> Vec<u16> {
    tls.cluster
        .primaries()
        .iter()
        .map(|node| node.port)
        .collect()
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("queuegen-cluster-tls-")
        .tempdir()
        .expect("a temporary directory")
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
}

/// A TLS Cluster with the user `worker` (password `first`), a CA file and
/// a password file holding `first`, and options that use both.
struct PasswordSetup {
    tls: TlsCluster,
    _dir: tempfile::TempDir,
    password_file: std::path::PathBuf,
    options: ConnectOptions,
}

fn password_setup() -> PasswordSetup {
    let ca = TestCa::new("cluster CA");
    let tls = TlsCluster::start(&ca, ClientAuth::None);
    tls.add_user(&AclUser::new("worker", "first"));
    let dir = temp_dir();
    let ca_file = dir.path().join("ca.pem");
    write(&ca_file, ca.pem());
    let password_file = dir.path().join("password");
    write(&password_file, "first\n");
    let options = ConnectOptions::new()
        .username("worker")
        .password_file(&password_file)
        .tls_ca_file(&ca_file);
    PasswordSetup {
        tls,
        _dir: dir,
        password_file,
        options,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_rotated_on_every_node_reaches_live_and_new_cluster_connections_over_tls() {
    if queuegen_tests::tls::skip_without_tls() {
        return;
    }
    init_tracing();
    let PasswordSetup {
        tls,
        _dir,
        password_file,
        options,
    } = password_setup();
    let config = config("cluster-tls-password");
    let admin = Redis::connect(tls.cluster.url()).await.unwrap();
    library::load(&admin).await;
    ensure_groups(&admin, &config).await.unwrap();

    let handler = Tally::default();
    let mut workers = Vec::new();
    for _ in 0..2 {
        let redis = Redis::connect_with(tls.url(), options.clone())
            .await
            .unwrap_or_else(|err| panic!("connecting to the Cluster over TLS as worker: {err}"));
        assert!(redis.is_cluster());
        workers.push(spawn_worker(Worker::new(
            &redis,
            config.clone(),
            handler.clone(),
        )));
    }
    let producer = Redis::connect_with(tls.url(), options.clone())
        .await
        .unwrap();
    let mut ids = publish_named(&producer, &config, "before", 30).await;
    wait_settled(&tls, &config, &handler, &ids).await;

    // 1. Live re-AUTH: the new password on every node, then in the file; the
    // connections, none of them cut, log in again with it; then the old
    // password goes. Jobs published meanwhile.
    let primaries = primary_ports(&tls);
    let logged_in = settled_client_ids(&tls, "worker").await;
    let auth_before = tls.command_calls("auth");
    tls.set_user("worker", &[">second"]);
    write_by_rename(&password_file, "second\n");
    ids.extend(publish_named(&producer, &config, "during", 30).await);
    wait_until(
        Duration::from_secs(10),
        "every live connection on every primary sends AUTH again",
        || async {
            let auth = tls.command_calls("auth");
            primaries
                .iter()
                .all(|port| auth[port] - auth_before[port] >= logged_in[port].len() as u64)
        },
    )
    .await;
    tls.set_user("worker", &["<first"]);
    ids.extend(publish_named(&producer, &config, "re-authenticated", 30).await);
    wait_settled(&tls, &config, &handler, &ids).await;
    let still = client_ids(&tls, "worker");
    for port in &primaries {
        assert!(
            !logged_in[port].is_empty() && logged_in[port].is_subset(&still[port]),
            "on {port} the same connections are still there, now on the new password: \
             before {:?}, after {:?}",
            logged_in[port],
            still[port]
        );
    }

    // 2. Forced reconnections: a third password, and every worker
    // connection cut on every node; they come back with the file's password.
    tls.set_user("worker", &[">third"]);
    write_by_rename(&password_file, "third\n");
    tokio::time::sleep(Duration::from_secs(2)).await;
    tls.set_user("worker", &["<second"]);
    let killed = tls.kill_tls_clients(Some("worker"));
    assert!(killed >= 6, "workers' and producer's connections: {killed}");
    // The producer's connections were cut too. A publish is not retried here
    // (a retry after a reply lost could append a job twice), so wait until
    // every primary answers it again: on a loaded machine the TLS handshakes
    // of every cut connection can outlast one response timeout.
    wait_until(
        Duration::from_secs(30),
        "the producer reaches every partition again",
        || async {
            let mut conn = producer.shared();
            for key in config.ready_keys() {
                let len: redis::RedisResult<u64> =
                    redis::cmd("XLEN").arg(&key).query_async(&mut conn).await;
                if len.is_err() {
                    return false;
                }
            }
            true
        },
    )
    .await;
    ids.extend(publish_named(&producer, &config, "after", 30).await);
    wait_settled(&tls, &config, &handler, &ids).await;
    let back = client_ids(&tls, "worker");
    for port in &primaries {
        assert!(
            !back[port].is_empty() && back[port].is_disjoint(&logged_in[port]),
            "on {port} new connections logged in with the third password: {back:?}"
        );
    }
    for worker in workers {
        let report = worker.stop().await;
        assert_eq!(report.dead_lettered, 0, "{report:?}");
    }
    handler.assert_each_once(&ids);
}

/// Fails before the Cluster followed its password file: the connection
/// the Cluster client made at start logs in again with the password read
/// at start, which the server no longer takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_cluster_connection_logs_in_again_with_the_rotated_password_file() {
    if queuegen_tests::tls::skip_without_tls() {
        return;
    }
    init_tracing();
    let setup = password_setup();
    let tls = &setup.tls;
    let redis = Redis::connect_with(tls.url(), setup.options.clone())
        .await
        .unwrap();
    let mut shared = redis.shared();
    // A key on each primary (hash tags of different slots).
    let keys: Vec<String> = (0..12).map(|n| format!("{{rotation-{n}}}")).collect();
    for key in &keys {
        let () = redis::cmd("SET")
            .arg(key)
            .arg("before")
            .query_async(&mut shared)
            .await
            .unwrap();
    }
    tls.set_user("worker", &[">second"]);
    write_by_rename(&setup.password_file, "second\n");
    tokio::time::sleep(Duration::from_secs(2)).await;
    tls.set_user("worker", &["<first"]);
    assert!(tls.kill_tls_clients(Some("worker")) > 0);
    for key in &keys {
        let set: redis::RedisResult<()> = redis::cmd("SET")
            .arg(key)
            .arg("after")
            .query_async(&mut shared)
            .await;
        set.unwrap_or_else(|err| panic!("SET {key} after the rotation: {err}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mutual_tls_certificates_rotated_on_every_node_and_on_disk_reach_the_next_cluster_connections(
) {
    if queuegen_tests::tls::skip_without_tls() {
        return;
    }
    init_tracing();
    let rotation = ClientRotation::write("old cluster CA", "new cluster CA");
    let tls = TlsCluster::start(&rotation.old_ca, ClientAuth::Required);
    let config = config("cluster-tls-certs");
    let admin = Redis::connect(tls.cluster.url()).await.unwrap();
    library::load(&admin).await;
    ensure_groups(&admin, &config).await.unwrap();

    let redis = Redis::connect_with(tls.url(), rotation.files.mutual_tls_options())
        .await
        .unwrap();
    assert!(redis.is_cluster());
    let handler = Tally::default();
    let worker = spawn_worker(Worker::new(&redis, config.clone(), handler.clone()));
    let mut ids = publish_named(&admin, &config, "before", 30).await;
    wait_settled(&tls, &config, &handler, &ids).await;
    wait_tls_subscriber(&tls).await;

    // The rotation: every node moves to the new CA (rolling), then the
    // worker's files are replaced on disk. Its connections stay up.
    tls.use_ca(&rotation.new_ca);
    rotation.replace_files();
    ids.extend(publish_named(&admin, &config, "during", 30).await);
    wait_settled(&tls, &config, &handler, &ids).await;

    // Every TLS connection cut on every node: only connections made from
    // the new files get back in.
    assert!(
        tls.kill_tls_clients(None) > 0,
        "the worker had TLS connections"
    );
    kill_subscribers(&tls);
    rotation.assert_stale_refused(tls.url()).await;
    ids.extend(publish_named(&admin, &config, "after", 30).await);
    wait_settled(&tls, &config, &handler, &ids).await;
    let clients = tls.tls_clients();
    assert!(
        clients.values().any(|lines| !lines.is_empty()),
        "the worker reconnected over TLS: {clients:?}"
    );
    // Its pause subscription came back over TLS with the new files too.
    wait_tls_subscriber(&tls).await;
    let report = worker.stop().await;
    assert_eq!(report.dead_lettered, 0, "{report:?}");
    handler.assert_each_once(&ids);
}

/// The worker's pause subscriber is connected over TLS to some node
/// (`CLIENT LIST TYPE pubsub`, on a TLS port), with the same files as its
/// other connections.
async fn wait_tls_subscriber(tls: &TlsCluster) {
    queuegen_tests::support::wait_until(
        Duration::from_secs(10),
        "a pause subscriber over TLS",
        || {
            let subscribed = tls.cluster.servers().iter().any(|node| {
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query(&mut node.connection())
                    .unwrap();
                let laddr = format!("laddr=127.0.0.1:{}", tls.tls_port(node.port()));
                list.lines()
                    .any(|line| line.split(' ').any(|field| field == laddr))
            });
            async move { subscribed }
        },
    )
    .await;
}

/// Closes every subscriber connection on every node.
fn kill_subscribers(tls: &TlsCluster) {
    for node in tls.cluster.servers() {
        let _: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut node.connection())
            .unwrap();
    }
}
