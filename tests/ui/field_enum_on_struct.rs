use queuegen_runtime::FieldEnum;

#[derive(FieldEnum)]
struct Priority {
    level: u8,
}

fn main() {}
