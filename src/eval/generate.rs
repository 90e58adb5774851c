//! The synthetic benchmark: labelled pairs built from real articles with a seeded RNG.
//!
//! Positives are an article and a copy changed the way reposts really differ; each is labelled
//! with its transformation and size (the fraction of the text touched). Negatives are random
//! pairs and hard ones: same category and day, the same site boilerplate around different
//! stories, the same event with different text, and the same topic (many shared top keywords)
//! with little shared text. Real reposts mined from the corpus are added as `real_positive`. ChaCha8 with a fixed seed gives the same benchmark on every
//! platform.

use std::collections::{HashMap, HashSet};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use rayon::prelude::*;

use super::oracle;
use super::real::SentenceIndex;
use super::LabelledPair;
use crate::fingerprint::{is_number, Idf};
use crate::hashing::word_hash;
use crate::text::Segmenter;
use crate::{Fingerprinter, Profile};

/// An article of the source corpus.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Article {
    pub id: String,
    pub title: String,
    pub content: String,
}

impl Article {
    fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("id".into(), self.id.clone().into());
        m.insert("title".into(), self.title.clone().into());
        m.insert("content".into(), self.content.clone().into());
        m
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    /// Pairs per transformation and size.
    pub per_cell: usize,
    /// Random negatives, and hard negatives of each kind.
    pub negatives: usize,
    /// Mine real reposts (sentence containment) and add them, up to this many per group.
    pub real: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 20240601,
            per_cell: 200,
            negatives: 2000,
            real: 2000,
        }
    }
}

/// Every synthetic transformation with its sizes, in generation order.
pub const TRANSFORMATIONS: &[(&str, &[f64])] = &[
    ("boilerplate", &[0.0]),
    ("html", &[0.0]),
    ("retitle", &[0.0]),
    ("retitle_boilerplate", &[0.0]),
    ("insert", &[0.05, 0.10, 0.20, 0.30]),
    ("delete", &[0.05, 0.10, 0.20, 0.30]),
    ("replace", &[0.05, 0.10, 0.20, 0.30]),
    ("reorder", &[0.0]),
    ("truncate", &[0.10, 0.30, 0.50]),
    ("punctuation", &[0.0]),
    ("numbers", &[0.0]),
    ("mixed", &[0.05, 0.10]),
];

const SOURCES: &[&str] = &[
    "新华网",
    "人民网",
    "中国新闻网",
    "央视新闻客户端",
    "澎湃新闻",
    "新京报",
    "环球网",
    "北京青年报",
    "光明网",
    "中国青年网",
    "每日经济新闻",
    "21世纪经济报道",
];
const EDITORS: &[&str] = &[
    "张三", "李梅", "王强", "赵宁", "刘洋", "陈静", "杨帆", "周敏",
];
const ADS: &[&str] = &[
    "点击关注，获取更多精彩资讯。",
    "扫描二维码下载新浪新闻客户端，随时随地看新闻。",
    "新浪众测，新品先知先享。",
    "特别声明：以上内容仅代表作者本人观点，不代表本网站观点或立场。",
    "版权声明：本文系转载，版权归原作者所有，如有侵权请联系删除。",
    "更多精彩内容，请关注微信公众号。",
    "加载中，请稍候……",
];

/// A text cut into paragraphs of sentences; joining gives the text back.
struct Doc {
    paras: Vec<Vec<String>>,
}

impl Doc {
    fn parse(content: &str) -> Doc {
        let paras = content
            .split('\n')
            .filter(|p| !p.trim().is_empty())
            .map(split_sentences)
            .collect();
        Doc { paras }
    }

