//! The handler stubs `queuegen generate --stubs` writes compile against the generated code they name: every queue of the example, including the PostgreSQL transaction pattern of its `results: postgres` queues.
//!
//! The stubs are written (as a team's crate would hold them, mounted with
//! `mod handlers;`) into a small binary that trybuild compiles with this
//! crate's dependencies, where the example's generated `queues` module is
//! `docs_pipeline::queues`; then each stub's handler is built and handed to
//! its queue's `worker` constructor, so the types really fit.

use std::fmt::Write as _;

#[test]
fn the_example_s_stubs_compile_against_its_generated_code() {
    let spec_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/docs-pipeline/queues.yaml"
    );
    let spec = queuegen::spec::check_file(std::path::Path::new(spec_path))
        .unwrap()
        .spec
        .expect("the example spec is valid");
    let stubs = queuegen::gen::stubs::generate(&spec, "docs_pipeline::queues").unwrap();
    let module_list = queuegen::gen::stubs::module_list(&spec).unwrap();
    assert!(
        stubs
            .iter()
            .any(|stub| stub.contents.contains("self.results.begin(ctx)")),
        "a results: postgres queue's stub shows the transaction pattern"
    );

    // A crate dir trybuild compiles: src of the binary plus the stubs dir.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("stubs_compile");
    let handlers = dir.join("handlers");
    std::fs::create_dir_all(&handlers).unwrap();
    for stub in stubs.iter().chain([&module_list]) {
        std::fs::write(handlers.join(&stub.path), &stub.contents).unwrap();
    }
    let mut main = String::from(
        "#![deny(warnings)]\n\
         #[path = \"handlers/mod.rs\"]\n\
         mod handlers;\n\n\
         #[allow(dead_code)]\n\
         async fn wire(redis: &queuegen_runtime::Redis, pg: &queuegen_runtime::postgres::Postgres) -> queuegen_runtime::Result<()> {\n\
         use docs_pipeline::queues;\n",
    );
    for queue in &spec.queues {
        let module = queue.name.as_str();
        let handler = stubs
            .iter()
            .find(|stub| stub.path.to_string_lossy() == format!("{module}_handler.rs"))
            .map(|stub| handler_type(&stub.contents))
            .unwrap_or_else(|| panic!("a stub for {module}"));
        let value = if queue.results.is_some() {
            format!("handlers::{module}_handler::{handler} {{ results: queues::{module}::results(pg).await? }}")
        } else {
            format!("handlers::{module}_handler::{handler}")
        };
        writeln!(main, "let _ = queues::{module}::worker(redis, {value});").unwrap();
    }
    main.push_str("let _ = pg;\nOk(())\n}\n\nfn main() {}\n");
    let main_path = dir.join("main.rs");
    std::fs::write(&main_path, main).unwrap();

    trybuild::TestCases::new().pass(&main_path);
}

/// The handler type a stub declares: `pub struct <Name>`.
fn handler_type(stub: &str) -> String {
    stub.lines()
        .find_map(|line| line.strip_prefix("pub struct "))
        .map(|rest| rest.trim_end_matches(';').trim_end_matches(" {").to_owned())
        .expect("a stub declares its handler struct")
}
