-- The docs-pipeline application's own tables (written by the team, not
-- generated; queuegen's results, fences and outbox are in deploy/sql/).
-- Idempotent, like queuegen's: safe to apply again.
BEGIN;

-- What a user asked to export: written with the export job's outbox row,
-- in one transaction (src/requests.rs).
CREATE TABLE IF NOT EXISTS export_requests (
    export_ref text PRIMARY KEY,
    tenant text NOT NULL,
    format text NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now()
);

-- One row per export written: the export handler's change, committed with
-- the job's marker.
CREATE TABLE IF NOT EXISTS exports (
    export_ref text PRIMARY KEY,
    file text NOT NULL,
    job_id text NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()
);

-- One row per reconciliation run, committed with the job's marker.
CREATE TABLE IF NOT EXISTS reconciliation_runs (
    job_id text PRIMARY KEY,
    ledger_ref text NOT NULL,
    window_start timestamptz NOT NULL,
    window_end timestamptz NOT NULL,
    fence bigint NOT NULL
);

-- Stands in for the ledger service the reconciliation reports to: another
-- system, written outside the job's transaction, that keeps the highest
-- fence token it accepted and refuses older ones.
CREATE TABLE IF NOT EXISTS ledger_snapshots (
    ledger_ref text PRIMARY KEY,
    reconciled_until timestamptz NOT NULL,
    fence bigint NOT NULL
);
-- Fence tokens order the deliveries of one job, not jobs: the service
-- compares a report's token only with its own job's last one.
ALTER TABLE ledger_snapshots ADD COLUMN IF NOT EXISTS job_id text NOT NULL DEFAULT '';

COMMIT;
