//! PostgreSQL: the top-level `postgres` section (where queuegen's tables live,
//! the generated pool's size) and each queue's `results` and `outbox`, with
//! the rules that tie them: the section is there only when a queue uses it,
//! and its schema is a name the generated SQL can use unquoted.

use crate::model::{PostgresSettings, ResultStore};
use crate::suggest;
use crate::yaml::Node;

use super::format::{POSTGRES, RESULT_STORES};
use super::read::{Ctx, Item, Object};
use super::values;

/// The schema of queuegen's tables unless the spec says otherwise.
pub const DEFAULT_SCHEMA: &str = "queuegen";
/// The generated pool's size unless the spec says otherwise.
pub const DEFAULT_POOL_SIZE: u32 = 16;

/// The rule for names written unquoted, shared with the runtime.
use queuegen_core::sql::is_plain_identifier as is_sql_identifier;

/// PostgreSQL's keywords that cannot name a schema unquoted (its reserved
/// and type/function-name keywords, PostgreSQL 17): `CREATE SCHEMA user`
/// is a syntax error.
const RESERVED_WORDS: &str = "\
    all analyse analyze and any array as asc asymmetric authorization binary both case cast \
    check collate collation column concurrently constraint create cross current_catalog \
    current_date current_role current_schema current_time current_timestamp current_user \
    default deferrable desc distinct do else end except false fetch for foreign freeze from \
    full grant group having ilike in initially inner intersect into is isnull join lateral \
    leading left like limit localtime localtimestamp natural not notnull null offset on only \
    or order outer overlaps placing primary references returning right select session_user \
    similar some symmetric system_user table tablesample then to trailing true union unique \
    user using variadic verbose when where window with";

fn is_reserved(word: &str) -> bool {
    RESERVED_WORDS.split_whitespace().any(|w| w == word)
}

/// The generated pool, for the check that it can serve a queue's handlers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool {
    size: u32,
    /// Whether `postgres.pool_size` is written (or the default).
    given: bool,
}

impl Pool {
    /// Warns, at the queue's `results`, when fewer connections than the
    /// jobs one worker runs at once would make them wait for each other.
    pub fn check_serves(self, ctx: &mut Ctx<'_>, q: &Object<'_>, concurrency: u32) {
        if concurrency <= self.size {
            return;
        }
        ctx.warning(
            &q.at("results"),
            format!(
                "each of the {concurrency} jobs a worker runs at once (handler.concurrency) holds a PostgreSQL connection for its whole transaction, and postgres.pool_size is {}{}: the others wait for a connection, and may run into handler.timeout",
                self.size,
                if self.given { "" } else { " (the default)" },
            ),
            format!(
                "raise postgres.pool_size to at least {concurrency} (more if one process works several queues), or lower handler.concurrency"
            ),
        );
    }
}

/// The `postgres` section, and the pool it describes when it is valid and
/// used. `used` says whether any queue (as written, even one with other
/// errors) asks for PostgreSQL: `results` set, or `outbox` not `false`.
/// The settings are `Some(None)` when PostgreSQL is not used at all, and
/// `None` when something was wrong (reported).
pub(crate) fn settings(
    ctx: &mut Ctx<'_>,
    spec: &Object<'_>,
    used: bool,
) -> (Option<Option<PostgresSettings>>, Option<Pool>) {
    let given = spec.get("postgres").map(Item::key);
    let p = spec.child(ctx, "postgres", &POSTGRES);
    let schema = p.read(ctx, "schema", schema).or(DEFAULT_SCHEMA.to_owned());
    let pool_size_given = p.get("pool_size").is_some();
    let pool_size = p
        .count(
            ctx,
            "pool_size",
            "pool_size is the most connections one process opens: at least 1, and within what the server's max_connections allows",
        )
        .or(DEFAULT_POOL_SIZE.into())
        .map(|n| n as u32);
    if let (Some(at), false) = (&given, used) {
        ctx.error(
            at,
            "no queue uses PostgreSQL, so nothing would read this section",
            "add `results: postgres` or `outbox: true` to a queue, or remove the `postgres` section",
        );
        return (None, None);
    }
    if !used {
        return (Some(None), None);
    }
    let (Some(schema), Some(pool_size)) = (schema, pool_size) else {
        return (None, None);
    };
    let pool = Pool {
        size: pool_size,
        given: pool_size_given,
    };
    (
        Some(Some(PostgresSettings { schema, pool_size })),
        Some(pool),
    )
}

