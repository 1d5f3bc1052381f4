//! Metrics read back for tests: an HTTP GET of an endpoint, a strict parser of the Prometheus and OpenMetrics text formats, and `promtool check metrics`.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// `GET path` on `addr` (HTTP/1.1, `Connection: close`), with an `Accept`
/// header when given. An error when nothing listens there.
pub async fn http_get(
    addr: SocketAddr,
    path: &str,
    accept: Option<&str>,
) -> std::io::Result<Response> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let accept = accept.map_or_else(String::new, |accept| format!("Accept: {accept}\r\n"));
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let raw = String::from_utf8(raw).map_err(|err| invalid(err.to_string()))?;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| invalid(format!("no end of headers in {raw:?}")))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid(format!("no status line in {head:?}")))?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let body = match header("transfer-encoding") {
        Some(encoding) if encoding.eq_ignore_ascii_case("chunked") => dechunk(body)?,
        _ => body.to_owned(),
    };
    Ok(Response {
        status,
        content_type: header("content-type").unwrap_or_default(),
        body,
    })
}

fn dechunk(mut body: &str) -> std::io::Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body
            .split_once("\r\n")
            .ok_or_else(|| invalid("truncated chunk size".into()))?;
        let size = usize::from_str_radix(size.trim(), 16)
            .map_err(|err| invalid(format!("chunk size {size:?}: {err}")))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest
            .get(..size)
            .ok_or_else(|| invalid("truncated chunk".into()))?;
        out.push_str(chunk);
        body = rest[size..].trim_start_matches("\r\n");
    }
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// A metric family: its `# TYPE` (and `# HELP`, `# UNIT`) lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    /// `counter`, `gauge`, `histogram`, ...
    pub kind: String,
    pub help: Option<String>,
    pub unit: Option<String>,
}

/// One sample line: `name{label="value",...} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
    /// The family it belongs to.
    pub family: String,
}

/// A whole exposition, in the order it was written.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    pub families: Vec<Family>,
    pub samples: Vec<Sample>,
    /// Whether it ended with OpenMetrics' `# EOF`.
    pub eof: bool,
}

impl Exposition {
    /// The family named `name`.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|family| family.name == name)
    }

    /// Samples named `name` (a sample name, e.g. `x_total` or `x_bucket`).
    pub fn samples_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples
            .iter()
            .filter(move |sample| sample.name == name)
    }

    /// The sample named `name` whose labels are exactly `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples_named(name)
            .find(|sample| sample.labels == wanted)
            .map(|sample| sample.value)
    }

    /// The sum of the samples named `name` that carry every label of `filter`.
    pub fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.samples_named(name)
            .filter(|sample| {
                filter
                    .iter()
                    .all(|(k, v)| sample.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|sample| sample.value)
            .sum()
    }
}

