//! The fingerprint pipeline: text → words → weights → 64-bit SimHash, per profile.

mod record;
mod scheme;
mod seed000;
mod tfidf;

pub use record::FingerprintRecord;
pub use scheme::{is_number, Features, Scheme, Weight};
pub use tfidf::{Idf, Thresholds};

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::method::Method;
use crate::minhash::{MinHashParams, MinHasher, Signature};
use crate::simhash::SimHash;
use crate::text::{self, segment, Boilerplate, Segmenter};

/// A weighting and hashing scheme. Fingerprints are only comparable within one profile.
///
/// Every profile but `seed000` is a [`Scheme`] (features × weights). `default` is the one that
/// measured best on the labelled benchmark (`docs/evaluation.md`); the others stay available
/// so that the measurement can be repeated on any user's data (`neardup eval --profile`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// The best-measured SimHash scheme, now that of `tf` (see `docs/evaluation.md`).
    #[default]
    Default,
    /// The older Java service's rules, bit for bit, for indices it wrote.
    Seed000,
    /// Words weighted by term frequency alone.
    Tf,
    /// Words weighted by term frequency × jieba's IDF (the first `default`).
    Tfidf,
    /// The 20 heaviest words by TF-IDF only (keywords); numbers do not vote.
    Keywords,
    /// Pairs of adjacent words, weighted by term frequency × their mean IDF.
    Bigram,
    /// Runs of three letters or digits, weighted by term frequency; no segmentation.
    Char3,
}

impl Profile {
    /// Every profile, for help texts.
    pub const ALL: [Profile; 7] = [
        Profile::Default,
        Profile::Seed000,
        Profile::Tf,
        Profile::Tfidf,
        Profile::Keywords,
        Profile::Bigram,
        Profile::Char3,
    ];

    /// The profile's name as used on the command line and in versions.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Seed000 => "seed000",
            Profile::Tf => "tf",
            Profile::Tfidf => "tfidf",
            Profile::Keywords => "keywords",
            Profile::Bigram => "bigram",
            Profile::Char3 => "char3",
        }
    }

    /// The profile's features and weights; `None` for `seed000`, which has its own rules.
    pub fn scheme(self) -> Option<Scheme> {
        let words = Scheme::TFIDF;
        Some(match self {
            Profile::Seed000 => return None,
            Profile::Default => DEFAULT_SCHEME,
            Profile::Tf => Scheme {
                weight: Weight::Tf,
                ..words
            },
            Profile::Tfidf => words,
            Profile::Keywords => KEYWORDS,
            Profile::Bigram => Scheme {
                features: Features::WordBigrams,
                ..words
            },
            Profile::Char3 => Scheme {
                features: Features::CharNgrams(3),
                weight: Weight::Tf,
                ..words
            },
        })
    }

    /// The version prefix naming the profile's rules; bumped whenever its bits change.
    fn version_name(self) -> &'static str {
        match self {
            Profile::Default => DEFAULT_VERSION_NAME,
            Profile::Seed000 => "seed000",
            Profile::Tf => "tf-1",
            Profile::Tfidf => "tfidf-1",
            Profile::Keywords => "keywords-1",
            Profile::Bigram => "bigram-1",
            Profile::Char3 => "char3-1",
        }
    }
}

const KEYWORDS: Scheme = Scheme {
    top_n: Some(20),
    numbers: false,
    ..Scheme::TFIDF
};

/// The scheme of the `default` SimHash profile: `tf` (every kept word, weighted by its count).
/// On the whole corpus, judged by shared text (`docs/evaluation.md`), it has the best
/// precision of the SimHash schemes that find more than a third of the near-duplicates:
/// 6 of its 362 pairs at k = 3 share less than 20% of their text, against 272 of 635 for
/// `keywords` (default-2: a few heavy topic words decided the fingerprint, so articles on one
/// hot topic collided) and 33 of 411 for `seed000`. default-1 was `tfidf`. Changing it
/// changes every default fingerprint: bump [`DEFAULT_VERSION_NAME`] with it.
const DEFAULT_SCHEME: Scheme = Scheme {
    weight: Weight::Tf,
    ..Scheme::TFIDF
};
const DEFAULT_VERSION_NAME: &str = "default-3";

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
    /// Too-short rules of the SimHash schemes (`seed000` has fixed rules); MinHash uses
    /// `min_words`.
    pub thresholds: Thresholds,
    /// Parameters of the MinHash method.
    pub minhash: MinHashParams,
    /// Fold Traditional characters into Simplified with mainland phrasing before
    /// segmentation ([`crate::text::fold`](mod@crate::text::fold); on by default). `seed000` never folds, whatever
    /// this says: the older Java service did not.
    pub fold: bool,
    /// Learned boilerplate lines to drop before segmentation ([`crate::text::boilerplate`];
    /// none by default). Its id is part of the versions. `seed000` never drops any.
    pub boilerplate: Option<Arc<Boilerplate>>,
}

