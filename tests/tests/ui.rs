//! Compile-fail tests for every error of `#[derive(Envelope)]` and `#[derive(FieldEnum)]`.
//!
//! Each `ui/*.rs` must fail to compile with exactly the diagnostics in its
//! `.stderr`. After changing a message, regenerate with `TRYBUILD=overwrite`
//! and read every changed `.stderr` before committing it.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/*.rs");
}