/// Parses the Prometheus text format (0.0.4) or OpenMetrics text, strictly:
/// every line is a `# HELP`, `# TYPE`, `# UNIT` or `# EOF` line or a sample;
/// a sample follows its family's `# TYPE` line and carries a name that
/// family's type allows (`_total` and `_created` for a counter, `_bucket`,
/// `_sum`, `_count`, `_created` for a histogram); no family or sample
/// appears twice; nothing follows `# EOF`.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut exposition = Exposition::default();
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    let mut units: BTreeMap<String, String> = BTreeMap::new();
    let mut seen_samples: HashSet<(String, Vec<(String, String)>)> = HashSet::new();
    for (number, line) in text.lines().enumerate() {
        let at = |problem: String| format!("line {}: {problem}: {line:?}", number + 1);
        if exposition.eof {
            return Err(at("text after # EOF".into()));
        }
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment
                .strip_prefix(' ')
                .ok_or_else(|| at("bad comment".into()))?;
            if comment == "EOF" {
                exposition.eof = true;
                continue;
            }
            let (keyword, rest) = comment
                .split_once(' ')
                .ok_or_else(|| at("comment without a metric name".into()))?;
            let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            check_metric_name(name).map_err(at)?;
            match keyword {
                "HELP" => {
                    if helps.insert(name.to_owned(), unescape(rest)).is_some() {
                        return Err(at(format!("second HELP for {name}")));
                    }
                }
                "UNIT" => {
                    units.insert(name.to_owned(), rest.to_owned());
                }
                "TYPE" => {
                    const KINDS: [&str; 9] = [
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "untyped",
                        "unknown",
                        "info",
                        "stateset",
                        "gaugehistogram",
                    ];
                    if !KINDS.contains(&rest) {
                        return Err(at(format!("unknown type {rest:?}")));
                    }
                    if exposition.family(name).is_some() {
                        return Err(at(format!("second TYPE for {name}")));
                    }
                    exposition.families.push(Family {
                        name: name.to_owned(),
                        kind: rest.to_owned(),
                        help: None,
                        unit: None,
                    });
                }
                other => return Err(at(format!("unknown comment keyword {other:?}"))),
            }
            continue;
        }
        let sample = parse_sample(line).map_err(at)?;
        let family = exposition
            .families
            .last()
            .ok_or_else(|| at("a sample before any # TYPE".into()))?;
        let suffix = sample
            .name
            .strip_prefix(family.name.as_str())
            .ok_or_else(|| at(format!("sample outside its family {}", family.name)))?;
        let allowed: &[&str] = match family.kind.as_str() {
            "counter" => &["", "_total", "_created"],
            "histogram" | "gaugehistogram" => {
                &["_bucket", "_sum", "_count", "_created", "_gcount", "_gsum"]
            }
            "summary" => &["", "_sum", "_count", "_created"],
            "info" => &["_info"],
            _ => &[""],
        };
        if !allowed.contains(&suffix) {
            return Err(at(format!(
                "{} is not a sample name of the {} {}",
                sample.name, family.kind, family.name
            )));
        }
        let key = (
            sample.name.clone(),
            sample
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        if !seen_samples.insert(key) {
            return Err(at("the same sample twice".into()));
        }
        exposition.samples.push(Sample {
            family: family.name.clone(),
            ..sample
        });
    }
    for family in &mut exposition.families {
        family.help = helps.remove(&family.name);
        family.unit = units.remove(&family.name);
    }
    if let Some(name) = helps.keys().chain(units.keys()).next() {
        return Err(format!("HELP or UNIT for {name}, which has no TYPE"));
    }
    Ok(exposition)
}

fn check_metric_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(format!("invalid metric name {name:?}"))
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
    let name = &line[..name_end];
    check_metric_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (label, after) = rest.split_once("=\"").ok_or("a label without =\"")?;
            let mut chars = label.chars();
            let label_ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !label_ok {
                return Err(format!("invalid label name {label:?}"));
            }
            let (value, after) = label_value(after)?;
            if labels.insert(label.to_owned(), value).is_some() {
                return Err(format!("label {label} twice"));
            }
            rest = after.strip_prefix(',').unwrap_or(after);
        }
    }
    let mut fields = rest
        .strip_prefix(' ')
        .ok_or("no space before the value")?
        .split(' ');
    let value = fields.next().ok_or("no value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        number => number
            .parse()
            .map_err(|err| format!("value {number:?}: {err}"))?,
    };
    if let Some(timestamp) = fields.next() {
        timestamp
            .parse::<f64>()
            .map_err(|err| format!("timestamp {timestamp:?}: {err}"))?;
    }
    if fields.next().is_some() {
        return Err("more than a value and a timestamp".into());
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
        family: String::new(),
    })
}

/// A quoted label value up to its closing quote, unescaped, and what follows it.
fn label_value(text: &str) -> Result<(String, &str), String> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((index, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[index + 1..])),
            '\\' => match chars.next() {
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, 'n')) => value.push('\n'),
                other => return Err(format!("bad escape {other:?} in a label value")),
            },
            '\n' => return Err("a newline in a label value".into()),
            c => value.push(c),
        }
    }
    Err("an unterminated label value".into())
}

fn unescape(text: &str) -> String {
    text.replace("\\n", "\n").replace("\\\\", "\\")
}