impl Default for FingerprintConfig {
    fn default() -> Self {
        FingerprintConfig {
            profile: Profile::Default,
            hmm: true,
            thresholds: Thresholds::default(),
            minhash: MinHashParams::DEFAULT,
            fold: true,
            boilerplate: None,
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

    /// Whether texts are folded into Simplified: [`FingerprintConfig::fold`], except for
    /// `seed000`, which never folds. What indices and stores record.
    pub fn folds(&self) -> bool {
        self.fold && self.profile.scheme().is_some()
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

/// A MinHash signature with the version of the pipeline that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MinHashFingerprint {
    pub signature: Signature,
    /// See [`Fingerprinter::minhash_version`].
    pub version: Arc<str>,
}

/// The result of MinHashing one text.
pub type MinHashOutcome = Result<MinHashFingerprint, TooShort>;

/// Which methods one pass over a text computes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Methods {
    pub simhash: bool,
    pub minhash: bool,
}

impl Methods {
    pub const BOTH: Methods = Methods {
        simhash: true,
        minhash: true,
    };

    /// Only `method`.
    pub fn only(method: Method) -> Methods {
        Methods {
            simhash: method == Method::SimHash,
            minhash: method == Method::MinHash,
        }
    }
}

/// What one pass over a text made, for the [`Methods`] asked for (`None` for the others).
#[derive(Clone, Debug, PartialEq)]
pub struct Sketches {
    pub simhash: Option<Outcome>,
    pub minhash: Option<MinHashOutcome>,
}

impl Sketches {
    /// The sketch of `method`, or why the text has none.
    ///
    /// # Panics
    /// If `method` was not asked for.
    pub fn into_sketch(self, method: Method) -> Result<crate::Sketch, TooShort> {
        match method {
            Method::SimHash => self
                .simhash
                .expect("SimHash was asked for")
                .map(|f| crate::Sketch::SimHash(f.simhash)),
            Method::MinHash => self
                .minhash
                .expect("MinHash was asked for")
                .map(|f| crate::Sketch::MinHash(f.signature)),
        }
    }

    /// Whether a method that was asked for found the text too short. Either method's
    /// reason is returned (SimHash's first).
    pub fn too_short(&self) -> Option<&TooShort> {
        self.simhash
            .as_ref()
            .and_then(|o| o.as_ref().err())
            .or_else(|| self.minhash.as_ref().and_then(|o| o.as_ref().err()))
    }
}

/// The version strings of one configuration (see [`Fingerprinter::version_of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    pub simhash: String,
    pub simhash_pretokenized: String,
    pub minhash: String,
    pub minhash_pretokenized: String,
}

impl Versions {
    /// Texts are folded when `config.fold` asks for it and learned boilerplate is dropped
    /// when `config.boilerplate` holds some, except by `seed000` (`scheme` `None`).
    fn of(config: &FingerprintConfig, scheme: Option<Scheme>, name: &str) -> Versions {
        let mut prep = String::new();
        if scheme.is_some() {
            if config.fold {
                prep = format!(",{}", text::fold::FOLD_ID);
            }
            if let Some(b) = &config.boilerplate {
                prep = format!("{prep},{}", b.id());
            }
        }
        let words_id = format!(
            "html-1,nfkc,lower{prep},{}{},{}",
            segment::SEGMENTER_ID,
            if config.hmm { "+hmm" } else { "" },
            segment::STOP_WORDS_ID
        );
        let text_id = match scheme {
            Some(s) if !s.segments() => format!("html-1,nfkc,lower{prep},alnum"),
            _ => words_id.clone(),
        };
        let scheme_id = match scheme {
            Some(s) => format!(
                "{name};{s};hash=xxh3-64-s{}",
                crate::hashing::WORD_HASH_SEED
            ),
            None => name.to_owned(),
        };
        let minhash_id = format!(
            "{MINHASH_VERSION_NAME};{};hash=xxh3-64-s{}",
            config.minhash,
            crate::hashing::WORD_HASH_SEED
        );
        Versions {
            simhash: format!("{scheme_id};text={text_id}"),
            simhash_pretokenized: format!("{scheme_id};text=pretokenized"),
            minhash: format!("{minhash_id};text={words_id}"),
            minhash_pretokenized: format!("{minhash_id};text=pretokenized"),
        }
    }
}

/// Builds fingerprints. Cheap to clone and share across threads: the dictionary, IDF table and
/// stop words are loaded once per process.
#[derive(Clone)]
pub struct Fingerprinter {
    config: Arc<FingerprintConfig>,
    /// `None` for `seed000`.
    scheme: Option<Scheme>,
    /// The version prefix: the profile's, or `custom`.
    name: &'static str,
    segmenter: Segmenter,
    version: Arc<str>,
    version_pretokenized: Arc<str>,
    minhasher: MinHasher,
    minhash_version: Arc<str>,
    minhash_version_pretokenized: Arc<str>,
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
        let scheme = config.profile.scheme();
        let name = config.profile.version_name();
        Fingerprinter::build(config, scheme, name)
    }

