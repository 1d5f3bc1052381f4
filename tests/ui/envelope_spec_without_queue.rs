use queuegen_runtime::Envelope;

#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml")]
struct OcrJob {
    subject_ref: String,
}

#[derive(Envelope)]
#[envelope(queue = "ocr")]
struct Notify {
    recipient_ref: String,
}

fn main() {}
