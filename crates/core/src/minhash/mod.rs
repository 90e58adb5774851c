//! MinHash signatures of word-shingle sets: estimated Jaccard similarity and LSH bands.
//!
//! An article becomes the set of its **shingles**: runs of `shingle` adjacent kept words (the
//! same segmentation and stop-word filter as SimHash), taken within each field. Each shingle
//! is hashed once to 64 bits (xxh3 of its word hashes). A **signature** of `hashes` 32-bit
//! minima summarises the set; the share of positions where two signatures agree estimates
//! the sets' Jaccard similarity |A ∩ B| / |A ∪ B|.
//!
//! Two ways to make the minima are implemented; the signature's [`Scheme`] is part of the
//! version, and `docs/evaluation.md` has the measurements that chose the default:
//! - [`Scheme::Oph`]: one-permutation hashing with optimal densification (Shrivastava, ICML
//!   2017). The shingle hash picks one of `hashes` bins by its high bits and competes for that
//!   bin's minimum with its low bits; bins no shingle fell into borrow the value of a
//!   non-empty bin chosen by a fixed probe sequence. Cost: one step per shingle, plus one per
//!   bin.
//! - [`Scheme::Permutations`]: `hashes` multiply-shift permutations of the shingle hash, the
//!   textbook MinHash. Cost: `hashes` steps per shingle.
//!
//! **LSH.** A signature is cut into `bands` bands of `rows` values; each band is hashed to a
//! 64-bit key. Two articles with Jaccard `s` share at least one band key with probability
//! `1 − (1 − s^rows)^bands`, so an index of band keys finds near-duplicates by lookup; a
//! candidate is then verified by its estimated Jaccard. [`MinHashParams::DEFAULT`] is tuned
//! for the default threshold.
//!
//! Everything here is deterministic across platforms and releases: fixed seeds, explicit
//! little-endian byte orders, integer arithmetic only. Signatures are stored in indices for
//! years; `tests/it/stability.rs` pins them.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// The default MinHash threshold: pairs whose estimated Jaccard similarity of word shingles
/// is at least this are near-duplicates (see `docs/evaluation.md`).
pub const DEFAULT_THRESHOLD: Threshold = Threshold(0.3);

/// Estimated similarities are multiples of 1 / hashes; a threshold such as 0.3 is compared
/// with this slack so that 38/128 vs 0.296875… rounding never decides.
pub const SIMILARITY_EPSILON: f64 = 1e-9;

/// A MinHash threshold: the smallest estimated Jaccard similarity that counts as a
/// near-duplicate, above 0 and at most 1. The one place that range is checked, and the one
/// comparison of a similarity with a threshold ([`Threshold::admits`]).
#[derive(Copy, Clone, Debug, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Threshold(f64);

impl Threshold {
    /// `t` if 0 < t ≤ 1, else [`crate::Error::ThresholdOutOfRange`].
    pub fn new(t: f64) -> crate::Result<Threshold> {
        if t > 0.0 && t <= 1.0 {
            Ok(Threshold(t))
        } else {
            Err(crate::Error::ThresholdOutOfRange(t))
        }
    }

    /// The threshold as a number.
    pub fn get(self) -> f64 {
        self.0
    }

    /// Whether an estimated similarity reaches the threshold (with [`SIMILARITY_EPSILON`]).
    pub fn admits(self, similarity: f64) -> bool {
        similarity >= self.0 - SIMILARITY_EPSILON
    }
}

impl Default for Threshold {
    fn default() -> Threshold {
        DEFAULT_THRESHOLD
    }
}

impl TryFrom<f64> for Threshold {
    type Error = crate::Error;
    fn try_from(t: f64) -> crate::Result<Threshold> {
        Threshold::new(t)
    }
}

