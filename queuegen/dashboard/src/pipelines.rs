//! The pipelines' pages: each pipeline's joins with their runs in flight
//! (oldest first, with the oldest wait), and one run at every join (its
//! state, when it started and ended, and its jobs grouped by stage), read
//! with `ops::runs` as `queuegen runs` reads them.
//!
//! A run's page is `/pipelines/<pipeline>/runs/<run_id>`, the run ID as one
//! percent-encoded path segment (a run ID may hold `/`: the route takes the
//! rest of the path, encoded or not). Ended runs are not listed (the
//! library keeps no index of them); the lookup form finds one by its ID.

use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{Query, RawPathParams, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use queuegen_runtime::ops::runs::{
    self as view, JoinRun, RunReport, RunState, RunsReport, SettledOutcome,
};
use queuegen_spec::model::Pipeline;
use serde::{Deserialize, Serialize};

use super::{ids, Dashboard, DashboardPipeline};

/// Runs listed per join on a pipeline's page, oldest first.
const RUNS_SHOWN: usize = 50;
/// Jobs of each kind (outstanding, settled) shown per join on a run's page.
const JOBS_SHOWN: usize = 100;

/// `GET /pipelines`: every pipeline's joins with their runs in flight.
pub(super) async fn all(State(dashboard): State<Dashboard>, headers: HeaderMap) -> Response {
    let pipelines: Vec<&DashboardPipeline> = dashboard.inner.pipelines.iter().collect();
    match pipelines_context(&dashboard, &pipelines, None).await {
        Ok(page) => dashboard.render_page(&headers, "pipelines.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

/// `GET /pipelines/{pipeline}`: one pipeline's joins with their runs in flight.
pub(super) async fn one(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    params: Result<RawPathParams, RawPathParamsRejection>,
) -> Response {
    let page = async {
        let [name] = path_params(params, ["pipeline"])?;
        let pipeline = dashboard.pipeline(&name)?;
        pipelines_context(&dashboard, &[pipeline], Some(&name)).await
    };
    match page.await {
        Ok(page) => dashboard.render_page(&headers, "pipelines.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Lookup {
    id: Option<String>,
}

/// `GET /pipelines/{pipeline}/runs?id=ID`: the lookup form's answer, a
/// redirect to the run's page (ended runs are found by ID only).
pub(super) async fn lookup(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    params: Result<RawPathParams, RawPathParamsRejection>,
    Query(query): Query<Lookup>,
) -> Response {
    let found = (|| {
        let [name] = path_params(params, ["pipeline"])?;
        dashboard.pipeline(&name)?;
        let text = query.id.unwrap_or_default();
        let run_id = ids::run_id(&name, &text)?;
        Ok::<_, crate::Error>(format!(
            "{}/pipelines/{}/runs/{}",
            dashboard.inner.options.mounted_at,
            ids::path_segment(&name),
            ids::path_segment(run_id)
        ))
    })();
    match found {
        Ok(to) => Redirect::to(&to).into_response(),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

/// `GET /pipelines/{pipeline}/runs/{*run_id}`: the run at every join.
pub(super) async fn run(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    params: Result<RawPathParams, RawPathParamsRejection>,
) -> Response {
    let page = async {
        let [name, run_id] = path_params(params, ["pipeline", "run_id"])?;
        let pipeline = dashboard.pipeline(&name)?;
        // Checked before Redis is asked: a malformed ID is a 400 naming it.
        let run_id = ids::run_id(&name, &run_id)?;
        let report = view::run(
            &mut dashboard.inner.redis.shared(),
            &pipeline.graph,
            &pipeline.configs,
            run_id,
            JOBS_SHOWN,
        )
        .await?;
        Ok::<_, crate::Error>(run_context(&dashboard, pipeline, &report))
    };
    match page.await {
        Ok(page) => dashboard.render_page(&headers, "run.html", page),
        Err(err) => dashboard.error_page(&headers, &err),
    }
}

/// The path's parameters named `names`, in that order, percent-decoded. A
/// parameter that is not UTF-8 once decoded is a 400 naming it.
fn path_params<const N: usize>(
    params: Result<RawPathParams, RawPathParamsRejection>,
    names: [&str; N],
) -> crate::Result<[String; N]> {
    let params = params.map_err(|rejection| {
        crate::Error::BadRequest(format!(
            "the path is not a pipeline page's: {} (pipeline names and run IDs are UTF-8 text)",
            rejection.body_text()
        ))
    })?;
    Ok(names.map(|name| {
        params
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_owned())
            .unwrap_or_default()
    }))
}

/// `ocr → index, thumbnail; document-ready joins index, thumbnail`.
fn shape(pipeline: &Pipeline) -> String {
    pipeline
        .stages
        .iter()
        .filter_map(|stage| match &stage.join {
            Some(join) => Some(format!("{} joins {}", stage.queue, join.after.join(", "))),
            None if !stage.then.is_empty() => {
                Some(format!("{} → {}", stage.queue, stage.then.join(", ")))
            }
            None => None,
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A pipeline's page: its graph and its joins' runs in flight.
#[derive(Debug, Serialize)]
struct PipelineView {
    #[serde(flatten)]
    report: RunsReport,
    shape: String,
}

async fn pipelines_context(
    dashboard: &Dashboard,
    pipelines: &[&DashboardPipeline],
    only: Option<&str>,
) -> crate::Result<minijinja::Value> {
    let mut views = Vec::with_capacity(pipelines.len());
    let mut server_time_ms = None;
    for pipeline in pipelines {
        let report = view::runs(
            &mut dashboard.inner.redis.shared(),
            &pipeline.graph,
            &pipeline.configs,
            RUNS_SHOWN,
        )
        .await?;
        server_time_ms = Some(report.server_time_ms);
        views.push(PipelineView {
            shape: shape(&pipeline.graph),
            report,
        });
    }
    Ok(context! {
        pipelines => views,
        only => only,
        server => dashboard.inner.redis.addr(),
        server_time_ms => server_time_ms,
        shown => RUNS_SHOWN,
    })
}

/// A job of a run at a join, as its row shows it.
#[derive(Debug, Serialize)]
struct JobRow {
    job_id: String,
    /// `waiting`, `done`, `dead` or `ended` (settled, not waited for).
    state: &'static str,
    result_ref: Option<String>,
}

/// The jobs of one stage at a join.
#[derive(Debug, Serialize)]
struct StageJobs {
    /// `None`: the job's ID does not say (not derived by the runtime).
    stage: Option<String>,
    waiting: usize,
    done: usize,
    dead: usize,
    ended: usize,
    jobs: Vec<JobRow>,
}

/// A run at one join, as the run's page shows it.
#[derive(Debug, Serialize)]
struct JoinRunView<'a> {
    #[serde(flatten)]
    run: &'a JoinRun,
    state_text: &'static str,
    after: &'a [String],
    on_dead_letter: &'static str,
    /// The dashboard shows the join's queue (so the join's entry links to
    /// its partition's page).
    queue_shown: bool,
    stages: Vec<StageJobs>,
    /// More jobs are outstanding, or settled, than listed (a sample).
    outstanding_sampled: bool,
    settled_sampled: bool,
}

/// The jobs of `run` grouped by the stage their IDs name, in the
/// pipeline's order of stages (jobs whose ID names none last); in each,
/// those still waiting first, then the settled, each by job ID.
fn by_stage(pipeline: &Pipeline, run: &JoinRun) -> Vec<StageJobs> {
    let order = |stage: &Option<String>| {
        stage
            .as_deref()
            .and_then(|stage| pipeline.stages.iter().position(|s| s.queue == stage))
            .unwrap_or(usize::MAX)
    };
    let mut groups: Vec<StageJobs> = Vec::new();
    let mut group = |stage: &Option<String>| -> usize {
        match groups.iter().position(|g| g.stage == *stage) {
            Some(at) => at,
            None => {
                groups.push(StageJobs {
                    stage: stage.clone(),
                    waiting: 0,
                    done: 0,
                    dead: 0,
                    ended: 0,
                    jobs: Vec::new(),
                });
                groups.len() - 1
            }
        }
    };
    let mut rows: Vec<(usize, JobRow)> = Vec::new();
    for job in &run.outstanding_jobs {
        rows.push((
            group(&job.stage),
            JobRow {
                job_id: job.job_id.clone(),
                state: "waiting",
                result_ref: None,
            },
        ));
    }
    for job in &run.settled_jobs {
        let state = match job.outcome {
            SettledOutcome::Done => "done",
            SettledOutcome::Dead => "dead",
            SettledOutcome::NotWaitedFor => "ended",
        };
        rows.push((
            group(&job.stage),
            JobRow {
                job_id: job.job_id.clone(),
                state,
                result_ref: job.result_ref.clone(),
            },
        ));
    }
    for (at, row) in rows {
        let g = &mut groups[at];
        match row.state {
            "waiting" => g.waiting += 1,
            "done" => g.done += 1,
            "dead" => g.dead += 1,
            _ => g.ended += 1,
        }
        g.jobs.push(row);
    }
    groups.sort_by_key(|g| order(&g.stage));
    groups
}

fn run_context(
    dashboard: &Dashboard,
    pipeline: &DashboardPipeline,
    report: &RunReport,
) -> minijinja::Value {
    let joins: Vec<JoinRunView<'_>> = report
        .joins
        .iter()
        .map(|run| {
            let rule = pipeline
                .graph
                .joins()
                .find(|(stage, _)| stage.queue == run.join)
                .map(|(_, rule)| rule);
            JoinRunView {
                run,
                state_text: run.state.as_str(),
                after: rule.map_or(&[], |rule| rule.after.as_slice()),
                on_dead_letter: rule.map_or("", |rule| rule.on_dead_letter.as_str()),
                queue_shown: dashboard.queue(&run.join).is_ok(),
                stages: by_stage(&pipeline.graph, run),
                outstanding_sampled: (run.outstanding_jobs.len() as u64) < run.outstanding,
                settled_sampled: (run.settled_jobs.len() as u64) < run.settled,
            }
        })
        .collect();
    let ended = report
        .joins
        .iter()
        .all(|join| matches!(join.state, RunState::Published | RunState::Failed));
    context! {
        pipeline => report.pipeline,
        run_id => report.run_id,
        first => pipeline.graph.first,
        shape => shape(&pipeline.graph),
        server_time_ms => report.server_time_ms,
        keep_ms => report.keep_ms,
        ended => ended,
        joins => joins,
        jobs_shown => JOBS_SHOWN,
        server => dashboard.inner.redis.addr(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use queuegen_spec::model::{Join, OnDeadLetter, Stage};

    use super::*;

    fn pipeline() -> Pipeline {
        let stage = |queue: &str, then: &[&str], join: Option<&[&str]>| Stage {
            queue: queue.to_owned(),
            then: then.iter().map(|s| s.to_string()).collect(),
            max_children: 100,
            join: join.map(|after| Join {
                after: after.iter().map(|s| s.to_string()).collect(),
                on_dead_letter: OnDeadLetter::Fail,
            }),
        };
        Pipeline {
            name: "documents".into(),
            stages: vec![
                stage("ocr", &["index", "thumbnail"], None),
                stage("index", &[], None),
                stage("thumbnail", &[], None),
                stage("notify", &[], Some(&["index", "thumbnail"])),
            ],
            first: "ocr".into(),
            keep: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_pipeline_is_described_by_its_hand_offs_and_joins() {
        assert_eq!(
            shape(&pipeline()),
            "ocr → index, thumbnail; notify joins index, thumbnail"
        );
    }

    #[test]
    fn a_run_s_jobs_are_grouped_by_stage_in_the_pipeline_s_order() {
        use queuegen_runtime::ops::runs::{RunJob, SettledRecord};
        let job = |id: &str, stage: Option<&str>| RunJob {
            job_id: id.to_owned(),
            stage: stage.map(str::to_owned),
        };
        let settled =
            |id: &str, stage: Option<&str>, outcome, result: Option<&str>| SettledRecord {
                job_id: id.to_owned(),
                stage: stage.map(str::to_owned),
                outcome,
                result_ref: result.map(str::to_owned),
            };
        let run = JoinRun {
            join: "notify".into(),
            partition: queuegen_runtime::Partition::new(0),
            key: "k".into(),
            state: RunState::Open,
            opened: true,
            started_ms: Some(1),
            ended_ms: None,
            waited_ms: Some(1),
            join_entry: None,
            expires_ms: None,
            outstanding: 2,
            outstanding_jobs: vec![job("d/thumbnail/1", Some("thumbnail")), job("x", None)],
            settled: 3,
            settled_jobs: vec![
                settled("d", Some("ocr"), SettledOutcome::NotWaitedFor, None),
                settled("d/index/1", Some("index"), SettledOutcome::Done, Some("r1")),
                settled("d/index/2", Some("index"), SettledOutcome::Dead, None),
            ],
        };
        let groups = by_stage(&pipeline(), &run);
        type Group<'a> = (Option<&'a str>, Vec<(&'a str, &'a str)>);
        let summary: Vec<Group<'_>> = groups
            .iter()
            .map(|g| {
                (
                    g.stage.as_deref(),
                    g.jobs
                        .iter()
                        .map(|j| (j.job_id.as_str(), j.state))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Some("ocr"), vec![("d", "ended")]),
                (
                    Some("index"),
                    vec![("d/index/1", "done"), ("d/index/2", "dead")]
                ),
                (Some("thumbnail"), vec![("d/thumbnail/1", "waiting")]),
                (None, vec![("x", "waiting")]),
            ]
        );
        let index = &groups[1];
        assert_eq!((index.done, index.dead, index.waiting), (1, 1, 0));
        assert_eq!(index.jobs[0].result_ref.as_deref(), Some("r1"));
    }
}
