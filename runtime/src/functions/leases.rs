//! Calls that take and give back a partition's lease: `lease_acquire` and `lease_release`.

use redis::Cmd;

use super::{fcall, Function, FunctionCall};

/// `lease_acquire`: `SET lease holder NX PX ttl_ms`. Answers `[1, holder]`
/// when taken, `[0, current holder or nil]` when not.
#[derive(Debug, Clone, Copy)]
pub struct LeaseAcquire<'a> {
    pub lease_key: &'a str,
    pub holder: &'a str,
    /// At least 1.
    pub ttl_ms: u64,
}

impl FunctionCall for LeaseAcquire<'_> {
    fn command(&self, name: &str) -> Cmd {
        let mut cmd = fcall(name, Function::LeaseAcquire, &[self.lease_key]);
        cmd.arg(self.holder).arg(self.ttl_ms);
        cmd
    }
}

/// `lease_release`: delete the lease if `holder` still holds it. Answers 1
/// when it did, 0 when not.
#[derive(Debug, Clone, Copy)]
pub struct LeaseRelease<'a> {
    pub lease_key: &'a str,
    pub holder: &'a str,
}

impl FunctionCall for LeaseRelease<'_> {
    fn command(&self, name: &str) -> Cmd {
        let mut cmd = fcall(name, Function::LeaseRelease, &[self.lease_key]);
        cmd.arg(self.holder);
        cmd
    }
}
