//! The `default` profile's weights: term frequency × inverse document frequency, with the IDF
//! table of jieba, and xxh3 word hashes.

use std::collections::HashMap;
use std::io::Read;
use std::sync::OnceLock;

use crate::hashing::{word_hash, BuildIdentity};
use crate::simhash::{Folder, SimHash};

use super::TooShort;

/// Identifies the IDF table in fingerprint versions; bump when `data/idf.txt.gz` changes.
pub const IDF_ID: &str = "idf-jieba-0.11";

static IDF_GZ: &[u8] = include_bytes!("../../data/idf.txt.gz");

/// The IDF table, keyed by word hash, with the median IDF for words it does not know (jieba's
/// own rule).
pub struct Idf {
    table: HashMap<u64, f32, BuildIdentity>,
    median: f32,
}

impl Idf {
    /// The table shipped in the crate, parsed once per process.
    pub fn shared() -> &'static Idf {
        static IDF: OnceLock<Idf> = OnceLock::new();
        IDF.get_or_init(|| {
            let mut text = String::new();
            flate2::read::GzDecoder::new(IDF_GZ)
                .read_to_string(&mut text)
                .expect("the IDF table compiled into neardup is valid gzip UTF-8");
            Idf::parse(&text)
        })
    }

    fn parse(text: &str) -> Idf {
        let mut table = HashMap::with_capacity_and_hasher(360_000, BuildIdentity);
        let mut values = Vec::with_capacity(360_000);
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            if let (Some(w), Some(v)) = (parts.next(), parts.next()) {
                if let Ok(v) = v.parse::<f32>() {
                    table.insert(word_hash(w), v);
                    values.push(v);
                }
            }
        }
        let mid = values.len().saturating_sub(1) / 2;
        let median = if values.is_empty() {
            1.0
        } else {
            *values.select_nth_unstable_by(mid, f32::total_cmp).1
        };
        Idf { table, median }
    }

    /// IDF of the word with hash `h` (see [`word_hash`]), or the median for unknown words.
    pub fn get(&self, h: u64) -> f32 {
        self.table.get(&h).copied().unwrap_or(self.median)
    }
}

/// Thresholds below which a text gets no fingerprint.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// Fewer distinct words than this: too short.
    pub min_words: usize,
    /// One word carrying at least this share of the total weight: the fingerprint would be
    /// little more than that word's hash.
    pub max_share: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_words: 8,
            max_share: 1.0 / 3.0,
        }
    }
}

/// Running state of one TF-IDF fingerprint: term frequencies keyed by word hash, so each
/// token costs one hash and one map probe, and each distinct word one IDF lookup.
pub struct TfIdf<'a> {
    idf: &'a Idf,
    terms: HashMap<u64, (u32, f32), BuildIdentity>,
}

impl<'a> TfIdf<'a> {
    pub fn new(idf: &'a Idf) -> Self {
        TfIdf {
            idf,
            terms: HashMap::with_capacity_and_hasher(512, BuildIdentity),
        }
    }

    /// Counts one occurrence of the word with hash `h` (see [`word_hash`]).
    #[inline]
    pub fn add(&mut self, h: u64) {
        let idf = self.idf;
        self.terms.entry(h).or_insert_with(|| (0, idf.get(h))).0 += 1;
    }

    /// The fingerprint, or why the text gets none.
    pub fn finish(&self, t: &Thresholds) -> Result<SimHash, TooShort> {
        if self.terms.is_empty() {
            return Err(TooShort::NoWords);
        }
        if self.terms.len() < t.min_words {
            return Err(TooShort::FewWords {
                words: self.terms.len(),
                min: t.min_words,
            });
        }
        let mut folder = Folder::<f64>::default();
        let (mut sum, mut max) = (0f64, 0f64);
        // Sorted by hash so the floating-point sums do not depend on map iteration order.
        let mut terms: Vec<(u64, f64)> = self
            .terms
            .iter()
            .map(|(&h, &(tf, idf))| (h, f64::from(tf) * f64::from(idf)))
            .collect();
        terms.sort_unstable_by_key(|&(h, _)| h);
        for (h, w) in terms {
            folder.add(h, w);
            sum += w;
            max = max.max(w);
        }
        if sum <= 0.0 || max / sum >= t.max_share {
            return Err(TooShort::Dominated {
                share: if sum > 0.0 { max / sum } else { 1.0 },
                max_share: t.max_share,
            });
        }
        Ok(folder.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idf_knows_common_words_and_falls_back_to_median() {
        let idf = Idf::shared();
        assert!(idf.get(word_hash("生化学")) > 13.0);
        assert_eq!(idf.get(word_hash("绝对不在词表里的词zzz")), idf.median);
    }

    #[test]
    fn few_words_are_too_short() {
        let idf = Idf::shared();
        let mut t = TfIdf::new(idf);
        for w in ["北京", "天气", "晴朗"] {
            t.add(word_hash(w));
        }
        assert!(matches!(
            t.finish(&Thresholds::default()),
            Err(TooShort::FewWords { words: 3, .. })
        ));
    }
}
