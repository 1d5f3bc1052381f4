use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct OcrRequested {
    #[envelope(max_byte = 200)]
    subject_ref: String,
    #[envelope(skip)]
    pages: u32,
}

fn main() {}
