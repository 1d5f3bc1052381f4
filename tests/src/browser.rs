//! Headless Chromium for the dashboard's browser tests: a private
//! chromedriver on a free loopback port, driven over WebDriver (fantoccini).
//! scripts/test installs Debian's `chromium` and `chromium-driver`.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::ClientBuilder;
pub use fantoccini::{Client, Locator};
use hyper_util::client::legacy::connect::HttpConnector;

use crate::redis_server::free_port;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A headless Chromium session; chromedriver is killed on drop.
pub struct Browser {
    pub client: Client,
    driver: Child,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session (1600×1000).
    pub async fn start() -> Browser {
        for binary in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(binary).exists(),
                "{binary} is missing: install Debian's chromium and chromium-driver (scripts/test does)"
            );
        }
        let port = free_port();
        // Its own process group, so that Drop ends Chromium with it even when
        // a failed test never closes the session.
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-dev-shm-usage",
                    "--window-size=1600,1000",
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(err) if Instant::now() < deadline => {
                    let _ = err;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => panic!("no Chromium session from chromedriver on {url}: {err}"),
            }
        };
        Browser { client, driver }
    }

    /// Saves a PNG of the page as a test artefact: `target/test-artefacts/<name>.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self
            .client
            .screenshot()
            .await
            .expect("a screenshot of the page");
        let dir = artefact_dir();
        std::fs::create_dir_all(&dir).expect("creating target/test-artefacts");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("writing the screenshot");
        path
    }

    /// Ends the session (Chromium exits) and stops chromedriver.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
        // Drop stops chromedriver and anything Chromium left in its group.
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // SAFETY: killpg only sends a signal to the group chromedriver leads.
        unsafe {
            libc::killpg(self.driver.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = self.driver.wait();
    }
}

/// `target/test-artefacts` of the workspace (CARGO_TARGET_DIR respected).
pub fn artefact_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")));
    target.join("test-artefacts")
}
