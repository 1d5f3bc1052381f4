//! When a schedule ticks: the one tick computation `check`, `queuegen schedules`, the generator and every worker share.
//!
//! A cadence is either a standard 5-field cron expression (minute, hour,
//! day of month, month, day of week; POSIX/Vixie semantics, evaluated by
//! `croner`) in an IANA time zone, or a fixed period. Ticks are instants in
//! Unix milliseconds:
//!
//! - `cron`: the instants whose wall-clock time in the zone matches. In a
//!   daylight-saving gap (a wall-clock time that does not exist that day) a
//!   fixed-time tick runs at the first instant after the gap; in an overlap
//!   (a wall-clock hour that happens twice) it runs once, at the first of
//!   the two. Interval patterns (`*/15 * * * *`) follow the real clock.
//! - `every`: whole multiples of the period since the Unix epoch, so every
//!   process computes the same ticks without talking to the others.
//!
//! A tick's job gets the deterministic `job_id` `<schedule>@<tick in RFC 3339
//! UTC with milliseconds>` ([`job_id`]), and its marker is named after the
//! schedule and the tick's Unix ms: that is what makes a tick publish once.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// The names of the five cron fields, in order.
pub const CRON_FIELDS: [&str; 5] = ["minute", "hour", "day of month", "month", "day of week"];

/// How a schedule ticks, as the spec says it (`cron` + `timezone`, or `every`).
/// Constructible in a `const`, so generated code bakes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cadence {
    /// A 5-field cron expression evaluated in an IANA time zone.
    Cron {
        expression: Cow<'static, str>,
        timezone: Cow<'static, str>,
    },
    /// Every `period` (whole milliseconds, at least 1), at multiples of it since the Unix epoch.
    Every(Duration),
}

/// A cron expression or time zone that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CadenceError {
    /// The cron field at fault (0 = minute .. 4 = day of week), when one is.
    pub field: Option<usize>,
    /// Byte offset in the expression of what is at fault (0 for the whole).
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for CadenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CadenceError {}

/// The parser every caller uses: exactly 5 fields (no seconds, no year),
/// day of month and day of week OR-ed as in Vixie cron.
fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

/// Parses a 5-field cron expression; an error names the field at fault and
/// its byte offset in `expression`, so `check` can point at its column.
pub fn parse_cron(expression: &str) -> Result<Cron, CadenceError> {
    let fields = field_spans(expression);
    let nickname = fields.len() == 1 && expression.trim_start().starts_with('@');
    if fields.len() != 5 && !nickname {
        return Err(CadenceError {
            field: None,
            offset: fields.get(5).map_or(0, |(at, _)| *at),
            message: format!(
                "a cron expression has 5 fields (minute hour day-of-month month day-of-week), found {}",
                fields.len()
            ),
        });
    }
    match parser().parse(expression) {
        Ok(cron) => Ok(cron),
        Err(whole) => {
            // Which field? Try each alone, the others `*`.
            for (i, (offset, text)) in fields.iter().enumerate().take(5) {
                let mut alone = ["*"; 5];
                alone[i] = text;
                if let Err(err) = parser().parse(&alone.join(" ")) {
                    return Err(CadenceError {
                        field: Some(i),
                        offset: *offset,
                        message: format!(
                            "the {} field `{text}` is not valid: {}",
                            CRON_FIELDS[i],
                            reason(&err)
                        ),
                    });
                }
            }
            Err(CadenceError {
                field: None,
                offset: fields.first().map_or(0, |(at, _)| *at),
                message: format!("not a valid cron expression: {}", reason(&whole)),
            })
        }
    }
}

/// croner's message without its "Invalid pattern: " style prefix.
fn reason(err: &croner::errors::CronError) -> String {
    let text = err.to_string();
    let text = text
        .split_once(": ")
        .map_or(text.as_str(), |(_, rest)| rest)
        .trim_end_matches('.');
    text.to_owned()
}

/// The whitespace-separated fields of `text` with their byte offsets.
fn field_spans(text: &str) -> Vec<(usize, &str)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                spans.push((s, &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, &text[s..]));
    }
    spans
}

/// An IANA time zone name (`UTC`, `Europe/Berlin`).
pub fn parse_timezone(name: &str) -> Result<Tz, CadenceError> {
    name.parse::<Tz>().map_err(|_| CadenceError {
        field: None,
        offset: 0,
        message: format!("`{name}` is not an IANA time zone name"),
    })
}

