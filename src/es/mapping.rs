//! The fingerprint fields of an index: their names, their mapping, and `es-init`.
//!
//! A SimHash fingerprint is stored as seven fields next to the article (default names; the
//! MinHash fields and `_meta` are in [`super::meta`]):
//!
//! | field | type | holds |
//! |---|---|---|
//! | `simHashA`…`simHashD` | `short` (or `keyword`) | the four 16-bit blocks, A = highest bits, as signed `i16` |
//! | `simHash` | `long` | the whole 64 bits as a signed `i64` (same bits, two's complement) |
//! | `simHashVersion` | `keyword` | [`Fingerprinter::version`](crate::Fingerprinter::version) |
//! | `simHashReason` | `keyword` | why there is no fingerprint (`too_short`), else absent/null |
//!
//! `short` keeps indices written by the older Java service working. Block values are written
//! as JSON numbers either way: a `keyword` field indexes the number's decimal text, and a
//! `term` query with a number matches it, so writers and queries need not know the block
//! type. The mappings come from `mappings/*.json` (compiled in), so docs and code agree.

use std::fmt;
use std::str::FromStr;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Map, Value};

use super::meta::{self, IndexMeta, META_KEY};
use super::{path_segment, request, send, Body, EsError, RetryPolicy};

/// `mappings/neardup-fields.json`: blocks as `short` (the default).
pub const MAPPING_SHORT: &str = include_str!("../../mappings/neardup-fields.json");
/// `mappings/neardup-fields-keyword.json`: blocks as `keyword`.
pub const MAPPING_KEYWORD: &str = include_str!("../../mappings/neardup-fields-keyword.json");

/// Names of the fingerprint fields. The defaults are those of the older Java service.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FieldNames {
    /// The four 16-bit blocks, highest bits first.
    pub blocks: [String; 4],
    /// The whole fingerprint as a signed 64-bit integer.
    pub simhash: String,
    /// The fingerprint version.
    pub version: String,
    /// Why a document has no fingerprint (e.g. `too_short`).
    pub reason: String,
}

impl Default for FieldNames {
    fn default() -> Self {
        FieldNames {
            blocks: ["simHashA", "simHashB", "simHashC", "simHashD"].map(String::from),
            simhash: "simHash".into(),
            version: "simHashVersion".into(),
            reason: "simHashReason".into(),
        }
    }
}

impl FieldNames {
    /// All seven names: blocks, whole value, version, reason.
    pub fn all(&self) -> [&str; 7] {
        [
            &self.blocks[0],
            &self.blocks[1],
            &self.blocks[2],
            &self.blocks[3],
            &self.simhash,
            &self.version,
            &self.reason,
        ]
    }

    /// Checks that the names are usable: non-empty, distinct, top-level (no dots), and not
    /// Elasticsearch metadata (`_…`).
    pub fn validate(&self) -> Result<(), EsError> {
        validate_names(&self.all())
    }

    /// The `{"properties": …}` mapping of the fields, from the shipped JSON file, renamed to
    /// these names.
    pub fn mapping(&self, block_type: BlockType) -> Value {
        let shipped: Value =
            serde_json::from_str(block_type.shipped_mapping()).expect("shipped mapping is JSON");
        let defaults = FieldNames::default();
        let props = &shipped["properties"];
        let mut out = Map::new();
        for (default, name) in defaults.all().iter().zip(self.all()) {
            out.insert(name.to_owned(), props[*default].clone());
        }
        json!({ "properties": out })
    }
}

/// Checks fingerprint field names: non-empty, top-level (no dots), not Elasticsearch metadata
/// (`_…`), and each used once.
pub(crate) fn validate_names(all: &[&str]) -> Result<(), EsError> {
    for (i, n) in all.iter().enumerate() {
        if n.is_empty() || n.starts_with('_') || n.contains('.') {
            return Err(EsError::Config(format!(
                "fingerprint field name `{n}` is not allowed: use a non-empty top-level name without dots that does not start with `_`"
            )));
        }
        if all[..i].contains(n) {
            return Err(EsError::Config(format!(
                "fingerprint field name `{n}` is used twice: each fingerprint field needs its own name"
            )));
        }
    }
    Ok(())
}

