//! The IDF table (jieba's) and the too-short thresholds of the weighted-feature profiles.

use std::collections::HashMap;
use std::io::Read;
use std::sync::OnceLock;

use crate::hashing::{word_hash, BuildIdentity};

/// Identifies the IDF table in fingerprint versions; bump when `crates/core/data/idf.txt.gz` changes.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idf_knows_common_words_and_falls_back_to_median() {
        let idf = Idf::shared();
        assert!(idf.get(word_hash("生化学")) > 13.0);
        assert_eq!(idf.get(word_hash("绝对不在词表里的词zzz")), idf.median);
    }
}
