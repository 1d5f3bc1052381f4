//! The tracing subscriber of the telemetry variant: installed once for the process, off (as if none) except while that variant runs.
//!
//! A subscriber is global to the process (worker tasks run on every runtime
//! thread), so it is installed at start with its filter at `off`, which
//! leaves every callsite disabled, as without a subscriber; the telemetry
//! variant raises it to `info` for its run. Output goes to a sink: what is
//! measured is building spans and events, not a terminal.

use std::sync::OnceLock;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Registry;

static LEVEL: OnceLock<reload::Handle<LevelFilter, Registry>> = OnceLock::new();

/// Installs the process's subscriber, off.
pub fn install() {
    let (filter, handle) = reload::Layer::new(LevelFilter::OFF);
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(std::io::sink);
    if tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()
        .is_ok()
    {
        let _ = LEVEL.set(handle);
    }
}

/// Tracing at `info` until dropped.
pub struct TracingOn;

impl TracingOn {
    pub fn start() -> TracingOn {
        set(LevelFilter::INFO);
        TracingOn
    }
}

impl Drop for TracingOn {
    fn drop(&mut self) {
        set(LevelFilter::OFF);
    }
}

fn set(level: LevelFilter) {
    if let Some(handle) = LEVEL.get() {
        // Only fails once the subscriber is gone, at exit.
        let _ = handle.reload(level);
    }
}
