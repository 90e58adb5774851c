//! Weighted-feature schemes: which features of a text vote in the SimHash and with what weight.
//!
//! Every profile except `seed000` is one [`Scheme`]; the evaluation (`neardup eval`) measures
//! exactly these, so the numbers in `docs/evaluation.md` are the numbers of what ships.

use std::collections::HashMap;
use std::fmt;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::tfidf::{Idf, Thresholds, IDF_ID};
use super::TooShort;
use crate::hashing::{BuildIdentity, WORD_HASH_SEED};
use crate::simhash::{Folder, SimHash};

/// What votes: words, pairs of adjacent words, or runs of characters.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Features {
    /// The kept words (after segmentation and the stop-word filter).
    Words,
    /// Pairs of adjacent kept words (shingles of two words), within one field.
    WordBigrams,
    /// Runs of `n` letters or digits of the normalised text, within one field; punctuation,
    /// symbols and whitespace are skipped, no segmentation or stop words apply.
    CharNgrams(u8),
}

/// How much a feature weighs, from its count `tf` in the text.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Weight {
    /// `tf`.
    Tf,
    /// `tf × idf` (jieba's IDF table; a word pair gets the mean IDF of its words).
    TfIdf,
    /// `(1 + ln tf) × idf`: repeated words count, but less than linearly.
    LogTfIdf,
}

/// A weighting and feature scheme. See the profiles in [`super::Profile`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scheme {
    pub features: Features,
    pub weight: Weight,
    /// Keep only the `n` heaviest features (keywords); `None` keeps all.
    pub top_n: Option<u16>,
    /// Whether numbers (tokens of digits, `.`, `,`, `%`; digits in character n-grams) vote.
    /// Reposts often change figures and dates; dropping them makes those edits invisible.
    pub numbers: bool,
}

impl Scheme {
    /// The `tfidf` profile (the first `default`).
    pub const TFIDF: Scheme = Scheme {
        features: Features::Words,
        weight: Weight::TfIdf,
        top_n: None,
        numbers: true,
    };

    /// Whether the scheme reads jieba's IDF table.
    pub fn uses_idf(&self) -> bool {
        !matches!(self.features, Features::CharNgrams(_))
            && matches!(self.weight, Weight::TfIdf | Weight::LogTfIdf)
    }

    /// Whether the text is segmented into words (else characters are read directly).
    pub fn segments(&self) -> bool {
        !matches!(self.features, Features::CharNgrams(_))
    }
}

/// The scheme's part of a fingerprint version, e.g. `feat=word;weight=tf*idf-jieba-0.11`.
impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.features {
            Features::Words => write!(f, "feat=word")?,
            Features::WordBigrams => write!(f, "feat=word2")?,
            Features::CharNgrams(n) => write!(f, "feat=char{n}")?,
        }
        let idf = if self.uses_idf() {
            format!("*{IDF_ID}")
        } else {
            String::new()
        };
        match self.weight {
            Weight::Tf => write!(f, ";weight=tf")?,
            Weight::TfIdf if self.uses_idf() => write!(f, ";weight=tf{idf}")?,
            Weight::TfIdf => write!(f, ";weight=tf")?,
            Weight::LogTfIdf => write!(f, ";weight=logtf{idf}")?,
        }
        if let Some(n) = self.top_n {
            write!(f, ";top={n}")?;
        }
        if !self.numbers {
            write!(f, ";nonum")?;
        }
        Ok(())
    }
}

/// Whether a token is a number: digits with at most `.`, `,`, `%` between them.
pub fn is_number(word: &str) -> bool {
    word.bytes().any(|b| b.is_ascii_digit())
        && word
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b',' | b'%'))
}

/// Running state of one fingerprint under a [`Scheme`]: feature counts keyed by hash, so each
/// token costs one map probe and each distinct feature one IDF lookup.
pub struct Terms<'a> {
    scheme: Scheme,
    idf: &'a Idf,
    terms: HashMap<u64, (u32, f32), BuildIdentity>,
    /// The previous word of this field (hash, IDF), for word pairs.
    prev: Option<(u64, f32)>,
    /// The last characters of this field, for character n-grams.
    window: Vec<char>,
    buf: String,
}

