//! The versioned Redis Function library of a service (retry, dead letter, replay, trim, lease, claim, ownership-checked ack and renew).
//!
//! One Lua library per service, `functions.lua` in the deploy directory; its
//! contract is docs/functions.md. Every value that differs between queues
//! (keys, group, TTLs, accepted schemas) arrives in KEYS and ARGV, so the
//! library text depends only on the service name and [`LIBRARY_VERSION`].

use std::path::PathBuf;

use queuegen_runtime::functions::Function;
use queuegen_runtime::transitions::DeadReason;
use serde::Serialize;

use super::templates::render;
use super::{header_in, CommentSyntax, GeneratedFile};
use crate::error::Result;
use crate::spec::model::Spec;

/// Version of the generated library's code. Bump it whenever the library's
/// text changes: function names carry it, so two versions load side by side.
pub const LIBRARY_VERSION: u32 = 8;

/// The file the library is written to, relative to the deploy directory.
pub const FILE_NAME: &str = "functions.lua";

/// `qg_<service>_v<N>`: the library name, and the prefix of every function name.
pub fn library_name(service: &str) -> String {
    versioned_library_name(service, LIBRARY_VERSION)
}

/// The library name of an explicit `version` (the ACL users also name the
/// previous one, loaded beside this during a rolling deploy).
pub fn library_name_at(service: &str, version: u32) -> String {
    versioned_library_name(service, version)
}

fn versioned_library_name(service: &str, version: u32) -> String {
    format!("qg_{}_v{version}", service.replace('-', "_"))
}

/// `functions.lua` for the spec's service at [`LIBRARY_VERSION`]. `spec_file`
/// is how the header names the spec (relative to the deploy directory).
pub fn generate(spec: &Spec, spec_file: &str) -> Result<GeneratedFile> {
    Ok(GeneratedFile {
        path: PathBuf::from(FILE_NAME),
        contents: render_library(spec, spec_file, LIBRARY_VERSION)?,
    })
}

/// The library text for an explicit `version` (tests load two side by side;
/// everything else uses [`generate`]).
pub fn render_library(spec: &Spec, spec_file: &str, version: u32) -> Result<String> {
    render_for_service(&spec.service, spec_file, version)
}

/// The library reads nothing of the spec but the service name.
fn render_for_service(service: &str, spec_file: &str, version: u32) -> Result<String> {
    render(
        "functions.lua",
        LibraryContext {
            header: &lua_header(spec_file),
            library: &versioned_library_name(service, version),
            service,
            version,
            limits: LibraryLimits::SPEC,
            functions: Function::ALL.map(Registered::of),
            header_fields: header_fields(),
            dead_reasons: DeadReasons::RUNTIME,
        },
    )
}

#[derive(Serialize)]
struct LibraryContext<'a> {
    header: &'a str,
    library: &'a str,
    service: &'a str,
    version: u32,
    limits: LibraryLimits,
    /// The `redis.register_function` block: the runtime's list of the
    /// library's functions, so the names it calls are the names registered.
    functions: [Registered; Function::ALL.len()],
    /// The header fields in the order rewritten envelopes keep them.
    header_fields: Vec<&'static str>,
    dead_reasons: DeadReasons,
}

/// The runtime's header fields (`header_fields::ALL`), then the one the
/// library's `replay` adds.
fn header_fields() -> Vec<&'static str> {
    use crate::spec::limits::header_fields::{ALL, REPLAY_OF};
    ALL.iter().copied().chain([REPLAY_OF]).collect()
}

/// The runtime's dead-letter reasons (`DeadReason`), as the template reads them.
#[derive(Serialize)]
struct DeadReasons {
    /// Every reason a dead letter may record.
    all: [&'static str; DeadReason::ALL.len()],
    /// What the promote functions record for a member that cannot be promoted.
    decode_error: &'static str,
}

impl DeadReasons {
    const RUNTIME: DeadReasons = {
        let mut all = [""; DeadReason::ALL.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = DeadReason::ALL[i].as_str();
            i += 1;
        }
        DeadReasons {
            all,
            decode_error: DeadReason::DecodeError.as_str(),
        }
    };
}

/// One function as the template registers it.
#[derive(Serialize)]
struct Registered {
    /// The name after the library prefix, and the Lua callback's name.
    name: &'static str,
    flags: &'static [&'static str],
}

impl Registered {
    fn of(function: Function) -> Registered {
        Registered {
            name: function.name(),
            flags: function.runs().flags(),
        }
    }
}

/// `queuegen_spec::limits::library`, as the template reads it.
#[derive(Serialize)]
struct LibraryLimits {
    max_ack_ids: u64,
    max_envelope_fields: u64,
    max_claim_count: u64,
    max_detail_bytes: u64,
    max_reason_bytes: u64,
}

