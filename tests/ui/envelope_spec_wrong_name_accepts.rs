use queuegen_runtime::{Envelope, FieldEnum};

#[derive(FieldEnum)]
enum Channel {
    Email,
    Sms,
    Push,
}

#[derive(Envelope)]
#[envelope(
    spec = "ui/specs/envelopes.yaml",
    queue = "notification",
    name = "Notification",
    accepts = [1, 2]
)]
struct Notify {
    recipient_ref: String,
    channel: Channel,
    urgent: bool,
    row_limit: Option<u64>,
}

fn main() {}
