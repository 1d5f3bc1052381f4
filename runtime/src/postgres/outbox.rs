//! The transactional outbox: a job enqueued in the same PostgreSQL transaction as the business change it announces, published to its stream only once that transaction commits.
//!
//! [`PgOutbox::enqueue`] validates and encodes the job exactly as a
//! [`Producer`](crate::Producer) would (same envelope, same partition), and
//! inserts the fields as an `outbox` row in the caller's transaction. A
//! rollback takes the row with it: nothing is published. After the commit,
//! an [`OutboxPublisher`](super::OutboxPublisher) `XADD`s the row and marks
//! it dispatched.

use std::marker::PhantomData;

use futures_util::future::BoxFuture;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, Row};

use super::connect::Postgres;
use super::results::PgJob;
use crate::config::QueueConfig;
use crate::envelope::Envelope;
use crate::error::Result;
use crate::producer::{self, NewJob};
use crate::stream_slot::StreamSlot;

/// Where an enqueued job waits until the publisher sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// The outbox row (`outbox.id`).
    pub id: i64,
    /// The stream (lane and partition) its entry will be in.
    pub stream: StreamSlot,
}

/// Enqueues jobs of envelope `E` for one queue into the outbox.
pub struct PgOutbox<E: Envelope> {
    pg: Postgres,
    config: QueueConfig,
    insert_sql: String,
    _envelope: PhantomData<fn(E)>,
}

// Manual impl: cloning never needs `E: Clone`.
impl<E: Envelope> Clone for PgOutbox<E> {
    fn clone(&self) -> Self {
        PgOutbox {
            pg: self.pg.clone(),
            config: self.config.clone(),
            insert_sql: self.insert_sql.clone(),
            _envelope: PhantomData,
        }
    }
}

impl<E: Envelope> PgOutbox<E> {
    pub fn new(pg: &Postgres, config: QueueConfig) -> Self {
        PgOutbox {
            insert_sql: format!(
                "INSERT INTO {} (queue, partition, job_id, fields) VALUES ($1, $2, $3, $4) RETURNING id",
                pg.table("outbox")
            ),
            pg: pg.clone(),
            config,
            _envelope: PhantomData,
        }
    }

    /// Adds `job` to the outbox inside `transaction`: it is published after
    /// the transaction commits, and never if it rolls back.
    ///
    /// An invalid job fails here, as [`Producer::publish`](crate::Producer::publish)
    /// would, before anything is written. The publisher does not apply
    /// `admission`: the job is committed intent, already accepted.
    pub async fn enqueue(
        &self,
        transaction: &impl InTransaction,
        job: NewJob<E>,
    ) -> Result<Enqueued> {
        let queue = &*self.config.queue;
        let encoded = producer::encode(&self.config, job, 0)?;
        let job_id = encoded
            .pairs
            .iter()
            .find(|(name, _)| *name == crate::envelope::header_fields::JOB_ID)
            .map_or("", |(_, value)| value.as_str());
        let fields: Vec<&str> = encoded
            .pairs
            .iter()
            .flat_map(|(name, value)| [*name, value.as_str()])
            .collect();
        let partition = i32::from(encoded.stream.index());
        let row = transaction
            .query_one_typed(
                &self.insert_sql,
                &[
                    (&queue, Type::TEXT),
                    (&partition, Type::INT4),
                    (&job_id, Type::TEXT),
                    (&fields, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(|err| {
                self.pg.error(
                    format!("enqueueing job {job_id:?} of queue {queue:?} into the outbox"),
                    err,
                )
            })?;
        Ok(Enqueued {
            id: row.get(0),
            stream: encoded.stream,
        })
    }
}

/// A connection inside a transaction that an outbox row can join: a
/// `tokio_postgres::Transaction`, a `deadpool_postgres::Transaction`, or a
/// handler's [`PgJob`] (a follow-up job committed with the handler's result).
///
/// A bare client is deliberately not one: a row inserted outside a
/// transaction would be published whether or not the change it announces
/// commits; publish with a [`Producer`](crate::Producer) then.
pub trait InTransaction: Sync {
    /// Runs a one-row statement with typed parameters (one round trip).
    #[doc(hidden)]
    fn query_one_typed<'a>(
        &'a self,
        statement: &'a str,
        params: &'a [(&'a (dyn ToSql + Sync), Type)],
    ) -> BoxFuture<'a, std::result::Result<Row, tokio_postgres::Error>>;
}

impl InTransaction for tokio_postgres::Transaction<'_> {
    fn query_one_typed<'a>(
        &'a self,
        statement: &'a str,
        params: &'a [(&'a (dyn ToSql + Sync), Type)],
    ) -> BoxFuture<'a, std::result::Result<Row, tokio_postgres::Error>> {
        GenericClient::query_typed_one(self, statement, params)
    }
}

impl InTransaction for deadpool_postgres::Transaction<'_> {
    fn query_one_typed<'a>(
        &'a self,
        statement: &'a str,
        params: &'a [(&'a (dyn ToSql + Sync), Type)],
    ) -> BoxFuture<'a, std::result::Result<Row, tokio_postgres::Error>> {
        let transaction: &tokio_postgres::Transaction<'_> = self;
        GenericClient::query_typed_one(transaction, statement, params)
    }
}

impl InTransaction for PgJob {
    fn query_one_typed<'a>(
        &'a self,
        statement: &'a str,
        params: &'a [(&'a (dyn ToSql + Sync), Type)],
    ) -> BoxFuture<'a, std::result::Result<Row, tokio_postgres::Error>> {
        GenericClient::query_typed_one(self.client(), statement, params)
    }
}
