//! The candidate query: which documents Elasticsearch collects for a query (band terms,
//! agreeing minima terms, SimHash block probes), and, with the server filter, the script it
//! runs on each ([`super::scripts`]) with its parameters.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::scripts::{
    SCRIPT_BLOCKS, SCRIPT_CONTAINMENT_SLACK, SCRIPT_LONG, SCRIPT_LONG_OR_BLOCKS, SCRIPT_MINHASH,
    SCRIPT_MINHASH_BITS, SCRIPT_MINHASH_RELATE,
};
use super::{minhash_meta, simhash_meta, Described, FilterMode, WHOLE_BLOCK_K};
use crate::schema::{CommonMinima, FieldNames, IndexMeta, MinHashLayout, MinHashMeta};
use neardup_core::method::Query;
use neardup_core::minhash::{Threshold, SIMILARITY_EPSILON};
use neardup_core::relation::{ContainmentRule, MatchOptions};
use neardup_core::{Method, Signature, SimHash, Sketch, Tolerance};

/// The values probed in one 16-bit block field for a SimHash query within `k`: the block
/// itself for k ≤ [`WHOLE_BLOCK_K`]; for larger k (up to [`FLIPPED_BLOCK_K`]) also its 16 one-bit
/// flips. Four blocks, total distance ≤ 7: some block differs in at most one bit.
pub fn block_probes(block: i16, k: u32) -> Vec<i16> {
    let mut out = vec![block];
    if k > WHOLE_BLOCK_K {
        out.extend((0..16).map(|bit| (block as u16 ^ (1u16 << bit)) as i16));
    }
    out
}

/// The fewest agreeing positions of two signatures of length `n`, compared on their lowest
/// `bits` bits, whose estimated similarity reaches `t`: the rule of [`Sketch::score`] in
/// integers, for the server-side script. `n + 1` when no number of agreements reaches it.
pub fn min_agreements(n: usize, bits: u8, t: Threshold) -> usize {
    (0..=n)
        .find(|&a| {
            Sketch::MinHash(Signature::from_reduced_values(vec![0u32; n], bits))
                .score(
                    &Sketch::MinHash(Signature::from_reduced_values(
                        (0..n).map(|i| u32::from(i >= a)).collect::<Vec<u32>>(),
                        bits,
                    )),
                    Tolerance::Similarity(t),
                )
                .is_some()
        })
        .unwrap_or(n + 1)
}

/// The candidate query (see the module docs), without paging. The indices hold the query's
/// method (checked by the callers).
pub(super) fn query_body(
    d: &Described,
    filter: FilterMode,
    query: &Query,
    options: &MatchOptions,
    terms: Option<&StoredTerms>,
) -> Value {
    match query {
        &Query::SimHash { fingerprint, k } => {
            simhash_body(&simhash_meta(&d.meta).fields, d, filter, fingerprint, k)
        }
        Query::MinHash {
            signature,
            threshold,
        } => minhash_body(
            minhash_meta(&d.meta),
            d,
            filter,
            signature,
            terms,
            *threshold,
            options.containment.as_ref(),
        ),
    }
}

/// Makes a candidate query `body` bring back the `keep` fields of `_source` too, beside the
/// sketch fields it reads (from doc values or `_source`).
pub(super) fn keep_source(body: &mut Value, keep: &[String]) {
    if keep.is_empty() {
        return;
    }
    let mut fields: Vec<Value> = body["_source"].as_array().cloned().unwrap_or_default();
    fields.extend(keep.iter().map(|f| Value::from(f.as_str())));
    body["_source"] = Value::Array(fields);
}

/// Leaves the query document (`id` in `index`) out of the hits of a candidate query `body`,
/// so that it is neither collected nor sent back: a lookup by id finds its own document
/// first, and often nothing else.
pub(super) fn leave_out(body: &mut Value, index: &str, id: &str) {
    let query = body["query"].take();
    body["query"] = json!({ "bool": {
        "filter": [query],
        "must_not": [{ "bool": { "filter": [
            { "ids": { "values": [id] } },
            { "term": { "_index": index } },
        ] } }],
    } });
}