impl std::str::FromStr for Threshold {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Threshold> {
        let t = s
            .trim()
            .parse::<f64>()
            .map_err(|_| crate::Error::ThresholdNotANumber(s.to_owned()))?;
        Threshold::new(t)
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Threshold, D::Error> {
        Threshold::new(f64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Seed of the shingle hash. Part of the version.
pub const SHINGLE_SEED: u64 = 0x6e65_6172_6475_7031; // "neardup1"

/// How the minima are made. See the module docs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// One-permutation hashing with optimal densification.
    Oph,
    /// `hashes` independent multiply-shift permutations.
    Permutations,
}

/// The parameters that fix a signature's values and its band keys.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MinHashParams {
    /// Words per shingle (1 = single words).
    pub shingle: u8,
    /// Minima per signature.
    pub hashes: u16,
    /// LSH bands; `bands × rows ≤ hashes`.
    pub bands: u16,
    /// Signature values per band.
    pub rows: u16,
    pub scheme: Scheme,
}

impl MinHashParams {
    /// The default: word bigrams, 128 minima by one-permutation hashing, 42 bands of 3 rows
    /// (see `docs/evaluation.md` for the measurements behind each choice).
    pub const DEFAULT: MinHashParams = MinHashParams {
        shingle: 2,
        hashes: 128,
        bands: 42,
        rows: 3,
        scheme: Scheme::Oph,
    };

    /// Checks the parameters: at least one hash, shingle and row, and bands that fit in the
    /// signature (at most 255 bands, so a band number fits a byte).
    pub fn validate(&self) -> Result<(), String> {
        if self.shingle == 0 || self.hashes == 0 || self.rows == 0 || self.bands == 0 {
            return Err("shingle, hashes, bands and rows must all be at least 1".into());
        }
        if self.bands > 255 {
            return Err(format!("{} bands: at most 255", self.bands));
        }
        if u32::from(self.bands) * u32::from(self.rows) > u32::from(self.hashes) {
            return Err(format!(
                "{} bands × {} rows need {} values, but a signature has {}",
                self.bands,
                self.rows,
                u32::from(self.bands) * u32::from(self.rows),
                self.hashes
            ));
        }
        Ok(())
    }

    /// Probability that two sets with Jaccard `s` share at least one band:
    /// `1 − (1 − s^rows)^bands`.
    pub fn candidate_probability(&self, s: f64) -> f64 {
        1.0 - (1.0 - s.powi(i32::from(self.rows))).powi(i32::from(self.bands))
    }
}

impl Default for MinHashParams {
    fn default() -> Self {
        MinHashParams::DEFAULT
    }
}

/// The parameters' part of a version, e.g. `shingle=w2;n=128;sig=oph;bands=42x3`.
impl fmt::Display for MinHashParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Oph => "oph",
            Scheme::Permutations => "perm",
        };
        write!(
            f,
            "shingle=w{};n={};sig={scheme};bands={}x{}",
            self.shingle, self.hashes, self.bands, self.rows
        )
    }
}

/// Parses the form [`fmt::Display`] writes, e.g. `shingle=w2;n=128;sig=oph;bands=42x3`; keys
/// left out keep their default, so `bands=64x2` is a valid specification.
impl std::str::FromStr for MinHashParams {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = MinHashParams::DEFAULT;
        let bad = |part: &str| {
            format!(
                "bad MinHash parameter `{part}`: expected shingle=wN, n=N, sig=oph|perm or bands=BxR, separated by `;` (e.g. `shingle=w2;n=128;sig=oph;bands=42x3`)"
            )
        };
        for part in s.split([';', ',']).map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| bad(part))?;
            match key {
                "shingle" => {
                    p.shingle = value
                        .trim_start_matches('w')
                        .parse()
                        .map_err(|_| bad(part))?
                }
                "n" => p.hashes = value.parse().map_err(|_| bad(part))?,
                "sig" => {
                    p.scheme = match value {
                        "oph" => Scheme::Oph,
                        "perm" => Scheme::Permutations,
                        _ => return Err(bad(part)),
                    }
                }
                "bands" => {
                    let (b, r) = value.split_once('x').ok_or_else(|| bad(part))?;
                    p.bands = b.parse().map_err(|_| bad(part))?;
                    p.rows = r.parse().map_err(|_| bad(part))?;
                }
                _ => return Err(bad(part)),
            }
        }
        p.validate()?;
        Ok(p)
    }
}

