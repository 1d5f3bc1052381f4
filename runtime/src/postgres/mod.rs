//! PostgreSQL for what must outlive Redis: durable results with their business change, fence tokens, and the transactional outbox (feature `postgres`); the SQL of their tables always.
//!
//! - [`Postgres`]: the pool and schema; connecting checks the migrations.
//! - [`PgResults`]: `begin` a job's transaction with its marker, make the
//!   change through the [`PgJob`], `commit`, then return `Outcome::Done`.
//! - [`Fence`]: a token per delivery for effects outside the database.
//! - [`PgOutbox`] and [`OutboxPublisher`]: enqueue a job in the business
//!   transaction; the publisher sends it once the transaction committed.
//! - [`migrations`]: the tables' SQL, written by `queuegen generate` to
//!   `DIR/sql/`, and checked at start.

pub mod migrations;

#[cfg(feature = "postgres")]
mod connect;
#[cfg(feature = "postgres")]
mod error;
#[cfg(feature = "postgres")]
mod fence;
#[cfg(feature = "postgres")]
mod outbox;
#[cfg(feature = "postgres")]
mod publisher;
#[cfg(feature = "postgres")]
mod results;

#[cfg(feature = "postgres")]
pub use crate::outcome::sqlstate::error_kind;
#[cfg(feature = "postgres")]
pub use connect::Postgres;
#[cfg(feature = "postgres")]
pub use fence::Fence;
#[cfg(feature = "postgres")]
pub use outbox::{Enqueued, InTransaction, PgOutbox};
#[cfg(feature = "postgres")]
pub use publisher::{OutboxPublisher, PublisherReport};
#[cfg(feature = "postgres")]
pub use results::{Begun, PgJob, PgResults};
/// The driver and pool the PostgreSQL types here are built on, so that an
/// application uses the same versions.
#[cfg(feature = "postgres")]
pub use {deadpool_postgres, tokio_postgres};
