//! The SQL of the tables PgResults, the fences and the outbox use: versioned, idempotent migrations that `queuegen generate` writes to `DIR/sql/`.
//!
//! The runtime owns this text (not the generator) because the runtime's
//! queries are what the tables must fit; `PgResults::start` checks that the
//! database has at least [`LATEST`] applied and names the file to apply when
//! it has not. Each migration runs in one transaction, serialized against a
//! concurrent apply by an advisory lock, and only creates what is missing:
//! applying it twice (two pods' init containers, a rerun) changes nothing.

/// The newest migration this runtime's queries need.
pub const LATEST: i32 = 1;

/// One migration: its number, a file name a migration tool sorts by, and its SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    pub version: i32,
    /// `0001_queuegen_results_outbox.sql`: sqlx, golang-migrate and plain
    /// `psql -f` in `ls` order all apply these in version order.
    pub file_name: String,
    pub sql: String,
}

/// Every migration for the tables in `schema`, oldest first. `service` only
/// appears in comments. `schema` must be a plain identifier
/// ([`queuegen_core::sql::is_plain_identifier`]).
pub fn migrations(service: &str, schema: &str) -> Vec<Migration> {
    assert!(
        queuegen_core::sql::is_plain_identifier(schema),
        "schema {schema:?} is not a plain lowercase SQL identifier"
    );
    vec![Migration {
        version: 1,
        file_name: "0001_queuegen_results_outbox.sql".to_owned(),
        sql: V1.replace("{schema}", schema).replace("{service}", service),
    }]
}

/// Tables of migration 1. `{schema}` and `{service}` are filled in.
const V1: &str = r#"-- queuegen migration 1 for service {service}: durable results, fences and the
-- transactional outbox, in schema {schema}. Idempotent: it creates only what is
-- missing, so applying it again changes nothing.
BEGIN;

-- Two appliers at once (say, two pods' init containers) take turns here.
SELECT pg_advisory_xact_lock(hashtext('queuegen migrations {schema}'));

CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE IF NOT EXISTS {schema}.migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- The queue each handler name works. A handler's results are keyed by its
-- name: PgResults refuses to start a handler whose name another queue uses
-- (one queue's job ids would skip the other's jobs) or a queue that another
-- handler name already worked (a renamed handler would repeat effects).
CREATE TABLE IF NOT EXISTS {schema}.handlers (
    handler text PRIMARY KEY,
    queue text NOT NULL,
    first_started timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS handlers_queue ON {schema}.handlers (queue);

-- One row per job a handler finished, inserted in the handler's own
-- transaction with its business change: committed together or not at all.
CREATE TABLE IF NOT EXISTS {schema}.results (
    handler text NOT NULL,
    job_id text NOT NULL,
    result bytea NOT NULL DEFAULT '',
    -- The delivery that committed it (the stream entry), for diagnostics.
    stream_id text NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (handler, job_id)
);
-- Pruning results older than every redelivery (the queue's retention).
CREATE INDEX IF NOT EXISTS results_committed_at ON {schema}.results (committed_at);

-- Fence tokens: one counter per handler and job, one more for each delivery
-- that asks, so an external target can refuse a stale delivery's write.
CREATE TABLE IF NOT EXISTS {schema}.fences (
    handler text NOT NULL,
    job_id text NOT NULL,
    token bigint NOT NULL,
    PRIMARY KEY (handler, job_id)
);

-- Jobs committed with a business change, waiting for the publisher to XADD
-- them. `fields` alternates envelope field names and values, as XADD takes them.
CREATE TABLE IF NOT EXISTS {schema}.outbox (
    id bigserial PRIMARY KEY,
    queue text NOT NULL,
    partition integer NOT NULL,
    job_id text NOT NULL,
    fields text[] NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    dispatched_at timestamptz,
    stream_id text
);
-- What the publisher reads: a partition's undispatched rows in id order.
CREATE INDEX IF NOT EXISTS outbox_undispatched
    ON {schema}.outbox (queue, partition, id) WHERE dispatched_at IS NULL;
-- What the publisher prunes: rows dispatched longer ago than it keeps them.
CREATE INDEX IF NOT EXISTS outbox_dispatched_at
    ON {schema}.outbox (dispatched_at) WHERE dispatched_at IS NOT NULL;

INSERT INTO {schema}.migrations (version, name)
VALUES (1, 'results, fences and outbox')
ON CONFLICT (version) DO NOTHING;

COMMIT;
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_migration_is_the_last_one_and_names_its_schema_everywhere() {
        let all = migrations("docs-pipeline", "docs_pipeline");
        assert_eq!(all.last().map(|m| m.version), Some(LATEST));
        let sql = &all[0].sql;
        assert!(!sql.contains("{schema}") && !sql.contains("{service}"));
        // Every table it creates is qualified by the schema.
        for line in sql.lines().filter(|l| l.starts_with("CREATE TABLE")) {
            assert!(line.contains(" docs_pipeline."), "{line}");
        }
        assert!(sql.trim_end().ends_with("COMMIT;"));
    }
}
