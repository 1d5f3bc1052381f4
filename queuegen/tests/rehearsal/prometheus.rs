//! A real Prometheus server (`/usr/bin/prometheus`) for the rehearsal: the generated `prometheus/rules.yml` loaded as is, the pods scraped that Kubernetes service discovery finds from the manifests' `prometheus.io/*` annotations, scrapes and evaluations every second, read through its HTTP API.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use queuegen_tests::exposition::http_get;
use queuegen_tests::redis_server::free_port;
use serde_json::{json, Value};

use super::cluster::Pod;
use super::manifests::{self, Manifests};

/// How long Prometheus may take to start, scrape every target or evaluate every group.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A scrape target as service discovery and the usual relabelling (the
/// prometheus-community chart's `kubernetes-pods` and
/// `kubernetes-service-endpoints` jobs) make it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub job: &'static str,
    pub addr: SocketAddr,
    pub path: String,
    /// `namespace`, and `pod` or `service`.
    pub labels: BTreeMap<String, String>,
}

/// The targets Prometheus would find in a cluster running `manifests` as
/// `pods`: a pod whose template says `prometheus.io/scrape: "true"` (role
/// `pod`), and every pod a Service saying so selects (role `endpoints`), on
/// the `prometheus.io/port` annotation's container port (else each declared
/// one) and `prometheus.io/path` (else `/metrics`).
pub fn discover(manifests: &Manifests, pods: &[Pod]) -> Vec<Target> {
    let deployment_of = |pod: &Pod| {
        let name = pod
            .name
            .rsplit_once('-')
            .map_or(&*pod.name, |(name, _)| name);
        manifests.named("Deployment", name)
    };
    let annotation = |object: &serde_yaml_ng::Value, key: &str| {
        object["metadata"]["annotations"][key]
            .as_str()
            .map(str::to_owned)
    };
    let mut targets = BTreeSet::new();
    for pod in pods {
        let template = &deployment_of(pod)["spec"]["template"];
        if annotation(template, "prometheus.io/scrape").as_deref() != Some("true") {
            continue;
        }
        let ns = namespace(deployment_of(pod));
        for addr in scraped_ports(pod, annotation(template, "prometheus.io/port"), None) {
            targets.insert(Target {
                job: "kubernetes-pods",
                addr,
                path: annotation(template, "prometheus.io/path").unwrap_or("/metrics".into()),
                labels: BTreeMap::from([
                    ("namespace".to_owned(), ns.clone()),
                    ("pod".to_owned(), pod.name.clone()),
                ]),
            });
        }
    }
    for service in manifests.of_kind("Service") {
        if annotation(service, "prometheus.io/scrape").as_deref() != Some("true") {
            continue;
        }
        let ns = namespace(service);
        let selector = service["spec"]["selector"].as_mapping().cloned();
        let selector = selector.unwrap_or_default();
        let service_ports: Vec<String> = service["spec"]["ports"]
            .as_sequence()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|port| {
                let target = &port["targetPort"];
                let target = if target.is_null() {
                    &port["port"]
                } else {
                    target
                };
                manifests::text(target, "targetPort")
            })
            .collect();
        for pod in pods {
            let deployment = deployment_of(pod);
            let labels = &deployment["spec"]["template"]["metadata"]["labels"];
            let selected = !selector.is_empty()
                && namespace(deployment) == ns
                && selector.iter().all(|(key, value)| &labels[key] == value);
            if !selected {
                continue;
            }
            for port in &service_ports {
                let ports = scraped_ports(
                    pod,
                    annotation(service, "prometheus.io/port"),
                    Some(port.as_str()),
                );
                for addr in ports {
                    targets.insert(Target {
                        job: "kubernetes-service-endpoints",
                        addr,
                        path: annotation(service, "prometheus.io/path")
                            .unwrap_or("/metrics".into()),
                        labels: BTreeMap::from([
                            ("namespace".to_owned(), ns.clone()),
                            ("service".to_owned(), manifests::name(service)),
                        ]),
                    });
                }
            }
        }
    }
    targets.into_iter().collect()
}

/// `metadata.namespace` (`default` when unset).
fn namespace(object: &serde_yaml_ng::Value) -> String {
    object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned()
}

/// The loopback addresses of `pod`'s container ports that are scraped: the
/// one numbered `annotated`, else the Service's `target_port` (a name or a
/// number), else every declared one.
fn scraped_ports(
    pod: &Pod,
    annotated: Option<String>,
    target_port: Option<&str>,
) -> Vec<SocketAddr> {
    let wanted = annotated.as_deref().or(target_port);
    pod.container
        .ports
        .iter()
        .filter(|(name, number)| {
            wanted.map_or(true, |wanted| {
                wanted == name || wanted == number.to_string()
            })
        })
        .map(|(name, _)| pod.addr(name))
        .collect()
}

/// One alerting rule as Prometheus last evaluated it.
#[derive(Debug, Clone)]
pub struct RuleState {
    pub group: String,
    pub name: String,
    pub query: String,
    /// `ok`, `err` or `unknown` (not evaluated yet).
    pub health: String,
    pub last_error: String,
    /// Its active alerts: labels and state (`pending` or `firing`).
    pub alerts: Vec<(BTreeMap<String, String>, String)>,
}

