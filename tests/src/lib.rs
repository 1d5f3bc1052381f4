//! Shared test support: the harness that starts private redis-server processes.