/// A MinHash signature: `hashes` 32-bit minima, or only their lowest `bits` bits (a b-bit
/// signature, Li & König, "b-Bit Minwise Hashing", WWW 2010), as Elasticsearch's compact layout
/// stores them ([`Signature::reduced`]).
///
/// A signature made from text also carries the number of **distinct** shingles of its set
/// ([`Signature::distinct`]), which turns the estimated Jaccard similarity into an estimated
/// containment ([`crate::relation::containment`]). It is data carried beside the minima, not
/// part of them: two signatures are equal (and hash alike) when their minima and bits are.
#[derive(Clone)]
pub struct Signature {
    values: Arc<[u32]>,
    /// How many low bits of each minimum are kept: [`Signature::FULL_BITS`], or fewer.
    bits: u8,
    /// Distinct shingles of the set, when known (not read back from Elasticsearch, nor from
    /// a store written before it was kept).
    distinct: Option<u32>,
}

impl PartialEq for Signature {
    fn eq(&self, other: &Signature) -> bool {
        self.bits == other.bits && self.values == other.values
    }
}

impl Eq for Signature {}

impl std::hash::Hash for Signature {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.values.hash(state);
        self.bits.hash(state);
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Signature[{}; {:08x}…; {} bits; {:?} distinct]",
            self.values.len(),
            self.values.first().copied().unwrap_or(0),
            self.bits,
            self.distinct
        )
    }
}

impl Signature {
    /// The bits of a whole minimum.
    pub const FULL_BITS: u8 = 32;

    /// A signature from its values (e.g. read back from a store).
    pub fn from_values(values: impl Into<Arc<[u32]>>) -> Signature {
        Signature {
            values: values.into(),
            bits: Self::FULL_BITS,
            distinct: None,
        }
    }

    /// The signature carrying `distinct`, the number of distinct shingles of its set (e.g.
    /// read back from a store that keeps it).
    pub fn with_distinct(mut self, distinct: u32) -> Signature {
        self.distinct = Some(distinct);
        self
    }

    /// The number of distinct shingles of the signature's set, when known: always for a
    /// signature made from text ([`SignatureBuilder::finish`]).
    pub fn distinct(&self) -> Option<u32> {
        self.distinct
    }

    /// A b-bit signature from its values, each below `2^bits` (higher bits are dropped);
    /// `bits` from 1 to 32.
    pub fn from_reduced_values(values: impl Into<Arc<[u32]>>, bits: u8) -> Signature {
        assert!(
            (1..=Self::FULL_BITS).contains(&bits),
            "a signature keeps 1 to 32 bits of each minimum, not {bits}"
        );
        let values: Arc<[u32]> = values.into();
        let mask = Self::mask(bits);
        Signature {
            values: values.iter().map(|v| v & mask).collect(),
            bits,
            distinct: None,
        }
    }

    /// The lowest `bits` bits of each minimum (the signature itself when it keeps no more):
    /// what Elasticsearch's compact layout stores.
    pub fn reduced(&self, bits: u8) -> Signature {
        if bits >= self.bits {
            return self.clone();
        }
        Signature {
            distinct: self.distinct,
            ..Signature::from_reduced_values(self.values.clone(), bits)
        }
    }

    fn mask(bits: u8) -> u32 {
        if bits >= Self::FULL_BITS {
            u32::MAX
        } else {
            (1u32 << bits) - 1
        }
    }

    /// The minima (only their lowest [`Signature::bits`] bits for a b-bit signature).
    pub fn values(&self) -> &[u32] {
        &self.values
    }

    /// How many low bits of each minimum the signature keeps: 32 for a whole signature.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// Whether the signature keeps whole minima (it can make band keys).
    pub fn is_full(&self) -> bool {
        self.bits == Self::FULL_BITS
    }

    /// Number of minima.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the signature has no value (never true for a signature made from text).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Number of positions where the two signatures agree, on the bits both keep.
    #[inline]
    pub fn agreements(&self, other: &Signature) -> u32 {
        let mask = Self::mask(self.bits.min(other.bits));
        self.values
            .iter()
            .zip(other.values.iter())
            .map(|(a, b)| u32::from((a ^ b) & mask == 0))
            .sum()
    }

