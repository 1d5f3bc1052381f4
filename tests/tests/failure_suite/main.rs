//! The failure-contract suite: issue 11's scenarios against real servers and processes, on every target, in one summary table.
//!
//! Run by `cargo test` like any test binary (it has its own runner, so that
//! it can print the table), or by `scripts/failure-suite`:
//!
//! ```text
//! cargo test -p queuegen-tests --test failure_suite -- [--long] [--target NAME] [FILTER...]
//! ```
//!
//! Each row is a scenario on a target; it passes when no job was lost (beyond
//! what the scenario destroys on purpose, reported), no effect was applied
//! twice, and every check of the scenario held. Scenarios run in parallel,
//! at most `QUEUEGEN_SUITE_JOBS` at once (default 2, the machine's cores),
//! each on a thread of its own with a current-thread runtime and its own log
//! capture. `--long` (or `QUEUEGEN_SUITE_LONG=1`) runs every scenario with
//! five times the jobs, three times over. A `FILTER` keeps the scenarios
//! whose id contains it; `--list` lists them. `--target NAME` (repeatable)
//! or `QUEUEGEN_SUITE_TARGETS=NAME,NAME` keeps those targets (`scripts/test`
//! runs the ACL targets and the pair on the servers beyond Redis 7.0: each
//! scenario there runs as the generated roles, which is also what the plain
//! targets check, and the CI budget is finite). The process exits non-zero
//! if any row fails.

mod process;
mod scenarios;
mod stage;
mod table;
mod verdict;

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use queuegen_tests::suite::Target;
use queuegen_tests::support::{capture_logs, LogCapture};

use scenarios::{Run, Scenario, Size};
use table::Row;
use verdict::Verdict;

/// Scenarios run at once unless `QUEUEGEN_SUITE_JOBS` says otherwise.
const DEFAULT_PARALLEL: usize = 2;
/// Runs of each row in the long form.
const LONG_REPETITIONS: usize = 3;

/// What the command line and the environment ask for.
struct Options {
    long: bool,
    list: bool,
    /// `--ignored`: cargo asks for ignored tests only, and there are none.
    ignored_only: bool,
    targets: Vec<String>,
    filters: Vec<String>,
}

