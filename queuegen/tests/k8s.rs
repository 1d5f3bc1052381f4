//! The generated Kubernetes manifests, checked by the tools that consume
//! them: every object of both committed specs (and of a Cluster spec)
//! against the Kubernetes API schema with `kubernetes-validate --strict`
//! (offline: the package ships the schemas), and `keda.yaml` against KEDA's
//! ScaledObject CRD schema. Plus the grace period and the spec hash, and
//! what PostgreSQL adds (DATABASE_URL, the outbox publisher, the migration
//! Job, whose script a real PostgreSQL runs) or, without a
//! `kubernetes.postgres_secret`, does not.
//!
//! `kubernetes-validate` lives in a venv that scripts/test creates at
//! target/k8s-venv; without it these tests fail and say how to create it.

use std::path::{Path, PathBuf};
use std::process::Command;

use queuegen::gen::deploy::{self, k8s};
use queuegen::gen::GeneratedFile;
use queuegen::spec::{self, model::Spec};
use serde_json::{json, Value};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The committed specs and their deploy directories.
fn committed() -> [(PathBuf, PathBuf); 2] {
    let root = workspace();
    [
        (
            root.join("examples/docs-pipeline/queues.yaml"),
            root.join("examples/docs-pipeline/deploy"),
        ),
        (root.join("tests/queues.yaml"), root.join("tests/deploy")),
    ]
}

fn validator_bin() -> PathBuf {
    let bin = std::env::var_os("QUEUEGEN_K8S_VALIDATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/k8s-venv/bin/kubernetes-validate"));
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test, or create it with \
         `python3 -m venv target/k8s-venv && target/k8s-venv/bin/pip install kubernetes-validate` \
         (or point QUEUEGEN_K8S_VALIDATE at a kubernetes-validate)",
        bin.display()
    );
    bin
}

/// Every YAML document of `text`.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("generated YAML parses"))
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// Runs `kubernetes-validate --strict` on `files`; panics unless every
/// document passed (a kind without a schema only warns, so warnings fail too).
fn kubernetes_validate(files: &[PathBuf]) {
    let out = Command::new(validator_bin())
        .arg("--strict")
        .args(files)
        .output()
        .expect("kubernetes-validate runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kubernetes-validate refused:\n{stdout}{stderr}"
    );
    for file in files {
        let expected = documents(&std::fs::read_to_string(file).unwrap()).len();
        let name = file.display().to_string();
        let passed = stdout
            .lines()
            .filter(|l| l.starts_with(&format!("INFO {name} passed")))
            .count();
        assert_eq!(
            passed, expected,
            "{name}: {expected} objects, {passed} passed:\n{stdout}{stderr}"
        );
    }
    assert!(
        !stdout.contains("WARN") && !stdout.contains("ERROR"),
        "{stdout}{stderr}"
    );
}

fn k8s_files(deploy: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy.join("k8s"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// KEDA's ScaledObject schema, made strict: the API server prunes unknown
/// fields silently, which would hide a misspelt one.
fn keda_validator() -> jsonschema::Validator {
    fn strict(schema: &mut Value) {
        if let Value::Object(map) = schema {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            for value in map.values_mut() {
                strict(value);
            }
        }
    }
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keda/scaledobject-schema.yaml");
    let mut schema: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap())
        .expect("the CRD schema parses");
    strict(&mut schema);
    jsonschema::draft4::new(&schema).expect("the CRD schema compiles")
}

fn assert_keda_valid(text: &str) -> Vec<Value> {
    let validator = keda_validator();
    let objects = documents(text);
    assert!(!objects.is_empty());
    for object in &objects {
        assert_eq!(object["apiVersion"], "keda.sh/v1alpha1");
        assert_eq!(object["kind"], "ScaledObject");
        let errors: Vec<String> = validator
            .iter_errors(object)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}\n{text}");
    }
    objects
}

