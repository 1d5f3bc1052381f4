//! Durations (`250ms`, `120s`, `10m`, `2h`, `3d`) and sizes (`2048`, `512B`,
//! `2KiB`, `1MiB`, `2kB`): parsing for the spec and formatting for messages.

use std::time::Duration;

/// Shown whenever a duration is malformed.
pub const DURATION_HELP: &str =
    "write a whole number and one unit: 250ms, 120s, 10m, 2h or 3d (ms, s, m, h, d)";

/// Shown whenever a size is malformed.
pub const SIZE_HELP: &str = "write a whole number of bytes (2048) or a number and a unit: 512B, 2KiB, 1MiB, 1GiB (1024-based) or 2kB, 1MB, 1GB (1000-based)";

const DURATION_UNITS: &[(&str, u64)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("kB", 1_000),
    ("KiB", 1 << 10),
    ("MB", 1_000_000),
    ("MiB", 1 << 20),
    ("GB", 1_000_000_000),
    ("GiB", 1 << 30),
];

/// Splits `120s` into (120, "s"). The number must be plain ASCII digits.
fn split_number(text: &str) -> Result<(u64, &str), String> {
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return Err("it does not start with a whole number".to_owned());
    }
    let number = text[..digits]
        .parse::<u64>()
        .map_err(|_| "the number is too large".to_owned())?;
    Ok((number, &text[digits..]))
}

/// Parses `<integer><unit>` with unit ms, s, m, h or d. Zero is accepted
/// here; keys that need a positive duration say so themselves.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = split_number(text)?;
    if unit.is_empty() {
        return Err("it has no unit".to_owned());
    }
    if unit.starts_with(['.', ',']) {
        return Err("the number must be whole; use a smaller unit (1500ms, not 1.5s)".to_owned());
    }
    let Some((_, millis)) = DURATION_UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(format!("`{unit}` is not a duration unit"));
    };
    number
        .checked_mul(*millis)
        .map(Duration::from_millis)
        .ok_or_else(|| "it is too long".to_owned())
}

/// Parses a size: plain digits are bytes, or `<integer><unit>`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = split_number(text)?;
    if unit.is_empty() {
        return Ok(number);
    }
    if unit.starts_with(['.', ',']) {
        return Err(
            "the number must be whole; use a smaller unit (1536KiB, not 1.5MiB)".to_owned(),
        );
    }
    let Some((_, factor)) = SIZE_UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(format!("`{unit}` is not a size unit"));
    };
    number
        .checked_mul(*factor)
        .ok_or_else(|| "it is too large".to_owned())
}

/// Exact, readable form for messages: `1m15s`, `250ms`, `3d`, `1s500ms`.
/// Sub-millisecond parts (only from arithmetic) are rounded up.
pub fn format_duration(duration: Duration) -> String {
    let mut millis = ceil_millis(duration);
    if millis == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (unit, size) in DURATION_UNITS.iter().rev() {
        if millis >= *size {
            out.push_str(&format!("{}{unit}", millis / size));
            millis %= size;
        }
    }
    out
}

/// A duration in ms as an operator reads it in a table: `850ms`, `42s`,
/// `4m05s`, `3h02m`, `2d04h` (the largest unit and the next, fixed width).
/// The CLI's tables and the dashboard's pages show ages and waits so.
pub fn short_duration(ms: u64) -> String {
    let seconds = ms / 1_000;
    match seconds {
        0 => format!("{ms}ms"),
        1..=59 => format!("{seconds}s"),
        60..=3_599 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        3_600..=86_399 => format!("{}h{:02}m", seconds / 3_600, seconds % 3_600 / 60),
        _ => format!("{}d{:02}h", seconds / 86_400, seconds % 86_400 / 3_600),
    }
}

/// A value a user can type (one unit) that is at least `duration`, rounded
/// up to a unit that reads well: the largest unit of which it is at least two.
pub fn round_up_duration(duration: Duration) -> String {
    let millis = ceil_millis(duration);
    let (unit, size) = DURATION_UNITS
        .iter()
        .rev()
        .find(|(_, size)| millis >= 2 * size)
        .unwrap_or(&DURATION_UNITS[0]);
    format!("{}{unit}", millis.div_ceil(*size))
}

fn ceil_millis(duration: Duration) -> u64 {
    let whole = duration.as_millis();
    let rest = duration.as_nanos() % 1_000_000;
    u64::try_from(whole + u128::from(rest > 0)).unwrap_or(u64::MAX)
}

/// Bytes for messages: `2048 bytes (2KiB)` when a binary unit divides exactly.
pub fn format_size(bytes: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= size && bytes % size == 0 {
            return format!("{bytes} bytes ({}{unit})", bytes / size);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {

    #[test]
    fn short_durations_read_at_a_glance() {
        assert_eq!(short_duration(850), "850ms");
        assert_eq!(short_duration(42_900), "42s");
        assert_eq!(short_duration(245_000), "4m05s");
        assert_eq!(short_duration(3 * 3_600_000 + 120_000), "3h02m");
        assert_eq!(short_duration(2 * 86_400_000 + 4 * 3_600_000), "2d04h");
    }
    use super::*;

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("3d"), Ok(Duration::from_secs(3 * 86_400)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn durations_reject_other_forms() {
        for bad in [
            "", "10", "1.5s", "10 m", "-1s", "1w", "1ns", "s", "10sec", "1m30s", "1H",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad} parsed");
        }
        assert_eq!(parse_duration("10"), Err("it has no unit".to_owned()));
        assert!(parse_duration("1.5s").unwrap_err().contains("whole"));
        assert_eq!(
            parse_duration("1w"),
            Err("`w` is not a duration unit".to_owned())
        );
        assert!(parse_duration("99999999999999999999s").is_err());
        assert!(parse_duration("18446744073709551615d").is_err());
    }

    #[test]
    fn sizes_binary_and_decimal() {
        assert_eq!(parse_size("2048"), Ok(2048));
        assert_eq!(parse_size("512B"), Ok(512));
        assert_eq!(parse_size("2KiB"), Ok(2048));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2kB"), Ok(2000));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
    }

    #[test]
    fn sizes_reject_other_forms() {
        for bad in [
            "", "KiB", "2KB", "2kb", "1.5MiB", "2 KiB", "-1", "1TiB", "2k",
        ] {
            assert!(parse_size(bad).is_err(), "{bad} parsed");
        }
        assert!(parse_size("18446744073709551615GiB").is_err());
    }

    #[test]
    fn formats_compound_durations() {
        assert_eq!(format_duration(Duration::from_secs(75)), "1m15s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_secs(3 * 86_400)), "3d");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
        assert_eq!(format_duration(Duration::from_secs(11_010)), "3h3m30s");
        assert_eq!(format_duration(Duration::from_micros(1_000_250)), "1s1ms");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn rounds_up_to_a_typeable_value() {
        assert_eq!(round_up_duration(Duration::from_secs(75)), "75s");
        assert_eq!(round_up_duration(Duration::from_secs(1125)), "19m");
        assert_eq!(round_up_duration(Duration::from_secs(11_010)), "4h");
        assert_eq!(round_up_duration(Duration::from_secs(120)), "2m");
        assert_eq!(round_up_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(round_up_duration(Duration::from_secs(3 * 86_400 + 1)), "4d");
    }

    #[test]
    fn formats_sizes() {
        assert_eq!(format_size(2048), "2048 bytes (2KiB)");
        assert_eq!(format_size(2301), "2301 bytes");
    }
}
