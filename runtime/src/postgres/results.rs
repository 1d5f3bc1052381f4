//! Durable results in PostgreSQL: a handler's business change and its processed-job marker commit in one transaction, so a redelivered job finds the marker instead of repeating the change.
//!
//! [`PgResults::begin`] opens a transaction on a pooled connection and
//! inserts the marker row `(handler, job_id)` first. Inserting it takes the
//! row's unique-index lock, so a second delivery of the same job (a claim
//! after a stall, or an outbox row published twice) waits on that insert
//! until the first commits (then finds the marker and does nothing) or
//! rolls back (then does the work itself): the business change runs only
//! in the transaction that holds the marker. The handler makes its change
//! through the returned [`PgJob`] and calls [`PgJob::commit`]; only then
//! does it return `Outcome::Done`, and only then does the worker XACK.
//! A crash anywhere before the commit rolls both back; a crash after it
//! leaves a committed marker that the redelivery finds.
//!
//! A `PgJob` dropped without commit (an error returned with `?`, a handler
//! timeout) rolls back before its connection goes back to the pool.

use std::borrow::Cow;
use std::ops::Deref;
use std::sync::Arc;

use deadpool_postgres::{ClientWrapper, Object};

use super::connect::{setup_error, Postgres};
use crate::config::QueueConfig;
use crate::error::Result;
use crate::failpoint::failpoint;
use crate::handler::JobContext;

/// A handler's results and fences in PostgreSQL, keyed by its name.
///
/// Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct PgResults {
    inner: Arc<Inner>,
}

struct Inner {
    pg: Postgres,
    handler: String,
    queue: Cow<'static, str>,
    /// Inserts the marker unless one exists: `(handler, job_id, stream_id)`.
    claim_sql: String,
    /// The committed result of a marker found: `(handler, job_id)`.
    existing_sql: String,
    /// Stores the handler's result in its marker: `(handler, job_id, result)`.
    store_sql: String,
    /// Takes the next fence token: `(handler, job_id)`.
    fence_sql: String,
}

/// What [`PgResults::begin`] found.
// Matched once, right away, per job: boxing the transaction would cost an
// allocation per job to shrink a value that never sits in a collection.
#[allow(clippy::large_enum_variant)]
pub enum Begun {
    /// No delivery of this job has committed: make the change through the
    /// job's transaction, then [`PgJob::commit`].
    New(PgJob),
    /// An earlier delivery committed; its result (empty if it stored none).
    /// The change is done: return `Outcome::Done` without repeating it.
    Finished(Vec<u8>),
}

impl PgResults {
    /// The results of the queue `config` describes, under the handler name
    /// of the queue's own name. See [`PgResults::start_as`].
    pub async fn start(pg: &Postgres, config: &QueueConfig) -> Result<PgResults> {
        Self::start_as(pg, config, &config.queue).await
    }

    /// The results of handler `handler` working the queue `config`
    /// describes: registers the name in `handlers` and refuses to start
    /// ([`PostgresError::Setup`](crate::error::PostgresError::Setup),
    /// naming the table, handler and queues) when
    /// - the name is registered for another queue: both queues' results
    ///   would share job ids, and a job of one would be skipped as done by
    ///   a result of the other;
    /// - the queue already has results of another handler name: a job
    ///   redelivered now would not find that handler's result and would
    ///   repeat its change (a renamed handler).
    pub async fn start_as(pg: &Postgres, config: &QueueConfig, handler: &str) -> Result<PgResults> {
        let (results, fences) = (pg.table("results"), pg.table("fences"));
        let results = PgResults {
            inner: Arc::new(Inner {
                pg: pg.clone(),
                handler: handler.to_owned(),
                queue: config.queue.clone(),
                claim_sql: format!(
                    "INSERT INTO {results} (handler, job_id, stream_id) VALUES ($1, $2, $3) \
                     ON CONFLICT (handler, job_id) DO NOTHING"
                ),
                existing_sql: format!(
                    "SELECT result FROM {results} WHERE handler = $1 AND job_id = $2"
                ),
                store_sql: format!(
                    "UPDATE {results} SET result = $3 WHERE handler = $1 AND job_id = $2"
                ),
                fence_sql: format!(
                    "INSERT INTO {fences} AS f (handler, job_id, token) VALUES ($1, $2, 1) \
                     ON CONFLICT (handler, job_id) DO UPDATE SET token = f.token + 1 \
                     RETURNING token"
                ),
            }),
        };
        results.register().await?;
        Ok(results)
    }

