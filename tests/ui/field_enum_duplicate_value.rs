use queuegen_runtime::FieldEnum;

#[derive(FieldEnum)]
enum Priority {
    High,
    #[field(rename = "high")]
    Urgent,
    HighPriority,
    #[field(rename = "high_priority")]
    Asap,
}

fn main() {}
