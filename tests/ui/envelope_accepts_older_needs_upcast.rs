use queuegen_runtime::{Envelope, FieldEnum, Timestamp};

// Accepting an older schema needs `impl Upcast`, which decodes its entries.
#[derive(Envelope)]
#[envelope(schema = 2, accepts = [1, 2])]
struct Reindex {
    subject_ref: String,
}

#[derive(FieldEnum)]
enum Priority {
    Low,
    Normal,
    High,
}

// Likewise when the spec's envelope accepts older versions.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "ocr")]
struct OcrJob {
    subject_ref: String,
    pages: Option<u32>,
    priority: Priority,
    searchable: bool,
    requested_at: Timestamp,
    max_retries: i32,
}

fn main() {}
