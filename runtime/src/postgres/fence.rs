//! Fence tokens: a durable counter per handler and job that a delivery takes before an external effect, so the target can refuse a stale delivery's write.
//!
//! Idle time is a redelivery threshold, not a lease: a worker that stalls
//! past `claim.min_idle` may wake up and write after another worker claimed
//! its job and wrote. A marker in the handler's own transaction covers
//! changes in the same database; an effect elsewhere (another service, a
//! file store, a second database) needs the target to enforce an order.
//! Each delivery takes a token strictly greater than every token taken
//! before for the same job (an `INSERT … ON CONFLICT DO UPDATE SET token =
//! token + 1`, committed at once), sends it with its write, and the target
//! keeps the highest token it accepted and refuses anything not above it:
//! in SQL, `UPDATE … SET …, fence = $token WHERE key = $key AND fence < $token`
//! (0 rows: a newer delivery got there first). The token orders writes; it
//! does not make one write happen once: pair it with an idempotent write.

use super::results::PgResults;
use crate::error::Result;
use crate::handler::JobContext;

/// One delivery's fence token for its job: greater than any token an
/// earlier delivery of the job took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fence(i64);

impl Fence {
    /// The token to send with the write (a `bigint` column on the target).
    pub fn token(self) -> i64 {
        self.0
    }

    /// Whether a target whose newest accepted write carried `last` (`None`:
    /// none yet) should accept a write carrying this token: only a strictly
    /// newer one. For targets that check in code rather than in SQL.
    pub fn admits(self, last: Option<i64>) -> bool {
        last.map_or(true, |last| self.0 > last)
    }
}

impl PgResults {
    /// Takes this delivery's fence token for its job. Take it before the
    /// external effect, on its own (not inside the job's transaction: the
    /// counter must commit at once for the next delivery to see it).
    pub async fn fence(&self, ctx: &JobContext) -> Result<Fence> {
        self.fence_job(ctx.job_id()).await
    }

    /// [`PgResults::fence`] for a job known by id.
    pub async fn fence_job(&self, job_id: &str) -> Result<Fence> {
        let (pg, handler) = (self.postgres(), self.handler());
        let doing = || format!("taking a fence token for job {job_id:?} (handler {handler:?})");
        let client = pg.client(&doing()).await?;
        let token: i64 = client
            .query_one(self.fence_sql(), &[&handler, &job_id])
            .await
            .map_err(|err| pg.error(doing(), err))?
            .get(0);
        Ok(Fence(token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_admits_only_writes_newer_than_the_last_accepted() {
        assert!(Fence(1).admits(None));
        assert!(Fence(3).admits(Some(2)));
        assert!(!Fence(2).admits(Some(2)));
        assert!(!Fence(1).admits(Some(2)));
    }
}
