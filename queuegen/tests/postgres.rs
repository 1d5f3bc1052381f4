//! PostgreSQL in what `generate` writes: `results: postgres`, `outbox: true`
//! and `postgres:` give the queue modules `results` and `outbox`, mod.rs the
//! pool and the outbox publisher, a transactional handler stub, the
//! migrations in `sql/` and a runbook section; a spec that uses none of it
//! gets none of it. The migrations are applied to a real PostgreSQL.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use queuegen::gen::{self, GeneratedFile};
use queuegen::spec::check_str;
use queuegen::spec::model::Spec;
use queuegen_runtime::postgres::migrations;

use queuegen_tests::cli::{run_in, stdout};

/// Four queues: results and outbox, results only, outbox only, neither.
const SPEC: &str = "\
version: 1
service: shop
postgres: { schema: shop_queues, pool_size: 24 }
envelopes:
  OrderPlaced:
    schema: 1
    fields:
      order_ref: { type: string, max_bytes: 64 }
queues:
  orders:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
    results: postgres
    outbox: true
  refunds:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
    results: postgres
  audits:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
    outbox: true
  mails:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
";

fn spec_of(source: &str) -> Spec {
    let checked = check_str(source, "queues.yaml");
    assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
    checked.spec.expect("valid")
}

/// The same spec with no queue using PostgreSQL (and so no section).
fn without_postgres() -> String {
    SPEC.replace("postgres: { schema: shop_queues, pool_size: 24 }\n", "")
        .replace("    results: postgres\n", "")
        .replace("    outbox: true\n", "")
}

fn contents<'a>(files: &'a [GeneratedFile], path: &str) -> &'a str {
    files
        .iter()
        .find(|f| f.path == Path::new(path))
        .map(|f| f.contents.as_str())
        .unwrap_or_else(|| panic!("no {path} among {:?}", paths(files)))
}

fn paths(files: &[GeneratedFile]) -> Vec<String> {
    files.iter().map(|f| f.path.display().to_string()).collect()
}

/// Fails the test unless rustfmt leaves `files` as they are, formatted as a
/// crate reaches them: from `mod.rs` when there is one (rustfmt follows its
/// `mod` items, and skips the modules marked `#[rustfmt::skip]`), else each
/// file (stubs, which the team's crate formats).
fn assert_rustfmt_clean(files: &[GeneratedFile]) {
    // All written first: rustfmt reads the modules mod.rs declares.
    let dir = tempfile::tempdir().unwrap();
    for file in files {
        fs::write(dir.path().join(&file.path), &file.contents).unwrap();
    }
    let roots: Vec<&GeneratedFile> = match files.iter().find(|f| f.path == Path::new("mod.rs")) {
        Some(root) => vec![root],
        None => files.iter().collect(),
    };
    for file in roots {
        let path = dir.path().join(&file.path);
        let status = Command::new("rustfmt")
            .args(["--edition", "2021", "--check"])
            .arg(&path)
            .status()
            .expect("rustfmt runs");
        assert!(
            status.success(),
            "{} is not rustfmt-clean:\n{}",
            file.path.display(),
            file.contents
        );
    }
}

#[test]
fn queue_modules_and_mod_rs_of_a_postgres_spec() {
    let files = gen::rust::generate(&spec_of(SPEC), "../queues.yaml").unwrap();
    insta::assert_snapshot!("mod_rs", contents(&files, "mod.rs"));
    insta::assert_snapshot!("orders_rs", contents(&files, "orders.rs"));

    let refunds = contents(&files, "refunds.rs");
    assert!(refunds.contains("use queuegen_runtime::postgres::{PgResults, Postgres};\n"));
    assert!(refunds.contains("pub async fn results(pg: &Postgres)"));
    assert!(!refunds.contains("fn outbox("));
    let audits = contents(&files, "audits.rs");
    assert!(audits.contains("use queuegen_runtime::postgres::{PgOutbox, Postgres};\n"));
    assert!(audits.contains("pub fn outbox(pg: &Postgres) -> PgOutbox<OrderPlaced> {"));
    assert!(!audits.contains("fn results("));
    // A queue that uses neither is generated as without PostgreSQL.
    let plain = gen::rust::generate(&spec_of(&without_postgres()), "../queues.yaml").unwrap();
    assert_eq!(contents(&files, "mails.rs"), contents(&plain, "mails.rs"));
    assert_rustfmt_clean(&files);
}