/// How the four blocks are mapped.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BlockType {
    /// `short`: compatible with the older Java service; see `docs/elasticsearch.md` for the
    /// measured difference to `keyword`.
    #[default]
    Short,
    /// `keyword`: what Elasticsearch's tuning guide suggests for identifiers only used in
    /// `term` queries.
    Keyword,
}

impl BlockType {
    pub const ALL: [BlockType; 2] = [BlockType::Short, BlockType::Keyword];

    /// The Elasticsearch field type.
    pub fn name(self) -> &'static str {
        match self {
            BlockType::Short => "short",
            BlockType::Keyword => "keyword",
        }
    }

    /// The mapping file shipped in `mappings/` for this block type.
    pub fn shipped_mapping(self) -> &'static str {
        match self {
            BlockType::Short => MAPPING_SHORT,
            BlockType::Keyword => MAPPING_KEYWORD,
        }
    }
}

impl fmt::Display for BlockType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BlockType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BlockType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown block type `{s}`: use `short` or `keyword`"))
    }
}

/// What [`init_index`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitOutcome {
    /// The index did not exist and was created with the fingerprint fields and `_meta`.
    Created,
    /// These fields were added to the existing index(es) (possibly none), and `_meta.neardup`
    /// was written where it was missing or lacked a method.
    Added { fields: Vec<String>, meta: bool },
    /// Every field was already mapped as needed and `_meta` says so; nothing changed.
    Unchanged,
}

