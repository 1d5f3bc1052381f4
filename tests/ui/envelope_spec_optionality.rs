use queuegen_runtime::{Envelope, FieldEnum};

#[derive(FieldEnum)]
enum Channel {
    Email,
    Sms,
    Push,
}

// `Option` where the spec says required (or gives a default), and none
// where it says optional, are reported at the type.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notification")]
struct Notify {
    recipient_ref: Option<String>,
    channel: Channel,
    urgent: Option<bool>,
    row_limit: u64,
}

fn main() {}
