//! The generated Kubernetes manifests, checked by the tools that consume
//! them: every object of both committed specs (and of a Cluster spec)
//! against the Kubernetes API schema with `kubernetes-validate --strict`
//! (offline: the package ships the schemas), and `keda.yaml` against KEDA's
//! ScaledObject CRD schema. Plus the grace period and the spec hash.
//!
//! `kubernetes-validate` lives in a venv that scripts/test creates at
//! target/k8s-venv; without it these tests fail and say how to create it.

use std::path::{Path, PathBuf};
use std::process::Command;

use queuegen::gen::deploy::{self, k8s};
use queuegen::spec::{self, model::Spec};
use serde_json::Value;

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
    assert_eq!(before_pods.len(), 5, "four workers and the monitor");
    assert!(before_pods.iter().all(|h| *h == before));
    assert!(after_pods.iter().all(|h| *h == after));
}
