use queuegen_runtime::Envelope;

#[derive(Envelope)]
enum Priority {
    Low,
    High,
}

fn main() {}
