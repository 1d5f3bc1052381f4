//! The handler stubs committed in `examples/docs-pipeline/src/stubs/` are what `queuegen generate --stubs` writes for the example today.
//!
//! The example crate compiles them and hands each stub's handler to its
//! queue's worker constructor (`stubs_wiring` in its lib.rs), so a generator
//! change that breaks a stub fails the workspace build; this test makes sure
//! the committed stubs cannot drift from the generator's output unnoticed.

use std::path::Path;

#[test]
fn the_example_s_committed_stubs_are_what_the_generator_writes() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/docs-pipeline");
    let spec = queuegen::spec::check_file(&example.join("queues.yaml"))
        .unwrap()
        .spec
        .expect("the example spec is valid");
    let stubs = queuegen::gen::stubs::generate(&spec, "crate::queues").unwrap();
    let module_list = queuegen::gen::stubs::module_list(&spec).unwrap();
    assert!(
        stubs
            .iter()
            .any(|stub| stub.contents.contains("self.results.begin(ctx)")),
        "a results: postgres queue's stub shows the transaction pattern"
    );

    let committed = example.join("src/stubs");
    let mut stale = Vec::new();
    for stub in stubs.iter().chain([&module_list]) {
        let path = committed.join(&stub.path);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(stub.contents.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale or missing stubs: {stale:?}; regenerate them with \
         `rm -r examples/docs-pipeline/src/stubs && queuegen generate examples/docs-pipeline/queues.yaml \
         --out examples/docs-pipeline/src/queues --stubs examples/docs-pipeline/src/stubs`"
    );
}