/// `postgres.schema`: a plain identifier that PostgreSQL accepts unquoted
/// as a new schema's name.
fn schema(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<String> {
    let name = values::string(ctx, item)?;
    let problem = if !is_sql_identifier(name) {
        let plain: String = name
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9' | '_') => c,
                _ => '_',
            })
            .collect();
        let hint = if is_sql_identifier(&plain) && !is_reserved(&plain) {
            plain
        } else {
            DEFAULT_SCHEMA.to_owned()
        };
        let hint = format!(", e.g. `{hint}`");
        Some((
            format!("`{name}` is not a plain lowercase SQL identifier: the generated SQL and the runtime's queries name the schema unquoted"),
            format!("use at most 63 lowercase letters, digits and `_`, not starting with a digit{hint}"),
        ))
    } else if is_reserved(name) {
        Some((
            format!("`{name}` is a reserved word in PostgreSQL: `CREATE SCHEMA {name}` in the migration would be a syntax error"),
            format!("pick another name, e.g. `{name}_queues`"),
        ))
    } else if name.starts_with("pg_") {
        Some((
            format!("`{name}` starts with `pg_`, which PostgreSQL reserves for its system schemas: the migration's CREATE SCHEMA would fail"),
            format!("pick a name without the prefix, e.g. `{}`", without_pg_prefix(name)),
        ))
    } else {
        None
    };
    match problem {
        Some((message, help)) => ctx.refuse(&item.value(), message, help),
        None => Some(name.to_owned()),
    }
}

/// `pg_docs` -> `docs`; `pg_` or `pg_1` -> the default schema.
fn without_pg_prefix(name: &str) -> &str {
    let rest = name.trim_start_matches("pg_");
    if is_sql_identifier(rest) && !is_reserved(rest) {
        rest
    } else {
        DEFAULT_SCHEMA
    }
}

/// A queue's `results`: `Some(None)` when left out.
pub(crate) fn results(ctx: &mut Ctx<'_>, q: &Object<'_>) -> Option<Option<ResultStore>> {
    q.read(ctx, "results", |ctx, it| {
        let text = match it.node {
            Node::Str(text) if text == "postgres" => return Some(ResultStore::Postgres),
            Node::Str(text) => format!("`{text}`"),
            other => other.kind().to_owned(),
        };
        let close = match it.node {
            Node::Str(text) => suggest::did_you_mean(text, RESULT_STORES.iter().copied()),
            _ => None,
        };
        let hint = close.map_or(String::new(), |best| format!("did you mean `{best}`? "));
        ctx.refuse(
            &it.value(),
            format!("unknown results store {text}: the only one is `postgres`"),
            format!(
                "{hint}write `results: postgres` to commit each job's marker with the handler's change in one PostgreSQL transaction, or leave `results` out to keep results yourself"
            ),
        )
    })
    .optional()
}

/// A queue's `outbox`: false when left out.
pub(crate) fn outbox(ctx: &mut Ctx<'_>, q: &Object<'_>) -> Option<bool> {
    q.read(ctx, "outbox", values::boolean).or(false)
}

/// Which queues, as written, ask for PostgreSQL ([`queue_asks_for_postgres`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PostgresUse {
    /// No queue does.
    Unused,
    /// These queues do (never empty), in file order.
    By(Vec<String>),
    /// `queues` is not a mapping: nobody can tell, so no rule that depends
    /// on it reports anything.
    Unknown,
}

impl PostgresUse {
    /// The queues of `queues` (the value of the top-level key, if any).
    pub fn of(queues: Option<&Node>) -> Self {
        match queues {
            Some(Node::Map(queues)) => {
                let mut by: Vec<String> = Vec::new();
                for (name, queue) in queues {
                    let name = name.key_text();
                    if queue_asks_for_postgres(queue) && !by.contains(&name) {
                        by.push(name);
                    }
                }
                if by.is_empty() {
                    PostgresUse::Unused
                } else {
                    PostgresUse::By(by)
                }
            }
            Some(_) => PostgresUse::Unknown,
            None => PostgresUse::Unused,
        }
    }

    /// Whether a queue may use PostgreSQL: a malformed `queues` counts, so
    /// that it does not also make PostgreSQL settings look unused.
    pub fn maybe(&self) -> bool {
        !matches!(self, PostgresUse::Unused)
    }
}

/// Whether a queue as written asks for PostgreSQL: it sets `results` (even
/// to an unknown store), or `outbox` to anything but `false`. Read from the
/// YAML, so that a queue with errors elsewhere still counts.
fn queue_asks_for_postgres(queue: &Node) -> bool {
    let Node::Map(pairs) = queue else {
        return false;
    };
    pairs
        .iter()
        .any(|(key, value)| match key.key_text().as_str() {
            "results" => true,
            "outbox" => !matches!(value, Node::Bool(false)),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_words_are_sorted_identifiers() {
        let words: Vec<&str> = RESERVED_WORDS.split_whitespace().collect();
        let mut sorted = words.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, words);
        assert!(words.iter().all(|w| is_sql_identifier(w)));
    }
}
