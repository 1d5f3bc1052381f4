//! PostgreSQL for the baseP / qg8p variants and the outbox mode: the
//! server's settings, a fresh schema per variant and round (queuegen's
//! migrations plus the application's `documents` table), the pools, the
//! baseline's hand-written transaction, and the check that every job left
//! exactly one row.
//!
//! The private server is `queuegen_tests::PostgresServer` with production
//! durability ([`DURABILITY`]: the harness's own default is `fsync=off`).
//! Every pool, on both sides, is a deadpool-postgres pool of `--pg-pool`
//! connections with `RecyclingMethod::Fast` (what `Postgres::connect`
//! builds), opened in full before the clock starts.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use deadpool_postgres::Pool;
use futures_util::future::try_join_all;
use queuegen_runtime::postgres::{migrations, Postgres};
use queuegen_tests::queues::jobs;
use serde_json::{json, Value};
use tokio_postgres::NoTls;

/// The private server's durability: as production runs it. Every commit
/// waits for its WAL flush (fsync'd), and pages are written whole after a
/// checkpoint.
pub const DURABILITY: [(&str, &str); 3] = [
    ("fsync", "on"),
    ("synchronous_commit", "on"),
    ("full_page_writes", "on"),
];

/// The server settings the report names, space-separated.
const REPORTED: &str = "server_version fsync synchronous_commit full_page_writes \
    wal_sync_method commit_delay max_connections shared_buffers";

/// The server the PostgreSQL runs use, as the report describes it.
pub struct ServerInfo {
    /// `private PostgreSQL (queuegen_tests::PostgresServer)` or the URL's target.
    pub source: String,
    pub settings: Vec<(String, String)>,
}

impl ServerInfo {
    pub async fn query(url: &str, source: String) -> Result<ServerInfo> {
        let client = connect(url).await?;
        let rows = client
            .query(
                "SELECT name, current_setting(name) FROM unnest(string_to_array($1, ' ')) AS name",
                &[&REPORTED],
            )
            .await
            .context("reading the PostgreSQL server's settings")?;
        Ok(ServerInfo {
            source,
            settings: rows.iter().map(|row| (row.get(0), row.get(1))).collect(),
        })
    }

    /// `PostgreSQL 15.x (source): fsync=on, …`, for the report.
    pub fn line(&self) -> String {
        let mut version = "unknown";
        let mut settings = Vec::new();
        for (name, value) in &self.settings {
            match name.as_str() {
                "server_version" => version = value,
                _ => settings.push(format!("{name}={value}")),
            }
        }
        format!(
            "PostgreSQL {version} ({}): {}",
            self.source,
            settings.join(", ")
        )
    }

    pub fn json(&self) -> Value {
        let settings: serde_json::Map<String, Value> = self
            .settings
            .iter()
            .map(|(name, value)| (name.clone(), json!(value)))
            .collect();
        json!({ "source": self.source, "settings": settings })
    }
}

/// A plain connection (its connection task runs until the client is dropped).
pub async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .context("connecting to PostgreSQL")?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Opens every connection of `pool` now, so no job pays for a connect.
pub async fn warm(pool: &Pool) -> Result<()> {
    let size = pool.status().max_size;
    let clients = try_join_all((0..size).map(|_| pool.get()))
        .await
        .context("opening the pool's connections")?;
    drop(clients);
    Ok(())
}

/// The schema of one variant's (or outbox run's) round: a lowercase SQL identifier.
pub fn schema_name(round: u32, slug: &str) -> String {
    format!(
        "qgbench_{}_r{round}_{}",
        std::process::id(),
        slug.to_ascii_lowercase()
    )
}

/// One variant's round in its own schema: queuegen's tables and `documents`.
pub struct PgRound {
    url: String,
    pub schema: String,
    /// The bench's own connection to the round's database (not a measured one).
    pub admin: tokio_postgres::Client,
}

impl PgRound {
    /// Creates the schema afresh (dropping a leftover of that name) with
    /// queuegen's migrations and the business table.
    pub async fn create(url: &str, schema: &str) -> Result<PgRound> {
        let admin = connect(url).await?;
        admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
            .with_context(|| format!("dropping a leftover schema {schema}"))?;
        for migration in migrations::migrations("queuegen-bench", schema) {
            admin
                .batch_execute(&migration.sql)
                .await
                .with_context(|| format!("applying {} in {schema}", migration.file_name))?;
        }
        admin
            .batch_execute(&format!(
                "CREATE TABLE {schema}.documents (job_id text NOT NULL, subject_ref text NOT NULL, pages integer)"
            ))
            .await
            .with_context(|| format!("creating {schema}.documents"))?;
        Ok(PgRound {
            url: url.to_owned(),
            schema: schema.to_owned(),
            admin,
        })
    }

