//! The docs-pipeline example: generated queue code (`queues`, committed, never
//! edited by hand) and the handlers the team writes (`handlers`).

pub mod handlers;
pub mod queues;