/// Some IANA zone names that are close to `name`, for a did-you-mean.
pub fn timezone_names() -> impl Iterator<Item = &'static str> {
    chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name())
}

impl Cadence {
    /// Parses the cadence once; the [`Ticks`] then answer every question.
    pub fn ticks(&self) -> Result<Ticks, CadenceError> {
        match self {
            Cadence::Cron {
                expression,
                timezone,
            } => Ok(Ticks(Inner::Cron(
                Box::new(parse_cron(expression)?),
                parse_timezone(timezone)?,
            ))),
            Cadence::Every(period) => {
                let ms = period.as_millis() as u64;
                if ms == 0 || period.subsec_nanos() % 1_000_000 != 0 {
                    return Err(CadenceError {
                        field: None,
                        offset: 0,
                        message: format!(
                            "`every` must be whole milliseconds, at least 1ms, got {period:?}"
                        ),
                    });
                }
                Ok(Ticks(Inner::Every(ms)))
            }
        }
    }

    /// As written in the spec: `cron "0 2 * * *" in Europe/Berlin`, `every 1s`.
    pub fn describe(&self) -> String {
        match self {
            Cadence::Cron {
                expression,
                timezone,
            } => format!("cron \"{expression}\" in {timezone}"),
            Cadence::Every(period) => format!("every {}", crate::units::format_duration(*period)),
        }
    }
}

/// A parsed cadence: the tick times.
#[derive(Debug, Clone)]
pub struct Ticks(Inner);

#[derive(Debug, Clone)]
enum Inner {
    Cron(Box<Cron>, Tz),
    Every(u64),
}

/// Cron searches give up this far from their start (croner's own bound is
/// years; a pattern like `0 0 30 2 *` never matches).
const YEAR_MS: u64 = 366 * 24 * 3600 * 1000;

impl Ticks {
    /// The first tick strictly after `after_ms` (Unix ms), if there is one
    /// within about a year for cron (none for a date that never comes).
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        match &self.0 {
            Inner::Every(period) => Some((after_ms / period + 1) * period),
            Inner::Cron(cron, tz) => {
                let start = instant(tz, after_ms)?;
                let next = cron.find_next_occurrence(&start, false).ok()?;
                let ms = next.timestamp_millis().try_into().ok()?;
                (ms <= after_ms.saturating_add(5 * YEAR_MS)).then_some(ms)
            }
        }
    }

    /// The last tick at or before `at_ms`, if any (none before the epoch).
    pub fn last_at_or_before(&self, at_ms: u64) -> Option<u64> {
        match &self.0 {
            Inner::Every(period) => Some(at_ms / period * period),
            Inner::Cron(cron, tz) => {
                let start = instant(tz, at_ms)?;
                let previous = cron.find_previous_occurrence(&start, true).ok()?;
                let ms: u64 = previous.timestamp_millis().try_into().ok()?;
                // croner compares whole seconds: a start within a matching
                // minute's first second would count that minute inclusively.
                (ms <= at_ms).then_some(ms)
            }
        }
    }

    /// The ticks in `(after_ms, until_ms]`, at most `limit` of them, ascending.
    pub fn between(&self, after_ms: u64, until_ms: u64, limit: usize) -> Vec<u64> {
        let mut ticks = Vec::new();
        let mut cursor = after_ms;
        while ticks.len() < limit {
            match self.next_after(cursor) {
                Some(tick) if tick <= until_ms => {
                    ticks.push(tick);
                    cursor = tick;
                }
                _ => break,
            }
        }
        ticks
    }

    /// The next `count` ticks strictly after `after_ms`.
    pub fn upcoming(&self, after_ms: u64, count: usize) -> Vec<u64> {
        self.between(after_ms, u64::MAX, count)
    }

    /// The last `count` ticks at or before `at_ms`, oldest first.
    pub fn recent(&self, at_ms: u64, count: usize) -> Vec<u64> {
        let mut ticks = Vec::new();
        let mut cursor = Some(at_ms);
        while ticks.len() < count {
            let Some(tick) = cursor.and_then(|at| self.last_at_or_before(at)) else {
                break;
            };
            ticks.push(tick);
            cursor = tick.checked_sub(1);
        }
        ticks.reverse();
        ticks
    }
}