    /// How the minima of two whole signatures of one length compare, position by position,
    /// over the positions where both hold a minimum of their own bin; `None` when either is
    /// a b-bit signature (its lowest bits keep no order) or the lengths differ.
    ///
    /// A value a signature holds at two positions was copied there by densification (an
    /// empty bin borrows a filled one's minimum), and which of them is its own cannot be
    /// told from the values: such positions are left out (and so, by chance about once in
    /// 2^32, are two bins whose minima are equal). Where the minimum of A
    /// is the smaller, A holds a shingle B lacks; see [`crate::relation`] for the
    /// containment this tells.
    pub fn minima_order(&self, other: &Signature) -> Option<MinimaOrder> {
        if !self.is_full() || !other.is_full() || self.values.len() != other.values.len() {
            return None;
        }
        let (mine, theirs) = (self.held_once(), other.held_once());
        let mut order = MinimaOrder::default();
        for (i, (x, y)) in self.values.iter().zip(other.values.iter()).enumerate() {
            if !(mine[i] && theirs[i]) {
                continue;
            }
            match x.cmp(y) {
                std::cmp::Ordering::Equal => order.equal += 1,
                std::cmp::Ordering::Less => order.less += 1,
                std::cmp::Ordering::Greater => order.greater += 1,
            }
        }
        Some(order)
    }

    /// For each position, whether its value is held at no other position.
    fn held_once(&self) -> Vec<bool> {
        let mut sorted = self.values.to_vec();
        sorted.sort_unstable();
        self.values
            .iter()
            .map(|v| {
                let first = sorted.partition_point(|w| w < v);
                sorted.get(first + 1) != Some(v)
            })
            .collect()
    }

    /// Estimated Jaccard similarity. Of two whole signatures: the share of agreeing
    /// positions. When either keeps only `b < 32` bits, both are compared on their lowest
    /// `b` bits, where unrelated minima agree by chance with probability `C = 2^-b`: the
    /// estimate is then `(P − C) / (1 − C)`, at least 0, with `P` the share agreeing (Li &
    /// König). Signatures of different lengths are not comparable and give 0.
    pub fn similarity(&self, other: &Signature) -> f64 {
        if self.values.len() != other.values.len() || self.values.is_empty() {
            return 0.0;
        }
        let p = f64::from(self.agreements(other)) / self.values.len() as f64;
        let bits = self.bits.min(other.bits);
        if bits >= Self::FULL_BITS {
            return p;
        }
        let chance = 1.0 / f64::from(1u32 << bits);
        ((p - chance) / (1.0 - chance)).max(0.0)
    }

    /// The signature as little-endian bytes (4 per value), the stored form.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// Inverse of [`Signature::to_le_bytes`]; `None` if the length is not a multiple of 4.
    pub fn from_le_bytes(bytes: &[u8]) -> Option<Signature> {
        if !bytes.len().is_multiple_of(4) {
            return None;
        }
        Some(Signature::from_values(
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Arc<[u32]>>(),
        ))
    }

    /// The LSH band keys under `params`, band 0 first (see [`Signature::band_key`]). Only a
    /// whole signature has the right ones: a b-bit signature's are of its reduced values.
    pub fn band_keys(&self, params: &MinHashParams) -> Vec<u64> {
        let mut buf = Vec::with_capacity(2 + 4 * usize::from(params.rows));
        (0..usize::from(params.bands))
            .map(|band| self.band_key_with(params, band, &mut buf))
            .collect()
    }

    /// The key of one band under `params`: xxh3 of the band number and its `rows` values,
    /// little-endian.
    pub fn band_key(&self, params: &MinHashParams, band: usize) -> u64 {
        self.band_key_with(params, band, &mut Vec::new())
    }

    fn band_key_with(&self, params: &MinHashParams, band: usize, buf: &mut Vec<u8>) -> u64 {
        let rows = usize::from(params.rows);
        buf.clear();
        buf.extend_from_slice(&(band as u16).to_le_bytes());
        for v in &self.values[band * rows..(band + 1) * rows] {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        xxh3_64(buf)
    }
}

/// Makes signatures under one set of [`MinHashParams`]. Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct MinHasher {
    params: MinHashParams,
    /// Multiplier (odd) and offset of each permutation ([`Scheme::Permutations`] only).
    perms: Arc<[(u64, u64)]>,
    /// For each bin, the probe sequence used to fill it when empty ([`Scheme::Oph`]): fixed
    /// per bin, so two documents with the same non-empty bins borrow from the same bins.
    probes: Arc<[Vec<u16>]>,
}

