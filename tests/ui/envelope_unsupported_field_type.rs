use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct OcrRequested {
    subject_ref: String,
    thumbnail: Vec<u8>,
    confidence: f64,
}

fn main() {}