impl<'a> Terms<'a> {
    pub fn new(scheme: Scheme, idf: &'a Idf) -> Self {
        Terms {
            scheme,
            idf,
            terms: HashMap::with_capacity_and_hasher(512, BuildIdentity),
            prev: None,
            window: Vec::new(),
            buf: String::new(),
        }
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    fn idf(&self, h: u64) -> f32 {
        if self.scheme.uses_idf() {
            self.idf.get(h)
        } else {
            1.0
        }
    }

    #[inline]
    fn count(&mut self, h: u64, idf: f32) {
        self.terms.entry(h).or_insert((0, idf)).0 += 1;
    }

    /// Counts one kept word with its [`crate::hashing::word_hash`] `h`.
    #[inline]
    pub fn add_word(&mut self, word: &str, h: u64) {
        if !self.scheme.numbers && is_number(word) {
            return;
        }
        match self.scheme.features {
            Features::Words => {
                // The IDF is looked up once per distinct word, not per occurrence: the table
                // is large and a probe is usually a cache miss.
                let (table, uses_idf) = (self.idf, self.scheme.uses_idf());
                self.terms
                    .entry(h)
                    .or_insert_with(|| (0, if uses_idf { table.get(h) } else { 1.0 }))
                    .0 += 1;
            }
            Features::WordBigrams => {
                let idf = self.idf(h);
                if let Some((p, pidf)) = self.prev {
                    let pair = xxh3_64_with_seed(
                        &[p.to_le_bytes(), h.to_le_bytes()].concat(),
                        WORD_HASH_SEED,
                    );
                    self.count(pair, (pidf + idf) / 2.0);
                }
                self.prev = Some((h, idf));
            }
            Features::CharNgrams(_) => unreachable!("character schemes are fed characters"),
        }
    }

    /// Counts the character n-grams of one normalised field.
    pub fn add_chars(&mut self, normalised: &str) {
        let Features::CharNgrams(n) = self.scheme.features else {
            unreachable!("word schemes are fed words")
        };
        let n = usize::from(n.max(1));
        for c in normalised.chars() {
            if !c.is_alphanumeric() || (!self.scheme.numbers && c.is_ascii_digit()) {
                continue;
            }
            self.window.push(c);
            if self.window.len() > n {
                self.window.remove(0);
            }
            if self.window.len() == n {
                self.buf.clear();
                self.buf.extend(self.window.iter());
                let h = xxh3_64_with_seed(self.buf.as_bytes(), WORD_HASH_SEED);
                self.count(h, 1.0);
            }
        }
    }

    /// Ends a field: word pairs and character runs do not span fields.
    pub fn end_field(&mut self) {
        self.prev = None;
        self.window.clear();
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
        let mut terms: Vec<(u64, f64)> = self
            .terms
            .iter()
            .map(|(&h, &(tf, idf))| {
                let tf = match self.scheme.weight {
                    Weight::Tf | Weight::TfIdf => f64::from(tf),
                    Weight::LogTfIdf => 1.0 + f64::from(tf).ln(),
                };
                (h, tf * f64::from(idf))
            })
            .collect();
        if let Some(n) = self.scheme.top_n {
            terms.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            terms.truncate(usize::from(n));
        }
        // Sorted by hash so the floating-point sums do not depend on map iteration order.
        terms.sort_unstable_by_key(|&(h, _)| h);
        let mut folder = Folder::<f64>::default();
        let (mut sum, mut max) = (0f64, 0f64);
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
    use crate::hashing::word_hash;

    #[test]
    fn numbers_are_recognised() {
        for w in ["2018", "3.5", "10%", "1,200"] {
            assert!(is_number(w), "{w}");
        }
        for w in ["k11", "北京", "", "%", "6月"] {
            assert!(!is_number(w), "{w}");
        }
    }

    #[test]
    fn bigrams_do_not_span_fields() {
        let scheme = Scheme {
            features: Features::WordBigrams,
            ..Scheme::TFIDF
        };
        let mut t = Terms::new(scheme, Idf::shared());
        for w in ["甲", "乙"] {
            t.add_word(w, word_hash(w));
        }
        t.end_field();
        for w in ["丙", "丁"] {
            t.add_word(w, word_hash(w));
        }
        assert_eq!(t.terms.len(), 2);
    }

    #[test]
    fn char_ngrams_skip_punctuation_and_optionally_digits() {
        let scheme = Scheme {
            features: Features::CharNgrams(3),
            weight: Weight::Tf,
            top_n: None,
            numbers: false,
        };
        let mut t = Terms::new(scheme, Idf::shared());
        t.add_chars("甲乙，丙2丁");
        // 甲乙丙, 乙丙丁
        assert_eq!(t.terms.len(), 2);
    }

    #[test]
    fn top_n_keeps_the_heaviest() {
        let scheme = Scheme {
            top_n: Some(3),
            ..Scheme::TFIDF
        };
        let mut t = Terms::new(scheme, Idf::shared());
        let words = [
            "北京", "天气", "晴朗", "气温", "回升", "市民", "出行", "公园", "踏青",
        ];
        for w in words {
            t.add_word(w, word_hash(w));
        }
        let th = Thresholds {
            min_words: 1,
            max_share: 1.0,
        };
        let top3 = t.finish(&th).unwrap();
        let mut all = Terms::new(Scheme::TFIDF, Idf::shared());
        for w in words {
            all.add_word(w, word_hash(w));
        }
        assert_ne!(top3, all.finish(&th).unwrap());
    }
}
