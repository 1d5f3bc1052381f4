use queuegen_runtime::Envelope;

#[derive(Envelope)]
#[envelope(schema = 3, accepts = [1, 2])]
struct OcrRequested {
    subject_ref: String,
}

fn main() {}
