//! Shared test support: the harness that starts private redis-server processes, the Function library, fixtures, helpers, and metrics read back.

pub mod evolved;
pub mod exposition;
pub mod fixtures;
pub mod library;
pub mod queues;
pub mod redis_server;
pub mod suite;
pub mod support;

pub use redis_server::RedisServer;