fn checked(source: &str, file: &str) -> Spec {
    let checked = spec::check_str(source, file);
    checked
        .spec
        .unwrap_or_else(|| panic!("{file} is valid: {:#?}", checked.diagnostics))
}

#[test]
fn every_committed_manifest_passes_the_kubernetes_api_schema_strictly() {
    for (_, deploy) in committed() {
        let files: Vec<PathBuf> = k8s_files(&deploy)
            .into_iter()
            .filter(|f| !f.ends_with("keda.yaml"))
            .collect();
        assert!(files.len() >= 3, "{files:?}");
        kubernetes_validate(&files);
    }
}

#[test]
fn the_strict_validator_refuses_an_unknown_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let example = workspace().join("examples/docs-pipeline/deploy/k8s/worker-ocr.yaml");
    let text = std::fs::read_to_string(example).unwrap().replacen(
        "      terminationGracePeriodSeconds:",
        "      terminationGraceSeconds:",
        1,
    );
    std::fs::write(&bad, text).unwrap();
    let out = Command::new(validator_bin())
        .arg("--strict")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
}

#[test]
fn the_committed_scaled_object_passes_kedas_crd_schema() {
    let keda = workspace().join("examples/docs-pipeline/deploy/k8s/keda.yaml");
    let objects = assert_keda_valid(&std::fs::read_to_string(keda).unwrap());
    let ocr = &objects[0]["spec"];
    assert_eq!(ocr["minReplicaCount"], 0);
    let triggers = ocr["triggers"].as_array().unwrap();
    assert_eq!(triggers[0]["type"], "prometheus");
    assert!(triggers[0]["metadata"]["query"]
        .as_str()
        .unwrap()
        .contains("queuegen_queue_oldest_ready_age_seconds{queue=\"ocr\""));
    // One lag trigger per partition stream, never a stream-length one.
    let lag: Vec<&Value> = triggers
        .iter()
        .filter(|t| t["type"] == "redis-streams")
        .collect();
    assert_eq!(lag.len(), 8);
    for trigger in lag {
        assert_eq!(trigger["metadata"]["lagCount"], "200");
        assert!(trigger["metadata"].get("streamLength").is_none());
    }
}

#[test]
fn a_misspelt_keda_field_fails_the_crd_schema() {
    let keda = workspace().join("examples/docs-pipeline/deploy/k8s/keda.yaml");
    let text = std::fs::read_to_string(keda)
        .unwrap()
        .replacen("minReplicaCount", "minReplicas", 1);
    let validator = keda_validator();
    assert!(documents(&text).iter().any(|o| !validator.is_valid(o)));
}

const CLUSTER_SPEC: &str = "\
version: 1
service: billing
redis: { deployment: cluster }
kubernetes: { namespace: billing-prod, image: reg.example/billing:2, metrics_port: 9100 }
envelopes:
  Invoice:
    schema: 1
    fields: { invoice_ref: { type: string, max_bytes: 64 } }