    /// The one number `sql` selects (a `count(*)`, say).
    pub async fn number(&self, sql: &str) -> Result<i64> {
        let row = self
            .admin
            .query_one(sql, &[])
            .await
            .with_context(|| sql.to_owned())?;
        Ok(row.get(0))
    }

    /// The business change, the same statement on both sides.
    pub fn documents_insert(&self) -> String {
        format!(
            "INSERT INTO {}.documents (job_id, subject_ref, pages) VALUES ($1, $2, $3)",
            self.schema
        )
    }

    /// The marker row, as `PgResults::begin` writes it (without its
    /// `ON CONFLICT DO NOTHING`: the baseline never sees a job twice).
    fn marker_insert(&self) -> String {
        format!(
            "INSERT INTO {}.results (handler, job_id, stream_id) VALUES ($1, $2, $3)",
            self.schema
        )
    }

    /// A queuegen worker's `Postgres` handle on this round's schema, its
    /// pool of `pool_size` connections opened.
    pub async fn postgres(&self, pool_size: usize) -> Result<Postgres> {
        let pg = Postgres::connect(&self.url, &self.schema, pool_size)
            .await
            .context("Postgres::connect")?;
        warm(pg.pool()).await?;
        Ok(pg)
    }

    /// A baseline consumer's store: its own pool of `pool_size` connections, opened.
    pub async fn baseline_store(&self, pool_size: usize) -> Result<BaselineStore> {
        // The pool `Postgres::connect` builds; the baseline uses only the pool.
        let pool = self.postgres(pool_size).await?.pool().clone();
        Ok(BaselineStore {
            pool,
            documents: self.documents_insert().into(),
            marker: self.marker_insert().into(),
        })
    }

    /// One `documents` row and one marker per job, no more, no less.
    pub async fn check(&self, jobs: u64) -> Result<()> {
        let schema = &self.schema;
        let counts = format!(
            "SELECT (SELECT count(*) FROM {schema}.documents), \
             (SELECT count(DISTINCT job_id) FROM {schema}.documents), \
             (SELECT count(*) FROM {schema}.results)"
        );
        let row = self.admin.query_one(&counts, &[]).await.context(counts)?;
        let [documents, distinct, markers]: [i64; 3] = [row.get(0), row.get(1), row.get(2)];
        if [documents, distinct, markers] != [jobs as i64; 3] {
            bail!(
                "{schema}.documents has {documents} rows ({distinct} distinct job ids) and \
                 {schema}.results {markers} markers; expected {jobs} of each"
            );
        }
        Ok(())
    }

    /// Drops the schema and everything in it.
    pub async fn drop_schema(&self) -> Result<()> {
        self.admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .await
            .with_context(|| format!("dropping schema {}", self.schema))
    }
}

/// One job's row, as the baseline reads it from the stream entry.
pub struct Document {
    pub job_id: String,
    pub subject_ref: String,
    pub pages: Option<i32>,
    pub stream_id: String,
}

/// What a careful tokio-postgres user writes for "insert the row and the
/// processed marker atomically": per job, a connection from the pool,
/// `transaction()` (`BEGIN`), the two inserts as prepared (cached)
/// statements, `commit()`: four round trips.
#[derive(Clone)]
pub struct BaselineStore {
    pool: Pool,
    documents: Arc<str>,
    marker: Arc<str>,
}

impl BaselineStore {
    pub async fn commit(&self, document: &Document) -> Result<()> {
        let mut client = self
            .pool
            .get()
            .await
            .context("a connection from the pool")?;
        let tx = client.transaction().await.context("BEGIN")?;
        let documents = tx.prepare_cached(&self.documents).await?;
        let marker = tx.prepare_cached(&self.marker).await?;
        tx.execute(
            &documents,
            &[&document.job_id, &document.subject_ref, &document.pages],
        )
        .await
        .context("INSERT INTO documents")?;
        // The handler name: `PgResults::start` keys markers by the queue's name.
        let handler: &str = &jobs::CONFIG.queue;
        tx.execute(&marker, &[&handler, &document.job_id, &document.stream_id])
            .await
            .context("INSERT INTO results")?;
        tx.commit().await.context("COMMIT")?;
        Ok(())
    }
}
