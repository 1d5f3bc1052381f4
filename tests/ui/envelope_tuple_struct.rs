use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct OcrRequested(String, u32);

fn main() {}
