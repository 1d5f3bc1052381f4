//! A small application on PostgreSQL for the results and outbox tests: the `documents` table a handler writes in its job's transaction, that handler, and the database setup.
//!
//! The same code runs in the tests' own workers and in the `pg-process`
//! binary the crash tests kill, so a crashed process and its successor
//! disagree on nothing but the crash.

use queuegen_runtime::postgres::{migrations, Begun, PgResults};
use queuegen_runtime::{Handler, JobContext, JobError, Outcome};

use crate::fixtures::TestJob;

/// The schema of queuegen's tables in the tests.
pub const SCHEMA: &str = "queuegen";

/// The application's own tables: each handled job leaves one `documents`
/// row (the business change) and one `documents_log` row written before it
/// in the same transaction (a partial change, were commits not atomic).
/// A `subject_ref` of `violates-check` breaks the CHECK constraint.
pub const APP_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS documents (
        job_id text NOT NULL,
        subject_ref text NOT NULL CHECK (subject_ref <> 'violates-check'),
        attempt integer NOT NULL,
        stream_id text NOT NULL
    );
    CREATE TABLE IF NOT EXISTS documents_log (job_id text NOT NULL);
";

/// A `subject_ref` whose first attempt fails with a serialization failure
/// (SQLSTATE 40001) after its first insert: a transient database error.
pub const SERIALIZATION_ONCE: &str = "serialization-once";
/// A `subject_ref` the CHECK constraint refuses (SQLSTATE 23514): permanent.
pub const VIOLATES_CHECK: &str = "violates-check";

/// queuegen's migrations for [`SCHEMA`], as `queuegen generate` writes them.
pub fn migration_sql() -> String {
    migrations::migrations("queuegen-tests", SCHEMA)
        .into_iter()
        .map(|migration| migration.sql)
        .collect()
}

/// Writes a `documents` row for each job, with its marker, in one transaction.
#[derive(Clone)]
pub struct DocumentsHandler {
    pub results: PgResults,
}

impl Handler<TestJob> for DocumentsHandler {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let tx = match self.results.begin(ctx).await? {
            Begun::New(tx) => tx,
            Begun::Finished(_) => return Ok(Outcome::Done),
        };
        tx.execute(
            "INSERT INTO documents_log (job_id) VALUES ($1)",
            &[&ctx.job_id()],
        )
        .await?;
        if job.subject_ref == SERIALIZATION_ONCE && ctx.attempt() == 1 {
            tx.batch_execute(
                "DO $$ BEGIN RAISE EXCEPTION 'simulated serialization failure' \
                 USING ERRCODE = 'serialization_failure'; END $$",
            )
            .await?;
        }
        let attempt = ctx.attempt() as i32;
        tx.execute(
            "INSERT INTO documents (job_id, subject_ref, attempt, stream_id) VALUES ($1, $2, $3, $4)",
            &[&ctx.job_id(), &job.subject_ref, &attempt, &ctx.stream_id()],
        )
        .await?;
        tx.commit(ctx.stream_id().as_bytes()).await?;
        Ok(Outcome::Done)
    }
}

/// A plain connection to `url` for a test's own statements (its connection
/// task runs until the client is dropped).
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|err| panic!("connecting to {url}: {err}"));
    tokio::spawn(connection);
    client
}

/// Applies queuegen's migrations and the application's tables to `url`'s database.
pub async fn prepare(url: &str) {
    let client = connect(url).await;
    client
        .batch_execute(&migration_sql())
        .await
        .unwrap_or_else(|err| panic!("applying the migrations to {url}: {err:?}"));
    client
        .batch_execute(APP_TABLES)
        .await
        .unwrap_or_else(|err| panic!("creating the application's tables in {url}: {err:?}"));
}

/// The one number `sql` selects (a `count(*)`, say).
pub async fn number(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client
        .query_one(sql, &[])
        .await
        .unwrap_or_else(|err| panic!("{sql}: {err:?}"))
        .get(0)
}

/// A private Redis and PostgreSQL for one test, with queuegen's tables and
/// the application's, the queue applied, and connections to both.
pub struct Servers {
    pub redis_server: crate::RedisServer,
    pub postgres_server: crate::PostgresServer,
    pub redis: queuegen_runtime::Redis,
    /// A plain connection for the test's own commands.
    pub conn: redis::aio::MultiplexedConnection,
    pub pg: queuegen_runtime::postgres::Postgres,
    /// A plain client for the test's own statements.
    pub db: tokio_postgres::Client,
}

/// Starts [`Servers`] for the queue `config` describes.
pub async fn servers(config: &queuegen_runtime::QueueConfig) -> Servers {
    let redis_server = crate::RedisServer::start();
    let postgres_server = crate::PostgresServer::start();
    prepare(&postgres_server.url()).await;
    let (redis, conn) = crate::support::applied(&redis_server, config).await;
    let pg = queuegen_runtime::postgres::Postgres::connect(&postgres_server.url(), SCHEMA, 8)
        .await
        .unwrap_or_else(|err| panic!("connecting the pool: {err}"));
    let db = connect(&postgres_server.url()).await;
    Servers {
        redis_server,
        postgres_server,
        redis,
        conn,
        pg,
        db,
    }
}

/// Starts `pg-process <mode>` (`worker` or `publisher`; the binary's path
/// is the caller's `env!("CARGO_BIN_EXE_pg-process")`) against `servers`,
/// for the queue `config` describes, with `extra_env` (a failpoint).
pub fn pg_process(
    binary: &str,
    mode: &str,
    servers: &Servers,
    config: &queuegen_runtime::QueueConfig,
    extra_env: &[(&str, &str)],
) -> std::process::Child {
    std::process::Command::new(binary)
        .arg(mode)
        .env("QG_REDIS_URL", servers.redis_server.url())
        .env("QG_DATABASE_URL", servers.postgres_server.url())
        .env("QG_PREFIX", &*config.key_prefix)
        .env("QG_PARTITIONS", config.partitions.to_string())
        .env(
            "QG_CLAIM_MIN_IDLE_MS",
            config.claim.min_idle.as_millis().to_string(),
        )
        .env(
            "QG_CLAIM_EVERY_MS",
            config.claim.every.as_millis().to_string(),
        )
        .env("QG_CONSUMER", format!("{mode}-process"))
        .envs(extra_env.iter().copied())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|err| panic!("starting {binary}: {err}"))
}

/// Waits for `child` to exit and asserts that SIGKILL ended it (its
/// failpoint was reached); kills it and panics after `timeout`.
pub fn assert_killed_at_failpoint(child: &mut std::process::Child, timeout: std::time::Duration) {
    use std::os::unix::process::ExitStatusExt;
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("polling pg-process") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("pg-process did not reach its failpoint within {timeout:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "pg-process died at its failpoint: {status:?}"
    );
}
