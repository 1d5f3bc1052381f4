use queuegen_runtime::{Envelope, FieldEnum, Timestamp};

#[derive(FieldEnum)]
enum Priority {
    Low,
    Normal,
    High,
}

// Every spec field the struct lacks is reported at the struct's name, with
// the declaration to add.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "ocr")]
struct OcrJob {
    subject_ref: String,
    priority: Priority,
    requested_at: Timestamp,
}

#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notification")]
struct Notify {
    recipient_ref: String,
    urgent: bool,
    row_limit: Option<u64>,
}

fn main() {}
