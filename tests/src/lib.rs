//! Shared test support: the harness that starts private redis-server processes, fixtures and helpers.

pub mod fixtures;
pub mod queues;
pub mod redis_server;
pub mod support;

pub use redis_server::RedisServer;
