//! The generated `redis/queue.conf`, included by a real redis-server: `CONFIG GET` shows every setting it makes.

use std::path::Path;

use queuegen::gen::deploy::conf;
use queuegen_tests::RedisServer;

fn spec_of(source: &str, file: &str) -> queuegen::spec::model::Spec {
    let checked = queuegen::spec::check_str(source, file);
    checked
        .spec
        .unwrap_or_else(|| panic!("{file} is invalid: {:?}", checked.diagnostics))
}

fn committed(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Starts a server including `fragment` after the harness's own settings
/// and checks that each directive took effect.
fn each_setting_is_in_effect(fragment: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.conf");
    std::fs::write(&path, fragment).unwrap();
    let server = RedisServer::start_with(&["--include", path.to_str().unwrap()]);
    let mut conn = server.connection();
    let settings = conf::directives(fragment);
    assert!(settings.len() >= 8, "{settings:?}");
    for (name, value) in settings {
        let (_, actual): (String, String) = redis::cmd("CONFIG")
            .arg("GET")
            .arg(&name)
            .query(&mut conn)
            .unwrap_or_else(|err| panic!("CONFIG GET {name}: {err}"));
        assert_eq!(actual, value, "{name}");
    }
}

#[test]
fn the_example_fragment_is_in_effect_with_everysec() {
    let spec = spec_of(
        &committed("examples/docs-pipeline/queues.yaml"),
        "queues.yaml",
    );
    let fragment = conf::generate(&spec, "../queues.yaml").unwrap().contents;
    assert!(fragment.contains("\nappendfsync everysec\n"));
    assert!(!fragment.contains("cluster-enabled"));
    each_setting_is_in_effect(&fragment);
}

#[test]
fn persistence_always_and_a_cluster_deployment_are_in_effect() {
    let source = committed("tests/queues.yaml").replace(
        "redis:\n  key_prefix: qgtest\n",
        "redis:\n  key_prefix: qgtest\n  persistence: always\n  deployment: cluster\n",
    );
    let spec = spec_of(&source, "queues.yaml");
    let fragment = conf::generate(&spec, "queues.yaml").unwrap().contents;
    assert!(fragment.contains("\nappendfsync always\n"));
    assert!(fragment.contains("\ncluster-enabled yes\n"));
    each_setting_is_in_effect(&fragment);
}
