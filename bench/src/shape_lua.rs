//! The Lua side of the entry shapes (`--variant lua`): server CPU per call of
//! a script that reads one entry by ID and rewrites it as the retry
//! transition does, against one that only reads it, per shape.
//!
//! The rewrite is `schedule_again`'s in the tests' `functions.lua`: read
//! `schema` and `attempt`, set `attempt` + 1, `prev_id` and `reason`, encode
//! the result for the retry hash. For the field shapes the script runs the
//! library's own `field_value` and `rewrite_envelope`, cut from the file,
//! and `cjson.encode`s the pairs as the Function does; for the packed
//! shapes it decodes the one field with `cmsgpack.unpack` / `cjson.decode`
//! (under `pcall`, as the library's `decode_envelope`), sets the three
//! keys and packs it again with the same codec.

use anyhow::{bail, Context, Result};
use redis::aio::MultiplexedConnection;

use crate::baseline;
use crate::shape::{Shape, PACKED_FIELD};
use crate::usage;

/// Calls per pipeline.
const BATCH: u64 = 1_000;
/// The `reason` each rewrite records, as a failed attempt's would.
const REASON: &str = "handler: connection reset by peer";

/// Entries in each shape's stream when its memory is measured.
const MEMORY_ENTRIES: u64 = 10_000;

/// Reads the entry only: the floor every rewrite shares.
const READ_ONLY: &str = "local entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
return #entries[1][2]";

/// What one shape's entry costs to read and rewrite in Lua.
pub struct LuaCost {
    pub shape: Shape,
    pub fields: usize,
    pub bytes: usize,
    /// Server µs per call of [`READ_ONLY`].
    pub read_us: f64,
    /// Server µs per call of the read and the rewrite.
    pub rewrite_us: f64,
    /// `MEMORY USAGE` of a stream of [`MEMORY_ENTRIES`] such entries, per entry.
    pub memory_bytes: f64,
}

/// Both scripts over one entry of every shape, `calls` times each.
pub async fn run(url: &str, prefix: &str, calls: u64) -> Result<Vec<LuaCost>> {
    let code = std::fs::read_to_string(queuegen_tests::library::tests_library_path())
        .context("reading the tests' Function library (tests/deploy/functions.lua)")?;
    let fields_rewrite = fields_rewrite(&code)?;
    let client = redis::Client::open(url).context("parsing the Redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("connecting the lua variant")?;
    let mut costs = Vec::new();
    for shape in Shape::ALL {
        let key = format!("{prefix}:{}", shape.letter());
        let entry = shape.encode(&baseline::header(0, None), &baseline::job(0))?;
        let id: String = redis::cmd("XADD")
            .arg(&key)
            .arg("*")
            .arg(&entry[..])
            .query_async(&mut conn)
            .await
            .with_context(|| format!("XADD {key}"))?;
        let rewrite = match shape {
            Shape::PackedMsgpack => packed_rewrite("cmsgpack.unpack", "cmsgpack.pack"),
            Shape::PackedJson => packed_rewrite("cjson.decode", "cjson.encode"),
            _ => fields_rewrite.clone(),
        };
        check_rewrite(&mut conn, shape, &rewrite, &key, &id).await?;
        let read_us = server_us_per_call(&mut conn, READ_ONLY, &key, &id, calls).await?;
        let rewrite_us = server_us_per_call(&mut conn, &rewrite, &key, &id, calls).await?;
        let memory_bytes = memory_per_entry(&mut conn, shape, &key).await?;
        costs.push(LuaCost {
            shape,
            fields: entry.len(),
            bytes: entry
                .iter()
                .map(|(name, value)| name.len() + value.len())
                .sum(),
            read_us,
            rewrite_us,
            memory_bytes,
        });
    }
    Ok(costs)
}

/// The field shapes' rewrite: the library's `HEADER_FIELDS`, `field_value`
/// and `rewrite_envelope`, then `schedule_again`'s reads and encode.
fn fields_rewrite(library: &str) -> Result<String> {
    let pieces = [
        lua_piece(library, "local HEADER_FIELDS = {", "\n}\n")?,
        lua_piece(library, "local function field_value(", "\nend\n")?,
        lua_piece(library, "local function rewrite_envelope(", "\nend\n")?,
    ];
    Ok(format!(
        "{}\n{}\n{}\n{}",
        pieces[0],
        pieces[1],
        pieces[2],
        "local entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
local fields = entries[1][2]
local schema = field_value(fields, 'schema')
local attempt = field_value(fields, 'attempt')
if schema == nil or not string.match(schema, '^%d+$')
    or attempt == nil or not string.match(attempt, '^%d+$') then
  return redis.error_reply('QG_BADENVELOPE schema or attempt')
end
local again = cjson.encode(rewrite_envelope(fields, {
  attempt = string.format('%d', tonumber(attempt) + 1),
  prev_id = ARGV[1],
  reason = ARGV[2],
}))
if ARGV[3] == 'show' then return again end
return #again"
    ))
}

/// The packed shapes' rewrite with `decode` and `encode` of one codec.
fn packed_rewrite(decode: &str, encode: &str) -> String {
    format!(
        "local entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
local fields = entries[1][2]
if #fields ~= 2 or fields[1] ~= '{PACKED_FIELD}' then
  return redis.error_reply('QG_BADENVELOPE not one {PACKED_FIELD} field')
end
local ok, e = pcall({decode}, fields[2])
if not ok or type(e) ~= 'table' then
  return redis.error_reply('QG_BADENVELOPE undecodable')
end
if type(e.schema) ~= 'number' or type(e.attempt) ~= 'number' then
  return redis.error_reply('QG_BADENVELOPE schema or attempt')
end
e.attempt = e.attempt + 1
e.prev_id = ARGV[1]
e.reason = ARGV[2]
local again = {encode}(e)
if ARGV[3] == 'show' then return again end
return #again"
    )
}

/// The text of `library` from `start` through the first `end` after it.
fn lua_piece<'a>(library: &'a str, start: &str, end: &str) -> Result<&'a str> {
    let from = library
        .find(start)
        .with_context(|| format!("functions.lua has no {start:?}"))?;
    let len = library[from..]
        .find(end)
        .with_context(|| format!("functions.lua: no {end:?} after {start:?}"))?;
    Ok(&library[from..from + len + end.len()])
}

