use queuegen_runtime::Envelope;

// Every header field name the runtime writes, as a field name.
#[derive(Envelope)]
struct ByFieldName {
    job_id: String,
    r#type: String,
    tenant: String,
    schema: u32,
    created_at: String,
    trace_id: String,
    attempt: u32,
    prev_id: String,
    reason: String,
}

// And given as a wire name.
#[derive(Envelope)]
struct ByRename {
    #[envelope(rename = "job_id")]
    request_id: String,
}

fn main() {}
