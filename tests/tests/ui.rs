//! Compile-fail tests for every error of `#[derive(Envelope)]` and `#[derive(FieldEnum)]`.
//!
//! Each `ui/*.rs` must fail to compile with exactly the diagnostics in its
//! `.stderr`. After changing a message, regenerate with `TRYBUILD=overwrite`
//! and read every changed `.stderr` before committing it.
//!
//! The `ui/envelope_spec_*.rs` cases read fixture specs from `ui/specs/`.
//! A spec path is relative to the compiled crate's Cargo.toml, but trybuild
//! compiles each case in a crate it generates under `target/tests/trybuild/`;
//! `QUEUEGEN_SPEC_BASE_DIR` points the derive at this crate's directory
//! instead, so the same paths work here and in `tests/envelope_spec.rs`.

#[test]
fn ui() {
    // The derive honours it only for the crates cargo is asked to build (the
    // trybuild cases), not for their dependencies. Set before trybuild starts
    // cargo, and this is the only test of this binary, so no thread reads the
    // environment meanwhile.
    std::env::set_var("QUEUEGEN_SPEC_BASE_DIR", env!("CARGO_MANIFEST_DIR"));
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/*.rs");
}