impl LibraryLimits {
    const SPEC: LibraryLimits = {
        use crate::spec::limits::library::*;
        LibraryLimits {
            max_ack_ids: MAX_ACK_IDS,
            max_envelope_fields: MAX_ENVELOPE_FIELDS,
            max_claim_count: MAX_CLAIM_COUNT,
            max_detail_bytes: MAX_DETAIL_BYTES,
            max_reason_bytes: MAX_REASON_BYTES,
        }
    };
}

/// The generated-file header as Lua comments (`-- Code generated by ...`).
fn lua_header(spec_file: &str) -> String {
    header_in(CommentSyntax::Dashes, spec_file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec;

    /// The pinned library is that of this service (the library reads nothing
    /// else of a spec; `render_library_reads_only_the_service` checks that).
    const PINNED_SERVICE: &str = "pinned-service";

    const SPEC: &str = "\
version: 1
service: pinned-service
redis:
  key_prefix: pin
envelopes:
  Job:
    schema: 1
    fields:
      subject_ref: { type: string, max_bytes: 64 }
queues:
  jobs:
    envelope: Job
    partitions: 2
    partition_by: [subject_ref]
    group: { name: workers }
    dead_letter: { owner: pin-oncall }
    payload: { max_bytes: 65536 }
";

    /// FNV-1a (64 bit) of the library text without its two header lines
    /// (they carry queuegen's crate version and the spec path, not code).
    const PINNED_HASH: u64 = 0xfdf3_74fc_e108_43a4;

    fn pinned_spec() -> Spec {
        let checked = spec::check_str(SPEC, "pinned.yaml");
        checked
            .spec
            .unwrap_or_else(|| panic!("the test spec is valid: {:?}", checked.diagnostics))
    }

    fn pinned_library(version: u32) -> String {
        render_for_service(PINNED_SERVICE, "queues.yaml", version).unwrap()
    }

    fn fnv1a(text: &str) -> u64 {
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }

    fn without_header(library: &str) -> String {
        let mut lines: Vec<&str> = library.split_inclusive('\n').collect();
        lines.drain(1..3);
        lines.concat()
    }

    #[test]
    fn the_library_text_is_pinned_to_its_version() {
        let hash = fnv1a(&without_header(&pinned_library(LIBRARY_VERSION)));
        assert_eq!(
            hash, PINNED_HASH,
            "the function library changed: bump LIBRARY_VERSION and update this hash \
             (PINNED_HASH = {hash:#018x})"
        );
    }

    #[test]
    fn render_library_reads_only_the_service() {
        let spec = pinned_spec();
        assert_eq!(spec.service, PINNED_SERVICE);
        assert_eq!(
            render_library(&spec, "queues.yaml", 3).unwrap(),
            pinned_library(3)
        );
    }

    #[test]
    fn opens_with_the_library_line_and_the_generated_header() {
        let library = generate(&pinned_spec(), "../queues.yaml").unwrap();
        assert_eq!(library.path, PathBuf::from("functions.lua"));
        let mut lines = library.contents.lines();
        assert_eq!(lines.next(), Some("#!lua name=qg_pinned_service_v8"));
        assert_eq!(
            lines.next().unwrap(),
            format!(
                "-- Code generated by queuegen {} from ../queues.yaml. DO NOT EDIT.",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(lines.next(), Some("-- @generated"));
        assert_eq!(library_name("pinned-service"), "qg_pinned_service_v8");
    }

    #[test]
    fn every_function_of_the_contract_is_registered_with_the_versioned_name() {
        let library = pinned_library(8);
        assert!(library.starts_with("#!lua name=qg_pinned_service_v8\n"));
        assert!(library.contains("local LIBRARY = 'qg_pinned_service_v8'"));
        let registered: Vec<&str> = library
            .lines()
            .filter_map(|line| line.trim().strip_prefix("function_name = LIBRARY .. '_"))
            .map(|rest| rest.trim_end_matches("',"))
            .collect();
        let listed: Vec<&str> = Function::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(registered, listed);
        // Only `version` is read-only: the rest are refused on replicas.
        // The transitions (defer among them), the publish functions and schedule_tick are
        // refused past maxmemory too; the trim, the lease functions, claim,
        // ack, ack_delete, renew and rate_take run there (they add no memory
        // beyond a few bytes).
        assert_eq!(library.matches("flags = {'no-writes'}").count(), 1);
        assert_eq!(library.matches("flags = {},").count(), 9);
        assert_eq!(library.matches("flags = {'allow-oom'},").count(), 8);
    }

    #[test]
    fn no_key_is_built_from_argv() {
        let library = pinned_library(LIBRARY_VERSION);
        let problems = key_lint::check(&library);
        assert!(
            problems.is_empty(),
            "the library breaks the KEYS convention:\n{}",
            problems.join("\n")
        );
        // The convention is really used: each transition binds its keys from KEYS.
        for binding in [
            "local ready_key = KEYS[1]",
            "local set_key = KEYS[1]",
            "local delayed_key = KEYS[1]",
            "local dead_key = KEYS[1]",
            "local marker_key = KEYS[4 + i]",
            "local stream_key = KEYS[1]",
            "local lease_key = KEYS[1]",
        ] {
            assert!(library.contains(binding), "{binding}");
        }
    }

    #[test]
    fn the_key_lint_catches_keys_from_argv_concatenation_and_rebinding() {
        let cases = [
            (
                "local function f(KEYS, ARGV)\n  redis.call('GET', ARGV[1])\nend\n",
                "key position",
            ),
            (
                "local function f(KEYS, ARGV)\n  local a_key = KEYS[1]\n  redis.call('SET', a_key .. ARGV[1], 1)\nend\n",
                "key position",
            ),
            (
                "local function f(KEYS, ARGV)\n  local a_key = KEYS[1] .. ARGV[1]\n  redis.call('GET', a_key)\nend\n",
                "KEYS[",
            ),
            (
                "local function f(KEYS, ARGV)\n  local a_key = KEYS[tonumber(ARGV[1])]\n  redis.call('GET', a_key)\nend\n",
                "ARGV",
            ),
            (
                "local function f(KEYS, ARGV)\n  local a_key = KEYS[1]\n  a_key = ARGV[1]\n  redis.call('GET', a_key)\nend\n",
                "assigned",
            ),
            (
                "local function f(KEYS, ARGV)\n  local name = ARGV[1]\n  redis.call('DEL', name)\nend\n",
                "key position",
            ),
            (
                "local function g(some_key)\n  return redis.call('GET', some_key)\nend\nlocal function f(KEYS, ARGV)\n  return g(ARGV[1])\nend\n",
                "some_key",
            ),
            (
                "local function f(KEYS, ARGV)\n  local cmd = 'GET'\n  redis.call(cmd, KEYS[1])\nend\n",
                "command",
            ),
            (
                "local function f(KEYS, ARGV)\n  return redis.call('XINFO', 'GROUPS', ARGV[1])\nend\n",
                "key position",
            ),
            (
                "local function f(KEYS, ARGV)\n  KEYS = ARGV\n  local a_key = KEYS[1]\n  redis.call('GET', a_key)\nend\n",
                "KEYS",
            ),
        ];
        for (lua, expected) in cases {
            let problems = key_lint::check(lua);
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "expected a problem mentioning {expected:?} for:\n{lua}\ngot {problems:?}"
            );
        }
        let fine = "local function f(KEYS, ARGV)\n  local a_key = KEYS[1]\n  -- KEYS[2] .. ARGV\n  redis.call('SET', a_key, ARGV[1] .. 'x')\n  redis.call('TIME')\nend\n";
        assert_eq!(key_lint::check(fine), Vec::<String>::new());
    }

    /// A small static check of the KEYS convention on Lua source: tokenizes
    /// (so comments and strings never count) and follows key values from
    /// `KEYS[...]` bindings to the key position of every `redis.call`.
    mod key_lint {
        use std::collections::{BTreeMap, BTreeSet};

        /// Commands that take no key; every other command's first argument is its key.
        const KEYLESS: &[&str] = &["TIME"];
        /// Commands whose first argument is a subcommand: their key comes second.
        const SUBCOMMAND_FIRST: &[&str] = &["XINFO", "MEMORY"];

        #[derive(Debug, Clone, PartialEq)]
        enum Token {
            Name(String),
            Str(String),
            Number,
            Punct(&'static str),
        }

        fn tokenize(source: &str) -> Vec<(usize, Token)> {
            const PUNCTS: &[&str] = &[
                "...", "..", "==", "~=", "<=", ">=", "=", "(", ")", "[", "]", "{", "}", ",", ".",
                ":", ";", "#", "+", "-", "*", "/", "%", "^", "<", ">",
            ];
            let bytes = source.as_bytes();
            let mut tokens = Vec::new();
            let (mut i, mut line) = (0, 1);
            // Line 1 `#!lua name=...` is the library header, not Lua.
            if source.starts_with("#!") {
                i = source.find('\n').unwrap_or(source.len());
            }
            while i < bytes.len() {
                let c = bytes[i];
                if c == b'\n' {
                    line += 1;
                    i += 1;
                } else if c.is_ascii_whitespace() {
                    i += 1;
                } else if source[i..].starts_with("--") {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                } else if c == b'\'' || c == b'"' {
                    let mut text = String::new();
                    i += 1;
                    while i < bytes.len() && bytes[i] != c {
                        if bytes[i] == b'\\' {
                            i += 1;
                        }
                        text.push(bytes[i] as char);
                        i += 1;
                    }
                    i += 1;
                    tokens.push((line, Token::Str(text)));
                } else if c.is_ascii_alphabetic() || c == b'_' {
                    let start = i;
                    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_')
                    {
                        i += 1;
                    }
                    tokens.push((line, Token::Name(source[start..i].to_owned())));
                } else if c.is_ascii_digit() {
                    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.')
                    {
                        i += 1;
                    }
                    tokens.push((line, Token::Number));
                } else {
                    let punct = PUNCTS
                        .iter()
                        .find(|p| source[i..].starts_with(**p))
                        .unwrap_or_else(|| panic!("line {line}: unexpected character {c:?}"));
                    i += punct.len();
                    tokens.push((line, Token::Punct(punct)));
                }
            }
            tokens
        }

        fn is_name(token: Option<&(usize, Token)>, name: &str) -> bool {
            matches!(token, Some((_, Token::Name(n))) if n == name)
        }

        fn is_punct(token: Option<&(usize, Token)>, punct: &str) -> bool {
            matches!(token, Some((_, Token::Punct(p))) if *p == punct)
        }

        /// Index of the token closing the bracket opened at `open`.
        fn closing(tokens: &[(usize, Token)], open: usize) -> usize {
            let mut depth = 0;
            for (i, (_, token)) in tokens.iter().enumerate().skip(open) {
                match token {
                    Token::Punct("(" | "[" | "{") => depth += 1,
                    Token::Punct(")" | "]" | "}") => {
                        depth -= 1;
                        if depth == 0 {
                            return i;
                        }
                    }
                    _ => {}
                }
            }
            panic!("unbalanced bracket at token {open}");
        }

        /// The arguments of the call whose `(` is at `open`, split at top-level commas.
        fn arguments(tokens: &[(usize, Token)], open: usize) -> Vec<Vec<Token>> {
            let close = closing(tokens, open);
            let mut args = vec![Vec::new()];
            let mut depth = 0;
            for (_, token) in &tokens[open + 1..close] {
                match token {
                    Token::Punct("(" | "[" | "{") => depth += 1,
                    Token::Punct(")" | "]" | "}") => depth -= 1,
                    Token::Punct(",") if depth == 0 => {
                        args.push(Vec::new());
                        continue;
                    }
                    _ => {}
                }
                args.last_mut()
                    .expect("one argument at least")
                    .push(token.clone());
            }
            if args.len() == 1 && args[0].is_empty() {
                args.clear();
            }
            args
        }

        fn is_key_name(name: &str) -> bool {
            name.ends_with("_key")
        }

        /// Every breach of the convention, as `line N: ...`; empty when none.
        pub fn check(source: &str) -> Vec<String> {
            let tokens = tokenize(source);
            let mut problems = Vec::new();
            // Key-valued names: `*_key` locals bound from KEYS, and `*_key`
            // parameters of helpers (checked at every call below).
            let mut key_names = BTreeSet::new();
            // helper name -> positions of its `*_key` and `KEYS` parameters.
            let mut helpers: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();

            for (i, (line, token)) in tokens.iter().enumerate() {
                let line = *line;
                match token {
                    Token::Name(name) if name == "KEYS" => {
                        let prev = i.checked_sub(1).and_then(|p| tokens.get(p));
                        if is_punct(prev, "(") || is_punct(prev, ",") {
                            // A parameter or an argument: checked with the helpers.
                            continue;
                        }
                        if is_punct(prev, "#") {
                            continue;
                        }
                        let bound = i >= 3
                            && is_name(tokens.get(i - 3), "local")
                            && matches!(&tokens[i - 2].1, Token::Name(n) if is_key_name(n))
                            && is_punct(tokens.get(i - 1), "=")
                            && is_punct(tokens.get(i + 1), "[");
                        if !bound {
                            problems.push(format!(
                                "line {line}: KEYS[...] may only be read as `local <name>_key = KEYS[i]`"
                            ));
                            continue;
                        }
                        let close = closing(&tokens, i + 1);
                        if tokens[i + 2..close]
                            .iter()
                            .any(|(_, t)| matches!(t, Token::Name(n) if n == "ARGV" || n == "KEYS"))
                        {
                            problems.push(format!(
                                "line {line}: a KEYS[...] index must not come from ARGV"
                            ));
                        }
                        let next = tokens.get(close + 1);
                        if [".", "..", "[", ":", "(", "+", "-", "*", "/", "%", "^"]
                            .iter()
                            .any(|p| is_punct(next, p))
                            || is_name(next, "or")
                            || is_name(next, "and")
                        {
                            problems.push(format!(
                                "line {line}: KEYS[...] must be bound as it is, not as part of an expression"
                            ));
                        }
                        if let Token::Name(name) = &tokens[i - 2].1 {
                            key_names.insert(name.clone());
                        }
                    }
                    Token::Name(name) if name == "function" => {
                        let Some((_, Token::Name(helper))) = tokens.get(i + 1) else {
                            continue;
                        };
                        if !is_punct(tokens.get(i + 2), "(") {
                            continue;
                        }
                        let params: Vec<(usize, String)> = arguments(&tokens, i + 2)
                            .into_iter()
                            .enumerate()
                            .filter_map(|(position, arg)| match arg.as_slice() {
                                [Token::Name(p)] if is_key_name(p) || p == "KEYS" => {
                                    Some((position, p.clone()))
                                }
                                _ => None,
                            })
                            .collect();
                        for (_, param) in &params {
                            if is_key_name(param) {
                                key_names.insert(param.clone());
                            }
                        }
                        if !params.is_empty() {
                            helpers.insert(helper.clone(), params);
                        }
                    }
                    _ => {}
                }
            }

            for (i, (line, token)) in tokens.iter().enumerate() {
                let line = *line;
                let Token::Name(name) = token else { continue };
                // Assignments: a key name is only ever bound from KEYS; KEYS never.
                if (is_key_name(name) || name == "KEYS") && is_punct(tokens.get(i + 1), "=") {
                    let from_keys = is_name(tokens.get(i + 2), "KEYS")
                        && is_name(i.checked_sub(1).and_then(|p| tokens.get(p)), "local");
                    if name == "KEYS" || !from_keys {
                        problems.push(format!(
                            "line {line}: {name} is assigned something other than KEYS[i]"
                        ));
                    }
                }
                if is_key_name(name)
                    && is_punct(tokens.get(i + 1), ",")
                    && is_name(i.checked_sub(1).and_then(|p| tokens.get(p)), "local")
                {
                    problems.push(format!(
                        "line {line}: {name} is assigned in a multiple assignment"
                    ));
                }
                // Calls of helpers with key parameters pass key names (or KEYS) there.
                if let Some(params) = helpers.get(name) {
                    let is_definition =
                        is_name(i.checked_sub(1).and_then(|p| tokens.get(p)), "function");
                    if !is_definition && is_punct(tokens.get(i + 1), "(") {
                        let args = arguments(&tokens, i + 1);
                        for (position, param) in params {
                            let ok = match args.get(*position).map(Vec::as_slice) {
                                Some([Token::Name(arg)]) if param == "KEYS" => arg == "KEYS",
                                Some([Token::Name(arg)]) => key_names.contains(arg),
                                _ => false,
                            };
                            if !ok {
                                problems.push(format!(
                                    "line {line}: {name}(...) must get a key bound from KEYS for {param}"
                                ));
                            }
                        }
                    }
                }
                // redis.call / redis.pcall: a literal command, and its key a key name.
                if name == "redis"
                    && is_punct(tokens.get(i + 1), ".")
                    && (is_name(tokens.get(i + 2), "call") || is_name(tokens.get(i + 2), "pcall"))
                {
                    if !is_punct(tokens.get(i + 3), "(") {
                        problems.push(format!("line {line}: redis.call must be called directly"));
                        continue;
                    }
                    let args = arguments(&tokens, i + 3);
                    let command = match args.first().map(Vec::as_slice) {
                        Some([Token::Str(command)]) => command.to_ascii_uppercase(),
                        _ => {
                            problems.push(format!(
                                "line {line}: redis.call's command must be a string literal"
                            ));
                            continue;
                        }
                    };
                    if KEYLESS.contains(&command.as_str()) {
                        continue;
                    }
                    let key_position = if SUBCOMMAND_FIRST.contains(&command.as_str()) {
                        2
                    } else {
                        1
                    };
                    match args.get(key_position).map(Vec::as_slice) {
                        Some([Token::Name(key)]) if key_names.contains(key) => {}
                        other => problems.push(format!(
                            "line {line}: {command}'s key position holds {other:?}, not a key bound from KEYS"
                        )),
                    }
                }
            }
            problems
        }
    }
}