/// `promtool check metrics` over `text` (its stdin): `Ok` when it exits 0
/// without a word, else what it said. `$PROMTOOL` names the binary (default
/// `promtool` on PATH: the Debian package `prometheus`, which scripts/test
/// installs when missing).
pub fn promtool_check(text: &str) -> Result<(), String> {
    // promtool accepts an empty input: a check of nothing proves nothing.
    if !text
        .lines()
        .any(|line| !line.trim().is_empty() && !line.starts_with('#'))
    {
        return Err("the text has no sample to check".to_owned());
    }
    let binary = std::env::var_os("PROMTOOL").unwrap_or_else(|| "promtool".into());
    let mut child = Command::new(&binary)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| {
            panic!("running {binary:?} check metrics: {err}; install the Debian package `prometheus` (scripts/test does) or set $PROMTOOL")
        });
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(text.as_bytes())
        .expect("writing promtool's stdin");
    let output = child.wait_with_output().expect("waiting for promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() && said.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("promtool exited with {}: {said}", output.status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMETHEUS: &str = "# HELP jobs_total Jobs.\n# TYPE jobs_total counter\njobs_total{queue=\"a\",outcome=\"done\"} 3\njobs_total{queue=\"a\",outcome=\"re\\\"try\"} 1\n# HELP wait_seconds Wait.\n# TYPE wait_seconds histogram\nwait_seconds_bucket{le=\"0.1\",queue=\"a\"} 1\nwait_seconds_bucket{le=\"+Inf\",queue=\"a\"} 2\nwait_seconds_sum{queue=\"a\"} 0.5\nwait_seconds_count{queue=\"a\"} 2\n";

    #[test]
    fn parses_families_samples_and_escapes() {
        let exposition = parse(PROMETHEUS).unwrap();
        assert_eq!(exposition.families.len(), 2);
        assert_eq!(exposition.families[0].help.as_deref(), Some("Jobs."));
        assert_eq!(
            exposition.value("jobs_total", &[("queue", "a"), ("outcome", "re\"try")]),
            Some(1.0)
        );
        assert_eq!(exposition.sum("jobs_total", &[("queue", "a")]), 4.0);
        assert_eq!(
            exposition.value("wait_seconds_bucket", &[("le", "+Inf"), ("queue", "a")]),
            Some(2.0)
        );
        assert!(!exposition.eof);
    }

    #[test]
    fn reads_openmetrics_with_units_and_eof() {
        let text = "# HELP jobs Jobs.\n# TYPE jobs counter\njobs_total 3\n# TYPE wait_seconds histogram\n# UNIT wait_seconds seconds\nwait_seconds_count 0\n# EOF\n";
        let exposition = parse(text).unwrap();
        assert!(exposition.eof);
        assert_eq!(exposition.samples[0].family, "jobs");
        assert_eq!(
            exposition.family("wait_seconds").unwrap().unit.as_deref(),
            Some("seconds")
        );
    }

    #[test]
    fn refuses_what_a_scraper_would() {
        for (text, why) in [
            ("jobs_total 1\n", "before any # TYPE"),
            ("# TYPE jobs counter\nother_total 1\n", "outside its family"),
            ("# TYPE jobs counter\njobs_bucket 1\n", "not a sample name"),
            ("# TYPE jobs counter\n# TYPE jobs counter\n", "second TYPE"),
            (
                "# TYPE jobs counter\njobs_total{a=\"1\"} 1\njobs_total{a=\"1\"} 2\n",
                "twice",
            ),
            ("# TYPE jobs counter\njobs_total{a=\"1} 1\n", "unterminated"),
            (
                "# TYPE jobs counter\njobs_total{1a=\"1\"} 1\n",
                "invalid label name",
            ),
            ("# TYPE jobs counter\njobs_total one\n", "value"),
            ("# EOF\n# TYPE jobs counter\n", "after # EOF"),
            ("# HELP jobs Jobs.\n", "no TYPE"),
            ("# a free comment\n", "unknown comment keyword"),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }
}
