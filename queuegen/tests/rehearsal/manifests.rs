//! The generated Kubernetes manifests read as Kubernetes reads them: every document of `k8s/*.yaml`, a workload's pod template, and its containers' command, environment, ports, probes and mounts.

use std::path::Path;

use serde::Deserialize;
use serde_yaml_ng::Value;

/// Every document of every file in `k8s/`, with the file it came from.
pub struct Manifests {
    docs: Vec<(String, Value)>,
}

impl Manifests {
    pub fn read(dir: &Path) -> Manifests {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        let mut docs = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            for doc in serde_yaml_ng::Deserializer::from_str(&text) {
                let doc = Value::deserialize(doc)
                    .unwrap_or_else(|err| panic!("{}: not YAML: {err}", path.display()));
                if !doc.is_null() {
                    docs.push((file.clone(), doc));
                }
            }
        }
        Manifests { docs }
    }

    /// The documents of `kind` (`Deployment`, `CronJob`, ...), in file order.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.docs
            .iter()
            .map(|(_, doc)| doc)
            .filter(move |doc| doc["kind"].as_str() == Some(kind))
    }

    /// The `kind` object named `name`.
    pub fn named(&self, kind: &str, name: &str) -> &Value {
        self.docs
            .iter()
            .map(|(_, doc)| doc)
            .filter(|doc| doc["kind"].as_str() == Some(kind))
            .find(|doc| doc["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} named {name} in k8s/"))
    }
}

/// `metadata.name`.
pub fn name(object: &Value) -> String {
    text(&object["metadata"]["name"], "metadata.name")
}

/// The pod template's spec of a Deployment, a Job or a CronJob.
pub fn pod_spec(workload: &Value) -> &Value {
    match workload["kind"].as_str() {
        Some("Deployment") | Some("Job") => &workload["spec"]["template"]["spec"],
        Some("CronJob") => &workload["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        other => panic!("{other:?} runs no pods"),
    }
}

/// The one container of a workload's pods (every generated pod has one).
pub fn container(workload: &Value) -> Container {
    let containers = pod_spec(workload)["containers"]
        .as_sequence()
        .unwrap_or_else(|| panic!("{} has no containers", name(workload)));
    assert_eq!(containers.len(), 1, "{}: one container", name(workload));
    Container::from(&containers[0])
}

/// Where a variable's value comes from.
#[derive(Debug, Clone)]
pub enum Source {
    Literal(String),
    Secret {
        name: String,
        key: String,
    },
    /// `fieldRef.fieldPath`, e.g. `metadata.name`.
    Field(String),
}

/// A container as its manifest declares it.
#[derive(Debug, Clone)]
pub struct Container {
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, Source)>,
    /// Named container ports (`name`, `containerPort`).
    pub ports: Vec<(String, u16)>,
    /// `readinessProbe.httpGet`: path and port name.
    pub readiness: Option<(String, String)>,
    /// `volumeMounts`: mount path and volume name.
    pub mounts: Vec<(String, String)>,
    /// `workingDir`, if set.
    pub working_dir: Option<String>,
}

impl Container {
    fn from(value: &Value) -> Container {
        let strings = |field: &str| -> Vec<String> {
            value[field]
                .as_sequence()
                .map(|items| items.iter().map(|item| text(item, field)).collect())
                .unwrap_or_default()
        };
        let list = |field: &str| value[field].as_sequence().cloned().unwrap_or_default();
        Container {
            name: text(&value["name"], "name"),
            image: text(&value["image"], "image"),
            command: strings("command"),
            args: strings("args"),
            env: list("env").iter().map(env_var).collect(),
            ports: list("ports")
                .iter()
                .map(|port| {
                    let number = port["containerPort"].as_u64().expect("containerPort");
                    (text(&port["name"], "ports.name"), number as u16)
                })
                .collect(),
            readiness: value["readinessProbe"]["httpGet"].as_mapping().map(|get| {
                let get = Value::Mapping(get.clone());
                (
                    text(&get["path"], "httpGet.path"),
                    text(&get["port"], "httpGet.port"),
                )
            }),
            mounts: list("volumeMounts")
                .iter()
                .map(|mount| {
                    (
                        text(&mount["mountPath"], "mountPath"),
                        text(&mount["name"], "volumeMounts.name"),
                    )
                })
                .collect(),
            working_dir: value["workingDir"].as_str().map(str::to_owned),
        }
    }

    /// The variable `name`'s source; panics naming the container if it has none.
    pub fn var(&self, name: &str) -> &Source {
        self.env
            .iter()
            .find(|(var, _)| var == name)
            .map(|(_, source)| source)
            .unwrap_or_else(|| panic!("container {} has no variable {name}", self.name))
    }
}

fn env_var(entry: &Value) -> (String, Source) {
    let name = text(&entry["name"], "env.name");
    let source = if let Some(value) = entry["value"].as_str() {
        Source::Literal(value.to_owned())
    } else if let Some(secret) = entry["valueFrom"]["secretKeyRef"].as_mapping() {
        let secret = Value::Mapping(secret.clone());
        Source::Secret {
            name: text(&secret["name"], "secretKeyRef.name"),
            key: text(&secret["key"], "secretKeyRef.key"),
        }
    } else if let Some(path) = entry["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
        Source::Field(path.to_owned())
    } else {
        panic!("variable {name}: a source this rehearsal does not know: {entry:?}")
    };
    (name, source)
}

/// A string field, or a panic naming it.
pub fn text(value: &Value, what: &str) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        other => panic!("{what}: expected a string, got {other:?}"),
    }
}
