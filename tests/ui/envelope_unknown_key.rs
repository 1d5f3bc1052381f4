use queuegen_runtime::Envelope;

#[derive(Envelope)]
#[envelope(shema = 3)]
struct Typo {
    subject_ref: String,
}

// `spec` and `queue` are not envelope attributes (yet): no close match.
#[derive(Envelope)]
#[envelope(spec = "queues.yaml", queue = "ocr")]
struct FromSpec {
    subject_ref: String,
}

fn main() {}
