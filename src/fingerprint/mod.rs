//! The fingerprint pipeline: text → words → weights → 64-bit SimHash, per profile.

mod seed000;
mod tfidf;

pub use tfidf::Thresholds;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::simhash::SimHash;
use crate::text::{self, segment, Segmenter};

/// A weighting and hashing scheme. Fingerprints are only comparable within one profile.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// TF-IDF weights (jieba's IDF table) and xxh3 word hashes.
    #[default]
    Default,
    /// The older Java service's rules, bit for bit, for indices it wrote.
    Seed000,
}

impl Profile {
    /// Every profile, for help texts.
    pub const ALL: [Profile; 2] = [Profile::Default, Profile::Seed000];

    /// The profile's name as used on the command line and in versions.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Seed000 => "seed000",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| crate::Error::UnknownProfile(s.to_owned()))
    }
}

/// How a [`Fingerprinter`] is built.
#[derive(Clone, Debug, PartialEq)]
pub struct FingerprintConfig {
    pub profile: Profile,
    /// jieba's HMM for out-of-dictionary words (on by default).
    pub hmm: bool,
    /// Too-short rules of the `default` profile; `seed000` has fixed rules.
    pub thresholds: Thresholds,
}

impl Default for FingerprintConfig {
    fn default() -> Self {
        FingerprintConfig {
            profile: Profile::Default,
            hmm: true,
            thresholds: Thresholds::default(),
        }
    }
}

impl FingerprintConfig {
    /// The default configuration of `profile`.
    pub fn for_profile(profile: Profile) -> Self {
        FingerprintConfig {
            profile,
            ..Default::default()
        }
    }
}

/// Why a text got no fingerprint.
#[derive(Clone, Debug, PartialEq)]
pub enum TooShort {
    /// Nothing left after removing markup, punctuation and stop words.
    NoWords,
    /// Fewer distinct words than the profile needs.
    FewWords { words: usize, min: usize },
    /// Total weight below the profile's minimum.
    LowWeight { weight: f64, min: f64 },
    /// One word carries so much of the weight that the fingerprint would be its hash.
    Dominated { share: f64, max_share: f64 },
}

impl TooShort {
    /// Stable machine-readable reason, as written in outputs and stores.
    pub fn code(&self) -> &'static str {
        "too_short"
    }
}

impl fmt::Display for TooShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TooShort::NoWords => write!(
                f,
                "no words left after removing markup, punctuation and stop words"
            ),
            TooShort::FewWords { words, min } => {
                write!(f, "{words} distinct words, at least {min} needed")
            }
            TooShort::LowWeight { weight, min } => {
                write!(f, "total word weight {weight}, at least {min} needed")
            }
            TooShort::Dominated { share, max_share } => write!(
                f,
                "one word carries {:.0}% of the weight (limit {:.0}%)",
                share * 100.0,
                max_share * 100.0
            ),
        }
    }
}

/// A fingerprint with the version of the pipeline that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub simhash: SimHash,
    /// See [`Fingerprinter::version`].
    pub version: Arc<str>,
}

/// The result of fingerprinting one text.
pub type Outcome = Result<Fingerprint, TooShort>;

/// Builds fingerprints. Cheap to clone and share across threads: the dictionary, IDF table and
/// stop words are loaded once per process.
#[derive(Clone)]
pub struct Fingerprinter {
    config: Arc<FingerprintConfig>,
    segmenter: Segmenter,
    version: Arc<str>,
    version_pretokenized: Arc<str>,
}

impl fmt::Debug for Fingerprinter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fingerprinter")
            .field("version", &self.version)
            .finish()
    }
}

