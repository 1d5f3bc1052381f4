use queuegen_runtime::Envelope;

#[derive(Envelope)]
struct Reindex {
    #[envelope(default = "doc-1")]
    subject_ref: Option<String>,
    #[envelope(default = "yes")]
    force: bool,
    #[envelope(default = "300")]
    retries: u8,
    #[envelope(default = 3)]
    pages: u32,
}

fn main() {}
