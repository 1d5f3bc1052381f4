//! queuegen's SQL migrations, applied by their consumer (`psql -f`): idempotent, safe to run twice at once, and what `Postgres::connect` checks for; and fence tokens that order a job's deliveries for an external target.

use std::path::PathBuf;

use queuegen_runtime::postgres::{migrations, PgResults, Postgres};
use queuegen_tests::fixtures::test_config;
use queuegen_tests::pg_app;
use queuegen_tests::support::unique_prefix;
use queuegen_tests::PostgresServer;

/// The migration files as `queuegen generate` writes them for `schema`.
fn migration_files(dir: &tempfile::TempDir, schema: &str) -> Vec<PathBuf> {
    migrations::migrations("queuegen-tests", schema)
        .into_iter()
        .map(|migration| {
            let path = dir.path().join(&migration.file_name);
            std::fs::write(&path, migration.sql).unwrap();
            path
        })
        .collect()
}

/// The tables, columns and indexes of `schema`, to compare before and after.
fn catalog(server: &PostgresServer, schema: &str) -> String {
    server.psql(&format!(
        "SELECT string_agg(table_name || '.' || column_name || ':' || data_type, ',' ORDER BY table_name, ordinal_position) \
         FROM information_schema.columns WHERE table_schema = '{schema}'; \
         SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE schemaname = '{schema}'; \
         SELECT string_agg(version::text, ',' ORDER BY version) FROM {schema}.migrations;"
    ))
}

#[tokio::test]
async fn the_migrations_apply_with_psql_twice_and_concurrently_and_satisfy_the_start_check() {
    let server = PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let files = migration_files(&dir, "docs_pipeline");

    for file in &files {
        server
            .psql_file(file)
            .unwrap_or_else(|err| panic!("{}: {err}", file.display()));
    }
    let once = catalog(&server, "docs_pipeline");
    assert!(
        once.contains("results.job_id:text") && once.contains("outbox_undispatched"),
        "{once}"
    );
    // Again, and twice at once (two pods' init containers): nothing changes.
    for file in &files {
        server.psql_file(file).unwrap();
    }
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                for file in &files {
                    server.psql_file(file).unwrap();
                }
            });
        }
    });
    assert_eq!(catalog(&server, "docs_pipeline"), once);

    let pg = Postgres::connect(&server.url(), "docs_pipeline", 2)
        .await
        .unwrap();
    assert_eq!(pg.schema(), "docs_pipeline");
    // Another schema was never migrated: the check names it and the file.
    let err = Postgres::connect(&server.url(), "other_schema", 2)
        .await
        .err()
        .expect("nothing in other_schema");
    let text = err.to_string();
    assert!(
        text.contains("other_schema.results")
            && text.contains(&migrations::migrations("x", "y")[0].file_name),
        "{text}"
    );
    // A migration table that records an older version than this runtime needs.
    server.psql(&format!(
        "DELETE FROM docs_pipeline.migrations WHERE version = {}",
        migrations::LATEST
    ));
    let err = Postgres::connect(&server.url(), "docs_pipeline", 2)
        .await
        .err()
        .expect("no migration recorded");
    assert!(
        err.to_string()
            .contains("docs_pipeline.migrations records migration none applied"),
        "{err}"
    );
}

/// Each delivery's fence token is above every earlier one of the job, and a
/// target that keeps the highest token it accepted refuses a stale write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_tokens_rise_per_delivery_and_a_target_refuses_a_stale_write() {
    let server = PostgresServer::start();
    pg_app::prepare(&server.url()).await;
    let pg = Postgres::connect(&server.url(), pg_app::SCHEMA, 4)
        .await
        .unwrap();
    let config = test_config(&unique_prefix("fence"), 1);
    let results = PgResults::start(&pg, &config).await.unwrap();
    let db = pg_app::connect(&server.url()).await;
    db.batch_execute(
        "CREATE TABLE ledger_snapshots (ledger text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL);
         INSERT INTO ledger_snapshots VALUES ('L-1', 0, 0);",
    )
    .await
    .unwrap();
    let write = |balance: i64, fence: i64| {
        let db = &db;
        async move {
            db.execute(
                "UPDATE ledger_snapshots SET balance = $1, fence = $2 WHERE ledger = 'L-1' AND fence < $2",
                &[&balance, &fence],
            )
            .await
            .unwrap()
        }
    };

    // A delivery that stalls takes its token first...
    let stale = results.fence_job("reconcile-L-1").await.unwrap();
    // ...another worker claims the job, takes a newer one, and writes.
    let current = results.fence_job("reconcile-L-1").await.unwrap();
    assert!(current > stale && current.token() == stale.token() + 1);
    assert_eq!(write(100, current.token()).await, 1);
    // The stale delivery wakes up and tries: refused, the newer write stays.
    assert_eq!(write(50, stale.token()).await, 0);
    assert!(!stale.admits(Some(current.token())));
    let balance: i64 = db
        .query_one("SELECT balance FROM ledger_snapshots", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(balance, 100);
    // Tokens are per job, and racing deliveries never share one.
    let racing: Vec<_> = take_fences(&results, "reconcile-L-2", 16).await;
    let mut tokens: Vec<i64> = racing.iter().map(|fence| fence.token()).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, (1..=16).collect::<Vec<i64>>());
}

/// `n` fence tokens for `job_id` taken at once.
async fn take_fences(
    results: &PgResults,
    job_id: &str,
    n: usize,
) -> Vec<queuegen_runtime::postgres::Fence> {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let results = results.clone();
        let job_id = job_id.to_owned();
        tasks.push(tokio::spawn(async move {
            results.fence_job(&job_id).await.unwrap()
        }));
    }
    let mut fences = Vec::new();
    for task in tasks {
        fences.push(task.await.unwrap());
    }
    fences
}