/// A running Prometheus; dropping it kills it.
pub struct Prometheus {
    child: Option<Child>,
    addr: SocketAddr,
    pub log: PathBuf,
    targets: usize,
}

impl Prometheus {
    /// Starts Prometheus in `dir` (its config, data and log) with `rules`
    /// as its one rule file, scraping `targets`; waits until it is ready.
    pub async fn start(dir: &Path, rules: &Path, targets: &[Target]) -> Prometheus {
        std::fs::create_dir_all(dir).unwrap();
        let mut jobs: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        for target in targets {
            let mut labels = json!(target.labels);
            labels["__metrics_path__"] = json!(target.path);
            jobs.entry(target.job)
                .or_default()
                .push(json!({"targets": [target.addr.to_string()], "labels": labels}));
        }
        // JSON is YAML: no quoting of our own.
        let config = json!({
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [rules],
            "scrape_configs": jobs
                .into_iter()
                .map(|(job, groups)| json!({"job_name": job, "static_configs": groups}))
                .collect::<Vec<_>>(),
        });
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = dir.join("prometheus.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            // Its API's times in UTC (`...Z`), as parse_time reads them.
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|err| {
                panic!("starting prometheus (Debian package `prometheus`): {err}")
            });
        let mut prometheus = Prometheus {
            child: Some(child),
            addr,
            log,
            targets: targets.len(),
        };
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Ok(response) = http_get(addr, "/-/ready", None).await {
                if response.status == 200 {
                    return prometheus;
                }
            }
            if let Some(status) = prometheus.child.as_mut().unwrap().try_wait().unwrap() {
                // Its errors (a rule that does not parse names its file, line and rule).
                let log = prometheus.log_text();
                let errors: Vec<&str> = log.lines().filter(|l| l.contains("level=error")).collect();
                panic!(
                    "prometheus exited ({status}) before ready (config {}, log {}):\n{}",
                    config_file.display(),
                    prometheus.log.display(),
                    if errors.is_empty() {
                        log.clone()
                    } else {
                        errors.join("\n")
                    }
                );
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready on {addr} after {TIMEOUT:?}:\n{}",
                prometheus.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `data` of the API's answer to `GET path`.
    pub async fn api(&self, path: &str) -> Value {
        let response = http_get(self.addr, path, None)
            .await
            .unwrap_or_else(|err| panic!("prometheus GET {path}: {err}"));
        let body: Value = serde_json::from_str(&response.body)
            .unwrap_or_else(|err| panic!("prometheus GET {path}: {err}: {}", response.body));
        assert!(
            response.status == 200 && body["status"] == "success",
            "prometheus GET {path}: {}",
            response.body
        );
        body["data"].clone()
    }

    /// Waits until every target was scraped, successfully, after `since`,
    /// then until every rule group was evaluated after that.
    pub async fn wait_evaluated(&self, since: SystemTime) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let data = self.api("/api/v1/targets?state=active").await;
            let targets = data["activeTargets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let fresh = targets
                .iter()
                .filter(|t| t["health"] == "up" && parse_time(&t["lastScrape"]) > since)
                .count();
            if targets.len() == self.targets && fresh == self.targets {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus: {fresh} of {} targets scraped successfully since the check began, after {TIMEOUT:?}:\n{}",
                self.targets,
                targets
                    .iter()
                    .map(|t| format!(
                        "{} {}: {} {}",
                        t["labels"]["job"], t["scrapeUrl"], t["health"], t["lastError"]
                    ))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let scraped = SystemTime::now();
        loop {
            let groups = self.api("/api/v1/rules").await["groups"].clone();
            let groups = groups.as_array().cloned().unwrap_or_default();
            let stale: Vec<String> = groups
                .iter()
                .filter(|group| parse_time(&group["lastEvaluation"]) <= scraped)
                .map(|group| group["name"].to_string())
                .collect();
            if !groups.is_empty() && stale.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus: rule groups not evaluated after the scrape in {TIMEOUT:?}: {stale:?} (of {})",
                groups.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every alerting rule of every group, as last evaluated.
    pub async fn rules(&self) -> Vec<RuleState> {
        let data = self.api("/api/v1/rules?type=alert").await;
        let mut rules = Vec::new();
        for group in data["groups"].as_array().cloned().unwrap_or_default() {
            for rule in group["rules"].as_array().cloned().unwrap_or_default() {
                let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
                let alerts = rule["alerts"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|alert| {
                        let labels = alert["labels"]
                            .as_object()
                            .map(|labels| {
                                labels.iter().map(|(k, v)| (k.clone(), text(v))).collect()
                            })
                            .unwrap_or_default();
                        (labels, text(&alert["state"]))
                    })
                    .collect();
                rules.push(RuleState {
                    group: text(&group["name"]),
                    name: text(&rule["name"]),
                    query: text(&rule["query"]),
                    health: text(&rule["health"]),
                    last_error: text(&rule["lastError"]),
                    alerts,
                });
            }
        }
        rules
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An API time (RFC 3339 in UTC); the epoch for Go's zero time (never).
fn parse_time(value: &Value) -> SystemTime {
    value
        .as_str()
        .and_then(|text| humantime::parse_rfc3339_weak(text).ok())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}
