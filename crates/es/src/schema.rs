//! The schema of neardup's fields in an index, as data: field names ([`FieldNames`],
//! [`MinHashFieldNames`]), block types ([`BlockType`]), what `_meta.neardup` records
//! ([`IndexMeta`]), the mappings shipped in `mappings/`, and how a value is written and read
//! back ([`band_term`], [`signature_base64`], [`minhash_fields_json`]). Nothing here talks to a
//! cluster: `es::init` creates, checks and reads indices with it ([`super::init_index`],
//! [`super::read_meta`]).
//!
//! A SimHash fingerprint is stored as seven fields next to the article (default names):
//!
//! | field | type | holds |
//! |---|---|---|
//! | `simHashA`…`simHashD` | `short` (or `keyword`) | the four 16-bit blocks, A = highest bits, as signed `i16` |
//! | `simHash` | `long` | the whole 64 bits as a signed `i64` (same bits, two's complement) |
//! | `simHashVersion` | `keyword` | [`Fingerprinter::version`](neardup_core::Fingerprinter::version) |
//! | `simHashReason` | `keyword` | why there is no fingerprint (`too_short`), else absent/null |
//!
//! `short` keeps indices written by the older Java service working. Block values are written
//! as JSON numbers either way: a `keyword` field indexes the number's decimal text, and a
//! `term` query with a number matches it, so writers and queries need not know the block
//! type. The mappings come from `mappings/*.json` (compiled in), so docs and code agree.
//!
//! What an index holds is recorded in its mapping's `_meta`, so that every command can read it.
//!
//! `es-init` writes `_meta.neardup` (other keys of `_meta` are kept):
//!
//! ```json
//! { "format": 1, "hmm": true, "fold": true,
//!   "simhash": { "profile": "default", "version": "default-3;…", "block_type": "short",
//!                "fields": { "blocks": ["simHashA", …], "simhash": "simHash", … } },
//!   "minhash": { "params": "shingle=w2;n=128;sig=oph;bands=42x3", "version": "minhash-1;…",
//!                "fields": { "bands": "minHashBands", "signature": "minHashSignature", … } } }
//! ```
//!
//! Writers take the methods, versions and field names from it, and queries refuse to compare
//! a fingerprint with stored ones of another version. An index without `_meta.neardup` whose
//! block fields are mapped was written by the older Java service (or by neardup before it
//! recorded `_meta`): it reads as SimHash `seed000` with the field names given, its block type
//! from the mapping ([`MetaSource::Legacy`]).
//!
//! The MinHash fields (default names, `mappings/neardup-minhash-fields.json`):
//!
//! | field | type | holds |
//! |---|---|---|
//! | `minHashBands` | `keyword` (no doc values) | one term per LSH band: [`band_term`] of its key |
//! | `minHashSignature` | `binary` (doc values) | the signature's little-endian bytes, base64 in `_source` |
//! | `minHashVersion` | `keyword` | [`Fingerprinter::minhash_version`] |
//! | `minHashReason` | `keyword` | why there is no signature (`too_short`), else null |

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};

use super::EsError;
pub use format::{FieldsFormat, FormatRequest, LayoutRequest};

mod format;
use neardup_core::align::Formula;
use neardup_core::fingerprint::{Methods, MinHashOutcome};
use neardup_core::relation::CANDIDATE_AGREEING_MINIMA;
use neardup_core::text::Boilerplate;
use neardup_core::{FingerprintConfig, Fingerprinter, Method, MinHashParams, Profile, Signature};

/// `mappings/neardup-fields.json`: blocks as `short` (the default).
pub const MAPPING_SHORT: &str = include_str!("../../../mappings/neardup-fields.json");
/// `mappings/neardup-fields-keyword.json`: blocks as `keyword`.
pub const MAPPING_KEYWORD: &str = include_str!("../../../mappings/neardup-fields-keyword.json");

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

/// The key under the mapping's `_meta` that neardup owns.
pub const META_KEY: &str = "neardup";
/// `mappings/neardup-minhash-fields.json`: the MinHash fields under their default names.
pub const MAPPING_MINHASH: &str = include_str!("../../../mappings/neardup-minhash-fields.json");

/// The term written for a band key: 16 lowercase hex digits. The band number is part of the
/// hashed key, so equal terms of different bands cannot meet.
pub fn band_term(key: u64) -> String {
    format!("{key:016x}")
}

/// The signature as the full layout stores it in the `binary` field: standard base64 (with
/// padding) of its little-endian bytes ([`MinHashLayout::signature_base64`] of
/// [`MinHashLayout::Full`]).
pub fn signature_base64(sig: &Signature) -> String {
    MinHashLayout::Full.signature_base64(sig)
}

/// Inverse of [`signature_base64`]; `None` for text that is not one. Padding is optional:
/// Elasticsearch returns `binary` doc values (`docvalue_fields`) without it.
pub fn signature_from_base64(s: &str) -> Option<Signature> {
    Signature::from_le_bytes(&lenient_base64(s)?)
}

/// The MinHash fields for `outcome`, as a JSON object to merge into a document: band
/// terms, signature, version and a null reason, in the index's [`MinHashLayout`], and where the
/// index holds containment ([`MinHashMeta::containment`]) the minima's terms and the distinct
/// shingle count; a
/// too-short text gets the version, its reason and null values, so it is not tried again
/// under the same version. The version written is [`MinHashMeta::stored_version`].
pub fn minhash_fields_json(meta: &MinHashMeta, outcome: &MinHashOutcome) -> Map<String, Value> {
    let names = &meta.fields;
    let mut m = Map::new();
    match outcome {
        Ok(f) => {
            m.insert(names.bands.clone(), json!(meta.band_terms(&f.signature)));
            m.insert(
                names.signature.clone(),
                json!(meta.layout.signature_base64(&f.signature)),
            );
            m.insert(names.version.clone(), json!(meta.stored_version()));
            m.insert(names.reason.clone(), Value::Null);
            if let Some(c) = &meta.containment {
                m.insert(c.fields.minima.clone(), json!(c.minima_value(&f.signature)));
                m.insert(c.fields.distinct.clone(), json!(f.signature.distinct()));
            }
        }
        Err(why) => {
            m.insert(names.bands.clone(), Value::Null);
            m.insert(names.signature.clone(), Value::Null);
            m.insert(names.version.clone(), json!(meta.stored_version()));
            m.insert(names.reason.clone(), json!(why.code()));
            if let Some(c) = &meta.containment {
                m.insert(c.fields.minima.clone(), Value::Null);
                m.insert(c.fields.distinct.clone(), Value::Null);
            }
        }
    }
    m
}

/// How the MinHash fields hold a signature, recorded in `_meta.neardup.minhash.layout`. Both
/// layouts use the same mapping (`mappings/neardup-minhash-fields.json`); only the values
/// differ, so an index changes layout in place (`es-init --upgrade --layout`, then
/// `backfill`). docs/elasticsearch.md, "The compact layout", has the measurements.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MinHashLayout {
    /// Fields format 1, every index before the compact layout (no `layout` in `_meta`):
    /// band terms are the 64-bit band keys in 16 hex digits, the signature is the whole
    /// 32-bit minima, and every document carries the version string.
    Full,
    /// Fields format 2: band terms are the keys' highest 36 bits in 6 base64url characters,
    /// the signature keeps the lowest `signature_bits` bits of each minimum (b-bit minwise
    /// hashing; similarity corrected for chance agreements, [`Signature::similarity`]), and
    /// documents carry an 8-character code of the version ([`MinHashMeta::stored_version`]).
    Compact { signature_bits: u8 },
}

impl MinHashLayout {
    /// The layout `es-init` gives a new index.
    pub const NEW: MinHashLayout = MinHashLayout::Compact { signature_bits: 8 };

    /// The bits of each minimum the index keeps.
    pub fn signature_bits(self) -> u8 {
        match self {
            MinHashLayout::Full => Signature::FULL_BITS,
            MinHashLayout::Compact { signature_bits } => signature_bits,
        }
    }

    /// The term written for a band key: 16 hex digits ([`band_term`]), or the key's highest
    /// 36 bits in 6 base64url characters. The band number is part of the hashed key either
    /// way, so equal terms of different bands meet only by chance.
    pub fn band_term(self, key: u64) -> String {
        match self {
            MinHashLayout::Full => band_term(key),
            MinHashLayout::Compact { .. } => {
                const URL_SAFE: &[u8; 64] =
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
                (0..6)
                    .map(|i| char::from(URL_SAFE[((key >> (58 - 6 * i)) & 63) as usize]))
                    .collect()
            }
        }
    }

    /// The signature's stored bytes: the whole minima little-endian (4 bytes each), or the
    /// lowest `signature_bits` bits of each packed little-endian (value `i` at bits
    /// `i·b … i·b + b − 1` of the byte string, lowest bit first), `⌈n·b / 8⌉` bytes.
    pub fn signature_bytes(self, sig: &Signature) -> Vec<u8> {
        let bits = u32::from(self.signature_bits());
        if bits == 32 {
            return sig.to_le_bytes();
        }
        let n = sig.len();
        let mut out = vec![0u8; (n * bits as usize).div_ceil(8)];
        for (i, &v) in sig.values().iter().enumerate() {
            let v = u64::from(v) & ((1u64 << bits) - 1);
            let at = i * bits as usize;
            let shifted = v << (at % 8);
            for (k, byte) in out[at / 8..].iter_mut().take(5).enumerate() {
                *byte |= (shifted >> (8 * k)) as u8;
            }
        }
        out
    }

    /// Inverse of [`MinHashLayout::signature_bytes`] for a signature of `n` values; a whole
    /// signature (`4·n` bytes, as written before an upgrade to this layout) is read too and
    /// reduced to the layout's bits, so every stored signature is compared by one rule.
    /// `None` for any other length.
    pub fn signature_from_bytes(self, bytes: &[u8], n: usize) -> Option<Signature> {
        let bits = self.signature_bits();
        if bytes.len() == 4 * n {
            return Some(Signature::from_le_bytes(bytes)?.reduced(bits));
        }
        let b = usize::from(bits);
        if bytes.len() != (n * b).div_ceil(8) {
            return None;
        }
        let values: Vec<u32> = (0..n)
            .map(|i| {
                let at = i * b;
                let mut acc = 0u64;
                for (k, &byte) in bytes[at / 8..].iter().take(5).enumerate() {
                    acc |= u64::from(byte) << (8 * k);
                }
                ((acc >> (at % 8)) & ((1u64 << b) - 1)) as u32
            })
            .collect();
        Some(Signature::from_reduced_values(values, bits))
    }