pub(super) fn simhash_body(
    names: &FieldNames,
    d: &Described,
    filter: FilterMode,
    fp: SimHash,
    k: u32,
) -> Value {
    let should: Vec<Value> = names
        .blocks
        .iter()
        .zip(fp.blocks16())
        .map(|(f, b)| {
            if k <= WHOLE_BLOCK_K {
                json!({ "term": { f: b } })
            } else {
                json!({ "terms": { f: block_probes(b, k) } })
            }
        })
        .collect();
    let mut filters = vec![json!({ "bool": { "should": should, "minimum_should_match": 1 } })];
    let script = match (d.long_doc_values, d.blocks_doc_values) {
        (true, true) => Some(SCRIPT_LONG_OR_BLOCKS),
        (false, true) => Some(SCRIPT_BLOCKS),
        (true, false) => Some(SCRIPT_LONG),
        // No doc values to script on: the client-side check does all the filtering.
        (false, false) => None,
    };
    if let (FilterMode::Server, Some(source)) = (filter, script) {
        filters.push(json!({ "script": { "script": {
            "lang": "painless",
            "source": source,
            "params": { "q": fp.as_i64(), "k": k, "f": &names.simhash, "b": &names.blocks },
        } } }));
    }
    let mut body = json!({ "query": { "bool": { "filter": filters } } });
    if d.blocks_doc_values {
        body["_source"] = json!(false);
        body["docvalue_fields"] = json!(&names.blocks);
    } else {
        // Blocks mapped with `doc_values: false` (as the older Java service did): read them
        // from `_source`, limited to the four fields.
        body["_source"] = json!(&names.blocks);
    }
    body
}

/// The MinHash candidate query: documents sharing a band term (and, with the server filter,
/// reaching the threshold in the painless script). With partial copies asked (`containment`)
/// and held by the indices, also documents whose minima's terms agree with the query's in at
/// least [`crate::ContainmentMeta::agreeing`] positions (a `bool` `should` with
/// `minimum_should_match`, one `term` per minimum); the server filter then keeps the
/// near-duplicates and partial copies ([`SCRIPT_MINHASH_RELATE`]), and the rule judges them
/// on the client. Without it, the query of every release before containment, unchanged.
pub(super) fn minhash_body(
    m: &MinHashMeta,
    d: &Described,
    filter: FilterMode,
    sig: &Signature,
    terms: Option<&StoredTerms>,
    t: Threshold,
    containment: Option<&ContainmentRule>,
) -> Value {
    let names = &m.fields;
    let bands = terms.map_or_else(|| m.query_terms(sig), |s| s.bands.clone());
    let held = m.containment.as_ref().filter(|_| containment.is_some());
    let minima = held.and_then(|_| held_minima(m, sig, terms));
    let script = (filter == FilterMode::Server && d.signature_doc_values).then(|| {
        let bits = m.layout.signature_bits();
        let mut script = match (m.layout, held.zip(containment)) {
            (MinHashLayout::Full, _) => {
                let q: Vec<i32> = sig.values().iter().map(|&v| v as i32).collect();
                json!({
                    "source": SCRIPT_MINHASH,
                    "params": { "f": &names.signature, "q": q, "m": min_agreements(sig.len(), bits, t) },
                })
            }
            (MinHashLayout::Compact { .. }, relate) => {
                let mut params = json!({
                    "f": &names.signature,
                    "q": sig.reduced(bits).values(),
                    "b": bits,
                    "m": min_agreements(sig.len(), bits, t),
                });
                let source = match relate {
                    None => SCRIPT_MINHASH_BITS,
                    Some((c, rule)) => {
                        params["d"] = json!(&c.fields.distinct);
                        params["x"] = json!(sig.distinct().unwrap_or(0));
                        params["s"] = json!(rule.min_shingles);
                        params["c"] =
                            json!(rule.threshold - SIMILARITY_EPSILON - SCRIPT_CONTAINMENT_SLACK);
                        SCRIPT_MINHASH_RELATE
                    }
                };
                json!({ "source": source, "params": params })
            }
        };
        script["lang"] = json!("painless");
        json!({ "script": { "script": script } })
    });
    let bands = json!({ "terms": { &names.bands: bands } });
    let (query, fields) = match (held, minima) {
        (Some(c), Some(minima)) => {
            let agree: Vec<Value> = minima
                .iter()
                .map(|t| json!({ "term": { &c.fields.minima: t } }))
                .collect();
            // The common minima terms are not asked.
            let agree: Vec<Value> = match d.meta.common_minima.as_deref() {
                Some(common) => minima
                    .iter()
                    .zip(agree)
                    .filter(|(t, _)| !common.contains(t))
                    .map(|(_, clause)| clause)
                    .collect(),
                None => agree,
            };
            let by_minima = (agree.len() >= c.agreeing()).then(
                || json!({ "bool": { "should": agree, "minimum_should_match": c.agreeing() } }),
            );
            let candidates = json!({ "bool": {
                "should": std::iter::once(bands).chain(by_minima).collect::<Vec<Value>>(),
                "minimum_should_match": 1,
            } });
            let filters: Vec<Value> = std::iter::once(candidates).chain(script).collect();
            (
                json!({ "bool": { "filter": filters } }),
                vec![&names.signature, &c.fields.distinct],
            )
        }
        _ => {
            let filters: Vec<Value> = std::iter::once(bands).chain(script).collect();
            (
                json!({ "bool": { "filter": filters } }),
                vec![&names.signature],
            )
        }
    };
    let mut body = json!({ "query": query });
    if d.signature_doc_values {
        body["_source"] = json!(false);
        body["docvalue_fields"] = json!(fields);
    } else {
        body["_source"] = json!(fields);
    }
    body
}