impl Options {
    fn parse(args: impl Iterator<Item = String>) -> Options {
        let mut options = Options {
            long: std::env::var("QUEUEGEN_SUITE_LONG").is_ok_and(|value| value == "1"),
            list: false,
            ignored_only: false,
            targets: std::env::var("QUEUEGEN_SUITE_TARGETS")
                .map(|names| {
                    names
                        .split(',')
                        .map(str::trim)
                        .filter(|name| !name.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            filters: Vec::new(),
        };
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--long" => options.long = true,
                "--list" => options.list = true,
                "--ignored" => options.ignored_only = true,
                "--target" => options.targets.extend(args.next()),
                // libtest's options, which `cargo test -- …` passes to every
                // test binary: this runner has its own parallelism and output.
                "--test-threads" | "--color" | "--format" | "--logfile" | "--skip" => {
                    args.next();
                }
                _ if arg.starts_with("--target=") => {
                    options.targets.push(arg["--target=".len()..].to_owned());
                }
                _ if arg.starts_with('-') => {}
                _ => options.filters.push(arg),
            }
        }
        options
    }

    fn wants(&self, scenario: &Scenario, target: &Target) -> bool {
        let id_matches = self.filters.is_empty()
            || self
                .filters
                .iter()
                .any(|filter| scenario.id.contains(filter.as_str()));
        let target_matches = self.targets.is_empty() || self.targets.contains(&target.name());
        let applies = scenario.targets.contains(target);
        id_matches && target_matches && applies
    }
}

fn main() -> ExitCode {
    let options = Options::parse(std::env::args().skip(1));
    let scenarios = scenarios::all();
    let known: Vec<String> = Target::all().iter().map(Target::name).collect();
    if let Some(unknown) = options.targets.iter().find(|name| !known.contains(name)) {
        eprintln!(
            "failure suite: no target named {unknown:?} (--target or QUEUEGEN_SUITE_TARGETS); the targets: {}",
            known.join(", ")
        );
        return ExitCode::from(2);
    }
    if options.list {
        for scenario in &scenarios {
            println!("{}: test", scenario.id);
        }
        return ExitCode::SUCCESS;
    }
    let mut planned = Vec::new();
    let mut filtered_out = 0;
    for scenario in &scenarios {
        for target in Target::all() {
            if !options.ignored_only && options.wants(scenario, &target) {
                planned.push((scenario, target));
            } else {
                filtered_out += 1;
            }
        }
    }
    let size = Size { long: options.long };
    let repetitions = if options.long { LONG_REPETITIONS } else { 1 };
    let parallel = std::env::var("QUEUEGEN_SUITE_JOBS")
        .ok()
        .and_then(|jobs| jobs.parse().ok())
        .filter(|&jobs: &usize| jobs > 0)
        .unwrap_or(DEFAULT_PARALLEL);
    println!(
        "failure suite: {} rows x {repetitions} run(s), {} form, {parallel} at once, on {}",
        planned.len(),
        if options.long { "long" } else { "short" },
        server_version(),
    );

    let started = Instant::now();
    let runs: VecDeque<(usize, &Scenario, Target)> = planned
        .iter()
        .enumerate()
        .flat_map(|(index, &(scenario, target))| {
            (0..repetitions).map(move |_| (index, scenario, target))
        })
        .collect();
    let results = run_all(runs, parallel, size);
    let rows: Vec<Row> = planned
        .iter()
        .enumerate()
        .map(|(index, &(scenario, target))| {
            let runs: Vec<&Finished> = results.iter().filter(|run| run.index == index).collect();
            Row::of(
                scenario,
                target,
                &runs.iter().map(|run| &run.verdict).collect::<Vec<_>>(),
                runs.iter().map(|run| run.took).sum(),
            )
        })
        .collect();

    println!();
    print!("{}", table::render(&rows));
    let failed: Vec<&Finished> = results.iter().filter(|run| !run.verdict.passed()).collect();
    for run in &failed {
        println!(
            "\nFAILED {} on {}:\n  {}",
            run.scenario.id,
            run.target.name(),
            run.verdict.problems.join("\n  ")
        );
        let log = run.logs.text();
        let lines: Vec<&str> = log.lines().collect();
        let from = lines.len().saturating_sub(40);
        println!("  last log lines:\n{}", lines[from..].join("\n"));
    }
    let failed_rows = rows.iter().filter(|row| !row.passed).count();
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out; finished in {:.2}s",
        if failed_rows == 0 { "ok" } else { "FAILED" },
        rows.len() - failed_rows,
        failed_rows,
        filtered_out,
        started.elapsed().as_secs_f64(),
    );
    if failed_rows == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One run of a row.
struct Finished<'a> {
    index: usize,
    scenario: &'a Scenario,
    target: Target,
    verdict: Verdict,
    took: Duration,
    logs: LogCapture,
}

/// Runs every run on `parallel` threads; results in the order they finished.
fn run_all<'a>(
    runs: VecDeque<(usize, &'a Scenario, Target)>,
    parallel: usize,
    size: Size,
) -> Vec<Finished<'a>> {
    let queue = Mutex::new(runs);
    let finished = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                let Some((index, scenario, target)) = next else {
                    return;
                };
                let run = run_one(index, scenario, target, size);
                eprintln!(
                    "  {:<4} {:<32} {:<16} {:>6.1}s",
                    if run.verdict.passed() { "ok" } else { "FAIL" },
                    scenario.id,
                    target.name(),
                    run.took.as_secs_f64()
                );
                finished.lock().unwrap_or_else(|p| p.into_inner()).push(run);
            });
        }
    });
    finished.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// Runs one scenario on one target on this thread, its logs captured; a
/// panic (a setup step that failed) fails the run with its message.
fn run_one(index: usize, scenario: &Scenario, target: Target, size: Size) -> Finished<'_> {
    let started = Instant::now();
    let (logs, guard) = capture_logs();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let run = Run {
        target,
        size,
        logs: logs.clone(),
    };
    let outcome =
        std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on((scenario.run)(run))));
    drop(runtime);
    drop(guard);
    let verdict = outcome.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
            .unwrap_or_else(|| "a panic without a message".to_owned());
        let mut verdict = Verdict::default();
        verdict.problem(format!("panicked: {message}"));
        verdict
    });
    Finished {
        index,
        scenario,
        target,
        verdict,
        took: started.elapsed(),
        logs,
    }
}

/// `redis-server --version`, or why it could not be read.
fn server_version() -> String {
    // The binary the harness starts: Redis or Valkey (`QUEUEGEN_SERVER`).
    let binary = queuegen_tests::server_kind::server_binary();
    std::process::Command::new(binary)
        .arg("--version")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|err| format!("the server's --version failed: {err}"))
}