    /// The signature as stored in the `binary` field: standard base64 of
    /// [`MinHashLayout::signature_bytes`].
    pub fn signature_base64(self, sig: &Signature) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(self.signature_bytes(sig))
    }

    /// Inverse of [`MinHashLayout::signature_base64`] (padding optional, as Elasticsearch
    /// returns `binary` doc values without it).
    pub fn signature_from_base64(self, s: &str, n: usize) -> Option<Signature> {
        self.signature_from_bytes(&lenient_base64(s)?, n)
    }

    /// Checks the layout: 1 to 28 signature bits, or 32. With 29 to 31 bits a short
    /// signature's packed bytes could be as long as a whole one's (`⌈n·b/8⌉ = 4·n`, e.g. n =
    /// 2, b = 29), and the two forms could not be told apart; above 28 bits nothing is saved
    /// anyway.
    pub fn validate(self) -> Result<(), EsError> {
        match self {
            MinHashLayout::Compact { signature_bits: b } if !(1..=28).contains(&b) && b != 32 => {
                Err(EsError::Config(format!(
                    "--signature-bits {b} is out of range: keep 1 to 28 bits of each minimum, or 32 (8, the default, changes no decision on the held-out pairs; 4 changes a few)"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// `full`, or `compact (8-bit minima)`.
impl fmt::Display for MinHashLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MinHashLayout::Full => f.write_str("full"),
            MinHashLayout::Compact { signature_bits } => {
                write!(f, "compact ({signature_bits}-bit minima)")
            }
        }
    }
}

fn full_layout() -> MinHashLayout {
    MinHashLayout::Full
}

fn is_full_layout(l: &MinHashLayout) -> bool {
    *l == MinHashLayout::Full
}

fn lenient_base64(s: &str) -> Option<Vec<u8>> {
    use base64::engine::{general_purpose, DecodePaddingMode, GeneralPurpose};
    use base64::Engine as _;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        general_purpose::PAD.with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(s).ok()
}

/// Names of the MinHash fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinHashFieldNames {
    /// One `keyword` term per band.
    pub bands: String,
    /// The signature, `binary`.
    pub signature: String,
    /// The MinHash version.
    pub version: String,
    /// Why a document has no signature.
    pub reason: String,
}

impl Default for MinHashFieldNames {
    fn default() -> Self {
        MinHashFieldNames {
            bands: "minHashBands".into(),
            signature: "minHashSignature".into(),
            version: "minHashVersion".into(),
            reason: "minHashReason".into(),
        }
    }
}

impl MinHashFieldNames {
    pub fn all(&self) -> [&str; 4] {
        [&self.bands, &self.signature, &self.version, &self.reason]
    }

    /// The `{"properties": …}` mapping of the fields, from the shipped JSON file, renamed.
    pub fn mapping(&self) -> Value {
        let shipped: Value = serde_json::from_str(MAPPING_MINHASH).expect("shipped mapping");
        let props = &shipped["properties"];
        let mut out = Map::new();
        for (default, name) in MinHashFieldNames::default().all().iter().zip(self.all()) {
            out.insert(name.to_owned(), props[*default].clone());
        }
        json!({ "properties": out })
    }
}

/// `mappings/neardup-containment-fields.json`: the containment fields under their default names.
pub const MAPPING_CONTAINMENT: &str =
    include_str!("../../../mappings/neardup-containment-fields.json");

/// The containment fields (`_meta.neardup.minhash.containment`): what the candidate step for
/// partial copies searches (at least [`ContainmentMeta::agreeing`] of the minima's terms agree)
/// and what the rule needs to judge them ([`neardup_core::relation::MatchRule::relate`]: the distinct
/// shingle counts). Fields format 4 (a new index's): a term for each of the first 64 minima,
/// 18 bits each, 4 agreeing; fields format 3 (recorded before format 4, without `positions`
/// and `agreeing`): a term for every minimum, 10 bits each, 10 agreeing.
/// docs/elasticsearch.md, "Containment: fields formats 3 and 4", has the measurements.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainmentMeta {
    pub fields: ContainmentFieldNames,
    /// The lowest bits of each minimum a minimum's term keeps, beside its position: with 64
    /// positions (6 bits) 18 bits make 4 base64url characters.
    pub minimum_bits: u8,
    /// How many minima have a term: the signature's first `positions`. Absent (format 3):
    /// all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<u16>,
    /// The candidate step: a document is a candidate when at least this many of its minima's
    /// terms are the query's. Absent (format 3): [`CANDIDATE_AGREEING_MINIMA`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreeing: Option<u16>,
}

impl ContainmentMeta {
    /// What `es-init` gives a new index: 18 bits of each minimum.
    pub const MINIMUM_BITS: u8 = 18;
    /// What `es-init` gives a new index: terms for the first 64 minima.
    pub const POSITIONS: u16 = 64;
    /// What `es-init` gives a new index: 4 of the 64 terms agree.
    pub const AGREEING: u16 = 4;

    /// The containment of a new index (fields format 4), with default field names.
    pub fn new() -> ContainmentMeta {
        ContainmentMeta {
            fields: ContainmentFieldNames::default(),
            minimum_bits: ContainmentMeta::MINIMUM_BITS,
            positions: Some(ContainmentMeta::POSITIONS),
            agreeing: Some(ContainmentMeta::AGREEING),
        }
    }

    /// The containment of fields format 3, as indices recorded it before format 4: a term
    /// for every minimum, 10 bits each, [`CANDIDATE_AGREEING_MINIMA`] agreeing.
    pub fn format_3() -> ContainmentMeta {
        ContainmentMeta {
            fields: ContainmentFieldNames::default(),
            minimum_bits: 10,
            positions: None,
            agreeing: None,
        }
    }

    /// How many of a signature of `n` minima have a term.
    pub fn positions(&self, n: usize) -> usize {
        self.positions.map_or(n, |p| usize::from(p).min(n))
    }

    /// The fewest agreeing terms that make a document a candidate.
    pub fn agreeing(&self) -> usize {
        self.agreeing.map_or(CANDIDATE_AGREEING_MINIMA, usize::from)
    }

    /// The terms of a signature's minima, one per position in order, the first
    /// [`ContainmentMeta::positions`]: the position and the minimum's lowest
    /// [`ContainmentMeta::minimum_bits`] bits, in base64url characters (`⌈(position bits +
    /// minimum bits) / 6⌉` of them), separated by spaces: the value of the `text` field
    /// ([`ContainmentFieldNames::minima`], `whitespace` analyzer).
    pub fn minima_terms(&self, sig: &Signature) -> Vec<String> {
        let n = self.positions(sig.len());
        let position_bits = usize::BITS - n.saturating_sub(1).leading_zeros();
        let bits = position_bits + u32::from(self.minimum_bits);
        let chars = bits.div_ceil(6) as usize;
        let mask = (1u64 << self.minimum_bits) - 1;
        sig.values()[..n]
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                ContainmentMeta::term_spelled(
                    ((i as u64) << self.minimum_bits) | (u64::from(v) & mask),
                    chars,
                )
            })
            .collect()
    }

    /// A minimum's term: `number` in `chars` base64url characters, the most significant first.
    pub fn term_spelled(number: u64, chars: usize) -> String {
        const URL_SAFE: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        (0..chars)
            .rev()
            .map(|c| char::from(URL_SAFE[((number >> (6 * c)) & 63) as usize]))
            .collect()
    }

    /// The number a term of [`ContainmentMeta::minima_terms`] spells (its position and the
    /// minimum's lowest bits), below `64^len`; `None` for what is not such a term or spells
    /// more than 24 bits (format 4 spells 24, format 3 18).
    pub fn term_number(term: &str) -> Option<u32> {
        if term.is_empty() || term.len() > 4 {
            return None;
        }
        term.bytes().try_fold(0u32, |acc, b| {
            let digit = match b {
                b'A'..=b'Z' => b - b'A',
                b'a'..=b'z' => b - b'a' + 26,
                b'0'..=b'9' => b - b'0' + 52,
                b'-' => 62,
                b'_' => 63,
                _ => return None,
            };
            Some(acc * 64 + u32::from(digit))
        })
    }

    /// The one field value of [`ContainmentMeta::minima_terms`]: the terms joined by spaces.
    pub fn minima_value(&self, sig: &Signature) -> String {
        self.minima_terms(sig).join(" ")
    }
}

impl Default for ContainmentMeta {
    fn default() -> ContainmentMeta {
        ContainmentMeta::new()
    }
}

/// Names of the containment fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainmentFieldNames {
    /// One term per minimum ([`ContainmentMeta::minima_terms`]), `text` (`whitespace`
    /// analyzer, documents only, no norms).
    pub minima: String,
    /// The number of distinct shingles of the article ([`Signature::distinct`]), `integer`
    /// with doc values, not indexed.
    pub distinct: String,
}

impl Default for ContainmentFieldNames {
    fn default() -> Self {
        ContainmentFieldNames {
            minima: "minHashMinima".into(),
            distinct: "minHashDistinct".into(),
        }
    }
}

impl ContainmentFieldNames {
    pub fn all(&self) -> [&str; 2] {
        [&self.minima, &self.distinct]
    }

    /// The `{"properties": …}` mapping of the fields, from the shipped JSON file, renamed.
    pub fn mapping(&self) -> Value {
        let shipped: Value = serde_json::from_str(MAPPING_CONTAINMENT).expect("shipped mapping");
        let props = &shipped["properties"];
        let mut out = Map::new();
        for (default, name) in ContainmentFieldNames::default()
            .all()
            .iter()
            .zip(self.all())
        {
            out.insert(name.to_owned(), props[*default].clone());
        }
        json!({ "properties": out })
    }
}

/// `mappings/neardup-group-field.json`: the duplicate group label under its default name.
pub const MAPPING_GROUP: &str = include_str!("../../../mappings/neardup-group-field.json");

/// The default name of the duplicate group field.
pub const DEFAULT_GROUP_FIELD: &str = "nearDupGroup";