    /// A fingerprinter for a scheme that is not a profile, for experiments and evaluation.
    /// Its version starts with `custom;` and names the scheme, so its fingerprints are never
    /// mistaken for a profile's. `config.profile` is ignored.
    pub fn with_scheme(scheme: Scheme, config: FingerprintConfig) -> Fingerprinter {
        Fingerprinter::build(config, Some(scheme), "custom")
    }

    fn build(
        config: FingerprintConfig,
        scheme: Option<Scheme>,
        name: &'static str,
    ) -> Fingerprinter {
        if scheme.is_some_and(|s| s.uses_idf()) {
            tfidf::Idf::shared();
        }
        let v = Versions::of(&config, scheme, name);
        Fingerprinter {
            name,
            segmenter: Segmenter::new(config.hmm, config.fold && scheme.is_some())
                .with_boilerplate(config.boilerplate.clone().filter(|_| scheme.is_some())),
            version: v.simhash.into(),
            version_pretokenized: v.simhash_pretokenized.into(),
            minhasher: MinHasher::new(config.minhash),
            minhash_version: v.minhash.into(),
            minhash_version_pretokenized: v.minhash_pretokenized.into(),
            config: Arc::new(config),
            scheme,
        }
    }

    /// The versions a fingerprinter for `config` writes, without building it (no dictionary
    /// is loaded): what an index records and checks.
    pub fn versions(config: &FingerprintConfig) -> Versions {
        Versions::of(
            config,
            config.profile.scheme(),
            config.profile.version_name(),
        )
    }