/// A stored sketch and, for a compact signature (whose band keys cannot be made again from its
/// lowest bits), the terms stored beside it.
pub(crate) struct StoredQuery {
    pub(crate) sketch: Sketch,
    pub(crate) terms: Option<StoredTerms>,
}

/// The terms stored beside a compact signature: its band terms, and in fields formats 4 and 3 its
/// minima's terms.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoredTerms {
    pub(crate) bands: Vec<String>,
    pub(crate) minima: Option<Vec<String>>,
}

/// The terms stored in `source` when `sketch` is a compact signature (its own cannot be
/// made); `None` otherwise.
pub(super) fn stored_terms(
    source: &Value,
    meta: &IndexMeta,
    sketch: &Sketch,
) -> Option<StoredTerms> {
    match (sketch, &meta.minhash) {
        (Sketch::MinHash(sig), Some(m)) if !sig.is_full() => Some(StoredTerms {
            bands: source[&m.fields.bands]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            minima: m.containment.as_ref().and_then(|c| {
                source[&c.fields.minima]
                    .as_str()
                    .map(|s| s.split(' ').map(str::to_owned).collect())
            }),
        }),
        _ => None,
    }
}

/// The fields of `_source` a stored sketch of `method` is read from.
pub(super) fn sketch_fields(meta: &IndexMeta, method: Method) -> Vec<&str> {
    match method {
        Method::SimHash => {
            let names = &simhash_meta(meta).fields;
            let mut f: Vec<&str> = names.blocks.iter().map(String::as_str).collect();
            f.push(&names.simhash);
            f
        }
        Method::MinHash => {
            let m = minhash_meta(meta);
            let mut f = vec![m.fields.signature.as_str(), m.fields.version.as_str()];
            if m.layout != MinHashLayout::Full {
                f.push(&m.fields.bands);
            }
            if let Some(c) = &m.containment {
                f.extend(c.fields.all());
            }
            f
        }
    }
}