fn instant(tz: &Tz, ms: u64) -> Option<DateTime<Tz>> {
    let ms: i64 = ms.try_into().ok()?;
    tz.timestamp_millis_opt(ms).single()
}

/// A tick as RFC 3339 UTC with milliseconds, the envelope's timestamp format:
/// `2026-12-05T02:00:00.000Z`.
pub fn format_tick(tick_ms: u64) -> String {
    let ms = i64::try_from(tick_ms).unwrap_or(i64::MAX);
    match Utc.timestamp_millis_opt(ms).single() {
        Some(at) => at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => tick_ms.to_string(),
    }
}

/// A tick in a time zone, for people: `2026-12-05 03:00:00 CET`.
pub fn format_tick_in(tick_ms: u64, timezone: &str) -> String {
    let (Ok(tz), Ok(ms)) = (timezone.parse::<Tz>(), i64::try_from(tick_ms)) else {
        return format_tick(tick_ms);
    };
    match tz.timestamp_millis_opt(ms).single() {
        Some(at) => at.format("%Y-%m-%d %H:%M:%S %Z").to_string(),
        None => format_tick(tick_ms),
    }
}

/// The deterministic `job_id` of a schedule's tick: `<schedule>@<tick>`,
/// the tick as [`format_tick`] writes it.
pub fn job_id(schedule: &str, tick_ms: u64) -> String {
    format!("{schedule}@{}", format_tick(tick_ms))
}

