//! The status and pending views cost two round trips whatever the partition
//! count: counted on a real connection, for 1, 16 and 64 partitions.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use queuegen_runtime::ops::pending::{pending, PendingQuery};
use queuegen_runtime::ops::status::{status, AlertThresholds, WatchedQueue};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{admin, Redis};
use queuegen_tests::fixtures::test_config;
use queuegen_tests::support::unique_prefix;
use queuegen_tests::RedisServer;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A connection that counts what it sends: single commands and pipelines,
/// each one round trip.
struct Counting {
    inner: MultiplexedConnection,
    round_trips: Arc<AtomicUsize>,
    commands: Arc<AtomicUsize>,
}

impl ConnectionLike for Counting {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        self.commands.fetch_add(1, Ordering::Relaxed);
        self.inner.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        self.commands
            .fetch_add(pipeline.cmd_iter().count(), Ordering::Relaxed);
        self.inner.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

#[tokio::test]
async fn a_refresh_is_two_round_trips_for_any_partition_count() {
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    for partitions in [1u16, 16, 64] {
        let config = test_config(&unique_prefix("ops-status"), partitions);
        admin::ensure_groups(&redis, &config).await.unwrap();
        let mut conn = redis.shared();
        // Something pending on every partition, so every read has work to do.
        for stream in StreamSlot::all(partitions) {
            let key = config.ready_key(stream);
            let _: String = redis::cmd("XADD")
                .arg(&key)
                .arg("*")
                .arg("job_id")
                .arg(format!("job-{stream}"))
                .query_async(&mut conn)
                .await
                .unwrap();
            let _: Value = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(&*config.group)
                .arg("w")
                .arg("STREAMS")
                .arg(&key)
                .arg(">")
                .query_async(&mut conn)
                .await
                .unwrap();
        }

        let round_trips = Arc::new(AtomicUsize::new(0));
        let commands = Arc::new(AtomicUsize::new(0));
        let mut counting = Counting {
            inner: redis.primaries().await.unwrap()[0]
                .connection()
                .await
                .unwrap(),
            round_trips: round_trips.clone(),
            commands: commands.clone(),
        };
        let watched = [WatchedQueue {
            config: config.clone(),
            alerts: AlertThresholds::default(),
        }];
        let report = status(&mut counting, &watched).await.unwrap();
        assert_eq!(report.queues[0].partitions.len(), usize::from(partitions));
        assert!(report.queues[0]
            .partitions
            .iter()
            .all(|p| p.queue_group().unwrap().pending == 1));
        assert_eq!(
            round_trips.swap(0, Ordering::Relaxed),
            2,
            "status with {partitions} partition(s)"
        );
        // TIME and FCALL_RO once, then 12 reads per partition (the retry
        // and delayed sets two each, the pause flag's and the pruned
        // count's GET) and 2 per group.
        let sent = commands.swap(0, Ordering::Relaxed);
        assert_eq!(sent, 2 + 14 * usize::from(partitions), "{partitions}");

        let listed = pending(
            &mut counting,
            &config,
            &PendingQuery {
                limit: 1_000,
                ..PendingQuery::default()
            },
        )
        .await
        .unwrap();
        assert_eq!(listed.rows.len(), usize::from(partitions));
        assert!(listed.rows.iter().all(|row| row.job_id.is_some()));
        assert_eq!(
            round_trips.load(Ordering::Relaxed),
            2,
            "pending with {partitions} partition(s)"
        );
    }
}
