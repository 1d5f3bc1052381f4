//! What a cluster gives the generated pods, played by local processes: the Secrets a team creates as docs/deploy.md says, the ConfigMaps mounted where the manifests mount them, a free loopback port per container port, and the images' programs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use queuegen_tests::exposition::http_get;
use queuegen_tests::redis_server::free_port;
use serde_yaml_ng::Value;

use super::manifests::{self, Container, Manifests, Source};

/// How long a pod may take to answer its readiness probe.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped pod may take to end after SIGTERM (its shutdown budget).
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The cluster's Secrets, ConfigMaps and images, and where pods keep their files.
pub struct Cluster {
    /// Secret name -> key -> value.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// ConfigMap name -> key -> content.
    configmaps: BTreeMap<String, BTreeMap<String, String>>,
    /// Image -> the program it runs when a container names no `command`.
    entrypoints: BTreeMap<String, PathBuf>,
    /// On the pods' PATH: the programs a container's `command` names.
    bin: PathBuf,
    root: PathBuf,
}

impl Cluster {
    /// A cluster under `root` with the ConfigMaps of `manifests`, the
    /// `commands` on PATH and the images' `entrypoints`.
    pub fn new(
        root: &Path,
        manifests: &Manifests,
        commands: &[(&str, PathBuf)],
        entrypoints: BTreeMap<String, PathBuf>,
    ) -> Cluster {
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for (name, program) in commands {
            std::os::unix::fs::symlink(program, bin.join(name)).unwrap();
        }
        let configmaps = manifests
            .of_kind("ConfigMap")
            .map(|map| {
                let data = map["data"]
                    .as_mapping()
                    .map(|data| {
                        data.iter()
                            .map(|(key, value)| {
                                (
                                    manifests::text(key, "data key"),
                                    manifests::text(value, "data"),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                (manifests::name(map), data)
            })
            .collect();
        Cluster {
            secrets: BTreeMap::new(),
            configmaps,
            entrypoints,
            bin,
            root: root.to_owned(),
        }
    }

    /// Adds Secret `name` with `data`.
    pub fn secret(&mut self, name: &str, data: BTreeMap<String, String>) {
        self.secrets.insert(name.to_owned(), data);
    }

    /// What a variable of pod `pod` resolves to: a literal, a Secret's key, the pod name.
    pub fn resolve(&self, source: &Source, pod: &str) -> String {
        match source {
            Source::Literal(value) => value.clone(),
            Source::Secret { name, key } => self
                .secrets
                .get(name)
                .unwrap_or_else(|| panic!("no Secret {name} (docs/deploy.md creates it)"))
                .get(key)
                .unwrap_or_else(|| panic!("Secret {name} has no key {key} (docs/deploy.md)"))
                .clone(),
            Source::Field(path) if path == "metadata.name" => pod.to_owned(),
            Source::Field(path) => panic!("fieldRef {path}: not a field this rehearsal knows"),
        }
    }

    /// Starts pod `pod` of `workload` (a Deployment): its container's
    /// program with its args and environment, ports and mounts mapped.
    pub fn start(&self, workload: &Value, pod: &str) -> Pod {
        let container = manifests::container(workload);
        let ports: BTreeMap<u16, u16> = container
            .ports
            .iter()
            .map(|(_, port)| (*port, free_port()))
            .collect();
        let mut command = self.command(workload, &container, pod, &ports);
        let log = self.root.join(format!("{pod}.log"));
        let file = std::fs::File::create(&log).unwrap();
        command
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        let child = command
            .spawn()
            .unwrap_or_else(|err| panic!("pod {pod}: starting {command:?}: {err}"));
        Pod {
            name: pod.to_owned(),
            child: Some(child),
            container,
            ports,
            log,
        }
    }

    /// Runs pod `pod` of `workload` (a CronJob's or Job's) to its end.
    pub fn run(&self, workload: &Value, pod: &str) -> Output {
        let container = manifests::container(workload);
        let mut command = self.command(workload, &container, pod, &BTreeMap::new());
        command
            .output()
            .unwrap_or_else(|err| panic!("pod {pod}: running {command:?}: {err}"))
    }

    /// The container's process: `command` from PATH (or the image's
    /// program), `args`, only its own environment, run in its own directory.
    fn command(
        &self,
        workload: &Value,
        container: &Container,
        pod: &str,
        ports: &BTreeMap<u16, u16>,
    ) -> Command {
        let mounts = self.mount(workload, container, pod);
        // What the pod's network and mounts change: the container's
        // listening addresses become loopback ports, mount paths host paths.
        let local = |text: &str| {
            let mut text = text.to_owned();
            for (container_port, host) in ports {
                text = text.replace(
                    &format!("0.0.0.0:{container_port}"),
                    &format!("127.0.0.1:{host}"),
                );
            }
            for (mount, host) in &mounts {
                text = text.replace(mount.as_str(), host.to_str().unwrap());
            }
            text
        };
        let mut command =
            match container.command.split_first() {
                Some((program, rest)) => {
                    let mut command = Command::new(self.bin.join(program));
                    command.args(rest.iter().map(|arg| local(arg)));
                    command
                }
                None => Command::new(self.entrypoints.get(&container.image).unwrap_or_else(|| {
                    panic!("no program for image {} of {pod}", container.image)
                })),
            };
        command.args(container.args.iter().map(|arg| local(arg)));
        command.env_clear();
        command.env(
            "PATH",
            format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap()),
        );
        command.env("RUST_LOG", "info");
        for (name, source) in &container.env {
            command.env(name, local(&self.resolve(source, pod)));
        }
        let dir = self.root.join("pods").join(pod);
        std::fs::create_dir_all(&dir).unwrap();
        // A `workingDir` is a path inside the container: a mount, mapped.
        match &container.working_dir {
            Some(working_dir) => command.current_dir(local(working_dir)),
            None => command.current_dir(dir),
        };
        command
    }

    /// Writes the ConfigMap volumes the container mounts into the pod's
    /// directory; mount path -> host path.
    fn mount(&self, workload: &Value, container: &Container, pod: &str) -> Vec<(String, PathBuf)> {
        let volumes = manifests::pod_spec(workload)["volumes"]
            .as_sequence()
            .cloned()
            .unwrap_or_default();
        container
            .mounts
            .iter()
            .map(|(path, volume)| {
                let spec = volumes
                    .iter()
                    .find(|v| v["name"] == volume.as_str())
                    .unwrap_or_else(|| {
                        panic!("{pod} mounts volume {volume}, which is not declared")
                    });
                let map = manifests::text(&spec["configMap"]["name"], "configMap.name");
                let data = self
                    .configmaps
                    .get(&map)
                    .unwrap_or_else(|| panic!("{pod} mounts ConfigMap {map}, which k8s/ lacks"));
                let host = self.root.join("volumes").join(pod).join(volume);
                std::fs::create_dir_all(&host).unwrap();
                let items: Vec<(String, String)> = match spec["configMap"]["items"].as_sequence() {
                    Some(items) => items
                        .iter()
                        .map(|item| {
                            (
                                manifests::text(&item["key"], "key"),
                                manifests::text(&item["path"], "path"),
                            )
                        })
                        .collect(),
                    None => data.keys().map(|key| (key.clone(), key.clone())).collect(),
                };
                for (key, file) in items {
                    let content = data
                        .get(&key)
                        .unwrap_or_else(|| panic!("ConfigMap {map} has no key {key}"));
                    std::fs::write(host.join(file), content).unwrap();
                }
                (path.clone(), host)
            })
            .collect()
    }
}

/// A running pod; dropping it kills it.
pub struct Pod {
    pub name: String,
    child: Option<Child>,
    pub container: Container,
    /// Container port -> loopback port.
    ports: BTreeMap<u16, u16>,
    log: PathBuf,
}

impl Pod {
    /// The loopback address of the container port named `name`.
    pub fn addr(&self, name: &str) -> SocketAddr {
        let (_, port) = self
            .container
            .ports
            .iter()
            .find(|(port, _)| port == name)
            .unwrap_or_else(|| panic!("{} has no port {name}", self.name));
        SocketAddr::from(([127, 0, 0, 1], self.ports[port]))
    }

    /// Waits until the readiness probe answers 200 (at once without a probe).
    pub async fn ready(&mut self) {
        let Some((path, port)) = self.container.readiness.clone() else {
            return;
        };
        let addr = self.addr(&port);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(response) = http_get(addr, &path, None).await {
                if response.status == 200 {
                    return;
                }
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "pod {} exited ({status}) before ready:\n{}",
                    self.name,
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "pod {} never answered {path} on {addr}:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `GET path` on the port named `port`: the body of a 200.
    pub async fn get(&self, port: &str, path: &str) -> String {
        let response = http_get(self.addr(port), path, None)
            .await
            .unwrap_or_else(|err| panic!("GET {path} of {}: {err}", self.name));
        assert_eq!(
            response.status, 200,
            "GET {path} of {}: {}",
            self.name, response.body
        );
        response.body
    }

    /// Stops it as Kubernetes does (SIGTERM) and waits; its log, and
    /// whether it ended by itself with status 0.
    pub fn stop(&mut self) -> (bool, String) {
        let Some(mut child) = self.child.take() else {
            return (false, self.log());
        };
        // kill(1): this package has no libc binding, and a signal is all it takes.
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return (status.success(), self.log());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return (
                    false,
                    format!(
                        "{}\n(killed: no exit {STOP_TIMEOUT:?} after SIGTERM)",
                        self.log()
                    ),
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