/// Which article of a group is its representative, the one whose id labels the group.
///
/// Recorded in `_meta.neardup.group.order`: `"fingerprinted"` (or no `order`, as in indices
/// recorded before orders existed) for the first fingerprinted, `{"field": "publishDate"}`
/// for the earliest by a field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "OrderRepr", into = "OrderRepr")]
pub enum GroupOrder {
    /// The first fingerprinted: a new article joins the group it is near, and starts one,
    /// labelled with its own id, when it is near none; articles of one batch near no stored
    /// one are labelled by the first of them.
    #[default]
    Fingerprinted,
    /// The earliest by a document field (a dotted path, e.g. `publishDate`), by the one rule
    /// [`super::group::earliest_first`]: articles of one batch near no stored one are
    /// labelled by the earliest of them. A new article joins the group it is near like in the
    /// first-fingerprinted order, even when it is earlier than the group's representative (a
    /// write never relabels others; a regroup does).
    Earliest { field: String },
}

impl GroupOrder {
    /// The field groups are ordered by, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            GroupOrder::Fingerprinted => None,
            GroupOrder::Earliest { field } => Some(field),
        }
    }
}

/// `first fingerprinted`, or `earliest by `publishDate``.
impl fmt::Display for GroupOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupOrder::Fingerprinted => f.write_str("first fingerprinted"),
            GroupOrder::Earliest { field } => write!(f, "earliest by `{field}`"),
        }
    }
}

/// How [`GroupOrder`] is written in `_meta`: a name, or the field of an order by a field.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum OrderRepr {
    Name(String),
    Field { field: String },
}

impl TryFrom<OrderRepr> for GroupOrder {
    type Error = String;
    fn try_from(r: OrderRepr) -> Result<GroupOrder, String> {
        match r {
            OrderRepr::Name(n) if n == "fingerprinted" => Ok(GroupOrder::Fingerprinted),
            OrderRepr::Name(n) => Err(format!(
                "unknown group order `{n}`: `fingerprinted` or {{\"field\": NAME}}"
            )),
            OrderRepr::Field { field } => Ok(GroupOrder::Earliest { field }),
        }
    }
}

impl From<GroupOrder> for OrderRepr {
    fn from(o: GroupOrder) -> OrderRepr {
        match o {
            GroupOrder::Fingerprinted => OrderRepr::Name("fingerprinted".into()),
            GroupOrder::Earliest { field } => OrderRepr::Field { field },
        }
    }
}

/// The duplicate groups part of [`IndexMeta`]: every article carries, in a `keyword` field,
/// the id of its group's representative ([`super::group`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMeta {
    pub field: String,
    #[serde(default)]
    pub order: GroupOrder,
    /// What joins two articles in a group (absent: [`GroupLink::Sketches`]).
    #[serde(default, skip_serializing_if = "GroupLink::is_sketches")]
    pub link: GroupLink,
}

impl Default for GroupMeta {
    fn default() -> Self {
        GroupMeta {
            field: DEFAULT_GROUP_FIELD.into(),
            order: GroupOrder::default(),
            link: GroupLink::default(),
        }
    }
}

/// What joins two articles in one duplicate group, for every writer and `regroup`.
///
/// Recorded in `_meta.neardup.group.link`: absent for [`GroupLink::Sketches`] (as in indices
/// recorded before it existed), `{"by": "texts", "fields": ["title", "content"]}` for
/// [`GroupLink::Texts`]. It decides no stored field: another one replaces the recorded one
/// without an upgrade, and `neardup regroup` then joins what is stored by it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum GroupLink {
    /// What `similar` links at the index's default tolerance ([`super::group::group_near`]).
    #[default]
    Sketches,
    /// The texts decide (issue 43): MinHash finds candidates as an aligned lookup does (down
    /// to a similarity of 0.1, partial copies included), the text `fields` (from `_source`,
    /// joined in order) are aligned, and only copies join (`near_duplicate`, or an article
    /// contained in another) by [`neardup_core::relation::AlignRule::DEFAULT`], not counting
    /// the formula text the index records. Two instances of one template, or two articles that
    /// share a passage, stay apart. MinHash only.
    Texts { fields: Vec<String> },
}

impl GroupLink {
    fn is_sketches(&self) -> bool {
        *self == GroupLink::Sketches
    }

    /// What links the groups of an index that records no link yet (`es-init` without
    /// `--group-by`): the texts of [`DEFAULT_TEXT_FIELDS`](neardup_core::input::DEFAULT_TEXT_FIELDS)
    /// where the index holds MinHash, which finds their candidates, else the sketches. By
    /// texts, groups join copies only, as issue 43 asks of every relation that groups: on
    /// held-out pairs duplicates share a group 0.9957 (by sketches 0.9547), negatives 0.0013
    /// (0.0383), template instances 0 (0.378); a write costs about 1.3× (its candidates'
    /// texts are read). An index recorded before keeps its link (absent: the sketches).
    pub fn for_new_index(holds_minhash: bool) -> GroupLink {
        match holds_minhash {
            true => GroupLink::Texts {
                fields: neardup_core::input::default_text_fields(),
            },
            false => GroupLink::Sketches,
        }
    }

    /// The text fields the groups read, where the texts decide.
    pub fn text_fields(&self) -> Option<&[String]> {
        match self {
            GroupLink::Sketches => None,
            GroupLink::Texts { fields } => Some(fields),
        }
    }
}

/// `sketches`, or `texts of `title`, `content``.
impl fmt::Display for GroupLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupLink::Sketches => f.write_str("sketches"),
            GroupLink::Texts { fields } => {
                let names: Vec<String> = fields.iter().map(|n| format!("`{n}`")).collect();
                write!(f, "texts of {}", names.join(", "))
            }
        }
    }
}

impl GroupMeta {
    /// A group field named `field`.
    pub fn named(field: impl Into<String>) -> GroupMeta {
        GroupMeta {
            field: field.into(),
            ..GroupMeta::default()
        }
    }

    /// The `{"properties": …}` mapping of the field, from the shipped JSON file, renamed.
    pub fn mapping(&self) -> Value {
        let shipped: Value = serde_json::from_str(MAPPING_GROUP).expect("shipped mapping");
        json!({ "properties": { &self.field: shipped["properties"][DEFAULT_GROUP_FIELD].clone() } })
    }
}

/// How an index's description was obtained.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum MetaSource {
    /// Read from `_meta.neardup` (or about to be written there).
    #[default]
    Recorded,
    /// No `_meta.neardup`, but the SimHash block fields are mapped: the older Java service's
    /// layout, read as `seed000`.
    Legacy,
}

/// What an index holds: its methods, their versions, parameters and field names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// jieba's HMM setting the words of both methods were made with.
    pub hmm: bool,
    /// Whether texts were folded from Traditional into Simplified before segmentation
    /// ([`neardup_core::text::fold`](mod@neardup_core::text::fold)). Absent (`false`) in indices recorded before folding
    /// existed: they keep getting the unfolded fingerprints they hold until upgraded
    /// (`es-init --upgrade`, then `backfill`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fold: bool,
    /// The learned boilerplate both methods drop ([`neardup_core::text::boilerplate`]), recorded
    /// whole without the lines' texts; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boilerplate: Option<Arc<Boilerplate>>,
    /// The formula text aligned lookups do not count as copied
    /// ([`neardup_core::align::Formula`], the artefact of `neardup formula learn`, recorded
    /// by `es-init --formula`); absent when none. It decides no fingerprint, so it can be
    /// replaced at any time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<Arc<Formula>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simhash: Option<SimHashMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minhash: Option<MinHashMeta>,
    /// Duplicate groups labelled next to the articles; absent in indices recorded before
    /// groups existed, and in those made with `es-init --no-groups`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupMeta>,
    /// Edits tracked by a final pipeline ([`TrackingMeta`]); absent where es-init did not
    /// install one (`--no-tracking`, a cluster without what it needs, an index recorded
    /// before tracking existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracking: Option<TrackingMeta>,
    /// The minima terms held by so many articles that they make no candidate alone
    /// ([`CommonMinima`]), learned by `regroup --common-above`; absent when none was learned.
    /// They decide no fingerprint, so they can be learned again at any time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_minima: Option<Arc<CommonMinima>>,
    #[serde(skip)]
    pub source: MetaSource,
}

/// The minima terms of an index held by more than [`CommonMinima::above`] articles when a
/// regroup walked it (`_meta.neardup.common_minima`). A frequent word pair is the least hash
/// of its bin in many texts, so its minimum's term is held by a share of the whole index:
/// asking for it costs a walk over that share (by the node for a search, by the regroup's
/// join), and agreeing in it says that two texts use common words, not that one copies the
/// other. With a list recorded, a document is a candidate by its minima when it agrees with
/// the query in at least [`ContainmentMeta::agreeing`] terms **that are not common**; the
/// band terms find candidates as before, and the judgement of a candidate reads every minimum. docs/explanation/containment.md, "Common
/// minima", says why and what it costs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommonMinima {
    /// The terms listed are held by more than this many articles.
    pub above: u64,
    /// The articles with a sketch the walk that learned them read.
    pub articles: u64,
    /// The terms, sorted (byte order).
    pub terms: Vec<String>,
}

impl CommonMinima {
    /// Whether `term` is one of the common minima terms.
    pub fn contains(&self, term: &str) -> bool {
        self.terms
            .binary_search_by(|t| t.as_str().cmp(term))
            .is_ok()
    }
}

/// The field every neardup write carries where the index tracks edits: its final pipeline
/// ([`tracking_pipeline`]) keeps the version fields of a write that has it, clears them in
/// any other write, and strips it, so it is never stored.
pub const TRACKING_MARKER: &str = "neardupWrite";

/// The final pipeline's script: painless, with the marker and the version fields as
/// parameters.
const TRACKING_SCRIPT: &str = "if (ctx.containsKey(params.marker)) { ctx.remove(params.marker); } else { for (String f : params.versions) { ctx.remove(f); } }";

/// How an index tracks edits (`_meta.neardup.tracking`): the final pipeline es-init
/// installed, and the user's final pipeline it runs first, if the index had one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackingMeta {
    /// The ingest pipeline set as `index.final_pipeline` ([`tracking_pipeline_name`]).
    pub pipeline: String,
    /// The user's final pipeline, run by neardup's before its own step (es-init
    /// `--chain-final-pipeline`); restored as the final pipeline when tracking is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chained: Option<String>,
    /// Whether the cluster runs the final pipeline for the `update` actions of a `_bulk`
    /// (es-init tries it on a scratch index). Elasticsearch 7.10 and OpenSearch 3 do not: a
    /// bulk of partial updates is then neither tracked nor marked (the marker would be
    /// stored), and neardup's bulk partial updates carry no marker.
    #[serde(default)]
    pub bulk_updates: bool,
}

