//! A pipeline as its stage workers need it: the graph, and each stage's queue configuration.

use std::sync::{Arc, OnceLock};

use queuegen_core::pipeline::Pipeline;

use crate::config::QueueConfig;
use crate::connect::Redis;
use crate::error::{PipelineError, Result};
use crate::functions::RunSettled;

use super::batched::{self, PublishRequest, SettleRequest};
use super::coalesce::Coalescer;

/// Most requests one batch of each kind takes from its queue.
const MAX_WAITING: usize = 1024;

/// One pipeline, shared by the workers of its stages in a process: the
/// graph the spec check accepted, the configuration of every stage's queue
/// (where children are published and joins keep their state), and the
/// connection it all goes over. Cheap to clone.
#[derive(Clone)]
pub struct PipelineRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    graph: Pipeline,
    configs: Vec<QueueConfig>,
    redis: Redis,
    /// The settles and the hand-offs of this process's stage workers,
    /// sent together when they wait together; started on first use.
    settles: OnceLock<Coalescer<SettleRequest, RunSettled>>,
    publishes: OnceLock<Coalescer<PublishRequest, ()>>,
}

impl std::fmt::Debug for PipelineRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineRuntime")
            .field("pipeline", &self.inner.graph.name)
            .finish_non_exhaustive()
    }
}

impl PipelineRuntime {
    /// `graph` with the configuration of each of its stages' queues
    /// (others are ignored). Refused, naming the stage, when a stage has
    /// none: its children or its join state would have nowhere to go.
    pub fn new(
        redis: &Redis,
        graph: Pipeline,
        configs: impl IntoIterator<Item = QueueConfig>,
    ) -> Result<Self> {
        let configs: Vec<QueueConfig> = configs
            .into_iter()
            .filter(|config| graph.stage(&config.queue).is_some())
            .collect();
        if let Some(missing) = graph
            .stages
            .iter()
            .find(|stage| !configs.iter().any(|c| *c.queue == stage.queue))
        {
            return Err(PipelineError::NoSuchStage {
                pipeline: graph.name.clone(),
                stage: missing.queue.clone(),
                known: configs
                    .iter()
                    .map(|c| &*c.queue)
                    .collect::<Vec<_>>()
                    .join(", "),
            }
            .into());
        }
        Ok(PipelineRuntime {
            inner: Arc::new(Inner {
                graph,
                configs,
                redis: redis.clone(),
                settles: OnceLock::new(),
                publishes: OnceLock::new(),
            }),
        })
    }

    pub fn graph(&self) -> &Pipeline {
        &self.inner.graph
    }

    pub fn name(&self) -> &str {
        &self.inner.graph.name
    }

    pub(crate) fn redis(&self) -> &Redis {
        &self.inner.redis
    }

    /// Where settles go to be sent with those that wait with them.
    pub(crate) fn settles(&self) -> &Coalescer<SettleRequest, RunSettled> {
        self.inner.settles.get_or_init(|| {
            let redis = self.inner.redis.clone();
            Coalescer::start(MAX_WAITING, move |requests| {
                let redis = redis.clone();
                async move { batched::send_settles(&redis, requests).await }
            })
        })
    }

    /// Where hand-offs go to be sent with those that wait with them.
    pub(crate) fn publishes(&self) -> &Coalescer<PublishRequest, ()> {
        self.inner.publishes.get_or_init(|| {
            let redis = self.inner.redis.clone();
            Coalescer::start(MAX_WAITING, move |requests| {
                let redis = redis.clone();
                async move { batched::send_publishes(&redis, requests).await }
            })
        })
    }

    /// The queue configuration of `stage`, checked to exist by [`PipelineRuntime::new`].
    pub(crate) fn config(&self, stage: &str) -> Result<&QueueConfig> {
        self.inner
            .configs
            .iter()
            .find(|config| *config.queue == *stage)
            .ok_or_else(|| {
                PipelineError::NoSuchStage {
                    pipeline: self.name().to_owned(),
                    stage: stage.to_owned(),
                    known: self
                        .inner
                        .configs
                        .iter()
                        .map(|c| &*c.queue)
                        .collect::<Vec<_>>()
                        .join(", "),
                }
                .into()
            })
    }

    /// How long a run's record is kept after it ends, in ms (at least 1).
    pub(crate) fn keep_ms(&self) -> u64 {
        u64::try_from(self.inner.graph.keep.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}
