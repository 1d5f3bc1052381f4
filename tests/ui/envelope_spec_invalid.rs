use queuegen_runtime::Envelope;

#[derive(Envelope)]
#[envelope(spec = "ui/specs/invalid.yaml", queue = "ocr")]
struct OcrJob {
    subject_ref: String,
}

fn main() {}