    /// The same fingerprinter (profile or scheme, settings) dropping `boilerplate` instead
    /// of what it dropped.
    pub fn with_boilerplate(&self, boilerplate: Option<Arc<Boilerplate>>) -> Fingerprinter {
        Fingerprinter::build(
            FingerprintConfig {
                boilerplate,
                ..(*self.config).clone()
            },
            self.scheme,
            self.name,
        )
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

    /// The version of MinHash signatures: the method's rules and parameters (shingles,
    /// minima, bands, hash) and the text pipeline. Signatures under another version are not
    /// comparable.
    pub fn minhash_version(&self) -> &str {
        &self.minhash_version
    }

    /// The MinHash version for pre-tokenized input.
    pub fn minhash_version_pretokenized(&self) -> &str {
        &self.minhash_version_pretokenized
    }

    /// The version of `method`'s output, from text or (`pre_tokenized`) from words.
    pub fn version_of(&self, method: Method, pre_tokenized: bool) -> &str {
        match (method, pre_tokenized) {
            (Method::SimHash, false) => &self.version,
            (Method::SimHash, true) => &self.version_pretokenized,
            (Method::MinHash, false) => &self.minhash_version,
            (Method::MinHash, true) => &self.minhash_version_pretokenized,
        }
    }

    /// The MinHash signature maker.
    pub fn minhasher(&self) -> &MinHasher {
        &self.minhasher
    }

    pub fn config(&self) -> &FingerprintConfig {
        &self.config
    }

    /// Whether texts are folded from Traditional into Simplified (never for `seed000`).
    pub fn folds(&self) -> bool {
        self.segmenter.folds()
    }

    /// The chosen methods' sketches of several fields of one article, in one pass over the
    /// text (segmentation is shared). HTML is reduced to its visible text first.
    ///
    /// With learned boilerplate ([`FingerprintConfig::boilerplate`]), its lines are dropped
    /// first; when that leaves no words at all, the whole text is used instead.
    pub fn sketch_fields<S: AsRef<str>>(&self, methods: Methods, fields: &[S]) -> Sketches {
        let (sketches, dropped) = self.sketch_with(&self.segmenter, methods, fields);
        if dropped > 0 && matches!(sketches.too_short(), Some(TooShort::NoWords)) {
            let whole = self.segmenter.clone().with_boilerplate(None);
            return self.sketch_with(&whole, methods, fields).0;
        }
        sketches
    }

    /// The sketches made with `segmenter`, and how many boilerplate lines it dropped.
    fn sketch_with<S: AsRef<str>>(
        &self,
        segmenter: &Segmenter,
        methods: Methods,
        fields: &[S],
    ) -> (Sketches, usize) {
        let mut acc = methods.simhash.then(|| self.accumulator());
        let mut mh = methods.minhash.then(|| MinHashAcc::new(self));
        let mut dropped = 0;
        for field in fields {
            let plain = text::plain_text(field.as_ref());
            let chars_only = matches!(&acc, Some(Accumulator::Terms(t)) if !t.scheme().segments());
            if chars_only {
                if let Some(Accumulator::Terms(t)) = &mut acc {
                    let (prepared, d) = segmenter.prepare(&plain);
                    t.add_chars(&prepared);
                    dropped += d;
                }
            }
            if mh.is_some() || (acc.is_some() && !chars_only) {
                let d = segmenter.for_each_word(&plain, |w, h| {
                    if let (Some(a), false) = (&mut acc, chars_only) {
                        a.add(w, h);
                    }
                    if let Some(m) = &mut mh {
                        m.add(h);
                    }
                });
                if !chars_only {
                    dropped += d;
                }
            }
            if let Some(a) = &mut acc {
                a.end_field();
            }
            if let Some(m) = &mut mh {
                m.builder.end_field();
            }
        }
        let sketches = Sketches {
            simhash: acc.map(|a| self.finish(a, &self.version)),
            minhash: mh.map(|m| m.finish(&self.minhash_version)),
        };
        (sketches, dropped)
    }

    /// A learner of boilerplate preparing text as this fingerprinter does (see
    /// [`crate::text::boilerplate`]), reading at most `sample` documents.
    pub fn boilerplate_learner(&self, sample: usize) -> crate::text::boilerplate::Learner {
        crate::text::boilerplate::Learner::new(
            self.segmenter.clone().with_boilerplate(None),
            sample,
        )
    }

    /// How this fingerprinter prepares text (normalisation, folding, boilerplate): the
    /// alignment reads texts the same way ([`crate::align::Letters::prepared`]).
    pub fn segmenter(&self) -> &Segmenter {
        &self.segmenter
    }

    /// The boilerplate this fingerprinter drops (never for `seed000`).
    pub fn boilerplate(&self) -> Option<&Arc<Boilerplate>> {
        self.segmenter.boilerplate()
    }

    /// [`Fingerprinter::sketch_fields`] for words segmented and filtered elsewhere.
    pub fn sketch_tokens<S: AsRef<str>>(&self, methods: Methods, tokens: &[S]) -> Sketches {
        let mut mh = methods.minhash.then(|| MinHashAcc::new(self));
        if let Some(m) = &mut mh {
            for t in tokens {
                m.add(crate::hashing::word_hash(t.as_ref()));
            }
        }
        Sketches {
            simhash: methods.simhash.then(|| self.fingerprint_tokens(tokens)),
            minhash: mh.map(|m| m.finish(&self.minhash_version_pretokenized)),
        }
    }

    /// The MinHash signature of one text (see [`Fingerprinter::sketch_fields`]).
    pub fn minhash(&self, text: &str) -> MinHashOutcome {
        self.minhash_fields(&[text])
    }

    /// The MinHash signature of several fields of one article.
    pub fn minhash_fields<S: AsRef<str>>(&self, fields: &[S]) -> MinHashOutcome {
        self.sketch_fields(Methods::only(Method::MinHash), fields)
            .minhash
            .expect("asked for")
    }

    /// Fingerprint of one text; HTML is reduced to its visible text first.
    pub fn fingerprint(&self, text: &str) -> Outcome {
        self.fingerprint_fields(&[text])
    }

    /// Fingerprint of several fields of one article (e.g. title and body) taken as one text,
    /// each field starting on a new line.
    pub fn fingerprint_fields<S: AsRef<str>>(&self, fields: &[S]) -> Outcome {
        self.sketch_fields(Methods::only(Method::SimHash), fields)
            .simhash
            .expect("asked for")
    }

    /// Fingerprint of words that were segmented and filtered elsewhere; no text processing
    /// is applied. This is the form of the seed000 compatibility vectors.
    pub fn fingerprint_tokens<S: AsRef<str>>(&self, tokens: &[S]) -> Outcome {
        let mut acc = self.accumulator();
        for t in tokens {
            let t = t.as_ref();
            match &mut acc {
                Accumulator::Terms(terms) if !terms.scheme().segments() => terms.add_chars(t),
                _ => acc.add(t, crate::hashing::word_hash(t)),
            }
        }
        self.finish(acc, &self.version_pretokenized)
    }

    /// The kept words of `text`, as the pipeline sees them (for debugging and evaluation).
    pub fn words(&self, text: &str) -> Vec<String> {
        self.segmenter.words(&text::plain_text(text))
    }

    /// The features and weights, or `None` for `seed000`.
    pub fn scheme(&self) -> Option<Scheme> {
        self.scheme
    }

    fn accumulator(&self) -> Accumulator<'static> {
        match self.scheme {
            Some(s) => Accumulator::Terms(scheme::Terms::new(s, tfidf::Idf::shared())),
            None => Accumulator::Seed000(Box::default()),
        }
    }

