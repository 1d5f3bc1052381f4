use queuegen_runtime::FieldEnum;

#[derive(FieldEnum)]
enum Priority {
    Low,
    High(u8),
    Custom { level: u8 },
}

fn main() {}
