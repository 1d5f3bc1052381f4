//! `redis/queue.conf`: the redis.conf fragment a Redis holding the queues needs (durability, no eviction), each setting with why.

use crate::error::Result;
use crate::gen::templates::render;
use crate::gen::{header_in, CommentSyntax, GeneratedFile};
use crate::spec::model::{Deployment, Spec};

/// Where the fragment goes, relative to the deploy directory.
pub const FILE_NAME: &str = "redis/queue.conf";

pub fn generate(spec: &Spec, spec_file: &str) -> Result<GeneratedFile> {
    let contents = render(
        "queue.conf",
        minijinja::context! {
            header => header_in(CommentSyntax::Hash, spec_file),
            service => &spec.service,
            persistence => spec.redis.persistence.appendfsync(),
            cluster => spec.redis.deployment == Deployment::Cluster,
        },
    )?;
    Ok(GeneratedFile::new(FILE_NAME, contents))
}

/// The `(directive, value)` pairs of a redis.conf text, comments skipped.
pub fn directives(conf: &str) -> Vec<(String, String)> {
    conf.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            let (name, value) = line.split_once(char::is_whitespace)?;
            Some((name.to_owned(), value.trim().to_owned()))
        })
        .collect()
}
