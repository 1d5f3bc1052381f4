use queuegen_runtime::Envelope;

#[derive(Envelope)]
#[envelope(schema = 0)]
struct SchemaZero {
    subject_ref: String,
}

#[derive(Envelope)]
#[envelope(schema = 2, accepts = [0, 2, 2])]
struct BadAccepts {
    subject_ref: String,
}

fn main() {}
