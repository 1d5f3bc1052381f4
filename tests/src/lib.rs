//! Shared test support: the harness that starts private servers (standalone, primary+replica, a 6-node cluster, TLS; Redis or Valkey) and a private PostgreSQL, the Function library, fixtures, helpers, and metrics read back.

pub mod acl;
pub mod browser;
pub mod cli;
pub mod evolved;
pub mod exposition;
pub mod fixtures;
pub mod forwarder;
pub mod library;
pub mod pg_app;
pub mod postgres_server;
pub mod queues;
pub mod redis_cluster;
pub mod redis_pair;
pub mod redis_server;
pub mod schedules;
pub mod server_kind;
pub mod suite;
pub mod support;
pub mod tls;

pub use acl::AclUser;
pub use postgres_server::PostgresServer;
pub use redis_cluster::{ClusterNode, RedisCluster};
pub use redis_pair::RedisPair;
pub use redis_server::{Fsync, RedisServer};
pub use server_kind::ServerKind;
