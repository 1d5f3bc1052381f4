use queuegen_runtime::{Envelope, FieldEnum};

// The spec's values are email, sms, push.
#[derive(FieldEnum)]
enum Channel {
    Email,
    Sms,
    Pager,
}

#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notification")]
struct Notify {
    recipient_ref: String,
    channel: Channel,
    urgent: bool,
    row_limit: Option<u64>,
}

// An enum field must be an enum deriving `FieldEnum`.
#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notification")]
struct Hand {
    recipient_ref: String,
    channel: HandWritten,
    urgent: bool,
    row_limit: Option<u64>,
}

struct HandWritten;

impl queuegen_runtime::FieldValue for HandWritten {
    fn encode_field(&self) -> Option<String> {
        Some("email".into())
    }
    fn decode_field(_: Option<&str>) -> Result<Self, queuegen_runtime::FieldProblem> {
        Ok(HandWritten)
    }
}

fn main() {}
