use queuegen_runtime::Envelope;

// One compile reports every problem, each at its own place.
#[derive(Envelope)]
#[envelope(schema = 2, acepts = [1, 2])]
struct OcrRequested {
    #[envelope(max_bytes = 0)]
    subject_ref: String,
    #[envelope(rename = "attempt")]
    tries: u32,
    #[envelope(rename = "subject_ref", default)]
    subject: Option<String>,
}

fn main() {}
