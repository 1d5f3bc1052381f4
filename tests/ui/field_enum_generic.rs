use queuegen_runtime::FieldEnum;

#[derive(FieldEnum)]
enum Choice<const N: usize> {
    Low,
    High,
}

fn main() {}