queues:
  invoices:
    envelope: Invoice
    partitions: 3
    dead_letter: { owner: billing-oncall }
    retention: { trim: cronjob, trim_every: 2h }
    pods: { cpu: \"0.25\", memory: 64Mi, cpu_limit: \"1\", memory_limit: 128Mi }
    autoscale: { min: 0, max: 5, lag: 50 }
  late_fees:
    envelope: Invoice
    dead_letter: { owner: billing-oncall }
    autoscale: { max: 3, oldest_ready_age: 2m }
";

#[test]
fn a_cluster_spec_validates_too_and_scales_on_cluster_streams() {
    let spec = checked(CLUSTER_SPEC, "billing.yaml");
    let files = deploy::generate(&spec, "billing.yaml", CLUSTER_SPEC).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    let mut keda = None;
    for file in files.iter().filter(|f| f.path.starts_with("k8s")) {
        if file.path.ends_with("keda.yaml") {
            keda = Some(file.contents.clone());
            continue;
        }
        let path = dir.path().join(file.path.file_name().unwrap());
        std::fs::write(&path, &file.contents).unwrap();
        written.push(path);
    }
    let names: Vec<_> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains(&"worker-late-fees.yaml".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"trim-cronjob.yaml".to_owned()), "{names:?}");
    kubernetes_validate(&written);

    let objects = assert_keda_valid(&keda.expect("keda.yaml is generated"));
    let invoices = &objects[0]["spec"]["triggers"];
    assert_eq!(invoices.as_array().unwrap().len(), 3);
    for trigger in invoices.as_array().unwrap() {
        assert_eq!(trigger["type"], "redis-cluster-streams");
        assert_eq!(trigger["metadata"]["addressesFromEnv"], "REDIS_ADDRESSES");
    }
    let late = &objects[1]["spec"];
    assert_eq!(late["minReplicaCount"], 1);
    assert_eq!(late["triggers"][0]["type"], "prometheus");
    assert_eq!(late["triggers"][0]["metadata"]["threshold"], "120");

    let cron = files
        .iter()
        .find(|f| f.path.ends_with("trim-cronjob.yaml"))
        .unwrap();
    let cron = &documents(&cron.contents)[0];
    assert_eq!(cron["spec"]["schedule"], "0 */2 * * *");
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"],
        serde_json::json!(["trim", "/etc/queuegen/queues.yaml", "--queue", "invoices"])
    );
}

#[test]
fn grace_periods_exceed_the_shutdown_budget() {
    for (spec_path, deploy) in committed() {
        let spec = spec::check_file(&spec_path).unwrap().spec.unwrap();
        for queue in &spec.queues {
            let file = deploy.join(format!("k8s/worker-{}.yaml", queue.name.replace('_', "-")));
            let objects = documents(&std::fs::read_to_string(&file).unwrap());
            let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
            let grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
                .as_u64()
                .unwrap();
            let budget = queue.handler.shutdown_budget.as_secs_f64();
            assert!(
                grace as f64 >= budget + 10.0,
                "{}: grace {grace}s is not the budget {budget}s plus the stated margin",
                file.display()
            );
            assert!(objects.iter().any(|o| o["kind"] == "PodDisruptionBudget"));
        }
    }
}

#[test]
fn the_configmap_hash_follows_the_spec_and_rolls_the_pods() {
    let source = std::fs::read_to_string(&committed()[0].0).unwrap();
    let changed = source.replacen("shutdown_budget: 20s", "shutdown_budget: 25s", 1);
    assert_ne!(source, changed);
    let render = |text: &str| {
        let spec = checked(text, "queues.yaml");
        deploy::generate(&spec, "queues.yaml", text).unwrap()
    };
    let hashes = |text: &str| -> (String, Vec<String>, String) {
        let files = render(text);
        let configmap = files
            .iter()
            .find(|f| f.path.ends_with("configmap.yaml"))
            .unwrap();
        let configmap = &documents(&configmap.contents)[0];
        let annotations: Vec<String> = files
            .iter()
            .filter(|f| f.path.starts_with("k8s") && !f.path.ends_with("keda.yaml"))
            .flat_map(|f| documents(&f.contents))
            .filter(|o| o["kind"] == "Deployment")
            .map(|o| {
                o["spec"]["template"]["metadata"]["annotations"][k8s::SPEC_HASH_ANNOTATION]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        (
            configmap["data"]["sha256"].as_str().unwrap().to_owned(),
            annotations,
            configmap["data"]["queues.yaml"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    };
    let (before, before_pods, carried) = hashes(&source);
    let (after, after_pods, _) = hashes(&changed);
    assert_eq!(before, k8s::spec_hash(&source));
    assert_eq!(carried, source, "the ConfigMap carries the spec verbatim");
    assert_ne!(before, after);
    assert_eq!(
        before_pods.len(),
        9,
        "seven workers, the monitor and the outbox publisher"
    );
    assert!(before_pods.iter().all(|h| *h == before));
    assert!(after_pods.iter().all(|h| *h == after));
}

/// Four queues: results and outbox, results only, outbox only, neither; a
/// `kubernetes` section with the PostgreSQL Secret and a psql image.
const POSTGRES_SPEC: &str = "\
version: 1
service: shop
kubernetes:
  namespace: shop-prod
  image: reg.example/shop-worker:3
  postgres_secret: shop-postgres
  psql_image: reg.example/psql:16
postgres: { schema: shop_queues }
envelopes:
  OrderPlaced:
    schema: 1
    fields: { order_ref: { type: string, max_bytes: 64 } }
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

fn k8s_file<'a>(files: &'a [GeneratedFile], name: &str) -> Option<&'a str> {
    files
        .iter()
        .find(|f| f.path == Path::new("k8s").join(name))
        .map(|f| f.contents.as_str())
}

fn k8s_names(files: &[GeneratedFile]) -> Vec<String> {
    files
        .iter()
        .filter(|f| f.path.starts_with("k8s"))
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn container(object: &Value) -> &Value {
    &object["spec"]["template"]["spec"]["containers"][0]
}

/// The container's environment as (name, value or secret:key) pairs.
fn env_of(container: &Value) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let value = match (&e["value"], &e["valueFrom"]["secretKeyRef"]) {
                (Value::String(value), _) => value.clone(),
                (_, Value::Object(secret)) => {
                    format!(
                        "secret {}:{}",
                        secret["name"].as_str().unwrap(),
                        secret["key"].as_str().unwrap()
                    )
                }
                _ => "from the pod".to_owned(),
            };
            (e["name"].as_str().unwrap().to_owned(), value)
        })
        .collect()
}

