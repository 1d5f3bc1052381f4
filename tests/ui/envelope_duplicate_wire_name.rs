use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct OcrRequested {
    subject_ref: String,
    #[envelope(rename = "subject_ref")]
    subject: String,
}

fn main() {}