    /// The handler name results are keyed by.
    pub fn handler(&self) -> &str {
        &self.inner.handler
    }

    pub(super) fn postgres(&self) -> &Postgres {
        &self.inner.pg
    }

    pub(super) fn fence_sql(&self) -> &str {
        &self.inner.fence_sql
    }

    /// Records which queue this handler name works, and checks that no
    /// other queue or handler name conflicts with it: in one transaction,
    /// so a refused start registers nothing.
    async fn register(&self) -> Result<()> {
        let pg = &self.inner.pg;
        let (handler, queue) = (self.handler(), &*self.inner.queue);
        let handlers = pg.table("handlers");
        let context =
            || format!("registering handler {handler:?} of queue {queue:?} in {handlers}");
        let mut client = pg.client("registering the handler").await?;
        let transaction = client
            .transaction()
            .await
            .map_err(|err| pg.error(context(), err))?;
        transaction
            .execute(
                &format!(
                    "INSERT INTO {handlers} (handler, queue) VALUES ($1, $2) ON CONFLICT (handler) DO NOTHING"
                ),
                &[&handler, &queue],
            )
            .await
            .map_err(|err| pg.error(context(), err))?;
        let registered: String = transaction
            .query_one(
                &format!("SELECT queue FROM {handlers} WHERE handler = $1"),
                &[&handler],
            )
            .await
            .map_err(|err| pg.error(context(), err))?
            .get(0);
        let other: Option<String> = transaction
            .query_opt(
                &format!(
                    "SELECT handler FROM {handlers} WHERE queue = $1 AND handler <> $2 ORDER BY handler LIMIT 1"
                ),
                &[&queue, &handler],
            )
            .await
            .map_err(|err| pg.error(context(), err))?
            .map(|row| row.get(0));
        let results = pg.table("results");
        let problem = if registered != queue {
            format!(
                "handler {handler:?} is registered in {handlers} for queue {registered:?}, not {queue:?}: \
                 both queues' results would be keyed by the same job ids, and a job of one would be \
                 skipped as done by the other's result. Give this queue's handler its own name \
                 (PgResults::start_as), or, if the old registration is obsolete, remove it and its \
                 results: DELETE FROM {results} WHERE handler = '{handler}'; \
                 DELETE FROM {handlers} WHERE handler = '{handler}';"
            )
        } else if let Some(other) = other {
            format!(
                "queue {queue:?} already has results of handler {other:?} in {results} \
                 (registered in {handlers}), and this worker's handler is {handler:?}: a job \
                 redelivered now would not find {other:?}'s result and would repeat its change. \
                 Start this handler as {other:?} (PgResults::start_as), or move the results over: \
                 UPDATE {results} SET handler = '{handler}' WHERE handler = '{other}'; \
                 DELETE FROM {handlers} WHERE handler = '{other}';"
            )
        } else {
            return transaction
                .commit()
                .await
                .map_err(|err| pg.error(context(), err));
        };
        // Dropping the transaction rolls the registration back.
        Err(setup_error(pg.target(), problem))
    }

    /// Opens this delivery's transaction and takes the job's marker, or
    /// finds that an earlier delivery committed ([`Begun::Finished`]).
    pub async fn begin(&self, ctx: &JobContext) -> Result<Begun> {
        self.begin_job(ctx.job_id(), ctx.stream_id()).await
    }

    /// [`PgResults::begin`] for a job known by id (outside a worker, or in
    /// a test); `stream_id` is recorded with the marker for diagnostics.
    pub async fn begin_job(&self, job_id: &str, stream_id: &str) -> Result<Begun> {
        let (pg, handler, queue) = (&self.inner.pg, self.handler(), &self.inner.queue);
        let doing = || {
            format!("taking the marker of job {job_id:?} (handler {handler:?}, queue {queue:?})")
        };
        let client = pg.client(&doing()).await?;
        let claim = client
            .prepare_cached(&self.inner.claim_sql)
            .await
            .map_err(|err| pg.error(doing(), err))?;
        // BEGIN and the marker's INSERT in one round trip (the driver sends
        // requests in order). The INSERT cannot run outside the transaction:
        // BEGIN fails only when the connection does (then so does the
        // INSERT), and the guard below never returns a connection to the
        // pool inside a transaction.
        let (begun, inserted) = futures_util::future::join(
            client.batch_execute("BEGIN"),
            client.execute(&claim, &[&handler, &job_id, &stream_id]),
        )
        .await;
        // From here the connection may be in a transaction: the guard rolls
        // it back whatever happens next.
        let job = PgJob {
            client: Some(client),
            results: self.clone(),
            job_id: job_id.to_owned(),
        };
        let inserted = begun.and(inserted).map_err(|err| pg.error(doing(), err))?;
        if inserted == 1 {
            return Ok(Begun::New(job));
        }
        let existing: Vec<u8> = job
            .query_one(&self.inner.existing_sql, &[&handler, &job_id])
            .await
            .map_err(|err| pg.error(doing(), err))?
            .get(0);
        job.rollback().await?;
        Ok(Begun::Finished(existing))
    }