/// The name of the final pipeline that tracks edits in the concrete index `index`.
pub fn tracking_pipeline_name(index: &str) -> String {
    format!("neardup-tracking-{index}")
}

/// The final pipeline that tracks edits in an index holding what `meta` says: a write
/// without [`TRACKING_MARKER`] loses the version field of every method held (the worker's
/// "missing or outdated" query then finds it); a write with it keeps them; the marker is
/// removed either way. `chained` (the user's final pipeline) runs first.
pub fn tracking_pipeline(meta: &IndexMeta, chained: Option<&str>) -> Value {
    let versions = meta.version_fields();
    let mut processors = Vec::new();
    if let Some(p) = chained {
        processors.push(json!({ "pipeline": { "name": p } }));
    }
    processors.push(json!({ "script": {
        "lang": "painless",
        "source": TRACKING_SCRIPT,
        "params": { "marker": TRACKING_MARKER, "versions": versions },
    } }));
    json!({
        "description": "neardup: a write without neardup's marker clears the fingerprint versions (the worker re-fingerprints the article); the marker is never stored",
        "processors": processors,
    })
}

/// The SimHash part of [`IndexMeta`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimHashMeta {
    pub profile: Profile,
    pub version: String,
    pub block_type: BlockType,
    pub fields: FieldNames,
}

/// The MinHash part of [`IndexMeta`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinHashMeta {
    #[serde(serialize_with = "params_to_str", deserialize_with = "params_from_str")]
    pub params: MinHashParams,
    pub version: String,
    pub fields: MinHashFieldNames,
    /// Absent (full) in indices recorded before the compact layout existed.
    #[serde(default = "full_layout", skip_serializing_if = "is_full_layout")]
    pub layout: MinHashLayout,
    /// Set by `es-init --upgrade` from the full to the compact layout, until a back-fill has
    /// rewritten every document ([`super::finish_layout_upgrade`]): queries also send the
    /// full layout's band terms, so documents not rewritten yet are still found (compared by
    /// the compact rule on their whole minima's lowest bits).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_full: bool,
    /// The containment fields (fields formats 3 and 4); absent in indices recorded before them, and
    /// in those made with `es-init --no-containment` or in the full layout: those answer
    /// near-duplicates only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<ContainmentMeta>,
}

impl MinHashMeta {
    /// The version value documents carry: the version itself in the full layout; in the
    /// compact one, `m` and 8 hex digits of a hash of the version and the layout, and of the
    /// containment fields where the index holds them (a layout change, or containment added,
    /// is a new stored form, so documents of the old one are stale).
    pub fn stored_version(&self) -> String {
        match self.layout {
            MinHashLayout::Full => self.version.clone(),
            layout => {
                let mut form = format!("{};{layout}", self.version);
                if let Some(c) = &self.containment {
                    form.push_str(&format!(";containment {}", c.minimum_bits));
                    if let Some(p) = c.positions {
                        form.push_str(&format!(" of {p}"));
                    }
                }
                let code = xxhash_rust::xxh3::xxh3_64(form.as_bytes());
                format!("m{:08x}", code >> 32)
            }
        }
    }

    /// The number of minima of the index's signatures.
    pub fn hashes(&self) -> usize {
        usize::from(self.params.hashes)
    }

    /// The band terms of a whole signature in the index's layout, band 0 first: what a
    /// writer stores.
    pub fn band_terms(&self, sig: &Signature) -> Vec<String> {
        sig.band_keys(&self.params)
            .into_iter()
            .map(|k| self.layout.band_term(k))
            .collect()
    }

    /// Checks the containment fields: only in the compact layout, 1 to 32 bits of each
    /// minimum.
    pub fn validate_containment(&self) -> Result<(), EsError> {
        match &self.containment {
            Some(_) if self.layout == MinHashLayout::Full => Err(EsError::Config(
                "the containment fields come with the compact layout (fields formats 3 and 4): pass --layout compact, or --no-containment".into(),
            )),
            Some(c) if !(1..=32).contains(&c.minimum_bits) => Err(EsError::Config(format!(
                "containment terms keep 1 to 32 bits of each minimum, not {}",
                c.minimum_bits
            ))),
            Some(c) if c.positions.is_some_and(|p| p == 0 || p > self.params.hashes) => {
                Err(EsError::Config(format!(
                    "containment terms are kept for 1 to {} minima (the signature's length), not {}",
                    self.params.hashes,
                    c.positions.unwrap_or_default()
                )))
            }
            Some(c) if !(1..=c.positions(self.hashes())).contains(&c.agreeing()) => {
                Err(EsError::Config(format!(
                    "a containment candidate needs 1 to {} agreeing terms, not {}",
                    c.positions(self.hashes()),
                    c.agreeing()
                )))
            }
            _ => Ok(()),
        }
    }

    /// The terms a query looks for: [`MinHashMeta::band_terms`], and during an upgrade from
    /// the full layout ([`MinHashMeta::from_full`]) the full layout's too.
    pub fn query_terms(&self, sig: &Signature) -> Vec<String> {
        let keys = sig.band_keys(&self.params);
        let mut terms: Vec<String> = keys.iter().map(|&k| self.layout.band_term(k)).collect();
        if self.from_full && self.layout != MinHashLayout::Full {
            terms.extend(keys.iter().map(|&k| MinHashLayout::Full.band_term(k)));
        }
        terms
    }
}

fn params_to_str<S: Serializer>(p: &MinHashParams, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(p)
}

fn params_from_str<'de, D: Deserializer<'de>>(d: D) -> Result<MinHashParams, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

impl IndexMeta {
    /// The description of an index holding `methods` as made by `config`.
    pub fn new(
        config: &FingerprintConfig,
        methods: Methods,
        block_type: BlockType,
        simhash_fields: FieldNames,
        minhash_fields: MinHashFieldNames,
    ) -> IndexMeta {
        let versions = Fingerprinter::versions(config);
        IndexMeta {
            hmm: config.hmm,
            fold: config.folds(),
            boilerplate: config
                .boilerplate
                .as_ref()
                .filter(|_| config.profile.scheme().is_some())
                .map(|b| Arc::new(b.without_texts())),
            formula: None,
            simhash: methods.simhash.then(|| SimHashMeta {
                profile: config.profile,
                version: versions.simhash.clone(),
                block_type,
                fields: simhash_fields,
            }),
            minhash: methods.minhash.then(|| MinHashMeta {
                params: config.minhash,
                version: versions.minhash.clone(),
                fields: minhash_fields,
                layout: MinHashLayout::NEW,
                from_full: false,
                containment: Some(ContainmentMeta::new()),
            }),
            group: None,
            tracking: None,
            common_minima: None,
            source: MetaSource::Recorded,
        }
    }

    /// An index holding only the design card's SimHash fields, of `profile`.
    pub fn simhash(profile: Profile, block_type: BlockType, fields: FieldNames) -> IndexMeta {
        IndexMeta::new(
            &FingerprintConfig::for_profile(profile),
            Methods::only(Method::SimHash),
            block_type,
            fields,
            MinHashFieldNames::default(),
        )
    }

    /// An index without `_meta.neardup` whose blocks are mapped: SimHash `seed000`.
    pub fn legacy(fields: FieldNames, block_type: BlockType) -> IndexMeta {
        IndexMeta {
            source: MetaSource::Legacy,
            ..IndexMeta::new(
                &FingerprintConfig::for_profile(Profile::Seed000),
                Methods::only(Method::SimHash),
                block_type,
                fields,
                MinHashFieldNames::default(),
            )
        }
    }

    /// Marks `doc` as neardup's own write where the index tracks edits ([`TRACKING_MARKER`]):
    /// every writer of neardup's sends its documents through here. `bulk_update`: `doc` is
    /// the partial document of a `_bulk` `update` action, which is marked only where the
    /// cluster runs the final pipeline for those ([`TrackingMeta::bulk_updates`]); whole
    /// documents (`index` and `create`) always are.
    pub fn mark_own_write(&self, doc: &mut Map<String, Value>, bulk_update: bool) {
        if let Some(t) = &self.tracking {
            if t.bulk_updates || !bulk_update {
                doc.insert(TRACKING_MARKER.to_owned(), Value::Bool(true));
            }
        }
    }

    /// The version field of every method the index holds (SimHash's first).
    pub fn version_fields(&self) -> Vec<&str> {
        self.simhash
            .iter()
            .map(|s| s.fields.version.as_str())
            .chain(self.minhash.iter().map(|m| m.fields.version.as_str()))
            .collect()
    }

    /// The methods the index holds.
    pub fn methods(&self) -> Methods {
        Methods {
            simhash: self.simhash.is_some(),
            minhash: self.minhash.is_some(),
        }
    }

    pub fn has(&self, method: Method) -> bool {
        match method {
            Method::SimHash => self.simhash.is_some(),
            Method::MinHash => self.minhash.is_some(),
        }
    }

    /// The method a query uses when none is asked for: MinHash where the index has it (it
    /// finds far more near-duplicates at the same precision, `docs/evaluation.md`).
    pub fn default_method(&self) -> Method {
        if self.minhash.is_some() {
            Method::MinHash
        } else {
            Method::SimHash
        }
    }

    /// The version the index holds for `method`, if it holds the method.
    pub fn version(&self, method: Method) -> Option<&str> {
        match method {
            Method::SimHash => self.simhash.as_ref().map(|m| m.version.as_str()),
            Method::MinHash => self.minhash.as_ref().map(|m| m.version.as_str()),
        }
    }

    /// The configuration that makes this index's fingerprints.
    pub fn fingerprint_config(&self) -> FingerprintConfig {
        FingerprintConfig {
            profile: self.simhash.as_ref().map(|s| s.profile).unwrap_or_default(),
            hmm: self.hmm,
            fold: self.fold,
            boilerplate: self.boilerplate.clone(),
            minhash: self.minhash.as_ref().map(|m| m.params).unwrap_or_default(),
            ..FingerprintConfig::default()
        }
    }

    /// A fingerprinter making exactly what the index holds; an error if this build of
    /// neardup computes another version for one of its methods.
    pub fn fingerprinter(&self, index: &str) -> Result<Fingerprinter, EsError> {
        let config = self.fingerprint_config();
        let v = Fingerprinter::versions(&config);
        self.check_versions(index, &v.simhash, &v.minhash)?;
        Ok(Fingerprinter::new(config))
    }