/// One call with `show`: the rewrite must carry attempt 2, the prev_id and reason.
async fn check_rewrite(
    conn: &mut MultiplexedConnection,
    shape: Shape,
    script: &str,
    key: &str,
    id: &str,
) -> Result<()> {
    let again: Vec<u8> = redis::Script::new(script)
        .key(key)
        .arg(&[id, REASON, "show"])
        .invoke_async(conn)
        .await
        .with_context(|| format!("the {shape:?} rewrite script"))?;
    if shape.is_packed() {
        let map = [(
            PACKED_FIELD.to_owned(),
            redis::Value::BulkString(again.clone()),
        )]
        .into_iter()
        .collect();
        let (header, _) = shape
            .decode(&map)
            .context("decoding the rewritten envelope")?;
        if header.attempt != 2 || header.prev_id.as_deref() != Some(id) {
            bail!(
                "the {shape:?} rewrite gave attempt {} and prev_id {:?}",
                header.attempt,
                header.prev_id
            );
        }
        return Ok(());
    }
    // cjson passes a MessagePack body's bytes through unescaped: not UTF-8,
    // so the check looks for the rewritten pairs in the bytes.
    for pair in [
        "\"attempt\",\"2\"".to_owned(),
        format!("\"prev_id\",\"{id}\""),
    ] {
        if !again.windows(pair.len()).any(|w| w == pair.as_bytes()) {
            bail!(
                "the {shape:?} rewrite lacks {pair}: {}",
                String::from_utf8_lossy(&again)
            );
        }
    }
    Ok(())
}

/// Bytes of stream memory per entry once `key` (holding one entry) holds
/// [`MEMORY_ENTRIES`] jobs in `shape` (`MEMORY USAGE … SAMPLES 0`: every
/// listpack node counted).
async fn memory_per_entry(
    conn: &mut MultiplexedConnection,
    shape: Shape,
    key: &str,
) -> Result<f64> {
    let mut pipe = redis::pipe();
    for n in 1..MEMORY_ENTRIES {
        let entry = shape.encode(&baseline::header(n, None), &baseline::job(n))?;
        pipe.cmd("XADD").arg(key).arg("*").arg(&entry[..]).ignore();
    }
    pipe.query_async::<()>(conn)
        .await
        .context("pipelined XADD")?;
    let bytes: u64 = redis::cmd("MEMORY")
        .arg(&["USAGE", key, "SAMPLES", "0"])
        .query_async(conn)
        .await
        .with_context(|| format!("MEMORY USAGE {key}"))?;
    Ok(bytes as f64 / MEMORY_ENTRIES as f64)
}

/// Server CPU µs per call of `script` over entry `id`, `calls` calls in
/// pipelines of [`BATCH`] `EVALSHA`s.
async fn server_us_per_call(
    conn: &mut MultiplexedConnection,
    script: &str,
    key: &str,
    id: &str,
    calls: u64,
) -> Result<f64> {
    let script = redis::Script::new(script);
    script
        .prepare_invoke()
        .load_async(conn)
        .await
        .context("SCRIPT LOAD")?;
    let before = usage::sample(conn).await?;
    let mut sent = 0;
    while sent < calls {
        let mut pipe = redis::pipe();
        for _ in 0..BATCH.min(calls - sent) {
            pipe.invoke_script(script.key(key).arg(&[id, REASON]));
        }
        pipe.query_async::<()>(conn)
            .await
            .context("pipelined EVALSHA")?;
        sent += BATCH.min(calls - sent);
    }
    let after = usage::sample(conn).await?;
    Ok(usage::Usage::between(&before, &after).server_us_per_job(calls))
}

/// The table: per shape, fields and bytes per entry, server µs per call.
pub fn markdown(costs: &[LuaCost], calls: u64) -> String {
    let mut out = format!(
        "Entry read and retry rewrite in Lua, server CPU per call ({calls} EVALSHA calls each, \
         pipelines of {BATCH}; rewrite = read `schema` and `attempt`, set attempt + 1, prev_id \
         and reason, encode as the retry hash stores it; stream memory = `MEMORY USAGE` of \
         {MEMORY_ENTRIES} such entries ÷ {MEMORY_ENTRIES}):\n\n\
         | shape | fields per entry | bytes per entry | stream memory per entry | XRANGE only \
         | XRANGE + rewrite | rewrite alone |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for cost in costs {
        out.push_str(&format!(
            "| base{} ({}) | {} | {} | {:.0} B | {:.2} µs | {:.2} µs | {:.2} µs |\n",
            cost.shape.letter(),
            cost.shape.describe(),
            cost.fields,
            cost.bytes,
            cost.memory_bytes,
            cost.read_us,
            cost.rewrite_us,
            cost.rewrite_us - cost.read_us
        ));
    }
    out
}
