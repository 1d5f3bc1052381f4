use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct OcrRequested {
    #[envelope(default)]
    pages: Option<u32>,
}

fn main() {}
