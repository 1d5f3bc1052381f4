//! The docs-pipeline example: generated queue code (`queues`, committed, never
//! edited by hand), and what the team writes: the handlers (`handlers`) and
//! the export request that enqueues its job through the outbox (`requests`).

pub mod handlers;
pub mod queues;
pub mod requests;
