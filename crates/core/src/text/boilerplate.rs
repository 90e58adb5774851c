//! Boilerplate: lines that recur across many documents of one source (a site's disclaimer,
//! its related-links list, its footer) are not content. Left in, they make different short
//! articles of one site near-duplicates and hide one article carried by two sites.
//!
//! Which lines they are is learned from data ([`Learner`]): a line (after normalisation and
//! folding, compared whole) counts as boilerplate when it is in at least `min_docs` distinct
//! documents. News is copied between sites a handful of times; a site's boilerplate is on
//! every page it serves, so a source holds far more of the latter. What is learned is an
//! artefact ([`Boilerplate`]): a set of line hashes with an id (`bp1-…`, a hash of the set)
//! that enters the fingerprint version, so it is recorded where the fingerprints are (an
//! index's `_meta`, a store's meta) and only an explicit command changes it.
//!
//! Applying it ([`Boilerplate::strip`]) drops those lines before segmentation. When nothing
//! would be left (a page that is all boilerplate, or a story copied so often that its own
//! lines were learned), the fingerprinter keeps the whole text instead.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use super::Segmenter;

/// Version of the artefact's JSON layout.
pub const FORMAT: u32 = 1;

/// A line is boilerplate when at least this many documents hold it (unless the learner
/// reads so many documents that [`DEFAULT_MIN_SHARE`] asks for more).
pub const DEFAULT_MIN_DOCS: usize = 10;

/// ... or this share of the documents read, whichever is larger: one document in 2,000.
pub const DEFAULT_MIN_SHARE: f64 = 0.0005;

/// The learner reads at most this many documents (the first ones) by default, which bounds
/// its memory (one counter per distinct line).
pub const DEFAULT_SAMPLE: usize = 200_000;

/// At most this many lines are kept (the most frequent), so the artefact stays small enough
/// for an index's `_meta`.
pub const MAX_LINES: usize = 5_000;

/// The hash a line is known by: xxh3-64 of its normalised, folded text.
pub fn line_hash(line: &str) -> u64 {
    xxh3_64(line.as_bytes())
}

/// The lines of normalised text that count: trimmed, not empty.
fn lines(normalised: &str) -> impl Iterator<Item = &str> {
    normalised
        .split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
}

/// One learned line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// [`line_hash`] of the line, 16 hex digits.
    #[serde(with = "hex_u64")]
    pub hash: u64,
    /// How many distinct documents held it when it was learned.
    pub docs: u32,
    /// The line itself, for people reading the artefact; left out where it is recorded
    /// next to fingerprints (only the hashes decide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A learned set of boilerplate lines: a versioned artefact (see the module docs).
#[derive(Clone, Serialize, Deserialize)]
#[serde(try_from = "Stored", into = "Stored")]
pub struct Boilerplate {
    id: String,
    fold: bool,
    min_docs: usize,
    docs: usize,
    lines: Vec<Line>,
    set: HashSet<u64>,
}

/// The JSON form of [`Boilerplate`].
#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    id: String,
    /// Whether the lines were folded into Simplified when learned.
    #[serde(default)]
    fold: bool,
    min_docs: usize,
    docs: usize,
    lines: Vec<Line>,
}

impl TryFrom<Stored> for Boilerplate {
    type Error = String;
    fn try_from(s: Stored) -> Result<Self, String> {
        if s.format != FORMAT {
            return Err(format!(
                "boilerplate format {} is not {FORMAT}, the one this neardup reads",
                s.format
            ));
        }
        let b = Boilerplate::new(s.lines, s.min_docs, s.docs).folded(s.fold);
        if b.id != s.id {
            return Err(format!(
                "boilerplate `{}` holds lines whose id is `{}`: the artefact was changed by hand or damaged; learn it again",
                s.id, b.id
            ));
        }
        Ok(b)
    }
}

impl From<Boilerplate> for Stored {
    fn from(b: Boilerplate) -> Stored {
        Stored {
            format: FORMAT,
            id: b.id,
            fold: b.fold,
            min_docs: b.min_docs,
            docs: b.docs,
            lines: b.lines,
        }
    }
}

impl Boilerplate {
    /// The artefact of `lines`, learned from `docs` documents with `min_docs`. The lines are
    /// sorted by hash; the id names the set of hashes alone.
    pub fn new(mut lines: Vec<Line>, min_docs: usize, docs: usize) -> Boilerplate {
        lines.sort_by_key(|l| l.hash);
        lines.dedup_by_key(|l| l.hash);
        let mut bytes = Vec::with_capacity(lines.len() * 8);
        for l in &lines {
            bytes.extend_from_slice(&l.hash.to_le_bytes());
        }
        let id = format!("bp1-{:012x}", xxh3_64(&bytes) >> 16);
        let set = lines.iter().map(|l| l.hash).collect();
        Boilerplate {
            id,
            fold: false,
            min_docs,
            docs,
            lines,
            set,
        }
    }

