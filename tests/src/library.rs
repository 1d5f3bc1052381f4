//! The generated Function libraries, loaded into the tests' servers the way `queuegen apply` loads them.
//!
//! Workers refuse to start where their library is missing, so every test
//! that runs one loads the library first. The files are the committed
//! output of `queuegen generate --deploy-out`, read at run time.

use std::path::{Path, PathBuf};

use queuegen_runtime::Redis;

/// `tests/deploy/functions.lua`: the library of tests/queues.yaml (service `queuegen-tests`).
pub fn tests_library_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/functions.lua")
}

/// `examples/docs-pipeline/deploy/functions.lua`: the example's library.
pub fn example_library_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/docs-pipeline/deploy/functions.lua")
}

/// The code of a library file; panics naming the file and how to make it.
pub fn code(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| {
        panic!(
            "reading {}: {err} (run `queuegen generate SPEC --out ... --deploy-out DIR` to generate it)",
            path.display()
        )
    })
}

/// Loads the tests' library (`FUNCTION LOAD REPLACE`).
pub async fn load(redis: &Redis) {
    load_code(redis, &code(&tests_library_path())).await;
}

/// Loads the docs-pipeline example's library.
pub async fn load_example(redis: &Redis) {
    load_code(redis, &code(&example_library_path())).await;
}

/// Loads `code`; panics with the server's error.
pub async fn load_code(redis: &Redis, code: &str) {
    queuegen_runtime::admin::load_library(redis, code)
        .await
        .unwrap_or_else(|err| panic!("loading the Function library: {err}"));
}

/// The same library under another version: every `_v<from>` name becomes
/// `_v<to>`, as the generator's next library version would name it.
pub fn as_version(code: &str, service: &str, from: u32, to: u32) -> String {
    let stem = format!("qg_{}_v", service.replace('-', "_"));
    let renamed = code.replace(&format!("{stem}{from}"), &format!("{stem}{to}"));
    assert_ne!(renamed, code, "the library names no {stem}{from}");
    renamed
}
