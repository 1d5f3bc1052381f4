//! The programs the images run: this package's `queuegen` CLI, and worker binaries of other workspace packages, built by cargo the way the workspace builds them.

use std::path::PathBuf;
use std::process::Command;

/// The `queuegen` CLI (the monitor and trim images' `command`).
pub fn queuegen() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_queuegen"))
}

/// The executable of `package`'s binary `bin`, built now: cargo gives a
/// test only its own package's binaries, and a worker image runs another
/// package's. Nothing is rebuilt when it is current (cargo releases its
/// build lock while tests run, so this waits at most for other builds).
pub fn built(package: &str, bin: &str) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let mut command = Command::new(&cargo);
    command
        .args(["build", "--quiet", "--message-format=json"])
        .args(["--manifest-path", manifest, "-p", package, "--bin", bin]);
    // The variables cargo set for this test describe this package, not the
    // build: passed on, a build script that watches one (ring's watches
    // CARGO_MANIFEST_DIR) would see it change, and the workspace's next
    // cargo run would rebuild ring, rustls, redis and every crate above.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_for_the_test = ["CARGO_MANIFEST_", "CARGO_PKG_", "CARGO_BIN_EXE_"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
            || [
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
            ]
            .contains(&name.as_ref());
        if set_for_the_test {
            command.env_remove(name.as_ref());
        }
    }
    if !cfg!(debug_assertions) {
        command.arg("--release");
    }
    let out = command
        .output()
        .unwrap_or_else(|err| panic!("running {cargo:?} build -p {package} --bin {bin}: {err}"));
    assert!(
        out.status.success(),
        "cargo build -p {package} --bin {bin} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["target"]["name"] == bin)
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo build -p {package} --bin {bin} named no executable"))
}