    /// The same artefact, marked as learned from folded (`true`) or unfolded text.
    pub fn folded(self, fold: bool) -> Boilerplate {
        Boilerplate { fold, ..self }
    }

    /// Whether its lines were learned from text folded into Simplified: it matches the lines
    /// of fingerprints made with the same setting only ([`Boilerplate::check_fold`]).
    pub fn fold(&self) -> bool {
        self.fold
    }

    /// An error, worded for people, unless the artefact was learned with folding set as
    /// `fold` is: otherwise the lines of Traditional pages would silently not match.
    pub fn check_fold(&self, fold: bool) -> Result<(), String> {
        if self.fold == fold {
            return Ok(());
        }
        let how = |f: bool| if f { "folded" } else { "not folded" };
        Err(format!(
            "boilerplate {} was learned from text {} into Simplified, but these fingerprints are made from text {}: learn it again {}",
            self.id,
            how(self.fold),
            how(fold),
            if fold { "without --no-fold" } else { "with --no-fold" }
        ))
    }

    /// Names the set of lines in fingerprint versions (`text=…,bp1-…,…`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The learned lines, by hash.
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// Documents read when it was learned.
    pub fn docs(&self) -> usize {
        self.docs
    }

    /// The document count a line needed.
    pub fn min_docs(&self) -> usize {
        self.min_docs
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Whether a (normalised, trimmed) line is boilerplate.
    pub fn contains(&self, line: &str) -> bool {
        self.set.contains(&line_hash(line))
    }

    /// The same artefact without the lines' texts: what is recorded next to fingerprints.
    pub fn without_texts(&self) -> Boilerplate {
        let mut b = self.clone();
        for l in &mut b.lines {
            l.text = None;
        }
        b
    }

    /// `normalised` without its boilerplate lines, and how many lines were dropped. The
    /// kept lines are joined by `'\n'`.
    pub fn strip(&self, normalised: &str) -> (String, usize) {
        let mut out = String::with_capacity(normalised.len());
        let mut dropped = 0;
        for line in normalised.split('\n') {
            let trimmed = line.trim();
            if !trimmed.is_empty() && self.set.contains(&line_hash(trimmed)) {
                dropped += 1;
                continue;
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(line);
        }
        (out, dropped)
    }
}

/// Two artefacts are the same when their ids are (the ids name the sets of hashes).
impl PartialEq for Boilerplate {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Boilerplate {}

impl fmt::Debug for Boilerplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Boilerplate")
            .field("id", &self.id)
            .field("lines", &self.lines.len())
            .field("min_docs", &self.min_docs)
            .field("docs", &self.docs)
            .finish()
    }
}

/// `bp1-…: 37 lines in ≥ 10 of 16158 documents`.
impl fmt::Display for Boilerplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} lines in at least {} of {} documents",
            self.id,
            self.lines.len(),
            self.min_docs,
            self.docs
        )
    }
}

/// Learns [`Boilerplate`] from documents: counts, for every line, the distinct documents
/// holding it. A document identical to one already read (the same lines) counts once, so
/// exact copies do not make their lines look like boilerplate.
pub struct Learner {
    segmenter: Segmenter,
    counts: HashMap<u64, u32>,
    texts: HashMap<u64, String>,
    seen: HashSet<u64>,
    docs: usize,
    sample: usize,
}

impl Learner {
    /// A learner preparing text the way `segmenter` does (normalisation, folding), reading
    /// at most `sample` documents.
    pub fn new(segmenter: Segmenter, sample: usize) -> Learner {
        Learner {
            segmenter,
            counts: HashMap::new(),
            texts: HashMap::new(),
            seen: HashSet::new(),
            docs: 0,
            sample,
        }
    }

    /// Whether it has read as many documents as it reads.
    pub fn is_full(&self) -> bool {
        self.docs >= self.sample
    }

    /// Documents counted so far.
    pub fn docs(&self) -> usize {
        self.docs
    }

    /// Reads one document's text fields (plain text or HTML). Ignored once full.
    pub fn add<S: AsRef<str>>(&mut self, fields: &[S]) {
        if self.is_full() {
            return;
        }
        let mut doc: Vec<(u64, String)> = Vec::new();
        for field in fields {
            let plain = super::plain_text(field.as_ref());
            let clean = self.segmenter.clean(&plain);
            for line in lines(&clean) {
                doc.push((line_hash(line), line.to_owned()));
            }
        }
        doc.sort_unstable_by_key(|(h, _)| *h);
        doc.dedup_by_key(|(h, _)| *h);
        let mut whole = Vec::with_capacity(doc.len() * 8);
        for (h, _) in &doc {
            whole.extend_from_slice(&h.to_le_bytes());
        }
        if !self.seen.insert(xxh3_64(&whole)) {
            return;
        }
        self.docs += 1;
        for (h, line) in doc {
            let c = self.counts.entry(h).or_insert(0);
            *c += 1;
            if *c == 2 {
                self.texts.insert(h, line);
            }
        }
    }

