//! The minijinja environment: templates embedded at build time, strict undefined.

use minijinja::{AutoEscape, Environment, UndefinedBehavior};

use crate::error::{Error, Result};

const TEMPLATES: &[(&str, &str)] = &[
    ("mod.rs", include_str!("../../templates/mod.rs.jinja")),
    (
        "envelopes.rs",
        include_str!("../../templates/envelopes.rs.jinja"),
    ),
    ("queue.rs", include_str!("../../templates/queue.rs.jinja")),
    (
        "handler_stub.rs",
        include_str!("../../templates/handler_stub.rs.jinja"),
    ),
    (
        "handlers_mod.rs",
        include_str!("../../templates/handlers_mod.rs.jinja"),
    ),
    (
        "queues.yaml",
        include_str!("../../templates/queues.yaml.jinja"),
    ),
    (
        "functions.lua",
        include_str!("../../templates/functions.lua.jinja"),
    ),
    ("users.acl", include_str!("../../templates/users.acl.jinja")),
    (
        "queue.conf",
        include_str!("../../templates/queue.conf.jinja"),
    ),
    ("rules.yml", include_str!("../../templates/rules.yml.jinja")),
    (
        "RUNBOOK.md",
        include_str!("../../templates/RUNBOOK.md.jinja"),
    ),
    (
        "k8s/configmap.yaml",
        include_str!("../../templates/k8s/configmap.yaml.jinja"),
    ),
    (
        "k8s/worker.yaml",
        include_str!("../../templates/k8s/worker.yaml.jinja"),
    ),
    (
        "k8s/monitor.yaml",
        include_str!("../../templates/k8s/monitor.yaml.jinja"),
    ),
    (
        "k8s/trim-cronjob.yaml",
        include_str!("../../templates/k8s/trim-cronjob.yaml.jinja"),
    ),
    (
        "k8s/keda.yaml",
        include_str!("../../templates/k8s/keda.yaml.jinja"),
    ),
    (
        "k8s/outbox-publisher.yaml",
        include_str!("../../templates/k8s/outbox-publisher.yaml.jinja"),
    ),
    (
        "k8s/postgres-migrations.yaml",
        include_str!("../../templates/k8s/postgres-migrations.yaml.jinja"),
    ),
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
