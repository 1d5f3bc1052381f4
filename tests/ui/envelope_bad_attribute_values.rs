use queuegen_runtime::Envelope;

#[derive(Envelope)]
#[envelope(name = OcrRequested, schema = "3", accepts = 3)]
struct OcrRequested {
    #[envelope(max_bytes, default = true)]
    subject_ref: String,
    #[envelope(max_bytes = -1, rename = "")]
    pages: u32,
}

#[derive(Envelope)]
#[envelope(schema = 2)]
#[envelope(schema = 3, name = "")]
struct GivenTwice {
    subject_ref: String,
}

fn main() {}