    /// The lines in at least `min_docs` documents (default: [`DEFAULT_MIN_DOCS`] or
    /// [`DEFAULT_MIN_SHARE`] of the documents read, whichever is larger), at most
    /// [`MAX_LINES`] of them (the most frequent).
    pub fn finish(self, min_docs: Option<usize>) -> Boilerplate {
        let min_docs = min_docs
            .unwrap_or_else(|| {
                DEFAULT_MIN_DOCS.max((self.docs as f64 * DEFAULT_MIN_SHARE).ceil() as usize)
            })
            .max(2);
        let mut found: Vec<Line> = self
            .counts
            .iter()
            .filter(|(_, &c)| c as usize >= min_docs)
            .map(|(&hash, &docs)| Line {
                hash,
                docs,
                text: self.texts.get(&hash).cloned(),
            })
            .collect();
        found.sort_by(|a, b| b.docs.cmp(&a.docs).then(a.hash.cmp(&b.hash)));
        found.truncate(MAX_LINES);
        Boilerplate::new(found, min_docs, self.docs).folded(self.segmenter.folds())
    }
}

mod hex_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{v:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        u64::from_str_radix(&s, 16).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(item: &str) -> String {
        format!("首页 > 新闻 > 正文\n{item}\n免责声明：本站转载内容仅供参考。\n相关阅读：\n某市举行运动会\n某县修路\n版权所有 © 某某网")
    }

    #[test]
    fn recurring_lines_are_learned_and_stripped_unique_lines_are_not() {
        let mut l = Learner::new(Segmenter::new(true, true), DEFAULT_SAMPLE);
        for i in 0..12 {
            l.add(&[site(&format!("第{i}条新闻的正文，内容各不相同。"))]);
        }
        let b = l.finish(None);
        assert_eq!(b.min_docs(), DEFAULT_MIN_DOCS);
        assert_eq!(b.len(), 6, "{b:?}");
        let (kept, dropped) = b.strip(&crate::text::normalise(&site("另一条新闻。")));
        assert_eq!(kept, "另一条新闻。");
        assert_eq!(dropped, 6);
        assert!(b.contains("免责声明:本站转载内容仅供参考。"));
    }

    #[test]
    fn exact_copies_count_once_and_rare_lines_are_kept() {
        let mut l = Learner::new(Segmenter::new(true, true), DEFAULT_SAMPLE);
        for _ in 0..20 {
            l.add(&["同一篇文章\n一字不差"]);
        }
        for i in 0..5 {
            l.add(&[format!("共同的一行\n第{i}篇")]);
        }
        assert_eq!(l.docs(), 6);
        assert!(l.finish(None).is_empty());
    }

    #[test]
    fn the_artefact_round_trips_and_refuses_edits() {
        let mut l = Learner::new(Segmenter::new(true, true), DEFAULT_SAMPLE);
        for i in 0..3 {
            l.add(&[format!("页脚\n正文{i}")]);
        }
        let b = l.finish(Some(2));
        assert_eq!(b.len(), 1);
        assert_eq!(b.lines()[0].text.as_deref(), Some("页脚"));
        let json = serde_json::to_string(&b).unwrap();
        let back: Boilerplate = serde_json::from_str(&json).unwrap();
        assert_eq!(back, b);
        assert_eq!(back.without_texts(), b);
        assert!(back.without_texts().lines()[0].text.is_none());
        let edited = json.replace(&format!("{:016x}", b.lines()[0].hash), "0000000000000001");
        let e = serde_json::from_str::<Boilerplate>(&edited).unwrap_err();
        assert!(e.to_string().contains("learn it again"), "{e}");
    }

    #[test]
    fn an_artefact_knows_whether_it_was_learned_folded() {
        let learn = |fold| {
            let mut l = Learner::new(Segmenter::new(true, fold), DEFAULT_SAMPLE);
            for i in 0..3 {
                l.add(&[format!("頁腳\n正文{i}")]);
            }
            l.finish(Some(2))
        };
        let (folded, unfolded) = (learn(true), learn(false));
        assert!(folded.fold() && !unfolded.fold());
        assert!(folded.contains("页脚") && unfolded.contains("頁腳"));
        assert!(folded.check_fold(true).is_ok());
        let e = unfolded.check_fold(true).unwrap_err();
        assert!(e.contains("without --no-fold"), "{e}");
        let json = serde_json::to_string(&unfolded).unwrap();
        let back: Boilerplate = serde_json::from_str(&json).unwrap();
        assert!(!back.fold());
    }

    #[test]
    fn the_sample_bounds_what_is_read() {
        let mut l = Learner::new(Segmenter::new(true, true), 3);
        for i in 0..10 {
            l.add(&[format!("页脚\n正文{i}")]);
        }
        assert!(l.is_full());
        assert_eq!(l.docs(), 3);
    }
}