fn has_env(container: &Value, name: &str, value: &str) -> bool {
    env_of(container)
        .iter()
        .any(|(n, v)| n == name && v == value)
}

#[test]
fn postgres_queues_get_the_database_url_a_publisher_and_the_migration_job() {
    let spec = checked(POSTGRES_SPEC, "queues.yaml");
    let files = deploy::generate(&spec, "../queues.yaml", POSTGRES_SPEC).unwrap();
    let mut names = k8s_names(&files);
    names.sort();
    assert_eq!(
        names,
        [
            "configmap.yaml",
            "monitor.yaml",
            "outbox-publisher.yaml",
            "postgres-migrations.yaml",
            "worker-audits.yaml",
            "worker-mails.yaml",
            "worker-orders.yaml",
            "worker-refunds.yaml",
        ]
    );
    let database = "secret shop-postgres:database-url";
    let redis = "secret shop-redis:worker-url";

    // DATABASE_URL exactly in the workers of `results: postgres` queues.
    for (queue, wanted) in [
        ("orders", true),
        ("refunds", true),
        ("audits", false),
        ("mails", false),
    ] {
        let text = k8s_file(&files, &format!("worker-{queue}.yaml")).unwrap();
        let deployment = &documents(text)[0];
        let worker = container(deployment);
        assert_eq!(
            has_env(worker, "DATABASE_URL", database),
            wanted,
            "{queue}: {:?}",
            env_of(worker)
        );
        assert!(has_env(worker, "REDIS_URL", redis));
    }

    // The publisher: the worker image, no queue, both URLs, the spec hash.
    let publisher = documents(k8s_file(&files, "outbox-publisher.yaml").unwrap());
    assert_eq!(publisher.len(), 2);
    let deployment = &publisher[0];
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(deployment["metadata"]["name"], "shop-outbox-publisher");
    assert_eq!(deployment["metadata"]["namespace"], "shop-prod");
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["annotations"][k8s::SPEC_HASH_ANNOTATION],
        k8s::spec_hash(POSTGRES_SPEC)
    );
    let worker = container(deployment);
    assert_eq!(worker["image"], "reg.example/shop-worker:3");
    assert_eq!(
        env_of(worker),
        [
            ("QUEUEGEN_QUEUE".to_owned(), "none".to_owned()),
            ("QUEUEGEN_OUTBOX_PUBLISHER".to_owned(), "true".to_owned()),
            ("REDIS_URL".to_owned(), redis.to_owned()),
            ("DATABASE_URL".to_owned(), database.to_owned()),
        ]
    );
    // The selector picks the publisher's pods and no worker's.
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "shop", "app.kubernetes.io/component": "outbox-publisher"})
    );
    let budget = &publisher[1];
    assert_eq!(budget["kind"], "PodDisruptionBudget");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
    assert_eq!(budget["spec"]["selector"], deployment["spec"]["selector"]);

    // The migrations: the files of sql/, byte for byte, and a Job applying
    // them in file-name order from the mounted ConfigMap.
    let migrations = documents(k8s_file(&files, "postgres-migrations.yaml").unwrap());
    let (configmap, job) = (&migrations[0], &migrations[1]);
    let sql: Vec<&GeneratedFile> = files.iter().filter(|f| f.path.starts_with("sql")).collect();
    assert!(!sql.is_empty());
    let data = configmap["data"].as_object().unwrap();
    assert_eq!(data.len(), sql.len());
    for file in &sql {
        let name = file.path.file_name().unwrap().to_str().unwrap();
        assert_eq!(data[name], file.contents.as_str(), "{name}");
    }
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["metadata"]["name"], "shop-postgres-migrate");
    assert!(job["spec"]["backoffLimit"].as_u64().unwrap() > 0);
    assert!(job["spec"]["ttlSecondsAfterFinished"].as_u64().unwrap() > 0);
    let migrate = container(job);
    assert_eq!(migrate["image"], "reg.example/psql:16");
    assert_eq!(
        env_of(migrate),
        [("DATABASE_URL".to_owned(), database.to_owned())]
    );
    assert_eq!(migrate["workingDir"], k8s::MIGRATIONS_MOUNT);
    assert_eq!(
        migrate["volumeMounts"][0]["mountPath"],
        k8s::MIGRATIONS_MOUNT
    );
    assert_eq!(
        job["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"],
        configmap["metadata"]["name"]
    );
    let script = migrate["args"][0].as_str().unwrap();
    let applied: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -f "))
        .collect();
    let mut in_order: Vec<&str> = data.keys().map(String::as_str).collect();
    in_order.sort();
    assert_eq!(applied, in_order, "{script}");

    insta::assert_snapshot!(
        "outbox_publisher",
        k8s_file(&files, "outbox-publisher.yaml").unwrap()
    );
    insta::assert_snapshot!(
        "postgres_migrations",
        k8s_file(&files, "postgres-migrations.yaml").unwrap()
    );

    // And the API server's schema takes every object.
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    for file in files.iter().filter(|f| f.path.starts_with("k8s")) {
        let path = dir.path().join(file.path.file_name().unwrap());
        std::fs::write(&path, &file.contents).unwrap();
        written.push(path);
    }
    kubernetes_validate(&written);
}

