use queuegen_runtime::FieldEnum;

#[derive(FieldEnum)]
#[field(rename_all = "kebab-case")]
enum Priority {
    #[field(renam = "lo")]
    Low,
    #[field(alias = "hi")]
    High,
    #[field(rename = "")]
    Normal,
}

fn main() {}
