//! What a stage worker's settles did to its runs, counted in the worker's metrics (`queuegen_pipeline_runs`).

/// A run's event at one join, as `run_settle` answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEvent {
    /// The first stage's job opened the run there.
    Started,
    /// The join's job was published (once per run).
    Published,
    /// A dead letter failed the run there.
    Failed,
}

impl RunEvent {
    fn as_str(self) -> &'static str {
        match self {
            RunEvent::Started => "started",
            RunEvent::Published => "published",
            RunEvent::Failed => "failed",
        }
    }
}

/// The worker's counters of run events, when it has metrics; cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct RunEvents {
    #[cfg(feature = "metrics")]
    counters: Option<
        prometheus_client::metrics::family::Family<
            crate::metrics::RunLabels,
            prometheus_client::metrics::counter::Counter,
        >,
    >,
}

impl RunEvents {
    #[cfg(feature = "metrics")]
    pub(crate) fn new(
        counters: Option<
            prometheus_client::metrics::family::Family<
                crate::metrics::RunLabels,
                prometheus_client::metrics::counter::Counter,
            >,
        >,
    ) -> RunEvents {
        RunEvents { counters }
    }

    /// Counts `event` of a run of `pipeline` at `join`.
    pub(crate) fn record(&self, pipeline: &str, join: &str, event: RunEvent) {
        #[cfg(feature = "metrics")]
        if let Some(counters) = &self.counters {
            counters
                .get_or_create(&crate::metrics::RunLabels {
                    pipeline: pipeline.to_owned(),
                    join: join.to_owned(),
                    event: event.as_str(),
                })
                .inc();
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (pipeline, join, event.as_str());
    }
}

impl std::fmt::Debug for RunEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEvents").finish_non_exhaustive()
    }
}
