use queuegen_runtime::{Envelope, FieldEnum};

#[derive(FieldEnum)]
enum Channel {
    Email,
    Sms,
    Push,
}

// Each field whose type is not the spec's is reported at the type.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notification")]
struct Notify {
    recipient_ref: Channel,
    channel: String,
    urgent: u8,
    row_limit: Option<u32>,
}

fn main() {}
