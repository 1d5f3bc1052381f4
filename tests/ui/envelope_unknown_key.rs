use queuegen_runtime::Envelope;

#[derive(Envelope)]
#[envelope(shema = 3)]
struct Typo {
    subject_ref: String,
}

// No close match: every key is listed.
#[derive(Envelope)]
#[envelope(path = "queues.yaml")]
struct FromSpec {
    subject_ref: String,
}

fn main() {}