/// The candidate query of one stored document as data, for a join done outside Elasticsearch
/// (`regroup`'s): each term is a [`term_key`] of its field and value. A document is a
/// candidate of the query when it holds one of `any` (a band term; a SimHash block probe),
/// or at least `agreeing` of `agree` (minima terms, where partial copies are asked and the
/// index holds them): what [`minhash_body`] and [`simhash_body`] ask, without the filter
/// script, whose rule the judgement applies whole ([`super::judged_match`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CandidateTerms {
    pub(crate) any: Vec<u64>,
    pub(crate) agree: Vec<u64>,
    pub(crate) agreeing: usize,
    /// The terms the document holds, which other queries find it by: `None` when they are
    /// `any` and `agree` (MinHash, and SimHash up to [`WHOLE_BLOCK_K`]).
    pub(crate) held: Option<Vec<u64>>,
}

/// The minima terms a document of signature `sig` holds, in an index holding them: those
/// stored beside a compact signature (`terms`), else its own.
pub(crate) fn held_minima(
    m: &MinHashMeta,
    sig: &Signature,
    terms: Option<&StoredTerms>,
) -> Option<Vec<String>> {
    let c = m.containment.as_ref()?;
    match terms {
        Some(stored) => stored.minima.clone(),
        None => Some(c.minima_terms(sig)),
    }
}

/// The keys ([`term_key`]) of the common minima terms `common` in an index described by
/// `meta`: the `agree` terms of a [`CandidateTerms`] that are not asked
/// ([`crate::schema::CommonMinima`]). Empty where the index holds no minima terms.
pub(crate) fn common_keys(meta: &IndexMeta, common: &CommonMinima) -> HashSet<u64> {
    meta.minhash
        .as_ref()
        .and_then(|m| m.containment.as_ref())
        .map(|c| {
            common
                .terms
                .iter()
                .map(|t| term_key(&c.fields.minima, t))
                .collect()
        })
        .unwrap_or_default()
}

/// A term of a join: its field and value hashed (64 bits of XXH3; two different terms share
/// a key by chance only, about once in 2^64 pairs).
pub(crate) fn term_key(field: &str, term: &str) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(field.as_bytes());
    h.update(&[0]);
    h.update(term.as_bytes());
    h.digest()
}

/// The candidate query of a stored document (`query`, and `terms`, those stored beside a
/// compact signature) with `options`, in an index described by `meta` holding the query's
/// method: the same terms [`query_body`] sends.
pub(crate) fn candidate_terms(
    meta: &IndexMeta,
    query: &Query,
    terms: Option<&StoredTerms>,
    options: &MatchOptions,
) -> CandidateTerms {
    match query {
        &Query::SimHash { fingerprint: fp, k } => {
            let names = &simhash_meta(meta).fields;
            let blocks = names.blocks.iter().zip(fp.blocks16());
            let any = blocks
                .clone()
                .flat_map(|(f, b)| {
                    block_probes(b, k)
                        .into_iter()
                        .map(|p| term_key(f, &p.to_string()))
                })
                .collect();
            let held = (k > WHOLE_BLOCK_K)
                .then(|| blocks.map(|(f, b)| term_key(f, &b.to_string())).collect());
            CandidateTerms {
                any,
                agree: Vec::new(),
                agreeing: 0,
                held,
            }
        }
        Query::MinHash { signature: sig, .. } => {
            let m = minhash_meta(meta);
            let bands = terms.map_or_else(|| m.query_terms(sig), |s| s.bands.clone());
            let held = m
                .containment
                .as_ref()
                .filter(|_| options.containment.is_some());
            let minima = held.and_then(|_| held_minima(m, sig, terms));
            let (agree, agreeing) = match (held, minima) {
                (Some(c), Some(minima)) => (
                    minima
                        .iter()
                        .map(|t| term_key(&c.fields.minima, t))
                        .collect(),
                    c.agreeing(),
                ),
                _ => (Vec::new(), 0),
            };
            CandidateTerms {
                any: bands.iter().map(|t| term_key(&m.fields.bands, t)).collect(),
                agree,
                agreeing,
                held: None,
            }
        }
    }
}
