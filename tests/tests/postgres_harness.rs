//! The PostgreSQL harness itself: private servers on distinct ports (never the system's 5432), gone after drop, SQL files applied or refused with the reason, and databases that isolate tests within one server.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use queuegen_tests::PostgresServer;

/// The port Debian's own cluster listens on; the harness must never use it.
const SYSTEM_PORT: u16 = 5432;

#[test]
fn parallel_servers_are_private() {
    let starting: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(PostgresServer::start))
        .collect();
    let servers: Vec<PostgresServer> = starting
        .into_iter()
        .map(|thread| thread.join().expect("PostgresServer::start panicked"))
        .collect();
    let (first, second) = (&servers[0], &servers[1]);
    assert_ne!(first.port(), second.port());
    assert_ne!(first.pid(), second.pid());
    assert_ne!(first.data_dir(), second.data_dir());

    for server in &servers {
        assert_ne!(
            server.port(),
            SYSTEM_PORT,
            "never the system cluster's port"
        );
        assert_eq!(server.psql("SELECT 1"), "1");
        // The server answering on the port runs from this harness's data dir.
        assert_eq!(
            Path::new(&server.psql("SHOW data_directory")),
            server.data_dir()
        );
        assert_eq!(server.psql("SHOW port"), server.port().to_string());
        assert_eq!(server.psql("SHOW listen_addresses"), "127.0.0.1");
        assert_eq!(server.psql("SELECT current_user"), "queuegen");
        assert_eq!(server.psql("SELECT current_database()"), "queuegen");
        assert_eq!(
            server.url(),
            format!("postgres://queuegen@127.0.0.1:{}/queuegen", server.port())
        );
        let dir = server.data_dir();
        let in_tmp = dir.parent().and_then(Path::file_name).unwrap();
        assert!(
            in_tmp.to_string_lossy().starts_with("queuegen-pg-"),
            "{}",
            dir.display()
        );
    }

    first.psql("CREATE TABLE only_in_first (id int)");
    assert_eq!(
        first.psql("SELECT to_regclass('only_in_first') IS NULL"),
        "f"
    );
    assert_eq!(
        second.psql("SELECT to_regclass('only_in_first') IS NULL"),
        "t",
        "each test gets its own server"
    );
}

#[test]
fn settings_default_to_fast_and_can_be_overridden() {
    let fast = PostgresServer::start();
    assert_eq!(fast.psql("SHOW fsync"), "off");
    assert_eq!(fast.psql("SHOW full_page_writes"), "off");
    assert_eq!(fast.psql("SHOW max_connections"), "200");

    let durable = PostgresServer::start_with(&[("fsync", "on"), ("work_mem", "8MB")]);
    assert_eq!(durable.psql("SHOW fsync"), "on");
    assert_eq!(durable.psql("SHOW work_mem"), "8MB");
    assert_eq!(durable.psql("SHOW full_page_writes"), "off");
}

#[test]
fn server_runs_as_its_data_dirs_owner_never_root() {
    let server = PostgresServer::start();
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let uid: u32 = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1)) // the effective uid
        .and_then(|uid| uid.parse().ok())
        .expect("a Uid: line");
    // As root the harness runs PostgreSQL as the postgres user.
    assert_ne!(uid, 0, "the postmaster runs as root");
    let owner = std::fs::metadata(server.data_dir()).unwrap();
    assert_eq!(
        owner.uid(),
        uid,
        "the data dir belongs to the server's user"
    );
    assert_eq!(
        owner.mode() & 0o777,
        0o700,
        "initdb wants a private data dir"
    );
}

#[test]
#[should_panic(expected = "unrecognized configuration parameter")]
fn a_server_that_cannot_start_panics_with_its_log() {
    PostgresServer::start_with(&[("no_such_setting", "1")]);
}