/// Enough probes that an empty bin finds a non-empty one unless almost all are empty; past
/// them, the bins are walked in order.
const PROBES_PER_BIN: usize = 32;

/// How the minima of two whole signatures compare ([`Signature::minima_order`]): counts of
/// positions, read from the first signature's side.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct MinimaOrder {
    /// Both hold the same minimum: a shingle of both sets.
    pub equal: u32,
    /// The first signature's minimum is the smaller: a shingle of the first set only.
    pub less: u32,
    /// The other's minimum is the smaller: a shingle of the other set only.
    pub greater: u32,
}

impl MinHasher {
    /// A hasher for `params` (which must pass [`MinHashParams::validate`]).
    pub fn new(params: MinHashParams) -> MinHasher {
        let n = usize::from(params.hashes.max(1));
        let mut rng = SplitMix64(0x9e37_79b9_7f4a_7c15);
        let perms = match params.scheme {
            Scheme::Permutations => (0..n).map(|_| (rng.next() | 1, rng.next())).collect(),
            Scheme::Oph => Vec::new(),
        }
        .into();
        let probes = match params.scheme {
            Scheme::Oph => (0..n)
                .map(|_| {
                    (0..PROBES_PER_BIN)
                        .map(|_| reduce(rng.next(), n) as u16)
                        .collect()
                })
                .collect(),
            Scheme::Permutations => Vec::new(),
        }
        .into();
        MinHasher {
            params,
            perms,
            probes,
        }
    }

    pub fn params(&self) -> &MinHashParams {
        &self.params
    }

    /// A fresh accumulator for one document.
    pub fn builder(&self) -> SignatureBuilder<'_> {
        SignatureBuilder {
            hasher: self,
            mins: vec![u64::MAX; usize::from(self.params.hashes)],
            window: Vec::with_capacity(usize::from(self.params.shingle)),
            bytes: Vec::with_capacity(8 * usize::from(self.params.shingle)),
            field_words: 0,
            shingles: 0,
            hashes: Vec::new(),
        }
    }

    /// The signature of word hashes ([`crate::hashing::word_hash`]) given field by field;
    /// `None` when there is no word at all.
    pub fn signature_of_hashes<F: AsRef<[u64]>>(&self, fields: &[F]) -> Option<Signature> {
        let mut b = self.builder();
        for f in fields {
            for &h in f.as_ref() {
                b.add_word(h);
            }
            b.end_field();
        }
        b.finish()
    }

    fn add_shingle(&self, mins: &mut [u64], x: u64) {
        match self.params.scheme {
            Scheme::Oph => {
                let bin = reduce(x, mins.len());
                let v = u64::from(x as u32);
                if v < mins[bin] {
                    mins[bin] = v;
                }
            }
            Scheme::Permutations => {
                for (m, &(a, b)) in mins.iter_mut().zip(self.perms.iter()) {
                    let v = a.wrapping_mul(x).wrapping_add(b) >> 32;
                    *m = (*m).min(v);
                }
            }
        }
    }

    fn finish(&self, mins: &[u64], distinct: u32) -> Signature {
        let sig = match self.params.scheme {
            Scheme::Permutations => {
                Signature::from_values(mins.iter().map(|&m| m as u32).collect::<Arc<[u32]>>())
            }
            Scheme::Oph => {
                let n = mins.len();
                let filled = |i: usize| mins[i] != u64::MAX;
                Signature::from_values(
                    (0..n)
                        .map(|bin| {
                            if filled(bin) {
                                return mins[bin] as u32;
                            }
                            let from = self.probes[bin]
                                .iter()
                                .map(|&p| usize::from(p))
                                .find(|&p| filled(p))
                                .or_else(|| (1..n).map(|d| (bin + d) % n).find(|&p| filled(p)))
                                .expect("a document with a shingle has a non-empty bin");
                            mins[from] as u32
                        })
                        .collect::<Arc<[u32]>>(),
                )
            }
        };
        sig.with_distinct(distinct)
    }
}

