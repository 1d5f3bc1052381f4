//! The PostgreSQL handle results, fences and the outbox share: a connection pool, the schema of queuegen's tables, and the check that the migrations are applied.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::Host;
use tokio_postgres::NoTls;

use super::migrations::{self, LATEST};
use crate::error::{Error, PostgresError, Result};

/// How long opening one connection may take when the URL does not say
/// (`connect_timeout`): a host that drops packets fails the start instead
/// of hanging it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The tables a runtime of this version reads and writes.
const TABLES: [&str; 5] = ["migrations", "handlers", "results", "fences", "outbox"];

/// A pool of connections to the database that holds queuegen's tables (in
/// one schema) and, usually, the application's own: a handler's business
/// change and its result marker commit on one of these connections.
///
/// Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct Postgres {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    schema: String,
    /// `user@host:port/database`, never the password: what errors name.
    target: String,
}

impl Postgres {
    /// Opens a pool of at most `pool_size` connections to `url`
    /// (`postgres://user:password@host:port/database`, or the key=value
    /// form), opens one connection now, and checks that queuegen's
    /// migrations are applied in `schema`.
    ///
    /// A bad URL, an unreachable server, a refused login, a missing table
    /// or an old migration each fail here with [`PostgresError::Setup`] or
    /// [`PostgresError::Driver`], naming the database (never the password) and
    /// what to do: so a worker fails at start, not at its first job.
    pub async fn connect(url: &str, schema: &str, pool_size: usize) -> Result<Postgres> {
        let mut config = tokio_postgres::Config::from_str(url).map_err(|err| {
            let problem = format!("the database URL cannot be used: {err}");
            setup_error(redact(url), problem)
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let target = describe_target(&config);
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                // A closed connection is replaced; a broken one fails its
                // job's transaction, which is retried: no query per checkout.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|err| {
                setup_error(&target, format!("cannot build a connection pool: {err}"))
            })?;
        Self::from_pool_named(pool, schema, target).await
    }

    /// Uses the application's own pool (its connections must reach the
    /// database with queuegen's tables), after the same checks as
    /// [`Postgres::connect`].
    pub async fn from_pool(pool: Pool, schema: &str) -> Result<Postgres> {
        Self::from_pool_named(pool, schema, "(the application's pool)".to_owned()).await
    }

    async fn from_pool_named(pool: Pool, schema: &str, target: String) -> Result<Postgres> {
        if !queuegen_core::sql::is_plain_identifier(schema) {
            let problem = format!(
                "schema {schema:?} is not a plain lowercase SQL identifier (spec `postgres.schema`)"
            );
            return Err(setup_error(target, problem));
        }
        let postgres = Postgres {
            inner: Arc::new(Inner {
                pool,
                schema: schema.to_owned(),
                target,
            }),
        };
        postgres.check_migrations().await?;
        Ok(postgres)
    }

    /// The pool, for the application's own queries.
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// The schema that holds queuegen's tables.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// `user@host:port/database`, as errors name it.
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// `schema.table`.
    pub(crate) fn table(&self, table: &str) -> String {
        format!("{}.{table}", self.inner.schema)
    }

    /// A connection from the pool; `doing` says what for, in the error.
    pub(crate) async fn client(&self, doing: &str) -> Result<Object> {
        self.inner.pool.get().await.map_err(|err| match err {
            deadpool_postgres::PoolError::Backend(source) => self.error(doing, source),
            other => setup_error(
                self.target(),
                format!("{doing}: no connection from the pool: {other}"),
            ),
        })
    }

    /// A driver error with the database and what was being done.
    pub(crate) fn error(&self, doing: impl Into<String>, source: tokio_postgres::Error) -> Error {
        Error::postgres(self.target(), doing, source)
    }

    /// Every table of [`TABLES`] exists in the schema, and the migrations
    /// table records [`LATEST`] or newer.
    async fn check_migrations(&self) -> Result<()> {
        let client = self.client("connecting").await?;
        let missing: Vec<String> = client
            .query(
                "SELECT t FROM unnest($1::text[]) AS t WHERE to_regclass($2 || '.' || t) IS NULL",
                &[&&TABLES[..], &self.schema()],
            )
            .await
            .map_err(|err| self.error("looking for queuegen's tables", err))?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let fix = format!(
            "apply the SQL migrations `queuegen generate --deploy-out DIR` wrote to DIR/sql/ \
             (for example `psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -f DIR/sql/{}`)",
            migrations::migrations("service", "schema")[0].file_name
        );
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|t| self.table(t)).collect();
            let problem = format!("table {} does not exist: {fix}", names.join(", "));
            return Err(setup_error(self.target(), problem));
        }
        let table = self.table("migrations");
        let applied: Option<i32> = client
            .query_one(&format!("SELECT max(version) FROM {table}"), &[])
            .await
            .map_err(|err| self.error("reading the applied migrations", err))?
            .get(0);
        if applied.is_some_and(|version| version >= LATEST) {
            return Ok(());
        }
        let applied = applied.map_or("none".to_owned(), |v| v.to_string());
        let problem = format!(
            "{table} records migration {applied} applied, this runtime needs {LATEST}: {fix}"
        );
        Err(setup_error(self.target(), problem))
    }
}

/// A problem with the database `target` or its setup, found before any job ran.
pub(super) fn setup_error(target: impl Into<String>, problem: String) -> Error {
    let target = target.into();
    Error::Postgres(PostgresError::Setup { target, problem })
}

/// `user@host:port/database` of a parsed URL.
fn describe_target(config: &tokio_postgres::Config) -> String {
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let user = config.get_user().unwrap_or("(default user)");
    let database = config.get_dbname().unwrap_or(user);
    format!("{user}@{}/{database}", hosts.join(","))
}

/// A URL that did not parse, with anything between `:` and `@` of its
/// authority (a password) hidden.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(the database URL)".to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{}", &rest[at + 1..])
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_names_user_host_port_and_database_but_no_password() {
        let config =
            tokio_postgres::Config::from_str("postgres://app:secret@db.internal:6543/orders")
                .unwrap();
        assert_eq!(describe_target(&config), "app@db.internal:6543/orders");
    }

    #[test]
    fn an_unparsable_url_is_shown_without_its_password() {
        assert_eq!(
            redact("postgres://app:s3cret@db:bad-port/orders"),
            "postgres://app:***@db:bad-port/orders"
        );
        assert_eq!(redact("host=db password=x"), "(the database URL)");
    }
}
