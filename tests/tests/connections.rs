//! Runtime connections: producer and worker over TLS, certificates and passwords rotated while workers run (read again at reconnection, no job lost), and bad connection input named.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::error::ConnectionError;
use queuegen_runtime::{
    ConnectOptions, Error, Handler, JobContext, JobError, Outcome, QueueConfig, Redis, Worker,
};
use queuegen_tests::fixtures::{quick_recovery_config, TestJob};
use queuegen_tests::support::{
    deliver_to, init_tracing, publish_named, spawn_worker, unique_prefix, wait_handled_and_acked,
    wait_until,
};
use queuegen_tests::tls::{write_by_rename, ClientAuth, ClientRotation, TestCa, TlsServer};
use queuegen_tests::{library, AclUser, RedisServer};

/// How long every wait for the jobs to settle may take.
const SETTLE: Duration = Duration::from_secs(15);

/// Records the `job_id` of every job it handles.
#[derive(Clone, Default)]
struct Recorder {
    handled: Arc<Mutex<BTreeSet<String>>>,
}

impl Recorder {
    fn handled(&self) -> BTreeSet<String> {
        self.handled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Handler<TestJob> for Recorder {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        self.handled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(ctx.job_id().to_owned());
        Ok(Outcome::Done)
    }
}

/// Quick recovery, so that a job whose ack met a killed connection is
/// claimed and settled within the test.
fn config(name: &str) -> QueueConfig {
    quick_recovery_config(&unique_prefix(name), 2)
}

/// Waits until every job of `ids` was handled and nothing of the queue is
/// pending: each published job handled and acknowledged.
async fn wait_settled(
    server: &RedisServer,
    config: &QueueConfig,
    handler: &Recorder,
    ids: &[String],
) {
    let admin = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("the harness's plain connection");
    wait_handled_and_acked(&admin, config, ids, SETTLE, || handler.handled()).await;
}

/// Waits until some client on the TLS port is blocked in `XREADGROUP`.
async fn wait_blocked_reader(tls: &TlsServer) {
    wait_until(SETTLE, "a worker blocks in XREADGROUP", || async {
        tls.tls_clients().iter().any(|client| {
            client.contains("cmd=xreadgroup")
                && client
                    .split(' ')
                    .any(|field| field.starts_with("flags=") && field.contains('b'))
        })
    })
    .await;
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("queuegen-connections-")
        .tempdir()
        .expect("a temporary directory")
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_a_server_certificate_replaced_under_a_blocked_worker_loses_no_job() {
    if queuegen_tests::tls::skip_without_tls() {
        return;
    }
    init_tracing();
    let ca = TestCa::new("queuegen test CA");
    let tls = TlsServer::start(&ca, ClientAuth::None);
    let dir = temp_dir();
    let ca_file = dir.path().join("ca.pem");
    write(&ca_file, ca.pem());
    let options = ConnectOptions::new().tls_ca_file(&ca_file);
    let config = config("tls-server-cert");

    let redis = Redis::connect_with(tls.url(), options.clone())
        .await
        .unwrap_or_else(|err| panic!("connecting over TLS: {err}"));
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    // Jobs a worker read and then vanished with: the running worker must
    // claim them once they are idle for claim_min_idle.
    let mut ids = publish_named(&redis, &config, "stalled", 4).await;
    let mut admin = tls.server.async_connection().await;
    for key in config.ready_keys() {
        deliver_to(&mut admin, &key, &config.group, "vanished").await;
    }

    let handler = Recorder::default();
    let worker = spawn_worker(Worker::new(&redis, config.clone(), handler.clone()));
    wait_blocked_reader(&tls).await;
    // A new certificate of the same CA, then every TLS connection cut: the
    // worker's blocked reader and shared connection must handshake again,
    // now against the new certificate.
    tls.use_ca(&ca);
    assert!(tls.kill_tls_clients() > 0, "the worker had TLS connections");

    let producer = Redis::connect_with(tls.url(), options).await.unwrap();
    ids.extend(publish_named(&producer, &config, "after", 20).await);
    wait_settled(&tls.server, &config, &handler, &ids).await;
    assert!(
        !tls.tls_clients().is_empty(),
        "the worker reconnected over TLS"
    );

    let report = worker.stop().await;
    assert!(
        report.claimed >= 4,
        "the stalled jobs were claimed: {report:?}"
    );
    assert_eq!(report.dead_lettered, 0, "{report:?}");
    assert_eq!(handler.handled().len(), ids.len(), "each job handled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mutual_tls_a_ca_and_client_certificate_replaced_on_disk_are_used_by_the_next_connection(
) {
    if queuegen_tests::tls::skip_without_tls() {
        return;
    }
    init_tracing();
    // The worker's files, rotated in place later; and a copy of the old
    // ones that stays, to show that the server no longer takes them.
    let rotation = ClientRotation::write("old CA", "new CA");
    let files = &rotation.files;
    let tls = TlsServer::start(&rotation.old_ca, ClientAuth::Required);
    let config = config("tls-client-rotation");

    // Without a client certificate the server refuses the handshake.
    let refused = Redis::connect_with(tls.url(), ConnectOptions::new().tls_ca_file(&files.ca))
        .await
        .expect_err("a client without a certificate is refused");
    assert!(refused.to_string().contains("over TLS"), "{refused}");

    let redis = Redis::connect_with(tls.url(), files.mutual_tls_options())
        .await
        .unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let handler = Recorder::default();
    let worker = spawn_worker(Worker::new(&redis, config.clone(), handler.clone()));
    let mut ids = publish_named(&redis, &config, "before", 10).await;
    wait_settled(&tls.server, &config, &handler, &ids).await;
    wait_blocked_reader(&tls).await;
    wait_tls_subscriber(&tls).await;

    // Rotation: the client's files now hold the new CA and a certificate
    // of it; the server presents and trusts only the new CA.
    rotation.replace_files();
    tls.use_ca(&rotation.new_ca);
    assert!(tls.kill_tls_clients() > 0, "the worker had TLS connections");
    rotation.assert_stale_refused(tls.url()).await;

    let producer = Redis::connect_with(tls.url(), files.mutual_tls_options())
        .await
        .unwrap();
    ids.extend(publish_named(&producer, &config, "after", 10).await);
    // Only a worker that read its files again can read and ack these.
    wait_settled(&tls.server, &config, &handler, &ids).await;
    // Its pause subscription came back over TLS with the new files too.
    wait_tls_subscriber(&tls).await;
    let report = worker.stop().await;
    assert_eq!(report.dead_lettered, 0, "{report:?}");
    assert_eq!(handler.handled().len(), ids.len(), "each job handled");
}

/// The worker's pause subscriber (`sub=1` in `CLIENT LIST`) is connected
/// over TLS, with the same files as its other connections.
async fn wait_tls_subscriber(tls: &TlsServer) {
    wait_until(
        Duration::from_secs(10),
        "a pause subscriber over TLS",
        || {
            let subscribed = tls
                .tls_clients()
                .iter()
                .any(|line| line.split(' ').any(|field| field == "sub=1"));
            async move { subscribed }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_rotated_while_workers_run_is_read_from_the_file_at_reconnection() {
    init_tracing();
    let server = RedisServer::start();
    server.add_user(&AclUser::new("worker", "first"));
    let dir = temp_dir();
    let password_file = dir.path().join("password");
    write(&password_file, "first\n");
    let options = ConnectOptions::new()
        .username("worker")
        .password_file(&password_file);
    let config = config("password-rotation");

    let admin = Redis::connect(server.url()).await.unwrap();
    library::load(&admin).await;
    ensure_groups(&admin, &config).await.unwrap();
    let handler = Recorder::default();
    let mut workers = Vec::new();
    for _ in 0..2 {
        let redis = Redis::connect_with(server.url(), options.clone())
            .await
            .unwrap_or_else(|err| panic!("connecting as worker: {err}"));
        workers.push(spawn_worker(Worker::new(
            &redis,
            config.clone(),
            handler.clone(),
        )));
    }
    let mut ids = publish_named(&admin, &config, "before", 20).await;
    wait_settled(&server, &config, &handler, &ids).await;

    // The rotation as an operator does it: add the new password, hand it to
    // the workers (the Secret's file), remove the old one, cut the sessions.
    let mut conn = server.connection();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("worker")
        .arg(">second")
        .query(&mut conn)
        .unwrap();
    write_by_rename(&password_file, "second\n");
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("worker")
        .arg("<first")
        .query(&mut conn)
        .unwrap();
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("worker")
        .query(&mut conn)
        .unwrap();
    assert!(
        killed >= 4,
        "each worker's reader and shared connection: {killed}"
    );

    ids.extend(publish_named(&admin, &config, "after", 20).await);
    wait_settled(&server, &config, &handler, &ids).await;
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
    assert!(
        list.lines().any(|line| line.contains(" user=worker ")),
        "the workers are back, logged in with the new password: {list}"
    );
    for worker in workers {
        let report = worker.stop().await;
        assert_eq!(report.dead_lettered, 0, "{report:?}");
    }
    assert_eq!(handler.handled().len(), ids.len(), "each job handled");

    // The old password is refused, naming the user and where it came from.
    write(&password_file, "first");
    let err = Redis::connect_with(server.url(), options)
        .await
        .expect_err("the old password is refused");
    assert!(
        matches!(
            err,
            Error::Connection(ConnectionError::Authentication { .. })
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("\"worker\""), "{message}");
    assert!(
        message.contains(&password_file.display().to_string()),
        "{message}"
    );
}

#[tokio::test]
async fn bad_connection_input_is_an_error_naming_what_and_where() {
    if queuegen_tests::tls::skip_without_tls() {
        return;
    }
    let ca = TestCa::new("queuegen test CA");
    let other_ca = TestCa::new("someone else's CA");
    let tls = TlsServer::start(&ca, ClientAuth::None);
    let dir = temp_dir();

    let missing = dir.path().join("missing-ca.pem");
    let err = Redis::connect_with(tls.url(), ConnectOptions::new().tls_ca_file(&missing))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Connection(ConnectionError::ConnectionFile { .. })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("reading the TLS CA file {}: ", missing.display())),
        "{err}"
    );

    let not_pem = dir.path().join("not-a-ca.pem");
    write(&not_pem, "this is not a certificate\n");
    let err = Redis::connect_with(tls.url(), ConnectOptions::new().tls_ca_file(&not_pem))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Connection(ConnectionError::InvalidConnectionFile { .. })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("not-a-ca.pem"), "{err}");

    // A CA that did not sign the server's certificate: the handshake fails,
    // and the error says which CA file was trusted.
    let other_file = dir.path().join("other-ca.pem");
    write(&other_file, other_ca.pem());
    let err = Redis::connect_with(tls.url(), ConnectOptions::new().tls_ca_file(&other_file))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&format!("127.0.0.1:{}", tls.tls_port()))
            && message.contains("other-ca.pem"),
        "{message}"
    );

    // TLS files with a plain URL.
    let ca_file = dir.path().join("ca.pem");
    write(&ca_file, ca.pem());
    let err = Redis::connect_with(
        tls.server.url(),
        ConnectOptions::new().tls_ca_file(&ca_file),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("not rediss://"), "{err}");

    // A wrong password, in the URL.
    tls.server.add_user(&AclUser::new("producer", "right"));
    let err = Redis::connect_with(
        tls.url_with("producer", "wrong"),
        ConnectOptions::new().tls_ca_file(&ca_file),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Connection(ConnectionError::Authentication { .. })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("user \"producer\" with the password from the URL"),
        "{err}"
    );
    // And the right one, over TLS, as a user.
    Redis::connect_with(
        tls.url_with("producer", "right"),
        ConnectOptions::new().tls_ca_file(&ca_file),
    )
    .await
    .unwrap_or_else(|err| panic!("the right password over TLS: {err}"));
}
