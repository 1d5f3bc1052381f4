use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct OcrRequested<T> {
    subject_ref: T,
}

fn main() {}
