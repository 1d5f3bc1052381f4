use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct Ping;

fn main() {}
