//! Segmentation with `jieba-rs` and the word filter (punctuation, whitespace, stop words).

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use jieba_rs::Jieba;

use super::boilerplate::Boilerplate;
use super::fold::Folder;
use super::normalise::normalise_into;
use crate::hashing::{word_hash, BuildIdentity};

/// Identifies the stop-word list in fingerprint versions; bump when `crates/core/data/stopwords.txt`
/// changes.
pub const STOP_WORDS_ID: &str = "stop-iso-1.1";

/// Identifies the segmenter and its dictionary in fingerprint versions.
pub const SEGMENTER_ID: &str = "jieba-0.11";

/// Texts are segmented in pieces of about this many bytes, cut at line breaks where possible,
/// so a 50 MB document needs a bounded working set instead of one giant DAG.
const CHUNK: usize = 64 * 1024;

static STOP_WORDS_TXT: &str = include_str!("../../data/stopwords.txt");

/// The shared jieba segmenter (dictionary loaded once per process); public for the
/// benchmark's bare-jieba baseline.
pub fn jieba() -> &'static Jieba {
    static J: OnceLock<Jieba> = OnceLock::new();
    J.get_or_init(Jieba::new)
}

/// Stop words by their [`word_hash`]: the hash is computed for every token anyway, so the
/// check costs one probe and no string comparison.
fn stop_words() -> &'static HashSet<u64, BuildIdentity> {
    static S: OnceLock<HashSet<u64, BuildIdentity>> = OnceLock::new();
    S.get_or_init(|| {
        STOP_WORDS_TXT
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(word_hash)
            .collect()
    })
}

/// Turns text into the words that count: normalised, segmented, filtered.
///
/// The dictionary and stop words are loaded once per process and shared, so building a
/// `Segmenter` is cheap after the first.
#[derive(Clone, Debug)]
pub struct Segmenter {
    hmm: bool,
    fold: bool,
    boilerplate: Option<Arc<Boilerplate>>,
}

impl Segmenter {
    /// `hmm` turns on jieba's HMM for words missing from the dictionary (names, new terms);
    /// `fold` folds Traditional characters into Simplified ([`super::fold`](mod@super::fold)) after
    /// normalisation.
    pub fn new(hmm: bool, fold: bool) -> Segmenter {
        jieba();
        stop_words();
        if fold {
            Folder::shared();
        }
        Segmenter {
            hmm,
            fold,
            boilerplate: None,
        }
    }

    /// The same segmenter dropping the lines of `boilerplate` ([`super::boilerplate`]) before
    /// it cuts words.
    pub fn with_boilerplate(self, boilerplate: Option<Arc<Boilerplate>>) -> Segmenter {
        Segmenter {
            boilerplate,
            ..self
        }
    }

    /// Whether the HMM is on.
    pub fn hmm(&self) -> bool {
        self.hmm
    }

    /// Whether Traditional characters are folded into Simplified.
    pub fn folds(&self) -> bool {
        self.fold
    }

    /// The boilerplate it drops, if any.
    pub fn boilerplate(&self) -> Option<&Arc<Boilerplate>> {
        self.boilerplate.as_ref()
    }

    /// `text` normalised and, if this segmenter folds, folded: the lines boilerplate is
    /// learned from.
    pub fn clean(&self, text: &str) -> String {
        let mut buf = String::with_capacity(text.len());
        normalise_into(text, &mut buf);
        self.folded(buf)
    }

    /// [`Segmenter::clean`] without the boilerplate lines: what words are cut from, for the
    /// schemes that count characters instead of words. Also returns how many lines were
    /// dropped.
    pub fn prepare(&self, text: &str) -> (String, usize) {
        self.stripped(self.clean(text))
    }

    fn folded(&self, text: String) -> String {
        match self.fold {
            true => match Folder::shared().fold(&text) {
                std::borrow::Cow::Owned(folded) => folded,
                std::borrow::Cow::Borrowed(_) => text,
            },
            false => text,
        }
    }