/// The id part of a tick's marker key (`...:marker:tick:<id>`): `<schedule>:<tick_ms>`.
pub fn marker_id(schedule: &str, tick_ms: u64) -> String {
    format!("{schedule}:{tick_ms}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> u64 {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis() as u64
    }

    fn cron(expression: &'static str, timezone: &'static str) -> Ticks {
        Cadence::Cron {
            expression: expression.into(),
            timezone: timezone.into(),
        }
        .ticks()
        .unwrap()
    }

    #[test]
    fn every_ticks_at_multiples_of_the_period() {
        let ticks = Cadence::Every(Duration::from_secs(1)).ticks().unwrap();
        assert_eq!(ticks.next_after(1_500), Some(2_000));
        assert_eq!(ticks.next_after(2_000), Some(3_000));
        assert_eq!(ticks.last_at_or_before(2_000), Some(2_000));
        assert_eq!(ticks.last_at_or_before(2_999), Some(2_000));
        assert_eq!(ticks.between(1_000, 4_000, 10), vec![2_000, 3_000, 4_000]);
        assert_eq!(ticks.between(1_000, 4_000, 2), vec![2_000, 3_000]);
        assert_eq!(ticks.recent(4_500, 3), vec![2_000, 3_000, 4_000]);
        assert_eq!(ticks.recent(1_500, 3), vec![0, 1_000]);
        let minutes = Cadence::Every(Duration::from_secs(90)).ticks().unwrap();
        assert_eq!(minutes.next_after(0), Some(90_000));
        assert!(Cadence::Every(Duration::ZERO).ticks().is_err());
        assert!(Cadence::Every(Duration::from_micros(1500)).ticks().is_err());
    }

    #[test]
    fn cron_in_utc() {
        let ticks = cron("*/15 * * * *", "UTC");
        let t = utc("2026-12-05T07:31:12Z");
        assert_eq!(ticks.next_after(t), Some(utc("2026-12-05T07:45:00Z")));
        assert_eq!(
            ticks.last_at_or_before(t),
            Some(utc("2026-12-05T07:30:00Z"))
        );
        let at = utc("2026-12-05T07:30:00Z");
        assert_eq!(ticks.last_at_or_before(at), Some(at));
        assert_eq!(ticks.next_after(at), Some(utc("2026-12-05T07:45:00Z")));
        assert_eq!(ticks.last_at_or_before(at + 500), Some(at));
        assert_eq!(
            ticks.last_at_or_before(at - 1),
            Some(utc("2026-12-05T07:15:00Z"))
        );
    }

    #[test]
    fn cron_in_a_time_zone() {
        // 02:00 in Berlin is 01:00 UTC in winter, 00:00 UTC in summer.
        let ticks = cron("0 2 * * *", "Europe/Berlin");
        assert_eq!(
            ticks.next_after(utc("2026-12-05T00:00:00Z")),
            Some(utc("2026-12-05T01:00:00Z"))
        );
        assert_eq!(
            ticks.next_after(utc("2026-07-01T12:00:00Z")),
            Some(utc("2026-07-02T00:00:00Z"))
        );
        // Weekdays: Monday to Friday at 09:30 in New York.
        let weekdays = cron("30 9 * * 1-5", "America/New_York");
        // 2026-12-05 is a Saturday: the next is Monday 7th, 14:30 UTC.
        assert_eq!(
            weekdays.next_after(utc("2026-12-05T00:00:00Z")),
            Some(utc("2026-12-07T14:30:00Z"))
        );
    }

    #[test]
    fn cron_across_daylight_saving_changes() {
        // Berlin springs forward on 2026-03-29 at 02:00 -> 03:00: 02:30 does
        // not exist that day, and the tick runs at the first instant after
        // the gap (03:00 CEST = 01:00 UTC), once.
        let ticks = cron("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            ticks.between(utc("2026-03-28T00:00:00Z"), utc("2026-03-31T00:00:00Z"), 10),
            vec![
                utc("2026-03-28T01:30:00Z"),
                utc("2026-03-29T01:00:00Z"),
                utc("2026-03-30T00:30:00Z"),
            ]
        );
        // It falls back on 2026-10-25 at 03:00 -> 02:00: 02:30 happens twice
        // and the tick runs once, at the first (CEST, 00:30 UTC).
        assert_eq!(
            ticks.between(utc("2026-10-24T00:00:00Z"), utc("2026-10-27T00:00:00Z"), 10),
            vec![
                utc("2026-10-24T00:30:00Z"),
                utc("2026-10-25T00:30:00Z"),
                utc("2026-10-26T01:30:00Z"),
            ]
        );
        // A time in the hour before the gap runs once, not also after the
        // gap (croner before 4.0.3 ran it twice).
        let one = cron("0 1 * * *", "Europe/Berlin");
        assert_eq!(
            one.between(utc("2026-03-28T12:00:00Z"), utc("2026-03-30T12:00:00Z"), 10),
            vec![utc("2026-03-29T00:00:00Z"), utc("2026-03-29T23:00:00Z")]
        );
        // An hourly pattern keeps to the real clock through the gap.
        let hourly = cron("0 * * * *", "Europe/Berlin");
        assert_eq!(
            hourly.between(utc("2026-03-28T23:30:00Z"), utc("2026-03-29T02:30:00Z"), 10),
            vec![
                utc("2026-03-29T00:00:00Z"),
                utc("2026-03-29T01:00:00Z"),
                utc("2026-03-29T02:00:00Z"),
            ]
        );
    }

    #[test]
    fn cron_errors_name_the_field_and_its_offset() {
        let err = parse_cron("0 25 * * *").unwrap_err();
        assert_eq!((err.field, err.offset), (Some(1), 2), "{err}");
        assert!(
            err.message.starts_with("the hour field `25` is not valid"),
            "{err}"
        );
        let err = parse_cron("*/5  *  *  13 *").unwrap_err();
        assert_eq!((err.field, err.offset), (Some(3), 11), "{err}");
        let err = parse_cron("0 2 * *").unwrap_err();
        assert_eq!(err.field, None);
        assert!(err.message.contains("found 4"), "{err}");
        let err = parse_cron("0 2 * * * *").unwrap_err();
        assert_eq!((err.field, err.offset), (None, 10), "{err}");
        let err = parse_cron("0 2 * * funday").unwrap_err();
        assert_eq!((err.field, err.offset), (Some(4), 8), "{err}");
        assert!(parse_cron("0 2 * * MON-FRI").is_ok());
        assert!(parse_cron("@daily").is_ok());
        assert!(parse_timezone("Europe/Berlin").is_ok());
        assert!(parse_timezone("Europe/Berln").is_err());
    }

    #[test]
    fn job_ids_and_markers() {
        let tick = utc("2026-12-05T02:00:00Z");
        assert_eq!(job_id("nightly", tick), "nightly@2026-12-05T02:00:00.000Z");
        assert_eq!(marker_id("nightly", tick), format!("nightly:{tick}"));
        assert_eq!(
            format_tick_in(tick, "Europe/Berlin"),
            "2026-12-05 03:00:00 CET"
        );
    }
}
