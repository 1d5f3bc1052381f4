//! The fan-in plan of docs/architecture.md#pipelines, simulated in memory before a line of it runs on a server: 2,000 random pipelines, fan-outs, dead letters, delivery orders and crashes between any two steps of a job (`pipeline_sim`). Every join of every run ends published once or failed, never early, with exactly the jobs it waited for in its summary. `tests/tests/run_settle.rs` runs the same against the library's `run_settle`.

mod pipeline_sim;

use pipeline_sim::{simulate, Model};

#[test]
fn every_join_of_every_run_ends_once_with_the_right_summary() {
    for seed in 0..2_000 {
        simulate(seed, Model::default());
    }
}