#[test]
fn nothing_about_postgres_is_generated_for_a_spec_without_it() {
    let spec = spec_of(&without_postgres());
    assert_eq!(spec.postgres, None);
    let rust = gen::rust::generate(&spec, "../queues.yaml").unwrap();
    let deploy = gen::deploy::generate(&spec, "../queues.yaml", &without_postgres()).unwrap();
    for file in rust.iter().chain(&deploy) {
        let text = file.contents.to_lowercase();
        assert!(
            !text.contains("postgres") && !text.contains("outbox"),
            "{} mentions PostgreSQL:\n{}",
            file.path.display(),
            file.contents
        );
    }
    assert!(
        !deploy.iter().any(|f| f.path.starts_with("sql")),
        "{:?}",
        paths(&deploy)
    );
}

#[test]
fn mod_rs_with_results_only_or_outbox_only_and_many_outbox_queues() {
    let results_only = SPEC.replace("    outbox: true\n", "");
    let files = gen::rust::generate(&spec_of(&results_only), "../queues.yaml").unwrap();
    let module = contents(&files, "mod.rs");
    assert!(module.contains("use queuegen_runtime::postgres::Postgres;\n"));
    assert!(module.contains("pub async fn connect_postgres(url: &str)"));
    assert!(!module.contains("OUTBOX_QUEUES") && !module.contains("QueueConfig"));
    assert_rustfmt_clean(&files);

    let outbox_only = SPEC.replace("    results: postgres\n", "");
    let files = gen::rust::generate(&spec_of(&outbox_only), "../queues.yaml").unwrap();
    let module = contents(&files, "mod.rs");
    assert!(module.contains(
        "pub const OUTBOX_QUEUES: [QueueConfig; 2] = [orders::CONFIG, audits::CONFIG];\n"
    ));
    assert_rustfmt_clean(&files);

    // Too long for one line: one queue a line.
    let mut many = SPEC.replace("    results: postgres\n", "");
    for name in ["invoices", "shipments", "returns_and_refunds"] {
        many.push_str(&format!(
            "  {name}:\n    envelope: OrderPlaced\n    dead_letter: {{ owner: shop-oncall }}\n    outbox: true\n"
        ));
    }
    let files = gen::rust::generate(&spec_of(&many), "../queues.yaml").unwrap();
    assert!(
        contents(&files, "mod.rs").contains(
            "pub const OUTBOX_QUEUES: [QueueConfig; 5] = [\n    orders::CONFIG,\n    audits::CONFIG,\n"
        ),
        "{}",
        contents(&files, "mod.rs")
    );
    assert_rustfmt_clean(&files);
}

#[test]
fn the_stub_of_a_results_postgres_queue_works_in_the_jobs_transaction() {
    let spec = spec_of(SPEC);
    let stubs = gen::stubs::generate(&spec, "crate::queues").unwrap();
    let orders = contents(&stubs, "orders_handler.rs");
    insta::assert_snapshot!("orders_handler_rs", orders);
    // An unedited stub never marks a job done: the change is not written.
    assert!(orders.contains("Err(JobError::transient(\"this handler is not written yet\"))"));
    // The other queues' stubs are as without PostgreSQL.
    let plain = gen::stubs::generate(&spec_of(&without_postgres()), "crate::queues").unwrap();
    for name in ["audits_handler.rs", "mails_handler.rs"] {
        assert_eq!(contents(&stubs, name), contents(&plain, name), "{name}");
    }
    assert_rustfmt_clean(&stubs);

    // Signatures too long for one line are laid out as rustfmt would.
    let long = SPEC.replace("OrderPlaced", "OrderPlacedByACustomerOfTheEuropeanShop");
    let stubs = gen::stubs::generate(&spec_of(&long), "crate::queues").unwrap();
    let orders = contents(&stubs, "orders_handler.rs");
    assert!(
        orders.contains("    async fn change(\n        &self,\n"),
        "{orders}"
    );
    assert_rustfmt_clean(&stubs);
}

fn queuegen(args: &[&str], cwd: &Path) -> Output {
    run_in(env!("CARGO_BIN_EXE_queuegen"), args, cwd)
}