/// Accumulates one document's shingles; see [`MinHasher::builder`].
pub struct SignatureBuilder<'a> {
    hasher: &'a MinHasher,
    mins: Vec<u64>,
    /// The last `shingle` word hashes of this field.
    window: Vec<u64>,
    /// The window as little-endian bytes, the input of the shingle hash (reused).
    bytes: Vec<u8>,
    /// Words seen in this field.
    field_words: usize,
    shingles: u64,
    /// Every shingle hash added, to count the distinct ones at the end.
    hashes: Vec<u64>,
}

impl SignatureBuilder<'_> {
    /// Adds the next kept word of the current field, by its word hash.
    #[inline]
    pub fn add_word(&mut self, h: u64) {
        let n = usize::from(self.hasher.params.shingle);
        if self.window.len() == n {
            self.window.remove(0);
        }
        self.window.push(h);
        self.field_words += 1;
        if self.window.len() == n {
            self.emit();
        }
    }

    /// Ends a field: shingles do not cross fields. A field shorter than one shingle counts
    /// as one shingle of all its words.
    pub fn end_field(&mut self) {
        if self.field_words > 0 && self.field_words < usize::from(self.hasher.params.shingle) {
            self.emit();
        }
        self.window.clear();
        self.field_words = 0;
    }

    fn emit(&mut self) {
        self.bytes.clear();
        for h in &self.window {
            self.bytes.extend_from_slice(&h.to_le_bytes());
        }
        let x = xxh3_64_with_seed(&self.bytes, SHINGLE_SEED);
        self.hasher.add_shingle(&mut self.mins, x);
        self.hashes.push(x);
        self.shingles += 1;
    }

    /// Shingles added so far (with repeats).
    pub fn shingles(&self) -> u64 {
        self.shingles
    }

    /// The signature, carrying its number of distinct shingles (distinct 64-bit shingle
    /// hashes, at most `u32::MAX`), or `None` if no shingle was added. Ends the current field
    /// first.
    pub fn finish(mut self) -> Option<Signature> {
        self.end_field();
        if self.shingles == 0 {
            return None;
        }
        self.hashes.sort_unstable();
        self.hashes.dedup();
        let distinct = u32::try_from(self.hashes.len()).unwrap_or(u32::MAX);
        Some(self.hasher.finish(&self.mins, distinct))
    }
}

/// Maps a 64-bit hash to `0..n` by its high bits (Lemire's multiply-shift reduction).
#[inline]
fn reduce(x: u64, n: usize) -> usize {
    ((u128::from(x) * n as u128) >> 64) as usize
}

