//! Real reposts in a corpus, found by sentence overlap: two articles sharing most of the
//! shorter one's sentences are the same story filed twice (often under another headline).
//!
//! Sentences are compared after keeping only letters and digits, so punctuation, width and
//! whitespace changes do not hide a shared sentence. Sentences found in many articles
//! (boilerplate such as "（编辑：…）" or promo lines) are ignored: they say nothing about the
//! story.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_64;

/// Sentences shorter than this (letters and digits) are ignored: too generic to be evidence.
pub const MIN_SENTENCE_CHARS: usize = 10;

/// A sentence in more articles than this is boilerplate and is ignored.
pub const MAX_SENTENCE_DOCS: usize = 8;

/// The sentences of `text`, each reduced to its letters and digits (lower case), split at
/// sentence-ending punctuation and line breaks; short ones are dropped.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut flush = |cur: &mut String| {
        if cur.chars().count() >= MIN_SENTENCE_CHARS {
            out.push(std::mem::take(cur));
        } else {
            cur.clear();
        }
    };
    for c in text.chars() {
        if matches!(c, '。' | '！' | '？' | '!' | '?' | '；' | ';' | '\n') {
            flush(&mut cur);
        } else if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        }
    }
    flush(&mut cur);
    out
}

/// Distinct sentence hashes per article, and which articles hold each sentence.
pub struct SentenceIndex {
    docs: Vec<Vec<u64>>,
    postings: HashMap<u64, Vec<u32>>,
}

impl SentenceIndex {
    /// Indexes the texts (one per article, in order).
    pub fn new<S: AsRef<str>>(texts: &[S]) -> SentenceIndex {
        let docs: Vec<Vec<u64>> = texts
            .iter()
            .map(|t| {
                let mut v: Vec<u64> = sentences(t.as_ref())
                    .iter()
                    .map(|s| xxh3_64(s.as_bytes()))
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();
        let mut postings: HashMap<u64, Vec<u32>> = HashMap::new();
        for (i, d) in docs.iter().enumerate() {
            for &h in d {
                postings.entry(h).or_default().push(i as u32);
            }
        }
        SentenceIndex { docs, postings }
    }

    fn informative(&self, h: u64) -> bool {
        self.postings
            .get(&h)
            .is_some_and(|p| p.len() <= MAX_SENTENCE_DOCS)
    }

    /// The informative sentences of article `i`.
    fn count(&self, i: usize) -> usize {
        self.docs[i]
            .iter()
            .filter(|&&h| self.informative(h))
            .count()
    }

    /// Shared informative sentences / informative sentences of the smaller article; 0 when
    /// either has none.
    pub fn containment(&self, i: usize, j: usize) -> f64 {
        let (a, b) = (&self.docs[i], &self.docs[j]);
        let shared = a
            .iter()
            .filter(|&&h| self.informative(h) && b.binary_search(&h).is_ok())
            .count();
        let min = self.count(i).min(self.count(j));
        if min == 0 {
            0.0
        } else {
            shared as f64 / min as f64
        }
    }

    /// Every pair `(i, j, containment)` with `i < j` and containment ≥ `min`.
    pub fn overlapping_pairs(&self, min: f64) -> Vec<(usize, usize, f64)> {
        let mut shared: HashMap<(u32, u32), u32> = HashMap::new();
        for docs in self.postings.values() {
            if docs.len() < 2 || docs.len() > MAX_SENTENCE_DOCS {
                continue;
            }
            for (x, &i) in docs.iter().enumerate() {
                for &j in &docs[x + 1..] {
                    *shared.entry((i.min(j), i.max(j))).or_default() += 1;
                }
            }
        }
        let mut out: Vec<(usize, usize, f64)> = shared
            .into_iter()
            .filter_map(|((i, j), n)| {
                let smaller = self.count(i as usize).min(self.count(j as usize));
                let c = f64::from(n) / smaller.max(1) as f64;
                (c >= min).then_some((i as usize, j as usize, c))
            })
            .collect();
        out.sort_by_key(|&(i, j, _)| (i, j));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_ignore_punctuation_and_width() {
        assert_eq!(
            sentences("今天，北京的天气非常晴朗。明天，Ｂｅｉｊｉｎｇ会下雨吗？短句。"),
            vec![
                "今天北京的天气非常晴朗".to_owned(),
                "明天ｂｅｉｊｉｎｇ会下雨吗".to_owned()
            ]
        );
    }

    #[test]
    fn finds_the_repost_and_not_the_stranger() {
        let story = "青禾市今天开通三条公交快线连接城北。快线全程只设六到九个停靠站点。早晚高峰发车间隔压缩到五分钟以内。";
        let texts = [
            story.to_owned(),
            format!("来源：某报\n{story}"),
            "临江市气象台发布寒潮蓝色预警信号。周末最低气温将降到零下五度左右。".to_owned(),
        ];
        let idx = SentenceIndex::new(&texts);
        assert_eq!(idx.overlapping_pairs(0.5), vec![(0, 1, 1.0)]);
        assert_eq!(idx.containment(0, 2), 0.0);
    }
}