    fn finish(&self, acc: Accumulator<'_>, version: &Arc<str>) -> Outcome {
        let simhash = match acc {
            Accumulator::Terms(t) => t.finish(&self.config.thresholds)?,
            Accumulator::Seed000(s) => s.finish()?,
        };
        Ok(Fingerprint {
            simhash,
            version: Arc::clone(version),
        })
    }
}

/// The version prefix of MinHash signatures; bumped whenever the values of the same
/// parameters change.
const MINHASH_VERSION_NAME: &str = "minhash-1";

/// Running MinHash state of one text, with the too-short rule: fewer than `min_words`
/// distinct words get no signature (a handful of words has too few shingles to estimate a
/// similarity from).
struct MinHashAcc<'a> {
    builder: crate::minhash::SignatureBuilder<'a>,
    min_words: usize,
    distinct: std::collections::HashSet<u64, crate::hashing::BuildIdentity>,
}

impl<'a> MinHashAcc<'a> {
    fn new(fp: &'a Fingerprinter) -> Self {
        MinHashAcc {
            builder: fp.minhasher.builder(),
            min_words: fp.config.thresholds.min_words,
            distinct: Default::default(),
        }
    }

    #[inline]
    fn add(&mut self, h: u64) {
        if self.distinct.len() < self.min_words {
            self.distinct.insert(h);
        }
        self.builder.add_word(h);
    }

    fn finish(self, version: &Arc<str>) -> MinHashOutcome {
        let words = self.distinct.len();
        if words == 0 {
            return Err(TooShort::NoWords);
        }
        if words < self.min_words {
            return Err(TooShort::FewWords {
                words,
                min: self.min_words,
            });
        }
        Ok(MinHashFingerprint {
            signature: self
                .builder
                .finish()
                .expect("a text with words has shingles"),
            version: Arc::clone(version),
        })
    }
}

enum Accumulator<'a> {
    Terms(scheme::Terms<'a>),
    Seed000(Box<seed000::Seed000>),
}

impl Accumulator<'_> {
    /// `h` is the word's xxh3 hash, already computed by the segmenter.
    #[inline]
    fn add(&mut self, word: &str, h: u64) {
        match self {
            Accumulator::Terms(t) => t.add_word(word, h),
            Accumulator::Seed000(s) => s.add(word),
        }
    }

    fn end_field(&mut self) {
        if let Accumulator::Terms(t) = self {
            t.end_field();
        }
    }
}

/// Compatibility helpers of the `seed000` profile, public so other implementations can be
/// checked against them.
pub mod compat {
    pub use super::seed000::{java_word_hash, java_word_weight};
}
