use queuegen_runtime::{Envelope, FieldEnum};

#[derive(FieldEnum)]
enum Channel {
    Email,
    Sms,
    Push,
}

// Struct fields the spec does not have are reported at the field, with the
// closest spec field when one is close.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notification")]
struct Notify {
    recipient_ref: String,
    chanel: Channel,
    urgent: bool,
    row_limit: Option<u64>,
    sent_by: String,
    #[envelope(rename = "locale")]
    language: String,
}

fn main() {}
