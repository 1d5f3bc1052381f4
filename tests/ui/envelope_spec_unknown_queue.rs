use queuegen_runtime::Envelope;

#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "notifications")]
struct Notify {
    recipient_ref: String,
}

#[derive(Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "billing")]
struct Invoice {
    invoice_ref: String,
}

fn main() {}
