//! The host a process runs on, as the runtime and the CLI both need it: its wall clock in Unix milliseconds and its name.

/// Current time as Unix milliseconds (rounded down); 0 before the epoch.
/// The clock retry due times, delays, schedule ticks and lease owners'
/// timestamps are kept in.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The host's name: the kernel's, else `$HOSTNAME`, else `unknown-host`.
/// Part of consumer names, lease owners and who paused a partition.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_past_2020_and_the_host_has_a_name() {
        assert!(now_ms() > 1_577_836_800_000);
        assert!(!hostname().is_empty());
    }
}