#[test]
fn the_publisher_is_left_out_without_an_outbox_queue() {
    let source = POSTGRES_SPEC.replace("    outbox: true\n", "");
    let spec = checked(&source, "queues.yaml");
    let files = deploy::generate(&spec, "../queues.yaml", &source).unwrap();
    let names = k8s_names(&files);
    assert!(
        !names.contains(&"outbox-publisher.yaml".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"postgres-migrations.yaml".to_owned()),
        "{names:?}"
    );
    let runbook = files
        .iter()
        .find(|f| f.path.ends_with("RUNBOOK.md"))
        .unwrap();
    assert!(runbook
        .contents
        .contains("kubectl -n shop-prod delete job shop-postgres-migrate --ignore-not-found"));
    assert!(!runbook.contents.contains("outbox-publisher"));
}

/// Without a `kubernetes` section a spec needs no `postgres_secret`, and
/// its manifests stay as they were before PostgreSQL had any: the same
/// files, nothing of PostgreSQL in them but the spec text the ConfigMap
/// carries; a spec with no PostgreSQL at all gets none of it either.
#[test]
fn without_the_postgres_secret_the_manifests_carry_nothing_of_postgres() {
    let without_section = POSTGRES_SPEC.replacen(
        "kubernetes:\n  namespace: shop-prod\n  image: reg.example/shop-worker:3\n  postgres_secret: shop-postgres\n  psql_image: reg.example/psql:16\n",
        "",
        1,
    );
    let without_postgres = without_section
        .replace("postgres: { schema: shop_queues }\n", "")
        .replace("    results: postgres\n", "")
        .replace("    outbox: true\n", "");
    let cluster = CLUSTER_SPEC.to_owned();
    for source in [&without_section, &without_postgres, &cluster] {
        let spec = checked(source, "queues.yaml");
        assert_eq!(spec.kubernetes.postgres_secret, None);
        let files = deploy::generate(&spec, "../queues.yaml", source).unwrap();
        for file in files.iter().filter(|f| f.path.starts_with("k8s")) {
            if file.path.ends_with("configmap.yaml") {
                continue;
            }
            let text = file.contents.to_lowercase();
            assert!(
                !text.contains("postgres")
                    && !text.contains("database")
                    && !text.contains("outbox"),
                "{}:\n{}",
                file.path.display(),
                file.contents
            );
        }
        let runbook = files
            .iter()
            .find(|f| f.path.ends_with("RUNBOOK.md"))
            .unwrap();
        assert!(!runbook.contents.contains("postgres-migrate"), "{source}");
    }
    // The same k8s/ files with and without the queues' PostgreSQL.
    let names = |source: &str| {
        let spec = checked(source, "queues.yaml");
        let mut names = k8s_names(&deploy::generate(&spec, "../queues.yaml", source).unwrap());
        names.sort();
        names
    };
    assert_eq!(names(&without_section), names(&without_postgres));
}