impl Fingerprinter {
    /// A fingerprinter for `config`. The first one in a process loads the jieba dictionary
    /// and IDF table (about a second); later ones share them.
    pub fn new(config: FingerprintConfig) -> Fingerprinter {
        if config.profile == Profile::Default {
            tfidf::Idf::shared();
        }
        let text_id = format!(
            "html-1,nfkc,lower,{}{},{}",
            segment::SEGMENTER_ID,
            if config.hmm { "+hmm" } else { "" },
            segment::STOP_WORDS_ID
        );
        let scheme = match config.profile {
            Profile::Default => format!(
                "default-1;weight=tf*{};hash=xxh3-64-s{}",
                tfidf::IDF_ID,
                crate::hashing::WORD_HASH_SEED
            ),
            Profile::Seed000 => "seed000".to_owned(),
        };
        Fingerprinter {
            segmenter: Segmenter::new(config.hmm),
            version: format!("{scheme};text={text_id}").into(),
            version_pretokenized: format!("{scheme};text=pretokenized").into(),
            config: Arc::new(config),
        }
    }

    /// The default fingerprinter of `profile`.
    pub fn for_profile(profile: Profile) -> Fingerprinter {
        Fingerprinter::new(FingerprintConfig::for_profile(profile))
    }

    /// Names the profile and everything that changes the output bits (text pipeline,
    /// segmenter, dictionary, stop words, weights, hash). Fingerprints stored under another
    /// version are not comparable and should be recomputed.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The version written for fingerprints of pre-tokenized input: the words came from
    /// outside, so the text pipeline is not part of it.
    pub fn version_pretokenized(&self) -> &str {
        &self.version_pretokenized
    }

    pub fn config(&self) -> &FingerprintConfig {
        &self.config
    }

    /// Fingerprint of one text; HTML is reduced to its visible text first.
    pub fn fingerprint(&self, text: &str) -> Outcome {
        self.fingerprint_fields(&[text])
    }

    /// Fingerprint of several fields of one article (e.g. title and body) taken as one text,
    /// each field starting on a new line.
    pub fn fingerprint_fields<S: AsRef<str>>(&self, fields: &[S]) -> Outcome {
        let mut acc = self.accumulator();
        for field in fields {
            let plain = text::plain_text(field.as_ref());
            self.segmenter.for_each_word(&plain, |w, h| acc.add(w, h));
        }
        self.finish(acc, &self.version)
    }

    /// Fingerprint of words that were segmented and filtered elsewhere; no text processing
    /// is applied. This is the form of the seed000 compatibility vectors.
    pub fn fingerprint_tokens<S: AsRef<str>>(&self, tokens: &[S]) -> Outcome {
        let mut acc = self.accumulator();
        for t in tokens {
            let t = t.as_ref();
            acc.add(t, crate::hashing::word_hash(t));
        }
        self.finish(acc, &self.version_pretokenized)
    }

    /// The kept words of `text`, as the pipeline sees them (for debugging and evaluation).
    pub fn words(&self, text: &str) -> Vec<String> {
        self.segmenter.words(&text::plain_text(text))
    }

    fn accumulator(&self) -> Accumulator<'static> {
        match self.config.profile {
            Profile::Default => Accumulator::TfIdf(tfidf::TfIdf::new(tfidf::Idf::shared())),
            Profile::Seed000 => Accumulator::Seed000(Box::default()),
        }
    }

    fn finish(&self, acc: Accumulator<'_>, version: &Arc<str>) -> Outcome {
        let simhash = match acc {
            Accumulator::TfIdf(t) => t.finish(&self.config.thresholds)?,
            Accumulator::Seed000(s) => s.finish()?,
        };
        Ok(Fingerprint {
            simhash,
            version: Arc::clone(version),
        })
    }
}

enum Accumulator<'a> {
    TfIdf(tfidf::TfIdf<'a>),
    Seed000(Box<seed000::Seed000>),
}

impl Accumulator<'_> {
    /// `h` is the word's default-profile hash, already computed by the segmenter.
    #[inline]
    fn add(&mut self, word: &str, h: u64) {
        match self {
            Accumulator::TfIdf(t) => t.add(h),
            Accumulator::Seed000(s) => s.add(word),
        }
    }
}

/// Compatibility helpers of the `seed000` profile, public so other implementations can be
/// checked against them.
pub mod compat {
    pub use super::seed000::{word_hash, word_weight};
}