/// Makes sure `index` holds what `wanted` describes: creates the index with the fields and
/// `_meta.neardup` if it does not exist, or adds the missing fields and records the methods
/// in `_meta` (other `_meta` keys are kept). Idempotent. Fields that exist with the type
/// neardup needs are left as they are (their other parameters too). Nothing is changed when
/// a field exists with another type ([`EsError::MappingConflict`]) or `_meta` records another
/// version, parameters or field names for a method ([`EsError::MetaConflict`]); a method
/// `wanted` lacks but `_meta` has stays recorded.
///
/// `index` may be an alias or a pattern: every index it names is checked, then updated.
pub async fn init_index(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    wanted: &IndexMeta,
) -> Result<InitOutcome, EsError> {
    wanted.validate()?;
    let mapping = wanted.mapping();
    let existing = match meta::mappings(client, retry, index).await {
        Ok(m) => m,
        Err(EsError::IndexNotFound { .. }) if !index.contains(['*', ',']) => {
            let mut body = mapping.clone();
            body["_meta"] = json!({ META_KEY: wanted.to_json() });
            if create_index(client, retry, index, &body).await? {
                return Ok(InitOutcome::Created);
            }
            // Created by someone else meanwhile: check it like any existing index.
            return Box::pin(init_index(client, retry, index, wanted)).await;
        }
        Err(e) => return Err(e),
    };

    // Check every index before changing any.
    let mut plans = Vec::new();
    for (concrete, m) in &existing {
        let props = &m["mappings"]["properties"];
        let mut missing = Map::new();
        for (name, want) in mapping["properties"].as_object().expect("properties") {
            let want_type = want["type"].as_str().unwrap_or_default();
            match props.get(name) {
                None => {
                    missing.insert(name.clone(), want.clone());
                }
                Some(have) => {
                    let have_type = have["type"].as_str().unwrap_or("object");
                    if have_type != want_type {
                        let names = wanted.simhash.as_ref().map(|s| s.fields.clone());
                        return Err(conflict(
                            concrete,
                            &names.unwrap_or_default(),
                            name,
                            have_type,
                            want_type,
                        ));
                    }
                }
            }
        }
        let mut all_meta = m["mappings"]["_meta"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let recorded = match all_meta.get(META_KEY) {
            Some(_) => Some(IndexMeta::from_mapping(
                concrete,
                &m["mappings"],
                &FieldNames::default(),
            )?),
            None => None,
        };
        let merged = merge_meta(concrete, recorded.as_ref(), wanted)?;
        let meta_changes = recorded.as_ref() != Some(&merged);
        if missing.is_empty() && !meta_changes {
            continue;
        }
        all_meta.insert(META_KEY.to_owned(), merged.to_json());
        plans.push((concrete.clone(), missing, all_meta, meta_changes));
    }
    if plans.is_empty() {
        return Ok(InitOutcome::Unchanged);
    }
    let mut fields: Vec<String> = Vec::new();
    let mut meta_written = false;
    for (concrete, missing, all_meta, meta_changes) in plans {
        for f in missing.keys() {
            if !fields.contains(f) {
                fields.push(f.clone());
            }
        }
        meta_written |= meta_changes;
        let body = json!({ "properties": missing, "_meta": all_meta });
        request(
            client,
            retry,
            &format!("index `{concrete}`: put mapping"),
            Method::Put,
            &format!("/{}/_mapping", path_segment(&concrete)),
            &[],
            Some(&Body::Json(body)),
        )
        .await
        .map_err(|e| match e {
            // Someone mapped a field differently between our check and our write.
            EsError::Status {
                status: 400,
                ref error_type,
                ref reason,
                ..
            } if error_type == "illegal_argument_exception" && reason.contains("mapper") => {
                EsError::MappingConflict {
                    index: concrete.clone(),
                    field: missing.keys().cloned().collect::<Vec<_>>().join(", "),
                    existing: "(changed concurrently)".into(),
                    wanted: reason.clone(),
                    hint: "run es-init again to see which field differs".into(),
                }
            }
            other => other,
        })?;
    }
    Ok(InitOutcome::Added {
        fields,
        meta: meta_written,
    })
}

/// `recorded` with `wanted`'s methods added; an error when both describe a method differently.
fn merge_meta(
    index: &str,
    recorded: Option<&IndexMeta>,
    wanted: &IndexMeta,
) -> Result<IndexMeta, EsError> {
    let Some(recorded) = recorded else {
        return Ok(wanted.clone());
    };
    let clash = |existing: String, wanted: String| {
        EsError::MetaConflict {
        index: index.to_owned(),
        existing,
        wanted,
        hint: "fingerprints of two versions cannot share an index: es-init a new index with the new settings and back-fill it (or pass the settings the index records)".into(),
    }
    };
    let mut out = recorded.clone();
    if recorded.hmm != wanted.hmm {
        return Err(clash(
            format!("words made with hmm {}", recorded.hmm),
            format!("hmm {}", wanted.hmm),
        ));
    }
    match (&recorded.simhash, &wanted.simhash) {
        (Some(r), Some(w)) if r != w => {
            return Err(clash(
                format!(
                    "simhash {} ({} blocks, fields {:?})",
                    r.version,
                    r.block_type,
                    r.fields.all()
                ),
                format!(
                    "simhash {} ({} blocks, fields {:?})",
                    w.version,
                    w.block_type,
                    w.fields.all()
                ),
            ))
        }
        (None, Some(w)) => out.simhash = Some(w.clone()),
        _ => {}
    }
    match (&recorded.minhash, &wanted.minhash) {
        (Some(r), Some(w)) if r != w => {
            return Err(clash(
                format!("minhash {} (fields {:?})", r.version, r.fields.all()),
                format!("minhash {} (fields {:?})", w.version, w.fields.all()),
            ))
        }
        (None, Some(w)) => out.minhash = Some(w.clone()),
        _ => {}
    }
    Ok(out)
}

/// What the indices behind `index` hold ([`meta::read_meta`]), checked, without changing
/// anything, against their mappings: every field of every method each index holds is mapped
/// with the type neardup writes (blocks `short` or `keyword`, as recorded). Writers call this
/// first: an unmapped field would get a dynamic mapping (`long` blocks, `text` version or band
/// terms) that breaks queries. `legacy_fields` names the SimHash fields of indices without
/// `_meta.neardup` (the older Java service's layout, read as `seed000`).
pub async fn verify_index(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    legacy_fields: &FieldNames,
) -> Result<IndexMeta, EsError> {
    legacy_fields.validate()?;
    let mut per_index = std::collections::BTreeMap::new();
    let mut missing = Vec::new();
    for (concrete, m) in meta::mappings(client, retry, index).await? {
        let held = match IndexMeta::from_mapping(&concrete, &m["mappings"], legacy_fields) {
            Ok(held) => held,
            Err(EsError::NotInitialised { fields, .. }) => {
                missing.extend(fields);
                continue;
            }
            Err(e) => return Err(e),
        };
        held.validate()?;
        let props = &m["mappings"]["properties"];
        let names = held.simhash.as_ref().map(|s| s.fields.clone());
        for (name, want) in held.mapping()["properties"]
            .as_object()
            .expect("properties")
        {
            let want = want["type"].as_str().unwrap_or_default();
            match props.get(name) {
                None => missing.push(name.clone()),
                Some(have) => {
                    let have = have["type"].as_str().unwrap_or("object");
                    if have != want {
                        let names = names.clone().unwrap_or_default();
                        return Err(conflict(&concrete, &names, name, have, want));
                    }
                }
            }
        }
        per_index.insert(concrete, held);
    }
    if !missing.is_empty() {
        missing.sort();
        missing.dedup();
        return Err(EsError::NotInitialised {
            index: index.to_owned(),
            fields: missing,
        });
    }
    IndexMeta::common(&per_index)
}

fn conflict(index: &str, names: &FieldNames, field: &str, have: &str, want: &str) -> EsError {
    let is_block = names.blocks.iter().any(|b| b == field);
    let hint = match (is_block, have) {
        (true, "short") | (true, "keyword") => format!(
            "the blocks of this index are `{have}`: run es-init with --block-type {have}"
        ),
        _ => "choose other field names (--block-fields, --simhash-field, --version-field, --reason-field, --minhash-fields) or reindex into an index with the right mapping".to_owned(),
    };
    EsError::MappingConflict {
        index: index.to_owned(),
        field: field.to_owned(),
        existing: have.to_owned(),
        wanted: want.to_owned(),
        hint,
    }
}

/// `PUT /index` with the mappings. `Ok(false)` when the index appeared meanwhile.
async fn create_index(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    mapping: &Value,
) -> Result<bool, EsError> {
    let what = format!("index `{index}`: create");
    let body = Body::Json(json!({ "mappings": mapping }));
    let path = format!("/{}", path_segment(index));
    let reply = retry
        .run(|| async {
            let reply = send(client, Method::Put, &path, &[], Some(&body)).await?;
            if reply.body["error"]["type"] == "resource_already_exists_exception" {
                return Ok(None);
            }
            super::check(&what, reply).map(Some)
        })
        .await?;
    Ok(reply.is_some())
}

/// Like [`path_segment`], but keeps `*` and `,` so patterns and lists reach Elasticsearch.
pub(crate) fn path_segment_keep_patterns(index: &str) -> String {
    index
        .split(',')
        .map(|part| {
            part.split('*')
                .map(path_segment)
                .collect::<Vec<_>>()
                .join("*")
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_mappings_have_every_default_field() {
        for t in BlockType::ALL {
            let m = FieldNames::default().mapping(t);
            let props = m["properties"].as_object().unwrap();
            assert_eq!(props.len(), 7);
            assert_eq!(props["simHashA"]["type"], t.name());
            assert_eq!(props["simHashD"]["type"], t.name());
            assert_eq!(props["simHash"]["type"], "long");
            assert_eq!(props["simHashVersion"]["type"], "keyword");
            assert_eq!(props["simHashReason"]["type"], "keyword");
        }
    }

    #[test]
    fn renamed_fields_keep_their_types() {
        let names = FieldNames {
            blocks: ["a", "b", "c", "d"].map(String::from),
            simhash: "fp".into(),
            version: "fpv".into(),
            reason: "why".into(),
        };
        names.validate().unwrap();
        let m = names.mapping(BlockType::Keyword);
        assert_eq!(m["properties"]["c"]["type"], "keyword");
        assert_eq!(m["properties"]["fp"]["type"], "long");
        assert_eq!(m["properties"]["why"]["type"], "keyword");
        assert!(m["properties"].get("simHashA").is_none());
    }

    #[test]
    fn bad_names_are_rejected() {
        let n = FieldNames {
            simhash: "simHashA".into(),
            ..FieldNames::default()
        };
        assert!(n.validate().unwrap_err().to_string().contains("twice"));
        let n = FieldNames {
            version: "fp.version".into(),
            ..FieldNames::default()
        };
        assert!(n.validate().is_err());
        let n = FieldNames {
            reason: "_id".into(),
            ..FieldNames::default()
        };
        assert!(n.validate().is_err());
    }

    #[test]
    fn block_type_parses() {
        assert_eq!("keyword".parse::<BlockType>().unwrap(), BlockType::Keyword);
        assert!("long".parse::<BlockType>().is_err());
    }

    #[test]
    fn patterns_survive_encoding() {
        assert_eq!(path_segment_keep_patterns("news-*,old"), "news-*,old");
        assert_eq!(path_segment_keep_patterns("a b"), "a%20b");
    }
}