/// The migration Job's real consumer: its script, run by `sh -ec` as the
/// container runs it, in a directory holding the ConfigMap's files, applies
/// the migrations to a real PostgreSQL, and again on the next deploy.
#[test]
fn the_migration_job_applies_the_configmap_to_postgresql_and_again() {
    let spec = checked(POSTGRES_SPEC, "queues.yaml");
    let files = deploy::generate(&spec, "../queues.yaml", POSTGRES_SPEC).unwrap();
    let migrations = documents(k8s_file(&files, "postgres-migrations.yaml").unwrap());
    let (configmap, job) = (&migrations[0], &migrations[1]);
    let mount = tempfile::tempdir().unwrap();
    for (name, text) in configmap["data"].as_object().unwrap() {
        std::fs::write(mount.path().join(name), text.as_str().unwrap()).unwrap();
    }
    let migrate = container(job);
    let command: Vec<&str> = migrate["command"]
        .as_array()
        .unwrap()
        .iter()
        .chain(migrate["args"].as_array().unwrap())
        .map(|v| v.as_str().unwrap())
        .collect();
    let server = queuegen_tests::PostgresServer::start();
    for round in 1..=2 {
        let out = Command::new(command[0])
            .args(&command[1..])
            .current_dir(mount.path())
            .env("DATABASE_URL", server.url())
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "round {round}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout)
            .contains("applying 0001_queuegen_results_outbox.sql"));
    }
    assert_eq!(
        server.psql(
            "SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables \
             WHERE table_schema = 'shop_queues'"
        ),
        "fences,handlers,migrations,outbox,results"
    );

    // A migration that fails stops the script (and fails the pod), naming the file.
    let broken = mount.path().join("0001_queuegen_results_outbox.sql");
    let text = std::fs::read_to_string(&broken).unwrap();
    std::fs::write(&broken, text.replacen("CREATE SCHEMA", "CREATE SCHEMAX", 1)).unwrap();
    let out = Command::new(command[0])
        .args(&command[1..])
        .current_dir(mount.path())
        .env("DATABASE_URL", server.url())
        .output()
        .expect("sh runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("0001_queuegen_results_outbox.sql"),
        "{out:?}"
    );
}
