use queuegen_runtime::Envelope;

// Relative to the crate's Cargo.toml (here tests/), not to this file.
#[derive(Envelope)]
#[envelope(spec = "specs/envelopes.yaml", queue = "ocr")]
struct OcrJob {
    subject_ref: String,
}

fn main() {}