    fn text(&self) -> String {
        self.paras
            .iter()
            .map(|p| p.concat())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn sentence_count(&self) -> usize {
        self.paras.iter().map(Vec::len).sum()
    }

    /// (paragraph, sentence) of every sentence.
    fn positions(&self) -> Vec<(usize, usize)> {
        self.paras
            .iter()
            .enumerate()
            .flat_map(|(p, ss)| (0..ss.len()).map(move |s| (p, s)))
            .collect()
    }
}

/// Splits after sentence-ending punctuation (and any closing quote after it).
pub fn split_sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut ended = false;
    for c in text.chars() {
        if ended && !matches!(c, '”' | '’' | '」' | '"' | '）' | ')') {
            out.push(std::mem::take(&mut cur));
            ended = false;
        }
        cur.push(c);
        if matches!(c, '。' | '！' | '？' | '!' | '?' | '；') {
            ended = true;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// The generator's state: the corpus, its sentences and the RNG.
pub struct Generator<'a> {
    articles: &'a [Article],
    rng: ChaCha8Rng,
}

impl<'a> Generator<'a> {
    pub fn new(articles: &'a [Article], seed: u64) -> Self {
        Generator {
            articles,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    fn pick(&mut self) -> usize {
        self.rng.gen_range(0..self.articles.len())
    }

    /// A sentence of another article than `not`, for inserts and replacements.
    fn foreign_sentence(&mut self, not: usize) -> String {
        loop {
            let i = self.pick();
            if i == not {
                continue;
            }
            let d = Doc::parse(&self.articles[i].content);
            let all: Vec<&String> = d.paras.iter().flatten().filter(|s| chars(s) >= 8).collect();
            if let Some(s) = all.choose(&mut self.rng) {
                return (*s).clone();
            }
        }
    }

    fn boilerplate(&mut self, not: usize, title: &str) -> (String, String) {
        let src = *SOURCES.choose(&mut self.rng).unwrap();
        let editor = *EDITORS.choose(&mut self.rng).unwrap();
        let mut header = Vec::new();
        match self.rng.gen_range(0..3) {
            0 => header.push(format!("来源：{src}")),
            1 => header.push(format!("本文转载自{src}，原标题：{title}")),
            _ => header.push(format!("（{src}记者 {editor}）")),
        }
        let mut footer = Vec::new();
        footer.push(format!("（责任编辑：{editor}）"));
        if self.rng.gen_bool(0.6) {
            let n = self.rng.gen_range(3..=5);
            let mut list = vec!["相关新闻：".to_owned()];
            for _ in 0..n {
                let mut j = self.pick();
                while j == not {
                    j = self.pick();
                }
                list.push(self.articles[j].title.clone());
            }
            footer.push(list.join("\n"));
        }
        let ads = self.rng.gen_range(1..=2);
        for ad in ADS.choose_multiple(&mut self.rng, ads) {
            footer.push((*ad).to_owned());
        }
        (header.join("\n"), footer.join("\n"))
    }

    fn with_boilerplate(&mut self, i: usize, content: &str) -> (String, usize) {
        let (h, f) = self.boilerplate(i, &self.articles[i].title.clone());
        let added = chars(&h) + chars(&f);
        (format!("{h}\n{content}\n{f}"), added)
    }

    fn html(&mut self, title: &str, content: &str) -> String {
        let site = *SOURCES.choose(&mut self.rng).unwrap();
        let paras: String = content
            .split('\n')
            .filter(|p| !p.trim().is_empty())
            .map(|p| format!("<p>&nbsp;&nbsp;{}</p>\n", escape(p)))
            .collect();
        format!(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t}_{site}</title>\
             <script>var _hmt = _hmt || []; window.ad = {{slot: 3}};</script>\
             <style>.article p {{ line-height: 1.8 }}</style></head><body>\
             <div class=\"nav\"><a href=\"/\">首页</a> <a href=\"/news\">新闻</a> <a href=\"/sports\">体育</a> \
             <a href=\"/ent\">娱乐</a> <a href=\"/tech\">科技</a></div>\
             <h1>{t}</h1><div class=\"article\">\n{paras}</div>\
             <div class=\"share\"><a href=\"/share?to=wx\">分享到微信</a></div>\
             <div class=\"footer\">版权所有 {site} 未经授权禁止转载</div></body></html>",
            t = escape(title),
        )
    }

    /// Applies `t` at `size` to article `i`: the changed (title, content) and the measured size.
    fn transform(&mut self, i: usize, t: &str, size: f64) -> Option<(String, String, f64)> {
        let art = &self.articles[i];
        let (title, content) = (art.title.clone(), art.content.clone());
        let total = chars(&content).max(1) as f64;
        let mut doc = Doc::parse(&content);
        Some(match t {
            "boilerplate" => {
                let (c, added) = self.with_boilerplate(i, &content);
                (title, c, added as f64 / total)
            }
            "html" => {
                let c = self.html(&title, &content);
                (title, c, 0.0)
            }
            "retitle" | "retitle_boilerplate" => {
                let other = self.other_title(i);
                if t == "retitle" {
                    (other, content, 0.0)
                } else {
                    let (c, added) = self.with_boilerplate(i, &content);
                    (other, c, added as f64 / total)
                }
            }
            "insert" => {
                let target = (size * total).ceil() as usize;
                let mut added = 0;
                while added < target {
                    let s = self.foreign_sentence(i);
                    added += chars(&s);
                    let p = self.rng.gen_range(0..doc.paras.len());
                    let at = self.rng.gen_range(0..=doc.paras[p].len());
                    doc.paras[p].insert(at, s);
                }
                (title, doc.text(), added as f64 / total)
            }
            "delete" | "replace" => {
                if doc.sentence_count() < 3 {
                    return None;
                }
                let target = (size * total).ceil() as usize;
                let mut pos = doc.positions();
                pos.shuffle(&mut self.rng);
                let mut touched = 0;
                let mut chosen = Vec::new();
                for (p, s) in pos {
                    if touched >= target || chosen.len() + 1 >= doc.sentence_count() {
                        break;
                    }
                    touched += chars(&doc.paras[p][s]);
                    chosen.push((p, s));
                }
                if touched as f64 > 2.0 * size * total + 30.0 {
                    // One sentence is most of the article: the size would be meaningless.
                    return None;
                }
                chosen.sort_unstable_by(|a, b| b.cmp(a));
                for (p, s) in chosen {
                    if t == "delete" {
                        doc.paras[p].remove(s);
                    } else {
                        doc.paras[p][s] = self.foreign_sentence(i);
                    }
                }
                doc.paras.retain(|p| !p.is_empty());
                (title, doc.text(), touched as f64 / total)
            }
            "reorder" => {
                let mut units: Vec<Vec<String>> = if doc.paras.len() >= 3 {
                    doc.paras
                } else {
                    // One long line (most Sina texts): reorder blocks of three sentences.
                    let all: Vec<String> = doc.paras.into_iter().flatten().collect();
                    all.chunks(3).map(<[String]>::to_vec).collect()
                };
                if units.len() < 2 {
                    return None;
                }
                let before = units.clone();
                while units == before {
                    units.shuffle(&mut self.rng);
                }
                doc = Doc { paras: units };
                (title, doc.text(), 0.0)
            }
            "truncate" => {
                let keep = ((1.0 - size) * total) as usize;
                let mut kept = Vec::new();
                let mut n = 0;
                'outer: for para in &doc.paras {
                    let mut p = Vec::new();
                    for s in para {
                        if n + chars(s) > keep && n > 0 {
                            if !p.is_empty() {
                                kept.push(p);
                            }
                            break 'outer;
                        }
                        n += chars(s);
                        p.push(s.clone());
                    }
                    kept.push(p);
                }
                if n == 0 || n as f64 >= total {
                    return None;
                }
                doc = Doc { paras: kept };
                (title, doc.text(), 1.0 - n as f64 / total)
            }
            "punctuation" => (self.punctuation(&title), self.punctuation(&content), 0.0),
            "numbers" => {
                let (c, changed) = self.numbers(&content);
                if changed == 0 {
                    return None;
                }
                (title, c, changed as f64 / total)
            }
            "mixed" => {
                let (_, c, s) = self.transform(i, "replace", size)?;
                let c = self.punctuation(&c);
                let (c, added) = self.with_boilerplate(i, &c);
                (title, c, s + added as f64 / total)
            }
            _ => return None,
        })
    }

    fn other_title(&mut self, i: usize) -> String {
        // A rewritten headline: half of the own title's words are kept, the rest comes from
        // another headline, as editors do when they retitle a repost.
        let j = loop {
            let j = self.pick();
            if j != i {
                break j;
            }
        };
        let own: Vec<char> = self.articles[i].title.chars().collect();
        let other: Vec<char> = self.articles[j].title.chars().collect();
        let head: String = own[..own.len() / 2].iter().collect();
        let tail: String = other[other.len() / 2..].iter().collect();
        format!("{head}{tail}")
    }

    /// Full-width ↔ half-width punctuation, spaces after punctuation, indented paragraphs
    /// separated by blank lines, trailing whitespace.
    fn punctuation(&mut self, text: &str) -> String {
        let to_half = self.rng.gen_bool(0.5);
        let mut out = String::with_capacity(text.len() + 64);
        for (n, para) in text.split('\n').enumerate() {
            if n > 0 {
                out.push_str("\n\n");
            }
            out.push_str("\u{3000}\u{3000}");
            for c in para.chars() {
                let m = if to_half {
                    match c {
                        '，' => Some(", "),
                        '。' => Some(". "),
                        '：' => Some(": "),
                        '；' => Some("; "),
                        '！' => Some("! "),
                        '？' => Some("? "),
                        '“' | '”' => Some("\""),
                        '（' => Some(" ("),
                        '）' => Some(") "),
                        '、' => Some(","),
                        _ => None,
                    }
                } else {
                    // Half-width commas become full-width; letters and digits full-width too.
                    (c == ',').then_some("，")
                };
                match m {
                    Some(s) => out.push_str(s),
                    None if !to_half && c.is_ascii_alphanumeric() => {
                        out.push(char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c));
                    }
                    None => out.push(c),
                }
            }
            out.push_str("  ");
        }
        out
    }

    /// Changes about half of the numbers (each digit run): figures and dates of a repost that
    /// was updated or misquoted. Returns the text and the number of digits changed.
    fn numbers(&mut self, text: &str) -> (String, usize) {
        let mut out = String::with_capacity(text.len());
        let mut changed = 0;
        let mut run = String::new();
        let mut flush = |run: &mut String, out: &mut String, rng: &mut ChaCha8Rng| {
            if run.is_empty() {
                return;
            }
            if rng.gen_bool(0.5) {
                let v: u64 = run.parse().unwrap_or(0);
                let delta = rng.gen_range(1..=9);
                let new = if rng.gen_bool(0.5) || v < delta {
                    v + delta
                } else {
                    v - delta
                };
                changed += run.len();
                out.push_str(&new.to_string());
            } else {
                out.push_str(run);
            }
            run.clear();
        };
        for c in text.chars() {
            if c.is_ascii_digit() && run.len() < 12 {
                run.push(c);
            } else {
                flush(&mut run, &mut out, &mut self.rng);
                out.push(c);
            }
        }
        flush(&mut run, &mut out, &mut self.rng);
        (out, changed)
    }

    /// `per_cell` positives of transformation `t` at `size`.
    pub fn positives(&mut self, t: &str, size: f64, per_cell: usize) -> Vec<LabelledPair> {
        let mut out = Vec::with_capacity(per_cell);
        let mut tries = 0;
        while out.len() < per_cell && tries < per_cell * 20 {
            tries += 1;
            let i = self.pick();
            let Some((title, content, measured)) = self.transform(i, t, size) else {
                continue;
            };
            let a = &self.articles[i];
            let b = Article {
                id: format!("{}~{t}", a.id),
                title,
                content,
            };
            out.push(LabelledPair {
                a: a.to_map(),
                b: b.to_map(),
                duplicate: true,
                kind: Some("positive".into()),
                transformation: Some(t.into()),
                // Edits of a requested size keep it as their label; compound ones (`mixed`:
                // an edit plus boilerplate) and unsized ones carry what was measured.
                size: Some(if size > 0.0 && t != "mixed" {
                    size
                } else {
                    round(measured)
                }),
            });
        }
        out
    }
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The category of an id: `sina2018-<folder>-<n>` → folder; `rmrb-<date>-<page>-<n>` → date.
pub fn category(id: &str) -> Option<&str> {
    let mut parts = id.split('-');
    match parts.next()? {
        "sina2018" => parts.next(),
        "rmrb" => parts.next(),
        _ => None,
    }
}

/// The page of a People's Daily id (`rmrb-<date>-<page>-<n>`).
fn page(id: &str) -> Option<&str> {
    id.starts_with("rmrb-")
        .then(|| id.split('-').nth(2))
        .flatten()
}

/// Builds the whole benchmark from `articles` (at least 20). Progress goes to `progress`.
pub fn generate(
    articles: &[Article],
    config: &Config,
    mut progress: impl FnMut(&str),
) -> Vec<LabelledPair> {
    assert!(articles.len() >= 20, "need at least 20 articles");
    let mut g = Generator::new(articles, config.seed);
    let mut pairs = Vec::new();
    for (t, sizes) in TRANSFORMATIONS {
        for &size in *sizes {
            pairs.extend(g.positives(t, size, config.per_cell));
        }
        progress(&format!("positives: {t}"));
    }

    let texts: Vec<String> = articles
        .iter()
        .map(|a| format!("{}\n{}", a.title, a.content))
        .collect();
    let index = SentenceIndex::new(&texts);
    // Pairs sharing a fifth of their sentences are not clean negatives.
    let related: HashSet<(usize, usize)> = index
        .overlapping_pairs(0.2)
        .into_iter()
        .map(|(i, j, _)| (i, j))
        .collect();
    let is_related = |i: usize, j: usize| related.contains(&(i.min(j), i.max(j)));

    if config.real > 0 {
        let mut real = index.overlapping_pairs(0.5);
        real.shuffle(&mut g.rng);
        let mut counts = [0usize; 2];
        for (i, j, c) in real {
            let strong = c >= 0.9;
            let slot = usize::from(strong);
            if counts[slot] >= config.real {
                continue;
            }
            counts[slot] += 1;
            pairs.push(LabelledPair {
                a: articles[i].to_map(),
                b: articles[j].to_map(),
                duplicate: true,
                kind: Some("real_positive".into()),
                transformation: Some(
                    if strong {
                        "real_repost"
                    } else {
                        "real_partial"
                    }
                    .into(),
                ),
                size: Some(round(c)),
            });
        }
        progress(&format!(
            "real reposts: {} (≥90% contained), {} partial (50–90%)",
            counts[1], counts[0]
        ));
    }

    let neg = |a: usize, b: usize, kind: &str, t: &str| LabelledPair {
        a: articles[a].to_map(),
        b: articles[b].to_map(),
        duplicate: false,
        kind: Some(kind.into()),
        transformation: Some(t.into()),
        size: None,
    };

    let mut seen = HashSet::new();
    let mut n = 0;
    while n < config.negatives && seen.len() < config.negatives * 10 {
        let (i, j) = (g.pick(), g.pick());
        if i == j || is_related(i, j) || !seen.insert((i.min(j), i.max(j))) {
            continue;
        }
        pairs.push(neg(i, j, "random_negative", "random"));
        n += 1;
    }

    // Same category and day: People's Daily articles of one date (same page first), Sina
    // articles of one folder filed close together.
    let mut by_cat: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, a) in articles.iter().enumerate() {
        if let Some(c) = category(&a.id) {
            by_cat.entry(c).or_default().push(i);
        }
    }
    let cats: Vec<&Vec<usize>> = by_cat.values().filter(|v| v.len() >= 2).collect();
    let mut n = 0;
    let mut tries = 0;
    while n < config.negatives && !cats.is_empty() && tries < config.negatives * 20 {
        tries += 1;
        let members = cats[g.rng.gen_range(0..cats.len())];
        let x = g.rng.gen_range(0..members.len());
        let y = (x + g.rng.gen_range(1..=members.len().clamp(2, 20) - 1)) % members.len();
        let (i, j) = (members[x], members[y]);
        if i == j || is_related(i, j) {
            continue;
        }
        let same_page =
            page(&articles[i].id).is_some() && page(&articles[i].id) == page(&articles[j].id);
        pairs.push(neg(
            i,
            j,
            "hard_negative",
            if same_page {
                "same_day_page"
            } else {
                "same_category_day"
            },
        ));
        n += 1;
    }

    // Different stories wrapped in the same site boilerplate (header, editor, related list).
    for _ in 0..config.negatives {
        let members = if cats.is_empty() {
            None
        } else {
            Some(cats[g.rng.gen_range(0..cats.len())])
        };
        let (i, j) = match members {
            Some(m) => (
                m[g.rng.gen_range(0..m.len())],
                m[g.rng.gen_range(0..m.len())],
            ),
            None => (g.pick(), g.pick()),
        };
        if i == j || is_related(i, j) {
            continue;
        }
        let (h, f) = g.boilerplate(i, &articles[i].title);
        let wrap = |k: usize| {
            let mut a = articles[k].clone();
            a.content = format!("{h}\n{}\n{f}", a.content);
            a.to_map()
        };
        pairs.push(LabelledPair {
            a: wrap(i),
            b: wrap(j),
            duplicate: false,
            kind: Some("hard_negative".into()),
            transformation: Some("shared_boilerplate".into()),
            size: None,
        });
    }

    // The same event told in different words: headlines sharing at least three content
    // words, bodies sharing no sentence.
    let seg = Segmenter::new(true, false);
    let title_words: Vec<HashSet<String>> = articles
        .iter()
        .map(|a| {
            seg.words(&a.title)
                .into_iter()
                .filter(|w| w.chars().count() >= 2)
                .collect()
        })
        .collect();
    let mut by_word: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    for (i, ws) in title_words.iter().enumerate() {
        for w in ws {
            by_word.entry(w.as_str()).or_default().push(i);
        }
    }
    let mut events = Vec::new();
    let mut seen = HashSet::new();
    let mut words: Vec<(&&str, &Vec<usize>)> =
        by_word.iter().filter(|(_, v)| v.len() <= 40).collect();
    words.sort_unstable_by_key(|(w, _)| **w);
    for (_, docs) in words {
        for (x, &i) in docs.iter().enumerate() {
            for &j in &docs[x + 1..] {
                if !seen.insert((i, j)) {
                    continue;
                }
                let shared = title_words[i].intersection(&title_words[j]).count();
                if shared >= 3 && index.containment(i, j) == 0.0 {
                    events.push((i, j));
                }
            }
        }
    }
    events.sort_unstable();
    events.shuffle(&mut g.rng);
    for &(i, j) in events.iter().take(config.negatives) {
        pairs.push(neg(i, j, "hard_negative", "same_event"));
    }
    progress(&format!(
        "negatives: random, same category/day, shared boilerplate, same event ({} found)",
        events.len().min(config.negatives)
    ));

    let mut topics = same_topic_pairs(articles);
    let found = topics.len();
    topics.shuffle(&mut g.rng);
    for &(i, j) in topics.iter().take(config.negatives) {
        pairs.push(neg(i, j, "hard_negative", "same_topic"));
    }
    progress(&format!(
        "same-topic negatives: {} of {found} found (≥ {TOPIC_SHARED} of the top {TOPIC_KEYWORDS} keywords shared, 5-character containment < {TOPIC_MAX_CONTAINMENT})",
        found.min(config.negatives)
    ));
    pairs
}

/// Top keywords compared for same-topic negatives.
pub const TOPIC_KEYWORDS: usize = 10;
/// Top keywords two articles must share to be on the same topic.
pub const TOPIC_SHARED: usize = 5;
/// Same-topic negatives share less than this share of the shorter text (the oracle's
/// containment of 5-character runs).
pub const TOPIC_MAX_CONTAINMENT: f64 = 0.1;

/// The `n` heaviest words of `text` by term frequency × IDF, with the words and the IDF the
/// fingerprints use; numbers are left out (as in the `keywords` profile). Ties go to the
/// smaller word, so the result is deterministic.
pub fn keywords(fp: &Fingerprinter, text: &str, n: usize) -> Vec<String> {
    let idf = Idf::shared();
    let mut tf: HashMap<String, u32> = HashMap::new();
    for w in fp.words(text) {
        if !is_number(&w) {
            *tf.entry(w).or_default() += 1;
        }
    }
    let mut weighted: Vec<(f64, String)> = tf
        .into_iter()
        .map(|(w, c)| (f64::from(c) * f64::from(idf.get(word_hash(&w))), w))
        .collect();
    weighted.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    weighted.into_iter().take(n).map(|(_, w)| w).collect()
}

/// Pairs `(i, j)`, `i < j`, sorted, of articles on the same topic with little shared text:
/// at least [`TOPIC_SHARED`] of their top [`TOPIC_KEYWORDS`] keywords (title and content) in
/// common, and 5-character containment below [`TOPIC_MAX_CONTAINMENT`].
pub fn same_topic_pairs(articles: &[Article]) -> Vec<(usize, usize)> {
    let fp = Fingerprinter::for_profile(Profile::Default);
    let texts: Vec<[&str; 2]> = articles
        .iter()
        .map(|a| [a.title.as_str(), a.content.as_str()])
        .collect();
    let keys: Vec<Vec<String>> = texts
        .par_iter()
        .map(|t| keywords(&fp, &t.join("\n"), TOPIC_KEYWORDS))
        .collect();
    let mut postings: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, ks) in keys.iter().enumerate() {
        for k in ks {
            postings.entry(k.as_str()).or_default().push(i as u32);
        }
    }
    let runs: Vec<Vec<u64>> = texts.par_iter().map(|t| oracle::runs(t)).collect();
    let mut out: Vec<(usize, usize)> = (0..articles.len())
        .into_par_iter()
        .flat_map_iter(|i| {
            let mut shared: HashMap<u32, usize> = HashMap::new();
            for k in &keys[i] {
                for &j in &postings[k.as_str()] {
                    if j as usize > i {
                        *shared.entry(j).or_default() += 1;
                    }
                }
            }
            let runs = &runs;
            shared.into_iter().filter_map(move |(j, n)| {
                let j = j as usize;
                (n >= TOPIC_SHARED
                    && oracle::overlap(&runs[i], &runs[j]).containment < TOPIC_MAX_CONTAINMENT)
                    .then_some((i, j))
            })
        })
        .collect();
    out.sort_unstable();
    out
}