    /// The committed result of `job_id`, if a delivery committed one.
    pub async fn find(&self, job_id: &str) -> Result<Option<Vec<u8>>> {
        let (pg, handler) = (&self.inner.pg, self.handler());
        let doing = || format!("reading the result of job {job_id:?} (handler {handler:?})");
        let client = pg.client(&doing()).await?;
        let row = client
            .query_opt(&self.inner.existing_sql, &[&handler, &job_id])
            .await
            .map_err(|err| pg.error(doing(), err))?;
        Ok(row.map(|row| row.get(0)))
    }
}

/// One delivery's open transaction, holding the job's marker. Run the
/// business change through it (it derefs to the pooled client: `execute`,
/// `query`, `prepare_cached`), then [`PgJob::commit`].
///
/// Dropped without commit, it rolls back: the marker and the change with it.
pub struct PgJob {
    /// `None` once committed or rolled back.
    client: Option<Object>,
    results: PgResults,
    job_id: String,
}

impl PgJob {
    /// The job this transaction works.
    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    /// The connection in the transaction, for APIs that take a
    /// `tokio_postgres::Client` (a `GenericClient`).
    pub fn client(&self) -> &tokio_postgres::Client {
        self
    }

    /// Commits the business change and the marker together, storing
    /// `result` (may be empty) as what a redelivery finds. Return
    /// `Outcome::Done` only after this returned `Ok`.
    ///
    /// A failed commit (a deferred constraint, a serialization failure, a
    /// lost connection) is an error, classified like any database error
    /// when returned with `?`; the job runs again, and finds the marker if
    /// the commit did happen.
    pub async fn commit(mut self, result: &[u8]) -> Result<()> {
        let client = self.client.take().expect("a PgJob commits at most once");
        let (inner, job_id) = (&self.results.inner, &self.job_id);
        let (handler, queue) = (&inner.handler, &inner.queue);
        let doing = || format!("committing job {job_id:?} (handler {handler:?}, queue {queue:?})");
        let committed = if result.is_empty() {
            client.batch_execute("COMMIT").await
        } else {
            async {
                let store = client.prepare_cached(&inner.store_sql).await?;
                // One round trip: if the UPDATE fails, the server ends
                // the failed transaction at COMMIT with a rollback.
                let (stored, committed) = futures_util::future::join(
                    client.execute(&store, &[&handler.as_str(), job_id, &result]),
                    client.batch_execute("COMMIT"),
                )
                .await;
                stored.and(committed)
            }
            .await
        };
        if let Err(err) = committed {
            // The transaction is still open (the UPDATE was never sent),
            // over, or its connection gone: a rollback is needed or harmless.
            self.client = Some(client);
            return Err(inner.pg.error(doing(), err));
        }
        failpoint("after_results_commit");
        Ok(())
    }

    /// Rolls back the change and the marker now (dropping does the same,
    /// in the background).
    pub async fn rollback(mut self) -> Result<()> {
        let Some(client) = self.client.take() else {
            return Ok(());
        };
        let Err(err) = client.batch_execute("ROLLBACK").await else {
            return Ok(());
        };
        let _ = Object::take(client);
        let doing = format!("rolling back job {:?}", self.job_id);
        Err(self.results.inner.pg.error(doing, err))
    }
}

impl Deref for PgJob {
    type Target = ClientWrapper;

    fn deref(&self) -> &ClientWrapper {
        self.client
            .as_ref()
            .expect("a PgJob's connection is there until commit or rollback consumes it")
    }
}

impl Drop for PgJob {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        // The connection must not go back to the pool mid-transaction: roll
        // back first, in the background (no await in drop). Without a
        // runtime, or if the rollback fails, close it instead: the server
        // rolls back a transaction whose connection is gone.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            let _ = Object::take(client);
            return;
        };
        runtime.spawn(async move {
            if client.batch_execute("ROLLBACK").await.is_err() {
                let _ = Object::take(client);
            }
        });
    }
}