    fn stripped(&self, text: String) -> (String, usize) {
        match &self.boilerplate {
            Some(b) => b.strip(&text),
            None => (text, 0),
        }
    }

    /// Calls `f` with every kept word of `text` and its [`word_hash`], in order, and returns
    /// how many boilerplate lines were dropped. `text` is plain text (not HTML) and not yet
    /// normalised.
    pub fn for_each_word(&self, text: &str, mut f: impl FnMut(&str, u64)) -> usize {
        let jieba = jieba();
        let stop = stop_words();
        let mut dropped = 0;
        for piece in chunks(text, CHUNK) {
            let (buf, d) = self.prepare(piece);
            dropped += d;
            for token in jieba.cut(&buf, self.hmm) {
                if is_content(token.word) {
                    let h = word_hash(token.word);
                    if !stop.contains(&h) {
                        f(token.word, h);
                    }
                }
            }
        }
        dropped
    }

    /// The kept words of `text` as owned strings (for inspection and tests).
    pub fn words(&self, text: &str) -> Vec<String> {
        let mut v = Vec::new();
        self.for_each_word(text, |w, _| v.push(w.to_owned()));
        v
    }
}

/// Whether a token is a content word: it has a letter or digit, and is not a stop word.
/// Tokens of punctuation, symbols or whitespace only are dropped.
pub fn keep(word: &str) -> bool {
    is_content(word) && !is_stop_word(word)
}

/// Whether `word` has a letter or digit. Most tokens start with a CJK ideograph, which
/// decides it without a Unicode table lookup.
#[inline]
fn is_content(word: &str) -> bool {
    match word.chars().next() {
        Some(c) if super::is_cjk_ideograph(c) => true,
        _ => word.chars().any(char::is_alphanumeric),
    }
}

/// Whether `word` (already normalised) is in the stop-word list.
pub fn is_stop_word(word: &str) -> bool {
    stop_words().contains(&word_hash(word))
}

/// Splits `text` into pieces of at most about `max` bytes, preferring to cut after a line
/// break, then after sentence-ending punctuation, else at a character boundary.
fn chunks(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= max {
            let all = rest;
            rest = "";
            return Some(all);
        }
        let mut limit = max;
        while !rest.is_char_boundary(limit) {
            limit -= 1;
        }
        let window = &rest[..limit];
        let cut = window
            .rfind('\n')
            .map(|i| i + 1)
            .or_else(|| {
                window
                    .rfind(['。', '！', '？', '.', '!', '?', '；', ';'])
                    .map(|i| i + window[i..].chars().next().map_or(1, char::len_utf8))
            })
            .filter(|&i| i > 0)
            .unwrap_or(limit);
        let (head, tail) = rest.split_at(cut);
        rest = tail;
        Some(head)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_punctuation_whitespace_and_stop_words() {
        let s = Segmenter::new(true, true);
        let words = s.words("我们的城市，今天下雨了！ The weather is bad.");
        assert!(words.iter().all(|w| keep(w)));
        assert!(words.contains(&"城市".to_string()), "{words:?}");
        assert!(words.contains(&"weather".to_string()), "{words:?}");
        assert!(!words.contains(&"the".to_string()));
        assert!(!words.contains(&"的".to_string()));
        assert!(!words.iter().any(|w| w == "，" || w == " " || w == "!"));
    }

    #[test]
    fn punctuation_only_gives_nothing() {
        assert!(Segmenter::new(true, true)
            .words("……！！？、 ，。")
            .is_empty());
    }

    #[test]
    fn chunks_cover_text_and_respect_boundaries() {
        let text = "第一句。第二句！\n第三行很长很长".repeat(1000);
        let parts: Vec<&str> = chunks(&text, 100).collect();
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|p| p.len() <= 100));
        let one_line = "字".repeat(500);
        let parts: Vec<&str> = chunks(&one_line, 100).collect();
        assert_eq!(parts.concat(), one_line);
    }
}
