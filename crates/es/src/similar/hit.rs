//! What a hit holds: its sketch, read from the fingerprint doc values (or `_source`), for the
//! rule ([`neardup_core::method::Query::relate`]) to judge.

use serde_json::Value;

use super::{minhash_meta, simhash_meta, Described};
use crate::error::EsError;
use crate::schema::{FieldNames, IndexMeta, MinHashMeta};
use neardup_core::{Method, SimHash, Sketch};

/// A hit's sketch of `method`, from its doc values (or `_source`).
pub(super) fn hit_sketch(
    hit: &Value,
    d: &Described,
    method: Method,
) -> Result<Option<Sketch>, EsError> {
    let bad = |detail: String| EsError::BadDocument {
        id: hit["_id"].as_str().unwrap_or("?").to_owned(),
        reason: format!("in `{}`: {detail}", hit["_index"].as_str().unwrap_or("?")),
    };
    let fields = &hit["fields"];
    match method {
        Method::SimHash => {
            let names = &simhash_meta(&d.meta).fields;
            let from: Vec<Option<&Value>> = if fields.is_object() {
                names.blocks.iter().map(|b| fields[b].get(0)).collect()
            } else {
                names.blocks.iter().map(|b| hit["_source"].get(b)).collect()
            };
            Ok(blocks_value(&from).map_err(bad)?.map(Sketch::SimHash))
        }
        Method::MinHash => {
            let m = minhash_meta(&d.meta);
            let read = |f: &str| {
                if fields.is_object() {
                    fields[f].get(0)
                } else {
                    hit["_source"].get(f)
                }
            };
            let f = &m.fields.signature;
            let sketch = signature_value(read(f), f, m).map_err(bad)?;
            Ok(with_distinct(sketch, m, read))
        }
    }
}

/// A stored sketch of `method` in a `_source`; `None` when there is none of the indices'
/// version (compute it from the text then).
pub(super) fn source_sketch(
    source: &Value,
    meta: &IndexMeta,
    method: Method,
) -> Result<Option<Sketch>, String> {
    match method {
        Method::SimHash => {
            Ok(source_fingerprint(source, &simhash_meta(meta).fields)?.map(Sketch::SimHash))
        }
        Method::MinHash => {
            let m = minhash_meta(meta);
            // During an upgrade to the compact layout, a compact signature's stored terms
            // would not find the documents still in the full layout: the text makes the query.
            if m.from_full
                || source.get(&m.fields.version).and_then(Value::as_str)
                    != Some(m.stored_version().as_str())
            {
                return Ok(None);
            }
            let sketch = signature_value(source.get(&m.fields.signature), &m.fields.signature, m)?;
            Ok(with_distinct(sketch, m, |f| source.get(f)))
        }
    }
}

/// A stored signature with the distinct shingle count stored beside it (fields formats 4 and 3),
/// read by `read`; unchanged where there is none (an index or document without it).
pub(super) fn with_distinct<'a>(
    sketch: Option<Sketch>,
    m: &MinHashMeta,
    read: impl Fn(&str) -> Option<&'a Value>,
) -> Option<Sketch> {
    let distinct = m
        .containment
        .as_ref()
        .and_then(|c| read(&c.fields.distinct))
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    match (sketch, distinct) {
        (Some(Sketch::MinHash(sig)), Some(n)) => Some(Sketch::MinHash(sig.with_distinct(n))),
        (sketch, _) => sketch,
    }
}

/// A stored signature (base64 text of its bytes in the index's layout) of the indices'
/// length; in the compact layout, reduced to the layout's bits.
pub(super) fn signature_value(
    v: Option<&Value>,
    field: &str,
    m: &MinHashMeta,
) -> Result<Option<Sketch>, String> {
    let s = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s,
        Some(other) => return Err(format!("`{field}` is not a base64 signature: {other}")),
    };
    let n = usize::from(m.params.hashes);
    match m.layout.signature_from_base64(s, n) {
        Some(sig) => Ok(Some(Sketch::MinHash(sig))),
        None => Err(format!(
            "`{field}` is not a base64 signature of {n} values ({}) in the index's {} layout",
            m.params, m.layout
        )),
    }
}

/// A stored fingerprint in a `_source`: the `long` if present, else the four blocks.
pub(super) fn source_fingerprint(
    source: &Value,
    names: &FieldNames,
) -> Result<Option<SimHash>, String> {
    match source.get(&names.simhash) {
        Some(Value::Null) | None => {}
        Some(v) => {
            return int_value(v)
                .map(|i| Some(SimHash::from_i64(i)))
                .ok_or_else(|| format!("`{}` is not a 64-bit integer: {v}", names.simhash))
        }
    }
    let blocks: Vec<Option<&Value>> = names.blocks.iter().map(|b| source.get(b)).collect();
    blocks_value(&blocks)
}

/// Four block values (numbers, or decimal strings from `keyword` doc values) into a
/// fingerprint; `None` when any is missing or null.
pub(super) fn blocks_value(blocks: &[Option<&Value>]) -> Result<Option<SimHash>, String> {
    let mut out = [0i16; 4];
    for (i, b) in blocks.iter().enumerate() {
        let v = match b {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => v,
        };
        let n = int_value(v).ok_or_else(|| format!("block {i} is not an integer: {v}"))?;
        // Accepts both the signed form neardup and the Java service write and the unsigned
        // form (0..=65535) a hand-written document might hold.
        out[i] = match n {
            -32768..=32767 => n as i16,
            32768..=65535 => n as u16 as i16,
            _ => return Err(format!("block {i} is out of 16-bit range: {n}")),
        };
    }
    Ok(Some(SimHash::from_blocks16(out)))
}

pub(super) fn int_value(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}
