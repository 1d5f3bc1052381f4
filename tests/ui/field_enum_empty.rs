use queuegen_runtime::FieldEnum;

#[derive(FieldEnum)]
enum Never {}

fn main() {}