#[test]
fn server_is_gone_after_drop() {
    let server = PostgresServer::start();
    let (pid, port, data_dir) = (server.pid(), server.port(), server.data_dir());
    let temp_dir = data_dir.parent().unwrap().to_owned();
    assert!(is_alive(pid), "postmaster {pid} runs");
    TcpStream::connect(("127.0.0.1", port)).expect("the server accepts connections");

    drop(server);
    assert!(!is_alive(pid), "postmaster {pid} still runs after drop");
    let refused =
        match TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)) {
            Ok(_) => panic!("port {port} still accepts connections after drop"),
            Err(err) => err,
        };
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "port {port}");
    assert!(!temp_dir.exists(), "{} left behind", temp_dir.display());
}

#[test]
fn stop_keeps_the_log_until_drop() {
    let mut server = PostgresServer::start();
    let pid = server.pid();
    server.stop();
    assert!(!is_alive(pid), "postmaster {pid} still runs after stop");
    assert!(
        server
            .log()
            .contains("database system is ready to accept connections"),
        "{}",
        server.log()
    );
    server.stop(); // stopping twice does nothing
}

#[test]
fn psql_file_applies_a_file_and_names_the_problem_in_a_bad_one() {
    let server = PostgresServer::start();
    // A directory only we can read: as root the harness's psql runs as the
    // postgres user, so psql_file must not depend on reading it there.
    let files = tempfile::tempdir().unwrap();

    let good = files.path().join("0001_jobs.sql");
    std::fs::write(
        &good,
        "CREATE TABLE jobs (id bigint PRIMARY KEY, body text NOT NULL);\n\
         INSERT INTO jobs VALUES (1, 'a'), (2, 'b');\n",
    )
    .unwrap();
    server.psql_file(&good).expect("a valid migration applies");
    assert_eq!(server.psql("SELECT count(*) FROM jobs"), "2");

    let bad = files.path().join("0002_broken.sql");
    std::fs::write(
        &bad,
        "CREATE TABLE before_error (id int);\n\
         SELEC 1;\n\
         CREATE TABLE after_error (id int);\n",
    )
    .unwrap();
    let problem = server.psql_file(&bad).expect_err("a broken file fails");
    assert!(
        problem.contains("0002_broken.sql"),
        "names the file: {problem}"
    );
    assert!(problem.contains(":2:"), "names the line: {problem}");
    assert!(
        problem.contains(r#"syntax error at or near "SELEC""#),
        "names the problem: {problem}"
    );
    // ON_ERROR_STOP: nothing after the error ran.
    assert_eq!(
        server.psql("SELECT to_regclass('before_error') IS NULL"),
        "f"
    );
    assert_eq!(
        server.psql("SELECT to_regclass('after_error') IS NULL"),
        "t"
    );

    let missing = files.path().join("missing.sql");
    let problem = server
        .psql_file(&missing)
        .expect_err("a missing file fails");
    assert!(problem.contains("missing.sql"), "{problem}");
}

#[test]
fn create_database_isolates_a_test() {
    let server = PostgresServer::start();
    let url = server.create_database("isolated_test");
    assert_eq!(
        url,
        format!(
            "postgres://queuegen@127.0.0.1:{}/isolated_test",
            server.port()
        )
    );
    assert_eq!(
        server.psql_db("isolated_test", "SELECT current_database()"),
        "isolated_test"
    );
    server.psql_db("isolated_test", "CREATE TABLE only_here (id int)");
    server.psql_db("isolated_test", "INSERT INTO only_here VALUES (7)");
    assert_eq!(
        server.psql_db("isolated_test", "SELECT id FROM only_here"),
        "7"
    );
    assert_eq!(
        server.psql("SELECT to_regclass('only_here') IS NULL"),
        "t",
        "the default database does not see it"
    );

    let other = server.create_database("other_test");
    assert_ne!(url, other);
    assert_eq!(
        server.psql_db("other_test", "SELECT to_regclass('only_here') IS NULL"),
        "t"
    );
}

/// Whether `pid` runs: not gone and not a zombie (a killed postmaster is
/// reparented, and its new parent may not reap it at once).
fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, None | Some('Z') | Some('X'))
        }
        Err(_) => false,
    }
}
