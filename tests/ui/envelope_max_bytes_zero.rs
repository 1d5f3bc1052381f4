use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct OcrRequested {
    #[envelope(max_bytes = 0)]
    subject_ref: String,
}

fn main() {}