    /// Errors unless `fp` makes what the index holds, for every method it holds.
    pub fn check_fingerprinter(&self, index: &str, fp: &Fingerprinter) -> Result<(), EsError> {
        self.check_versions(
            index,
            fp.version_of(Method::SimHash, false),
            fp.version_of(Method::MinHash, false),
        )
    }

    /// Errors where the index links its groups by texts and a writer that reads an
    /// article's text from `text_fields` (its `--field`) does not read every field the
    /// groups align: the groups would align text the fingerprints never saw, or none (an
    /// article kept in `body` grouped by a `content` it lacks).
    pub fn check_group_text_fields(
        &self,
        index: &str,
        text_fields: &[String],
    ) -> Result<(), EsError> {
        match self.group.as_ref().and_then(|g| g.link.text_fields()) {
            Some(grouped) if !grouped.iter().all(|f| text_fields.contains(f)) => {
                Err(EsError::GroupTextFields {
                    index: index.to_owned(),
                    grouped: grouped.to_vec(),
                    read: text_fields.to_vec(),
                })
            }
            _ => Ok(()),
        }
    }

    fn check_versions(&self, index: &str, simhash: &str, minhash: &str) -> Result<(), EsError> {
        for (method, computed) in [(Method::SimHash, simhash), (Method::MinHash, minhash)] {
            match self.version(method) {
                Some(stored) if stored != computed => {
                    return Err(EsError::VersionMismatch {
                        index: index.to_owned(),
                        method,
                        stored: stored.to_owned(),
                        computed: computed.to_owned(),
                    })
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every field name of every method the index holds, checked: non-empty, top-level,
    /// not metadata, and all distinct; the MinHash layout's bits; the group order field,
    /// if any (not metadata, not the group field); and groups linked by texts (MinHash held,
    /// text fields named).
    pub fn validate(&self) -> Result<(), EsError> {
        let mut all: Vec<&str> = Vec::new();
        if let Some(s) = &self.simhash {
            all.extend(s.fields.all());
        }
        if let Some(m) = &self.minhash {
            all.extend(m.fields.all());
            m.layout.validate()?;
            if let Some(c) = &m.containment {
                all.extend(c.fields.all());
                m.validate_containment()?;
            }
        }
        if let Some(g) = &self.group {
            all.push(&g.field);
            if let Some(f) = g.order.field() {
                if f.is_empty() || f.starts_with('_') || f == g.field {
                    return Err(EsError::Config(format!(
                        "group order field `{f}` is not allowed: name a field of the articles (a dotted path allowed) that is not the group field and does not start with `_`"
                    )));
                }
            }
            if let Some(fields) = g.link.text_fields() {
                if self.minhash.is_none() {
                    return Err(EsError::Config(
                        "groups linked by texts find their candidates with MinHash, which the index does not hold: es-init it with --methods minhash (or simhash,minhash), or leave out --group-by texts".into(),
                    ));
                }
                if fields.is_empty() || fields.iter().any(|f| f.is_empty()) {
                    return Err(EsError::Config(
                        "groups linked by texts need at least one text field, each named (--group-text-field NAME)".into(),
                    ));
                }
            }
        }
        validate_names(&all)
    }

    /// The `{"properties": …}` mapping of every field of every method held.
    pub fn mapping(&self) -> Value {
        let mut props = Map::new();
        if let Some(s) = &self.simhash {
            if let Value::Object(p) = s.fields.mapping(s.block_type)["properties"].take() {
                props.extend(p);
            }
        }
        if let Some(m) = &self.minhash {
            if let Value::Object(p) = m.fields.mapping()["properties"].take() {
                props.extend(p);
            }
            if let Some(c) = &m.containment {
                if let Value::Object(p) = c.fields.mapping()["properties"].take() {
                    props.extend(p);
                }
            }
        }
        if let Some(g) = &self.group {
            if let Value::Object(p) = g.mapping()["properties"].take() {
                props.extend(p);
            }
        }
        json!({ "properties": props })
    }

    /// The JSON stored under `_meta.neardup`, with the number of its fields format
    /// ([`FieldsFormat::recorded`]).
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("IndexMeta serialises");
        v["format"] = json!(FieldsFormat::of(self).recorded().number());
        v
    }

    /// This description with the MinHash fields in `layout` (if it holds MinHash). The full
    /// layout holds no containment fields (they come with the compact one, formats 3 and 4).
    pub fn with_layout(mut self, layout: MinHashLayout) -> IndexMeta {
        if let Some(m) = &mut self.minhash {
            m.layout = layout;
            m.from_full &= layout != MinHashLayout::Full;
            if layout == MinHashLayout::Full {
                m.containment = None;
            }
        }
        self
    }

    /// This description with the containment fields (default names) or without them (if it
    /// holds MinHash in the compact layout; the full layout holds none).
    pub fn with_containment(mut self, on: bool) -> IndexMeta {
        if let Some(m) = &mut self.minhash {
            m.containment = (on && m.layout != MinHashLayout::Full)
                .then(|| m.containment.clone().unwrap_or_default());
        }
        self
    }

    /// This description with the containment terms `c` where it holds the containment fields
    /// (an index recorded in fields format 3 keeps its own), the format following.
    pub fn with_containment_terms(mut self, c: ContainmentMeta) -> IndexMeta {
        if let Some(held) = self.minhash.as_mut().and_then(|m| m.containment.as_mut()) {
            *held = c;
        }
        self
    }

    /// Whether the index holds the containment fields: MinHash in fields format 3 or 4.
    pub fn has_containment(&self) -> bool {
        self.minhash
            .as_ref()
            .is_some_and(|m| m.containment.is_some())
    }

    /// The description of one concrete index from its mapping (`{"properties": …, "_meta": …}`).
    /// `legacy_fields` names the SimHash fields of an index without `_meta.neardup`. The
    /// format `_meta` records must be one this neardup reads and the one what it records
    /// makes ([`FieldsFormat::of`]).
    pub fn from_mapping(
        index: &str,
        mapping: &Value,
        legacy_fields: &FieldNames,
    ) -> Result<IndexMeta, EsError> {
        if let Some(m) = mapping["_meta"].get(META_KEY) {
            let meta: IndexMeta =
                serde_json::from_value(m.clone()).map_err(|e| EsError::BadMeta {
                    index: index.to_owned(),
                    detail: e.to_string(),
                })?;
            let newest = FieldsFormat::NEWEST.number().unwrap_or_default();
            let Some(recorded) = m["format"].as_u64().and_then(FieldsFormat::from_number) else {
                return Err(EsError::BadMeta {
                    index: index.to_owned(),
                    detail: format!(
                        "format {} is not one this neardup reads (1 to {newest}); use the neardup version that wrote it",
                        m["format"]
                    ),
                });
            };
            let holds = FieldsFormat::of(&meta);
            if recorded != holds {
                return Err(EsError::BadMeta {
                    index: index.to_owned(),
                    detail: format!(
                        "format {} does not go with the MinHash layout it records ({}, format {})",
                        m["format"],
                        meta.minhash
                            .as_ref()
                            .map_or(MinHashLayout::Full, |m| m.layout),
                        holds.number().unwrap_or_default()
                    ),
                });
            }
            if let Some(m) = &meta.minhash {
                m.layout
                    .validate()
                    .and_then(|()| m.validate_containment())
                    .map_err(|e| EsError::BadMeta {
                        index: index.to_owned(),
                        detail: e.to_string(),
                    })?;
            }
            return Ok(meta);
        }
        let props = &mapping["properties"];
        let mut block_type = None;
        let mut missing = Vec::new();
        for b in &legacy_fields.blocks {
            match props[b]["type"].as_str() {
                None => missing.push(b.clone()),
                Some(t) => block_type = t.parse::<BlockType>().ok().or(block_type),
            }
        }
        if !missing.is_empty() {
            return Err(EsError::NotInitialised {
                index: index.to_owned(),
                fields: missing,
            });
        }
        Ok(IndexMeta::legacy(
            legacy_fields.clone(),
            block_type.unwrap_or_default(),
        ))
    }

    /// Every method held by any of the indices (the first description of each, in name
    /// order): what one fingerprinter writing to all of them must make. Check each index
    /// against it ([`IndexMeta::check_fingerprinter`]): two that describe a method
    /// differently cannot share one. `None` for no index.
    pub fn union(per_index: &BTreeMap<String, IndexMeta>) -> Option<IndexMeta> {
        let mut it = per_index.values();
        let mut out = it.next()?.clone();
        for m in it {
            if out.simhash.is_none() {
                out.simhash.clone_from(&m.simhash);
            }
            if out.minhash.is_none() {
                out.minhash.clone_from(&m.minhash);
            }
            if out.tracking.is_none() {
                out.tracking.clone_from(&m.tracking);
            }
            if m.source == MetaSource::Legacy {
                out.source = MetaSource::Legacy;
            }
        }
        Some(out)
    }

    /// What several indices queried together have in common: each method whose description
    /// is the same in all of them. An error when nothing is common.
    pub fn common(per_index: &BTreeMap<String, IndexMeta>) -> Result<IndexMeta, EsError> {
        let mut it = per_index.iter();
        let Some((_, first)) = it.next() else {
            return Err(EsError::BadMeta {
                index: String::new(),
                detail: "no index to describe".into(),
            });
        };
        let mut out = first.clone();
        for (_, m) in it {
            if m.hmm != out.hmm || m.fold != out.fold || m.boilerplate != out.boilerplate {
                out.simhash = None;
                out.minhash = None;
            }
            if m.simhash != out.simhash {
                out.simhash = None;
            }
            if m.minhash != out.minhash {
                out.minhash = None;
            }
            // Aligned lookups leave formula out only where every index records the same.
            if m.formula != out.formula {
                out.formula = None;
            }
            // Common minima are left unasked only where every index records the same: a
            // term common in one index can be rare in another.
            if m.common_minima != out.common_minima {
                out.common_minima = None;
            }
            // Labels are written only where every index keeps the same group field.
            if m.group != out.group {
                out.group = None;
            }
            // Writes carry the marker where any index tracks edits: without it, a tracked
            // index would take neardup's own writes for edits.
            if out.tracking.is_none() {
                out.tracking.clone_from(&m.tracking);
            }
            if m.source == MetaSource::Legacy {
                out.source = MetaSource::Legacy;
            }
        }
        if out.simhash.is_none() && out.minhash.is_none() {
            return Err(EsError::MetaMismatch {
                indices: per_index
                    .iter()
                    .map(|(i, m)| format!("`{i}`: {m}"))
                    .collect(),
            });
        }
        Ok(out)
    }
}

/// What `es-init` records by default for the fingerprints: both methods, the default SimHash
/// profile and MinHash parameters, `short` blocks, the default field names. Without duplicate
/// groups, which `es-init` adds by default (`IndexMeta { group: Some(GroupMeta::default()),
/// .. }`) and library callers choose.
impl Default for IndexMeta {
    fn default() -> Self {
        IndexMeta::new(
            &FingerprintConfig::default(),
            Methods::BOTH,
            BlockType::Short,
            FieldNames::default(),
            MinHashFieldNames::default(),
        )
    }
}

/// One line per method, for messages: `simhash default-3;… (short blocks), minhash minhash-1;…`.
impl fmt::Display for IndexMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(s) = &self.simhash {
            parts.push(format!("simhash {} ({} blocks)", s.version, s.block_type));
        }
        if let Some(m) = &self.minhash {
            match m.containment {
                Some(_) => parts.push(format!(
                    "minhash {} ({} layout, containment)",
                    m.version, m.layout
                )),
                None => parts.push(format!("minhash {} ({} layout)", m.version, m.layout)),
            }
        }
        if parts.is_empty() {
            parts.push("no fingerprints".into());
        }
        write!(
            f,
            "{}, hmm {}, fold {}",
            parts.join(", "),
            self.hmm,
            self.fold
        )?;
        if let Some(b) = &self.boilerplate {
            write!(f, ", boilerplate {b}")?;
        }
        if let Some(x) = &self.formula {
            write!(f, ", formula {}", x.id())?;
        }
        if let Some(g) = &self.group {
            write!(f, ", groups in `{}`", g.field)?;
            if g.order != GroupOrder::Fingerprinted {
                write!(f, " ({})", g.order)?;
            }
            if g.link != GroupLink::Sketches {
                write!(f, " linked by {}", g.link)?;
            }
        }
        if self.tracking.is_some() {
            write!(f, ", edits tracked")?;
        }
        Ok(())
    }
}

/// The documents of an index holding `meta` whose fingerprint of some method is missing or of
/// another version than the one `_meta` records: for each method held, a `must_not` `term` on
/// its version field, any of them (`bool` `should`). A document whose SimHash is current but
/// which has no MinHash yet (written before `es-init` added MinHash) matches.
pub fn stale_query(meta: &IndexMeta) -> Value {
    let mut should = Vec::new();
    if let Some(s) = &meta.simhash {
        should.push(json!({
            "bool": { "must_not": [ { "term": { &s.fields.version: &s.version } } ] }
        }));
    }
    if let Some(m) = &meta.minhash {
        should.push(json!({
            "bool": { "must_not": [ { "term": { &m.fields.version: m.stored_version() } } ] }
        }));
    }
    json!({ "bool": { "should": should, "minimum_should_match": 1 } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::{FingerprintConfig, Fingerprinter, Profile};

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

    fn both() -> IndexMeta {
        IndexMeta::default()
    }

    #[test]
    fn round_trips_through_meta_json() {
        let m = both();
        let mapping = json!({ "_meta": { META_KEY: m.to_json() }, "properties": {} });
        let back = IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).unwrap();
        assert_eq!(back, m);
        assert_eq!(
            m.to_json()["minhash"]["params"],
            "shingle=w2;n=128;sig=oph;bands=42x3"
        );
        assert_eq!(m.to_json()["simhash"]["profile"], "default");
        assert_eq!(m.default_method(), Method::MinHash);
        m.validate().unwrap();
    }

    #[test]
    fn containment_is_format_4_and_format_3_still_reads_back() {
        let m = both();
        assert!(m.has_containment());
        let j = m.to_json();
        assert_eq!(j["format"], 4);
        assert_eq!(
            j["minhash"]["containment"],
            json!({ "fields": { "minima": "minHashMinima", "distinct": "minHashDistinct" },
                    "minimum_bits": 18, "positions": 64, "agreeing": 4 })
        );
        let mapping = json!({ "_meta": { META_KEY: j }, "properties": {} });
        let back = IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).unwrap();
        assert_eq!(back, m);
        // An index recorded in format 3 reads as it was written: every minimum, 10 bits, 10
        // agreeing, and its documents' version code unchanged.
        let mut three = m.to_json();
        three["format"] = json!(3);
        three["minhash"]["containment"] = json!({ "fields": { "minima": "minHashMinima", "distinct": "minHashDistinct" }, "minimum_bits": 10 });
        let mapping = json!({ "_meta": { META_KEY: three }, "properties": {} });
        let old = IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).unwrap();
        let c = old.minhash.as_ref().unwrap().containment.as_ref().unwrap();
        assert_eq!(*c, ContainmentMeta::format_3());
        assert_eq!((c.positions(128), c.agreeing()), (128, 10));
        assert_eq!(FieldsFormat::of(&old), FieldsFormat::V3);
        assert_eq!(old.minhash.as_ref().unwrap().stored_version(), "mc28f40bf");
        assert_ne!(
            old.minhash.as_ref().unwrap().stored_version(),
            m.minhash.as_ref().unwrap().stored_version()
        );
        // A format that does not go with the containment recorded is refused, and so are
        // positions and agreeing counts the signature cannot hold.
        let mut wrong = m.to_json();
        wrong["format"] = json!(3);
        let mapping = json!({ "_meta": { META_KEY: wrong }, "properties": {} });
        assert!(IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).is_err());
        for (positions, agreeing) in [(0, 1), (129, 4), (64, 0), (64, 65)] {
            let mut bad = m.to_json();
            bad["minhash"]["containment"]["positions"] = json!(positions);
            bad["minhash"]["containment"]["agreeing"] = json!(agreeing);
            let mapping = json!({ "_meta": { META_KEY: bad }, "properties": {} });
            let e = IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).unwrap_err();
            assert!(e.to_string().contains("containment"), "{e}");
        }
        // Format 2 is format 4 without containment; a format that does not go with what is
        // recorded is refused; the full layout holds no containment.
        let two = m.clone().with_containment(false);
        assert_eq!(two.to_json()["format"], 2);
        assert!(two.to_json()["minhash"].get("containment").is_none());
        assert_ne!(
            two.minhash.as_ref().unwrap().stored_version(),
            m.minhash.as_ref().unwrap().stored_version()
        );
        let mut wrong = m.to_json();
        wrong["format"] = json!(2);
        let mapping = json!({ "_meta": { META_KEY: wrong }, "properties": {} });
        assert!(IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).is_err());
        let full = m.clone().with_layout(MinHashLayout::Full);
        assert!(!full.has_containment());
        assert_eq!(FieldsFormat::of(&full), FieldsFormat::V1);
        assert!(!full.with_containment(true).has_containment());
        assert_eq!(two.with_containment(true), m);
    }

    #[test]
    fn minima_terms_hold_the_position_and_the_lowest_bits() {
        let sig = Signature::from_values(
            (0..128u32)
                .map(|i| i.wrapping_mul(0x9E37_79B9))
                .collect::<Vec<u32>>(),
        );
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        // Format 4: the first 64 minima, 6 bits of position and 18 of the minimum in 4
        // characters; format 3: every minimum, 7 bits of position and 10 in 3.
        for (c, n, chars, bits) in [
            (ContainmentMeta::new(), 64, 4, 18),
            (ContainmentMeta::format_3(), 128, 3, 10),
        ] {
            let terms = c.minima_terms(&sig);
            assert_eq!(terms.len(), n);
            let mask = (1u64 << bits) - 1;
            for (i, t) in terms.iter().enumerate() {
                assert_eq!(t.len(), chars, "{t}");
                let key = t
                    .chars()
                    .fold(0u64, |acc, ch| acc << 6 | alphabet.find(ch).unwrap() as u64);
                assert_eq!(key >> bits, i as u64, "{t}");
                assert_eq!(key & mask, u64::from(sig.values()[i]) & mask, "{t}");
            }
            assert_eq!(c.minima_value(&sig).split(' ').count(), n);
            for (i, t) in terms.iter().enumerate() {
                let number = ContainmentMeta::term_number(t).unwrap();
                assert_eq!(number >> bits, i as u32, "{t}");
                assert_eq!(u64::from(number) & mask, u64::from(sig.values()[i]) & mask);
                assert_eq!(&ContainmentMeta::term_spelled(number.into(), chars), t);
            }
            let distinct: std::collections::HashSet<&String> = terms.iter().collect();
            assert_eq!(distinct.len(), n);
        }
    }

    #[test]
    fn versions_match_a_built_fingerprinter() {
        let m = both();
        let fp = m.fingerprinter("i").unwrap();
        assert_eq!(m.version(Method::SimHash), Some(fp.version()));
        assert_eq!(m.version(Method::MinHash), Some(fp.minhash_version()));
        m.check_fingerprinter("i", &fp).unwrap();
        let other = Fingerprinter::for_profile(Profile::Seed000);
        let e = m.check_fingerprinter("i", &other).unwrap_err().to_string();
        assert!(e.contains("default-3") && e.contains("seed000"), "{e}");
    }

    #[test]
    fn no_meta_with_blocks_is_seed000_and_without_blocks_is_uninitialised() {
        let mapping = json!({ "properties": {
            "simHashA": {"type": "keyword"}, "simHashB": {"type": "keyword"},
            "simHashC": {"type": "keyword"}, "simHashD": {"type": "keyword"} } });
        let m = IndexMeta::from_mapping("old", &mapping, &FieldNames::default()).unwrap();
        assert_eq!(m.source, MetaSource::Legacy);
        let s = m.simhash.as_ref().unwrap();
        assert_eq!(s.profile, Profile::Seed000);
        assert_eq!(s.block_type, BlockType::Keyword);
        assert!(m.minhash.is_none());
        assert_eq!(m.default_method(), Method::SimHash);
        let e = IndexMeta::from_mapping("bare", &json!({"properties": {}}), &FieldNames::default())
            .unwrap_err();
        assert!(matches!(e, EsError::NotInitialised { .. }));
    }

    #[test]
    fn common_keeps_what_every_index_agrees_on() {
        let mut per = BTreeMap::new();
        per.insert("new".to_owned(), both());
        let mut legacy = IndexMeta::legacy(FieldNames::default(), BlockType::Short);
        per.insert("old".to_owned(), legacy.clone());
        let e = IndexMeta::common(&per).unwrap_err().to_string();
        assert!(e.contains("`old`") && e.contains("`new`"), "{e}");
        let seed_both = IndexMeta::new(
            &FingerprintConfig::for_profile(Profile::Seed000),
            Methods::BOTH,
            BlockType::Short,
            FieldNames::default(),
            MinHashFieldNames::default(),
        );
        per.insert("new".to_owned(), seed_both);
        let c = IndexMeta::common(&per).unwrap();
        assert!(c.minhash.is_none());
        assert_eq!(c.simhash, legacy.simhash.take());
        assert_eq!(c.source, MetaSource::Legacy);

        // Groups are kept only where every index keeps the same field.
        let grouped = |field: &str| IndexMeta {
            group: Some(GroupMeta::named(field)),
            ..both()
        };
        let mut per = BTreeMap::new();
        per.insert("a".to_owned(), grouped("g"));
        per.insert("b".to_owned(), grouped("g"));
        assert_eq!(
            IndexMeta::common(&per).unwrap().group,
            Some(GroupMeta::named("g"))
        );
        per.insert("c".to_owned(), grouped("h"));
        assert_eq!(IndexMeta::common(&per).unwrap().group, None);
        per.insert("c".to_owned(), both());
        assert_eq!(IndexMeta::common(&per).unwrap().group, None);

        // Common minima are kept only where every index records the same list.
        let listing = |terms: &[&str]| IndexMeta {
            common_minima: Some(Arc::new(CommonMinima {
                above: 1000,
                articles: 5000,
                terms: terms.iter().map(|t| t.to_string()).collect(),
            })),
            ..both()
        };
        let mut per = BTreeMap::new();
        per.insert("a".to_owned(), listing(&["AAAA", "BBBB"]));
        per.insert("b".to_owned(), listing(&["AAAA", "BBBB"]));
        let c = IndexMeta::common(&per).unwrap().common_minima.unwrap();
        assert!(c.contains("BBBB") && !c.contains("CCCC"));
        per.insert("c".to_owned(), listing(&["AAAA"]));
        assert_eq!(IndexMeta::common(&per).unwrap().common_minima, None);
        per.insert("c".to_owned(), both());
        assert_eq!(IndexMeta::common(&per).unwrap().common_minima, None);
    }

    #[test]
    fn bad_meta_is_reported_with_the_index() {
        let mapping = json!({ "_meta": { META_KEY: { "format": 99, "hmm": true } } });
        let e = IndexMeta::from_mapping("x", &mapping, &FieldNames::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`x`") && e.contains("format 99"), "{e}");
        let mapping = json!({ "_meta": { META_KEY: { "format": 1 } } });
        assert!(IndexMeta::from_mapping("x", &mapping, &FieldNames::default()).is_err());
    }

    #[test]
    fn mapping_has_every_field_of_both_methods() {
        let m = both().mapping();
        let p = m["properties"].as_object().unwrap();
        assert_eq!(p.len(), 13);
        assert_eq!(p["minHashMinima"]["type"], "text");
        assert_eq!(p["minHashMinima"]["analyzer"], "whitespace");
        assert_eq!(p["minHashDistinct"]["type"], "integer");
        let two = both().with_containment(false).mapping();
        assert_eq!(two["properties"].as_object().unwrap().len(), 11);
        assert_eq!(p["minHashBands"]["type"], "keyword");
        assert_eq!(p["minHashSignature"]["type"], "binary");
        assert_eq!(p["simHashA"]["type"], "short");
        assert_eq!(band_term(0xab), "00000000000000ab");
    }

    #[test]
    fn minhash_fields_round_trip_and_too_short_keeps_the_version() {
        let fp = Fingerprinter::for_profile(Profile::Default);
        let text = "国家统计局今天发布了最新的经济数据，显示上个月工业生产继续保持增长，消费市场稳步恢复，就业形势总体稳定。";
        let out = fp.minhash(text);
        let sig = out.as_ref().unwrap().signature.clone();
        let params = MinHashParams::DEFAULT;
        let full = IndexMeta::default().with_layout(MinHashLayout::Full);
        let full = full.minhash.as_ref().unwrap();
        let m = minhash_fields_json(full, &out);
        let bands = m["minHashBands"].as_array().unwrap();
        assert_eq!(bands.len(), 42);
        assert_eq!(bands[0], band_term(sig.band_key(&params, 0)));
        let stored = m["minHashSignature"].as_str().unwrap();
        assert_eq!(signature_from_base64(stored).unwrap(), sig);
        let unpadded = stored.trim_end_matches('=');
        assert_eq!(signature_from_base64(unpadded).unwrap(), sig);
        assert_eq!(m["minHashVersion"], fp.minhash_version());
        assert!(m["minHashReason"].is_null());
        let short = fp.minhash("短");
        let m = minhash_fields_json(full, &short);
        assert!(m["minHashBands"].is_null() && m["minHashSignature"].is_null());
        assert_eq!(m["minHashReason"], "too_short");
        assert_eq!(m["minHashVersion"], fp.minhash_version());
        assert!(signature_from_base64("not base64!").is_none());
    }

    #[test]
    fn compact_fields_hold_short_terms_b_bit_minima_and_a_version_code() {
        let fp = Fingerprinter::for_profile(Profile::Default);
        let text = "国家统计局今天发布了最新的经济数据，显示上个月工业生产继续保持增长，消费市场稳步恢复，就业形势总体稳定。";
        let out = fp.minhash(text);
        let sig = out.as_ref().unwrap().signature.clone();
        let meta = IndexMeta::default().with_containment(false);
        let m = meta.minhash.as_ref().unwrap();
        assert_eq!(m.layout, MinHashLayout::NEW);
        assert_eq!(meta.to_json()["format"], 2);
        assert_eq!(
            meta.to_json()["minhash"]["layout"],
            json!({ "compact": { "signature_bits": 8 } })
        );
        let f = minhash_fields_json(m, &out);
        let bands = f["minHashBands"].as_array().unwrap();
        assert_eq!(bands.len(), 42);
        let key = sig.band_key(&m.params, 0);
        let first = bands[0].as_str().unwrap();
        assert_eq!(first.len(), 6);
        // The term is the key's highest 36 bits, 6 bits a character, highest first.
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let decoded = first
            .chars()
            .fold(0u64, |acc, c| acc << 6 | alphabet.find(c).unwrap() as u64);
        assert_eq!(decoded, key >> 28);
        let stored = f["minHashSignature"].as_str().unwrap();
        assert_eq!(stored.len(), 172, "128 bytes in base64");
        assert_eq!(
            m.layout.signature_from_base64(stored, 128).unwrap(),
            sig.reduced(8)
        );
        // A whole signature (written before an upgrade to the layout) reads reduced too.
        assert_eq!(
            m.layout
                .signature_from_base64(&signature_base64(&sig), 128)
                .unwrap(),
            sig.reduced(8)
        );
        assert!(m.layout.signature_from_base64(stored, 127).is_none());
        let code = f["minHashVersion"].as_str().unwrap();
        assert_eq!(code, m.stored_version());
        assert!(code.len() == 9 && code.starts_with('m'), "{code}");
        let other = MinHashMeta {
            layout: MinHashLayout::Compact { signature_bits: 4 },
            ..m.clone()
        };
        assert_ne!(
            other.stored_version(),
            code,
            "a layout change makes documents stale"
        );
        let full = MinHashMeta {
            layout: MinHashLayout::Full,
            ..m.clone()
        };
        assert_eq!(full.stored_version(), m.version);
        let short = minhash_fields_json(m, &fp.minhash("短"));
        assert_eq!(short["minHashVersion"], code);
        assert_eq!(short["minHashReason"], "too_short");
    }

    #[test]
    fn layouts_record_their_format_and_wrong_pairs_are_refused() {
        let full = IndexMeta::default().with_layout(MinHashLayout::Full);
        assert_eq!(full.to_json()["format"], 1);
        assert!(full.to_json()["minhash"].get("layout").is_none());
        let back = |v: Value| {
            IndexMeta::from_mapping(
                "i",
                &json!({ "_meta": { META_KEY: v } }),
                &FieldNames::default(),
            )
        };
        assert_eq!(back(full.to_json()).unwrap(), full);
        let compact =
            IndexMeta::default().with_layout(MinHashLayout::Compact { signature_bits: 4 });
        assert_eq!(back(compact.to_json()).unwrap(), compact);
        let mut wrong = compact.to_json();
        wrong["format"] = json!(1);
        let e = back(wrong).unwrap_err().to_string();
        assert!(e.contains("does not go with"), "{e}");
        let mut wrong = compact.to_json();
        wrong["minhash"]["layout"]["compact"]["signature_bits"] = json!(0);
        assert!(back(wrong)
            .unwrap_err()
            .to_string()
            .contains("out of range"));
        let simhash = IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default());
        assert_eq!(simhash.to_json()["format"], 1);
        let e = IndexMeta::default()
            .with_layout(MinHashLayout::Compact { signature_bits: 33 })
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("--signature-bits 33"), "{e}");
        for bad in [0u8, 29, 31] {
            assert!(IndexMeta::default()
                .with_layout(MinHashLayout::Compact {
                    signature_bits: bad
                })
                .validate()
                .is_err());
        }
    }

    proptest::proptest! {
        /// Packing keeps exactly the lowest bits of each minimum, for any width and length.
        #[test]
        fn packed_signatures_read_back_reduced(
            values in proptest::collection::vec(proptest::prelude::any::<u32>(), 1..200),
            bits in proptest::prop_oneof![1u8..=28, proptest::strategy::Just(32u8)],
        ) {
            let sig = Signature::from_values(values.clone());
            let layout = MinHashLayout::Compact { signature_bits: bits };
            let bytes = layout.signature_bytes(&sig);
            proptest::prop_assert_eq!(bytes.len(), (values.len() * usize::from(bits)).div_ceil(8));
            let back = layout.signature_from_bytes(&bytes, values.len()).unwrap();
            proptest::prop_assert_eq!(back.bits(), bits);
            proptest::prop_assert_eq!(&back, &sig.reduced(bits));
            for (b, v) in back.values().iter().zip(&values) {
                proptest::prop_assert_eq!(u64::from(*b), u64::from(*v) & ((1u64 << bits) - 1));
            }
        }
    }

    #[test]
    fn group_orders_round_trip_and_old_forms_read_as_first_fingerprinted() {
        let ordered = IndexMeta {
            group: Some(GroupMeta {
                field: "nearDupGroup".into(),
                order: GroupOrder::Earliest {
                    field: "publishDate".into(),
                },
                ..GroupMeta::default()
            }),
            ..both()
        };
        ordered.validate().unwrap();
        let j = ordered.to_json();
        assert_eq!(
            j["group"],
            json!({ "field": "nearDupGroup", "order": { "field": "publishDate" } })
        );
        let mapping = json!({ "_meta": { META_KEY: j }, "properties": {} });
        let back = IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).unwrap();
        assert_eq!(back, ordered);
        assert!(back
            .to_string()
            .ends_with("groups in `nearDupGroup` (earliest by `publishDate`)"));

        let first = IndexMeta {
            group: Some(GroupMeta::default()),
            ..both()
        };
        assert_eq!(first.to_json()["group"]["order"], "fingerprinted");
        // What neardup wrote before orders existed, and an absent `order`: the default.
        for group in [
            json!({ "field": "nearDupGroup", "order": "fingerprinted" }),
            json!({ "field": "nearDupGroup" }),
        ] {
            let mut j = first.to_json();
            j["group"] = group;
            let mapping = json!({ "_meta": { META_KEY: j }, "properties": {} });
            let back = IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).unwrap();
            assert_eq!(back, first);
            assert_eq!(back.group.unwrap().order, GroupOrder::Fingerprinted);
        }
        let mut j = first.to_json();
        j["group"]["order"] = json!("newest");
        let mapping = json!({ "_meta": { META_KEY: j }, "properties": {} });
        let e = IndexMeta::from_mapping("i", &mapping, &FieldNames::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`i`"), "{e}");

        for bad in ["", "_id", "nearDupGroup"] {
            let mut m = ordered.clone();
            m.group.as_mut().unwrap().order = GroupOrder::Earliest { field: bad.into() };
            assert!(m.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn group_links_round_trip_and_their_absence_reads_as_sketches() {
        let by_texts = IndexMeta {
            group: Some(GroupMeta {
                link: GroupLink::Texts {
                    fields: vec!["title".into(), "content".into()],
                },
                ..GroupMeta::default()
            }),
            ..both()
        };
        by_texts.validate().unwrap();
        let j = by_texts.to_json();
        assert_eq!(
            j["group"]["link"],
            json!({ "by": "texts", "fields": ["title", "content"] })
        );
        let mapping = json!({ "_meta": { META_KEY: j }, "properties": {} });
        let back = IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).unwrap();
        assert_eq!(back, by_texts);
        assert!(back
            .to_string()
            .ends_with("groups in `nearDupGroup` linked by texts of `title`, `content`"));
        // Sketches, the default, is not written: `_meta` stays what it was before links.
        let sketches = IndexMeta {
            group: Some(GroupMeta::default()),
            ..both()
        };
        let j = sketches.to_json();
        assert!(j["group"].get("link").is_none(), "{j}");
        let mapping = json!({ "_meta": { META_KEY: j }, "properties": {} });
        let back = IndexMeta::from_mapping("i", &mapping, &FieldNames::default()).unwrap();
        assert_eq!(back.group.unwrap().link, GroupLink::Sketches);
        // Texts need MinHash's candidates and at least one named field.
        let mut no_minhash = by_texts.clone();
        no_minhash.minhash = None;
        assert!(no_minhash
            .validate()
            .unwrap_err()
            .to_string()
            .contains("MinHash"));
        for fields in [vec![], vec![String::new()]] {
            let mut m = by_texts.clone();
            m.group.as_mut().unwrap().link = GroupLink::Texts { fields };
            assert!(m.validate().is_err());
        }
    }

    /// A new index links by texts where it holds MinHash, by sketches where it holds SimHash
    /// only; a writer must read every field the groups align (more is fine), and any fields
    /// do on an index linked by sketches or without groups.
    #[test]
    fn new_indices_link_by_texts_and_writers_read_what_the_groups_align() {
        assert_eq!(
            GroupLink::for_new_index(true),
            GroupLink::Texts {
                fields: vec!["title".into(), "content".into()]
            }
        );
        assert_eq!(GroupLink::for_new_index(false), GroupLink::Sketches);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let by_texts = |fields: &[&str]| IndexMeta {
            group: Some(GroupMeta {
                link: GroupLink::Texts {
                    fields: names(fields),
                },
                ..GroupMeta::default()
            }),
            ..both()
        };
        let meta = by_texts(&["title", "content"]);
        for ok in [
            &["title", "content"][..],
            &["content", "title", "summary"][..],
        ] {
            meta.check_group_text_fields("news", &names(ok)).unwrap();
        }
        for short in [&["title", "body"][..], &["content"][..], &[][..]] {
            let e = meta
                .check_group_text_fields("news", &names(short))
                .unwrap_err();
            assert!(matches!(e, EsError::GroupTextFields { .. }), "{e:?}");
            let msg = e.to_string();
            assert!(
                msg.contains("index `news`")
                    && msg.contains("texts of title, content")
                    && msg.contains("--group-text-field"),
                "{msg}"
            );
        }
        by_texts(&["body"])
            .check_group_text_fields("news", &names(&["title", "body"]))
            .unwrap();
        let sketches = IndexMeta {
            group: Some(GroupMeta::default()),
            ..both()
        };
        for meta in [sketches, both()] {
            meta.check_group_text_fields("news", &names(&["body"]))
                .unwrap();
        }
    }

    #[test]
    fn clashing_names_across_methods_are_refused() {
        let mut m = both();
        m.minhash.as_mut().unwrap().fields.version = "simHashVersion".into();
        assert!(m.validate().unwrap_err().to_string().contains("twice"));
    }

    #[test]
    fn the_tracking_pipeline_clears_the_versions_of_the_methods_held() {
        let meta = IndexMeta::default();
        let p = tracking_pipeline(&meta, None);
        let procs = p["processors"].as_array().unwrap();
        assert_eq!(procs.len(), 1);
        let script = &procs[0]["script"];
        assert_eq!(script["lang"], "painless");
        assert_eq!(script["params"]["marker"], TRACKING_MARKER);
        assert_eq!(
            script["params"]["versions"],
            json!(["simHashVersion", "minHashVersion"])
        );

        // Renamed fields, one method: its version field only.
        let names = FieldNames {
            version: "fpVersion".into(),
            ..FieldNames::default()
        };
        let simhash = IndexMeta::simhash(Profile::default(), BlockType::Short, names);
        let p = tracking_pipeline(&simhash, Some("users-final"));
        let procs = p["processors"].as_array().unwrap();
        assert_eq!(procs.len(), 2);
        // The user's final pipeline runs first, then neardup's step.
        assert_eq!(procs[0], json!({ "pipeline": { "name": "users-final" } }));
        assert_eq!(
            procs[1]["script"]["params"]["versions"],
            json!(["fpVersion"])
        );
        assert_eq!(tracking_pipeline_name("news"), "neardup-tracking-news");
    }

    #[test]
    fn own_writes_carry_the_marker_only_where_edits_are_tracked() {
        let mut meta = IndexMeta::default();
        let mut doc = Map::new();
        meta.mark_own_write(&mut doc, false);
        meta.mark_own_write(&mut doc, true);
        assert!(doc.is_empty());
        meta.tracking = Some(TrackingMeta {
            pipeline: tracking_pipeline_name("news"),
            chained: None,
            bulk_updates: false,
        });
        // A bulk's update actions bypass the pipeline here: no marker (it would be stored).
        meta.mark_own_write(&mut doc, true);
        assert!(doc.is_empty());
        meta.mark_own_write(&mut doc, false);
        assert_eq!(Value::Object(doc.clone()), json!({ TRACKING_MARKER: true }));
        meta.tracking.as_mut().unwrap().bulk_updates = true;
        let mut update = Map::new();
        meta.mark_own_write(&mut update, true);
        assert_eq!(update, doc);
    }

    #[test]
    fn tracking_is_recorded_in_meta_and_read_back() {
        let untracked = IndexMeta::default();
        assert!(untracked.to_json().get("tracking").is_none());
        let meta = IndexMeta {
            tracking: Some(TrackingMeta {
                pipeline: "neardup-tracking-news".into(),
                chained: Some("users-final".into()),
                bulk_updates: false,
            }),
            ..IndexMeta::default()
        };
        let j = meta.to_json();
        assert_eq!(
            j["tracking"],
            json!({ "pipeline": "neardup-tracking-news", "chained": "users-final", "bulk_updates": false })
        );
        let mapping = json!({ "_meta": { META_KEY: j } });
        let read = IndexMeta::from_mapping("news", &mapping, &FieldNames::default()).unwrap();
        assert_eq!(read, meta);
        assert!(read.to_string().ends_with(", edits tracked"), "{read}");

        // Indices written together: the marker goes where any of them tracks edits.
        let both = BTreeMap::from([("a".to_owned(), untracked), ("b".to_owned(), meta.clone())]);
        assert_eq!(IndexMeta::common(&both).unwrap().tracking, meta.tracking);
        assert_eq!(IndexMeta::union(&both).unwrap().tracking, meta.tracking);
    }

    #[test]
    fn stale_means_any_held_method_missing_or_of_another_version() {
        let both = IndexMeta::default();
        let v = Fingerprinter::versions(&FingerprintConfig::default());
        let q = stale_query(&both);
        assert_eq!(q["bool"]["minimum_should_match"], 1);
        assert_eq!(
            q["bool"]["should"],
            json!([
                { "bool": { "must_not": [ { "term": { "simHashVersion": v.simhash } } ] } },
                { "bool": { "must_not": [ { "term": { "minHashVersion": both.minhash.as_ref().unwrap().stored_version() } } ] } },
            ])
        );
        let full = IndexMeta::default().with_layout(crate::MinHashLayout::Full);
        assert_eq!(
            stale_query(&full)["bool"]["should"][1],
            json!({ "bool": { "must_not": [ { "term": { "minHashVersion": v.minhash } } ] } })
        );
        let seed = IndexMeta::legacy(FieldNames::default(), BlockType::Short);
        let seed_version =
            Fingerprinter::versions(&FingerprintConfig::for_profile(Profile::Seed000));
        assert_eq!(
            stale_query(&seed)["bool"]["should"],
            json!([
                { "bool": { "must_not": [ { "term": { "simHashVersion": seed_version.simhash } } ] } },
            ])
        );
    }
}