const MIGRATION: &str = "sql/0001_queuegen_results_outbox.sql";

#[test]
fn migrations_are_written_only_with_postgres_and_check_covers_them() {
    let dir = tempfile::tempdir().unwrap();
    let write = ["generate", "queues.yaml", "--deploy-out", "deploy"];
    let check = [
        "generate",
        "queues.yaml",
        "--deploy-out",
        "deploy",
        "--check",
    ];

    fs::write(dir.path().join("queues.yaml"), without_postgres()).unwrap();
    assert!(queuegen(&write, dir.path()).status.success());
    assert!(!dir.path().join("deploy/sql").exists());
    let runbook = fs::read_to_string(dir.path().join("deploy/RUNBOOK.md")).unwrap();
    assert!(!runbook.contains("## PostgreSQL"));

    fs::write(dir.path().join("queues.yaml"), SPEC).unwrap();
    let out = queuegen(&write, dir.path());
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains(&format!("wrote     deploy/{MIGRATION}")));
    let sql = fs::read_to_string(dir.path().join("deploy").join(MIGRATION)).unwrap();
    let expected = &migrations::migrations("shop", "shop_queues")[0].sql;
    assert_eq!(
        sql,
        format!(
            "-- Code generated by queuegen {} from ../queues.yaml. DO NOT EDIT.\n-- @generated\n{expected}",
            env!("CARGO_PKG_VERSION")
        )
    );
    let runbook = fs::read_to_string(dir.path().join("deploy/RUNBOOK.md")).unwrap();
    for line in [
        "## PostgreSQL\n",
        &format!("psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -f {MIGRATION}\n"),
        "FROM shop_queues.outbox WHERE dispatched_at IS NULL GROUP BY 1, 2",
        "FROM shop_queues.results WHERE handler = '<queue>' AND job_id = '<job_id>'",
        "(`<queue>` is `orders` or `refunds`, the handler name)",
    ] {
        assert!(runbook.contains(line), "{line}\n{runbook}");
    }
    assert!(queuegen(&check, dir.path()).status.success());

    // Edited by hand: drift.
    let path = dir.path().join("deploy").join(MIGRATION);
    fs::write(&path, sql.replace("CREATE INDEX", "-- CREATE INDEX")).unwrap();
    let drift = queuegen(&check, dir.path());
    assert_eq!(drift.status.code(), Some(1), "{drift:?}");
    assert!(
        stdout(&drift).contains(&format!("differs:  deploy/{MIGRATION}")),
        "{drift:?}"
    );
    // Gone: missing.
    fs::remove_file(&path).unwrap();
    let missing = queuegen(&check, dir.path());
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    assert!(stdout(&missing).contains(&format!("missing:  deploy/{MIGRATION}")));

    // The spec stops using PostgreSQL: the migration it wrote is stale.
    assert!(queuegen(&write, dir.path()).status.success());
    fs::write(dir.path().join("queues.yaml"), without_postgres()).unwrap();
    let stale = queuegen(&check, dir.path());
    assert_eq!(stale.status.code(), Some(1), "{stale:?}");
    assert!(
        stdout(&stale).contains(&format!("stale:    deploy/{MIGRATION}")),
        "{stale:?}"
    );
}

/// The migrations' real consumer: a PostgreSQL applies the written file as
/// it is (header included), twice, and then has every table the runtime
/// checks for, in the spec's schema.
#[test]
fn the_written_migrations_apply_to_postgresql_and_again() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("queues.yaml"), SPEC).unwrap();
    let out = queuegen(
        &["generate", "queues.yaml", "--deploy-out", "deploy"],
        dir.path(),
    );
    assert!(out.status.success(), "{out:?}");
    let server = queuegen_tests::PostgresServer::start();
    let file = dir.path().join("deploy").join(MIGRATION);
    for round in 1..=2 {
        server
            .psql_file(&file)
            .unwrap_or_else(|err| panic!("applying {MIGRATION}, round {round}: {err}"));
    }
    let tables = server.psql(
        "SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables \
         WHERE table_schema = 'shop_queues'",
    );
    assert_eq!(tables, "fences,handlers,migrations,outbox,results");
    assert_eq!(
        server.psql("SELECT max(version) FROM shop_queues.migrations"),
        migrations::LATEST.to_string()
    );
}