/// splitmix64: fixed, portable parameters for the permutations and probe sequences.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(range: std::ops::Range<u64>) -> Vec<u64> {
        range.map(|i| xxh3_64(&i.to_le_bytes())).collect()
    }

    fn both() -> [MinHashParams; 2] {
        let oph = MinHashParams {
            shingle: 1,
            hashes: 256,
            bands: 64,
            rows: 4,
            scheme: Scheme::Oph,
        };
        [
            oph,
            MinHashParams {
                scheme: Scheme::Permutations,
                ..oph
            },
        ]
    }

    #[test]
    fn identical_sets_agree_everywhere_and_disjoint_ones_almost_nowhere() {
        for p in both() {
            let mh = MinHasher::new(p);
            let a = mh.signature_of_hashes(&[words(0..300)]).unwrap();
            let a2 = mh.signature_of_hashes(&[words(0..300)]).unwrap();
            let b = mh.signature_of_hashes(&[words(1000..1300)]).unwrap();
            assert_eq!(a.similarity(&a2), 1.0);
            assert!(
                a.similarity(&b) < 0.03,
                "{:?}: {}",
                p.scheme,
                a.similarity(&b)
            );
        }
    }

    #[test]
    fn estimate_is_close_to_jaccard() {
        for p in both() {
            let mh = MinHasher::new(p);
            // 300 and 300 words sharing 200: Jaccard 200 / 400 = 0.5.
            let a = mh.signature_of_hashes(&[words(0..300)]).unwrap();
            let b = mh.signature_of_hashes(&[words(100..400)]).unwrap();
            let j = a.similarity(&b);
            assert!((j - 0.5).abs() < 0.1, "{:?}: {j}", p.scheme);
        }
    }

    #[test]
    fn short_documents_are_densified_consistently() {
        let mh = MinHasher::new(MinHashParams::DEFAULT);
        // Three bigrams for 128 bins: most bins borrow, and equal sets still agree fully.
        let a = mh.signature_of_hashes(&[words(0..4)]).unwrap();
        let b = mh.signature_of_hashes(&[words(0..4)]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 128);
        let distinct: std::collections::HashSet<u32> = a.values().iter().copied().collect();
        assert!(distinct.len() <= 3, "{distinct:?}");
    }

    #[test]
    fn shingles_stay_within_fields_and_short_fields_count() {
        let mh = MinHasher::new(MinHashParams::DEFAULT);
        let mut b = mh.builder();
        for h in words(0..3) {
            b.add_word(h);
        }
        b.end_field();
        b.add_word(7);
        b.end_field();
        // Two bigrams in the first field, one single-word shingle for the second.
        assert_eq!(b.shingles(), 3);
        assert_eq!(b.finish().unwrap().distinct(), Some(3));
        assert!(mh.builder().finish().is_none());
    }

    #[test]
    fn distinct_counts_each_shingle_once_and_is_not_part_of_equality() {
        let mh = MinHasher::new(MinHashParams::DEFAULT);
        // 0 1 2 0 1 2 0 1: bigrams 01 12 20 01 12 20 01, three distinct.
        let text: Vec<u64> = words(0..3).into_iter().cycle().take(8).collect();
        let sig = mh.signature_of_hashes(&[text]).unwrap();
        assert_eq!(sig.distinct(), Some(3));
        assert_eq!(sig.reduced(8).distinct(), Some(3));
        let bare = Signature::from_values(sig.values().to_vec());
        assert_eq!(bare.distinct(), None);
        assert_eq!(bare, sig);
        assert_eq!(bare.with_distinct(3).distinct(), Some(3));
    }

    #[test]
    fn bytes_round_trip_and_band_keys_depend_on_band_and_values() {
        let mh = MinHasher::new(MinHashParams::DEFAULT);
        let s = mh.signature_of_hashes(&[words(0..50)]).unwrap();
        assert_eq!(Signature::from_le_bytes(&s.to_le_bytes()).unwrap(), s);
        assert!(Signature::from_le_bytes(&[1, 2, 3]).is_none());
        let keys = s.band_keys(&MinHashParams::DEFAULT);
        assert_eq!(keys.len(), 42);
        for (band, &key) in keys.iter().enumerate() {
            assert_eq!(
                s.band_key(&MinHashParams::DEFAULT, band),
                key,
                "band {band}"
            );
        }
        let same = Signature::from_values(vec![5u32; 128]).band_keys(&MinHashParams::DEFAULT);
        assert_ne!(same[0], same[1], "equal values in different bands differ");
    }

    #[test]
    fn params_are_checked() {
        assert!(MinHashParams::DEFAULT.validate().is_ok());
        let too_many = MinHashParams {
            bands: 43,
            ..MinHashParams::DEFAULT
        };
        assert!(too_many.validate().unwrap_err().contains("need 129 values"));
        let text = MinHashParams::DEFAULT.to_string();
        assert_eq!(text, "shingle=w2;n=128;sig=oph;bands=42x3");
        assert_eq!(
            text.parse::<MinHashParams>().unwrap(),
            MinHashParams::DEFAULT
        );
        let p: MinHashParams = "bands=64x2;sig=perm".parse().unwrap();
        assert_eq!((p.bands, p.rows, p.scheme), (64, 2, Scheme::Permutations));
        assert!("bands=64".parse::<MinHashParams>().is_err());
        assert!("n=64"
            .parse::<MinHashParams>()
            .unwrap_err()
            .contains("42 bands × 3 rows need 126 values, but a signature has 64"));
    }
}
