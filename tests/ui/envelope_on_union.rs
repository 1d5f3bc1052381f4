use queuegen_runtime::Envelope;

#[derive(Envelope)]
union Either {
    number: u32,
    flag: bool,
}

fn main() {}
