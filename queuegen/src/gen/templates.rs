//! The minijinja environment: templates embedded at build time, strict undefined.

use minijinja::{AutoEscape, Environment, UndefinedBehavior};

use crate::error::{Error, Result};

/// `(name, text)` of `templates/<name>.jinja`: `include_str!` takes only a
/// literal path, so a function cannot build it from the name.
macro_rules! embedded {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!("../../templates/", $name, ".jinja")),
        )
    };
}

const TEMPLATES: &[(&str, &str)] = &[
    embedded!("mod.rs"),
    embedded!("envelopes.rs"),
    embedded!("queue.rs"),
    embedded!("pipelines.rs"),
    embedded!("handler_stub.rs"),
    embedded!("handlers_mod.rs"),
    embedded!("queues.yaml"),
    embedded!("functions.lua"),
    embedded!("users.acl"),
    embedded!("queue.conf"),
    embedded!("rules.yml"),
    embedded!("RUNBOOK.md"),
    embedded!("k8s/configmap.yaml"),
    embedded!("k8s/worker.yaml"),
    embedded!("k8s/monitor.yaml"),
    embedded!("k8s/trim-cronjob.yaml"),
    embedded!("k8s/keda.yaml"),
    embedded!("k8s/outbox-publisher.yaml"),
    embedded!("k8s/postgres-migrations.yaml"),
];

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    // A missing variable is a generator bug; never render it as empty.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    // A string as a Rust literal (quoted, escaped): `{{ name|rust_str }}`.
    env.add_filter("rust_str", |text: String| {
        super::rust_value::source(&text.as_str())
    });
    for (name, source) in TEMPLATES {
        env.add_template(name, source)
            .expect("embedded templates are valid; covered by tests");
    }
    env
}

/// Renders one embedded template with `context`.
pub fn render(template: &'static str, context: impl serde::Serialize) -> Result<String> {
    let env = environment();
    env.get_template(template)
        .and_then(|t| t.render(context))
        .map_err(|source| Error::Template { template, source })
}
