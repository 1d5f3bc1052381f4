use queuegen_runtime::Envelope;

// A spec saved as Latin-1: the derive points at the byte, as `queuegen check` does.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/latin1.yaml", queue = "ocr")]
struct OcrJob {
    subject_ref: String,
}

fn main() {}
