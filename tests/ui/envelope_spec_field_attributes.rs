use queuegen_runtime::{Envelope, FieldEnum};

#[derive(FieldEnum)]
enum Channel {
    Email,
    Sms,
    Push,
}

// Field attributes may repeat the spec, never contradict it.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notification")]
struct Notify {
    #[envelope(max_bytes = 128)]
    recipient_ref: String,
    #[envelope(default)]
    channel: Channel,
    #[envelope(default = "true")]
    urgent: bool,
    #[envelope(max_bytes = 8)]
    row_limit: Option<u64>,
}

// A rename that takes a field away from its spec name, and a `default`
// that cannot be told to be the spec's.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notification")]
struct Renamed {
    recipient_ref: String,
    #[envelope(rename = "via")]
    channel: Channel,
    #[envelope(default)]
    urgent: bool,
    row_limit: Option<u64>,
}

fn main() {}
