//! Pipeline errors: a stage worker set up against a pipeline it is not part of, or a hand-off its pipeline does not allow.

/// Why a stage worker cannot start, or a job's hand-off was refused before
/// anything of it was published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The worker's queue is not a stage of the pipeline, or the pipeline
    /// was given no queue configuration for one of its stages.
    #[error(
        "pipeline {pipeline}: {stage} is not a stage with a queue configuration (stages: {known})"
    )]
    NoSuchStage {
        pipeline: String,
        stage: String,
        /// The pipeline's stages that have one, comma-separated.
        known: String,
    },

    /// A handler handed jobs to a stage that is not in its stage's `then`
    /// (the generated types make this impossible; a hand-written hand-off
    /// can get it wrong).
    #[error("pipeline {pipeline}: job {job_id:?} of stage {stage} handed jobs to {to}, which is not in the stage's then ({then})")]
    NotNext {
        pipeline: String,
        stage: String,
        job_id: String,
        to: String,
        then: String,
    },

    /// A job other than the first stage's handed on a join's envelope, or
    /// the first stage's job handed on none for a join.
    #[error("pipeline {pipeline}: job {job_id:?} of stage {stage}: {problem}")]
    JoinEnvelope {
        pipeline: String,
        stage: String,
        job_id: String,
        problem: String,
    },

    /// A job of a stage after the first carries no run (`run_id` and
    /// `parent`): it was published by hand, not handed on.
    #[error("pipeline {pipeline}: job {job_id:?} of stage {stage} carries no run_id and parent; only the first stage ({first}) starts runs, so publish to it")]
    NoRun {
        pipeline: String,
        stage: String,
        job_id: String,
        first: String,
    },
}
