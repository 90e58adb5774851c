//! The synthetic benchmark: labelled pairs built from real articles with a seeded RNG.
//!
//! Positives are an article and a copy changed the way reposts really differ; each is labelled
//! with its transformation and size (the fraction of the text touched). Negatives are random
//! pairs and hard ones: same category and day, the same site boilerplate around different
//! stories, the same event with different text, and the same topic (many shared top keywords)
//! with little shared text. A negative of two corpus articles never shares a fifth of the
//! shorter text by the oracle ([`oracle::FALSE_POSITIVE_BELOW`]): reporting it is an error.
//! Real reposts mined from the corpus are added as `real_positive`. ChaCha8 with a fixed seed gives the same benchmark on every
//! platform.
//!
//! Two families of messy text follow ([`Config::messy`]), drawn from their own ChaCha8 stream
//! of the same seed so that everything before them stays as it was: reposts written in
//! Traditional characters ([`TRADITIONAL`]), and short news items under site boilerplate
//! longer than themselves ([`Site`]): two items of one site are `site_boilerplate_long`
//! negatives, one item on two sites is a `same_item_two_sites` positive.
//!
//! The partial reprints follow ([`Config::partial`], stream 2), then the copied-text kinds of
//! issue 43 ([`Config::copies`], stream 3, module `copies`: see [`copies()`]): template
//! instances and their reposts, round-ups and two articles quoting one statement (which share
//! a passage, [`crate::SHARES_PASSAGE`]), and excerpts wrapped in long boilerplate or lightly
//! reworded.

use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use rayon::prelude::*;

use super::oracle;
use super::real::SentenceIndex;
use super::{LabelledPair, CONTAINED_IN, DIFFERENT};
use neardup_core::fingerprint::{is_number, Idf};
use neardup_core::hashing::word_hash;
use neardup_core::text::{Folder, Segmenter, TraditionalStyle};
use neardup_core::{Fingerprinter, Profile};

mod copies;
mod templates;

pub use copies::{
    copies, share_a_run, shared_runs_outside, span_text, template_series, CopiesStats, Instance,
    Pools, Rewording, COMPILATION_MAX_SHARE, COMPILATION_MIN_CHARS, COMPILATION_SHARE,
    COMPILATION_SOURCES, COPIES_STREAM, FIXED_SHARE, REWORDED_MIN_SHARE, REWORDED_SHARE,
    REWORDED_SIZES, SHARED_QUOTE_CHARS, SHARED_QUOTE_MAX_SHARE, SHARED_RUN, SYNONYMS,
    TEMPLATE_CHARS, TEMPLATE_FAMILIES, WRAPPED_MAX_CHARS, WRAPPED_MIN_LETTERS, WRAPPED_SITES,
    WRAPPED_SIZES,
};

/// An article of the source corpus.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Article {
    pub id: String,
    pub title: String,
    pub content: String,
}

impl Article {
    /// The article of a pair's side (`LabelledPair::a` or `b`), `None` when it lacks a
    /// string `id`, `title` or `content`.
    pub fn from_map(m: &Map<String, Value>) -> Option<Article> {
        let text = |f: &str| m.get(f)?.as_str().map(str::to_owned);
        Some(Article {
            id: text("id")?,
            title: text("title")?,
            content: text("content")?,
        })
    }

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
    /// Append the messy families ([`messy`]): `per_cell` Traditional reposts of each
    /// [`TRADITIONAL`] style, `negatives` pairs of short items of one site and `per_cell`
    /// pairs of one item on two sites (fewer when a small input runs out of short items).
    /// `false` gives the benchmark as it was before them; the pairs before them are the same
    /// either way.
    pub messy: bool,
    /// Append the partial-reprint kinds ([`partial`]) after the messy ones: `per_cell`
    /// `lead_excerpt` and `middle_passage` positives of each [`PARTIAL_SIZES`] share, and
    /// `negatives` `digest_page`, `shared_statement` and `same_day_teasers` negatives (fewer
    /// when a small input runs out of long articles). `false` gives the benchmark as it was
    /// before them; the pairs before them are the same either way.
    pub partial: bool,
    /// Append the copied-text kinds of issue 43 ([`copies()`]) after the partial ones:
    /// `negatives` `template_instances` pairs, `per_cell` `template_repost`, `compilation` and
    /// `shared_quote` pairs, and `per_cell` `wrapped_excerpt` and `reworded_passage` pairs of
    /// each of their sizes (fewer when a small input runs out of suitable articles). `false`
    /// gives the benchmark as it was before them; the pairs before them are the same either
    /// way.
    pub copies: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 20240601,
            per_cell: 200,
            negatives: 2000,
            real: 2000,
            messy: true,
            partial: true,
            copies: true,
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

/// The Traditional-character reposts, in generation order: the article and a copy of it
/// (title and content) converted by OpenCC's `s2t`, `s2twp` (Taiwan phrases: 软件 → 軟體,
/// 网络 → 網路, 信息 → 資訊) and `s2hk`.
pub const TRADITIONAL: &[(&str, TraditionalStyle)] = &[
    ("traditional_chars", TraditionalStyle::Characters),
    ("traditional_taiwan", TraditionalStyle::Taiwan),
    ("traditional_hongkong", TraditionalStyle::HongKong),
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

    /// Two articles of one category and day (of `cats`, not empty), filed close together:
    /// at most 19 apart in the category's order. They may be the same article.
    fn same_day(&mut self, cats: &[Vec<usize>]) -> (usize, usize) {
        let members = &cats[self.rng.gen_range(0..cats.len())];
        let x = self.rng.gen_range(0..members.len());
        let y = (x + self.rng.gen_range(1..=members.len().clamp(2, 20) - 1)) % members.len();
        (members[x], members[y])
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
            t if traditional_style(t).is_some() => {
                let style = traditional_style(t)?;
                let folder = Folder::shared();
                let content_t = folder.to_traditional(&content, style);
                if content_t == content {
                    return None;
                }
                (folder.to_traditional(&title, style), content_t, 0.0)
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
                relation: None,
                a_span: None,
                b_span: None,
            });
        }
        out
    }
}

/// The OpenCC style of a Traditional transformation name.
fn traditional_style(t: &str) -> Option<TraditionalStyle> {
    TRADITIONAL
        .iter()
        .find(|(name, _)| *name == t)
        .map(|&(_, style)| style)
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
    // A negative drawn from the corpus must be one the oracle counts a false positive when
    // reported: two articles of one page, day or event sometimes share most of a text in
    // other words or other sentence breaks (a summary of a notice beside the notice), which
    // the sentence index does not see.
    let runs = ArticleRuns::new(articles);
    let clean_negative = |i: usize, j: usize| !is_related(i, j) && !runs.share_text(i, j);

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
                relation: None,
                a_span: None,
                b_span: None,
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
        relation: None,
        a_span: None,
        b_span: None,
    };

    let mut seen = HashSet::new();
    let mut n = 0;
    while n < config.negatives && seen.len() < config.negatives * 10 {
        let (i, j) = (g.pick(), g.pick());
        if i == j || !clean_negative(i, j) || !seen.insert((i.min(j), i.max(j))) {
            continue;
        }
        pairs.push(neg(i, j, "random_negative", "random"));
        n += 1;
    }

    // Same category and day: People's Daily articles of one date (same page first), Sina
    // articles of one folder filed close together.
    let cats = categories(articles);
    let mut n = 0;
    let mut tries = 0;
    let mut seen = HashSet::new();
    while n < config.negatives && !cats.is_empty() && tries < config.negatives * 20 {
        tries += 1;
        let (i, j) = g.same_day(&cats);
        if i == j || !clean_negative(i, j) || !seen.insert((i.min(j), i.max(j))) {
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
            Some(&cats[g.rng.gen_range(0..cats.len())])
        };
        let (i, j) = match members {
            Some(m) => (
                m[g.rng.gen_range(0..m.len())],
                m[g.rng.gen_range(0..m.len())],
            ),
            None => (g.pick(), g.pick()),
        };
        if i == j || !clean_negative(i, j) {
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
            relation: None,
            a_span: None,
            b_span: None,
        });
    }

    // The same event told in different words: headlines sharing at least three content
    // words, bodies sharing no sentence and no text by the oracle.
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
                if shared >= 3 && index.containment(i, j) == 0.0 && !runs.share_text(i, j) {
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

    let mut topics = same_topic_pairs_of(articles, &runs);
    let found = topics.len();
    topics.shuffle(&mut g.rng);
    for &(i, j) in topics.iter().take(config.negatives) {
        pairs.push(neg(i, j, "hard_negative", "same_topic"));
    }
    progress(&format!(
        "same-topic negatives: {} of {found} found (≥ {TOPIC_SHARED} of the top {TOPIC_KEYWORDS} keywords shared, 5-character containment < {TOPIC_MAX_CONTAINMENT})",
        found.min(config.negatives)
    ));
    if config.messy {
        pairs.extend(messy_with(articles, config, &is_related, &mut progress));
    }
    if config.partial {
        pairs.extend(partial_with(articles, config, &is_related, &mut progress));
    }
    if config.copies {
        pairs.extend(copies::copies_with(articles, config, &is_related, &mut progress).0);
    }
    pairs
}

/// The oracle's runs of every corpus article (title and content), made once for the negatives
/// that must share no text and for the same-topic ones that must share little.
struct ArticleRuns {
    runs: Vec<Vec<u64>>,
}

impl ArticleRuns {
    fn new(articles: &[Article]) -> ArticleRuns {
        ArticleRuns {
            runs: articles
                .par_iter()
                .map(|a| oracle::runs(&[a.title.as_str(), a.content.as_str()]))
                .collect(),
        }
    }

    fn overlap(&self, i: usize, j: usize) -> oracle::Overlap {
        oracle::overlap(&self.runs[i], &self.runs[j])
    }

    /// Whether reporting articles `i` and `j` would be no error by the oracle: they share at
    /// least [`oracle::FALSE_POSITIVE_BELOW`] of the shorter one's text.
    fn share_text(&self, i: usize, j: usize) -> bool {
        self.overlap(i, j).verdict() != oracle::Verdict::Unrelated
    }
}

/// The articles of each category and day ([`category`]) with at least two, in the order of
/// the categories.
fn categories(articles: &[Article]) -> Vec<Vec<usize>> {
    let mut by_cat: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, a) in articles.iter().enumerate() {
        if let Some(c) = category(&a.id) {
            by_cat.entry(c).or_default().push(i);
        }
    }
    by_cat.into_values().filter(|v| v.len() >= 2).collect()
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
    same_topic_pairs_of(articles, &ArticleRuns::new(articles))
}

/// [`same_topic_pairs`] with the articles' runs already made.
fn same_topic_pairs_of(articles: &[Article], runs: &ArticleRuns) -> Vec<(usize, usize)> {
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
            shared.into_iter().filter_map(move |(j, n)| {
                let j = j as usize;
                (n >= TOPIC_SHARED && runs.overlap(i, j).containment < TOPIC_MAX_CONTAINMENT)
                    .then_some((i, j))
            })
        })
        .collect();
    out.sort_unstable();
    out
}

/// The ChaCha8 stream the messy families draw from (stream 0 of the same seed makes
/// everything before them, which is why adding them changed none of it).
pub const MESSY_STREAM: u64 = 1;

/// Characters of a short news item: the lead of an article, cut at a sentence end.
pub const SHORT_ITEM_CHARS: RangeInclusive<usize> = 150..=400;

/// Characters of a site's boilerplate, all its lines together (line breaks not counted).
pub const SITE_BOILERPLATE_CHARS: RangeInclusive<usize> = 500..=800;

/// Items each site carries: its pool, pairwise unrelated (fewer when the input runs out).
pub const SITE_ITEMS: usize = 40;

/// `site_boilerplate_long` negatives per site, at most: there are `max(2, ⌈negatives /
/// this⌉)` sites. The first `SITE_ITEMS / 2` negatives of a site pair off its whole pool, so
/// from `negatives` ≥ 40 on (each site then has at least 20) every item of every full pool
/// is in the file: [`SITE_ITEMS`] pages per site.
pub const NEGATIVES_PER_SITE: usize = 40;

/// Related links each site lists under its first heading, at least.
const MIN_LINKS: usize = 5;
/// Links of one list, at most.
const MAX_LINKS: usize = 10;

const SECTIONS: &[&str] = &[
    "新闻", "国内", "国际", "财经", "体育", "娱乐", "科技", "教育", "健康", "汽车", "房产", "时尚",
    "军事", "社会", "文化", "旅游", "评论", "图片", "视频", "地方",
];
const NAME_SUFFIXES: &[&str] = &[
    "网",
    "在线",
    "新闻网",
    "资讯网",
    "热线",
    "日报网",
    "晚报",
    "新闻",
    "观察",
    "视界",
];
const SURNAMES: &[&str] = &[
    "王", "李", "张", "刘", "陈", "杨", "黄", "赵", "吴", "周", "徐", "孙", "马", "朱", "胡", "郭",
    "何", "林", "罗", "高", "郑", "梁", "谢", "宋", "唐", "韩", "冯", "邓", "曹", "彭",
];
const GIVEN: &[&str] = &[
    "伟", "芳", "娜", "敏", "静", "丽", "强", "磊", "军", "洋", "勇", "艳", "杰", "娟", "涛", "明",
    "超", "秀", "霞", "平", "刚", "桂", "英", "华", "慧", "建", "晓", "宁", "鹏", "婷",
];
const CITIES: &[&str] = &[
    "北京市",
    "上海市",
    "广州市",
    "深圳市",
    "杭州市",
    "南京市",
    "成都市",
    "武汉市",
    "西安市",
    "长沙市",
    "郑州市",
    "济南市",
    "福州市",
    "合肥市",
    "昆明市",
    "南宁市",
    "沈阳市",
    "天津市",
    "重庆市",
    "青岛市",
];
const PROVINCES: &[&str] = &[
    "京", "沪", "粤", "浙", "苏", "鲁", "川", "鄂", "湘", "闽", "豫", "冀", "陕", "辽", "津", "渝",
    "皖", "赣", "桂", "滇",
];

/// A site that carries short news items: the same boilerplate lines on every page, some
/// before the item (navigation, breadcrumb) on about half of the sites, the rest after it
/// (share line, disclaimer, related links, footer). Made from seeded choices and corpus
/// material (the site's name, the road of its address and its link texts come from corpus
/// headlines), so that two sites share little of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    /// `site<n>`: a page of the site has the id `<article id>~site<n>`.
    pub key: String,
    pub name: String,
    /// Lines before the item.
    pub before: Vec<String>,
    /// Lines after the item.
    pub after: Vec<String>,
}

impl Site {
    /// Characters of the boilerplate, line breaks not counted.
    pub fn boilerplate_chars(&self) -> usize {
        self.before
            .iter()
            .chain(&self.after)
            .map(|l| chars(l))
            .sum()
    }

    /// A page of the site carrying `item`: the lines before, the item, the lines after.
    pub fn page(&self, item: &str) -> String {
        self.before
            .iter()
            .map(String::as_str)
            .chain([item])
            .chain(self.after.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The sentence end of [`lead_cuts`] nearest to `size` of `content`'s characters, within
/// [`PARTIAL_TOLERANCE`] of it (a byte offset); `None` when no sentence ends there.
pub(crate) fn nearest_lead_cut(content: &str, size: f64) -> Option<usize> {
    let target = size * chars(content) as f64;
    lead_cuts(content, &share_range(chars(content), size))
        .into_iter()
        .min_by(|&x, &y| {
            let off = |c: usize| (chars(&content[..c]) as f64 - target).abs();
            off(x).total_cmp(&off(y))
        })
}

/// Where a lead of `content` with a length in `range` (characters) can end: after `。！？!?`
/// (and the closing quotes or brackets after it), at a paragraph end, or at the end of the
/// text. Byte offsets, ascending; `content[..cut]` is the lead.
pub fn lead_cuts(content: &str, range: &RangeInclusive<usize>) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut n = 0;
    let mut ended = false;
    for (at, c) in content.char_indices() {
        if n > *range.end() {
            return cuts;
        }
        let closing = matches!(c, '”' | '’' | '」' | '』' | '"' | '）' | ')');
        if c == '\n' || (ended && !closing) {
            if range.contains(&n) {
                cuts.push(at);
            }
            ended = false;
        }
        if matches!(c, '。' | '！' | '？' | '!' | '?') {
            ended = true;
        }
        n += 1;
    }
    if range.contains(&n) {
        cuts.push(content.len());
    }
    cuts
}

fn is_cjk(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}

/// A short item of a site's pool: the lead of article `source`, with its oracle runs.
struct Item {
    source: usize,
    content: String,
    runs: Vec<u64>,
}

impl Generator<'_> {
    /// The lead of article `i` as a short news item ([`SHORT_ITEM_CHARS`]), cut at one of its
    /// sentence ends chosen at random; `None` when it has no such end.
    fn short_item(&mut self, i: usize) -> Option<String> {
        let content = &self.articles[i].content;
        let cuts = lead_cuts(content, &SHORT_ITEM_CHARS);
        let cut = *cuts.choose(&mut self.rng)?;
        Some(content[..cut].to_owned())
    }

    /// `k` adjacent CJK characters of a random corpus headline.
    fn corpus_chars(&mut self, k: usize) -> String {
        for _ in 0..1000 {
            let title: Vec<char> = self.articles[self.pick()].title.chars().collect();
            let starts: Vec<usize> = (0..title.len().saturating_sub(k - 1))
                .filter(|&s| title[s..s + k].iter().all(|&c| is_cjk(c)))
                .collect();
            if let Some(&s) = starts.choose(&mut self.rng) {
                return title[s..s + k].iter().collect();
            }
        }
        // Headlines without CJK runs (a test input of Latin text): a name of seeded letters.
        self.letters(k, k)
    }

    fn digits(&mut self, k: usize) -> String {
        (0..k)
            .map(|_| char::from(b'0' + self.rng.gen_range(0..10u8)))
            .collect()
    }

    fn letters(&mut self, min: usize, max: usize) -> String {
        let k = self.rng.gen_range(min..=max);
        (0..k)
            .map(|_| char::from(b'a' + self.rng.gen_range(0..26u8)))
            .collect()
    }

    fn person(&mut self) -> String {
        let given = self.rng.gen_range(1..=2);
        let mut p = (*SURNAMES.choose(&mut self.rng).unwrap()).to_owned();
        for _ in 0..given {
            p.push_str(GIVEN.choose(&mut self.rng).unwrap());
        }
        p
    }

    fn phone(&mut self) -> String {
        format!("0{}-{}", self.digits(2), self.digits(8))
    }

    /// The headline of another corpus article (8–40 characters) for a related-links list of
    /// a site that lists `own` already: one no site lists yet when the input has one, one
    /// this site does not list when it has one.
    fn link_title(&mut self, links: &mut HashSet<usize>, own: &mut HashSet<usize>) -> String {
        let mut fallback = None;
        for _ in 0..200 {
            let j = self.pick();
            let title = self.articles[j].title.trim();
            if own.contains(&j) || !(8..=40).contains(&chars(title)) || title.contains('\n') {
                continue;
            }
            let title = title.to_owned();
            if links.insert(j) {
                own.insert(j);
                return title;
            }
            fallback.get_or_insert((j, title));
        }
        let (j, title) = fallback.unwrap_or_else(|| {
            let j = self.pick();
            (j, self.articles[j].title.trim().to_owned())
        });
        own.insert(j);
        title
    }

    /// The disclaimer paragraph: an opener and three or four clauses, each one of several
    /// wordings, with the site's name, mailbox and phone.
    fn disclaimer(&mut self, name: &str, email: &str, phone: &str) -> String {
        let opener = *[
            "特别声明：",
            "免责声明：",
            "声明：",
            "郑重声明：",
            "版权及免责声明：",
        ]
        .choose(&mut self.rng)
        .unwrap();
        let rights = match self.rng.gen_range(0..4) {
            0 => format!(
                "本网站所载文章、图片、视频等内容，凡注明“来源：{name}”的，版权均属{name}所有。"
            ),
            1 => format!(
                "凡本网注明“来源：{name}”的所有作品，均为{name}合法拥有版权或有权使用的作品。"
            ),
            2 => format!("{name}刊载的原创内容，著作权归{name}及作者所有。"),
            _ => format!("本站发布的所有内容，除特别注明外，版权归{name}及相关权利人所有。"),
        };
        let reuse = [
            "未经本网书面授权，任何单位和个人不得转载、摘编或以其他方式使用。",
            "未经许可，禁止任何媒体、网站或个人转载、链接、转贴或以其他方式复制发表。",
            "如需转载，请与本站联系并注明出处，违者本网将依法追究责任。",
            "其他媒体、网站或个人转载使用时，须保留本网注明的稿件来源，并自负版权等法律责任。",
        ]
        .choose(&mut self.rng)
        .unwrap()
        .to_string();
        let views = match self.rng.gen_range(0..4) {
            0 => "本网转载其他媒体之稿件，意在为公众提供免费服务，不代表本网赞同其观点或证实其描述。".to_owned(),
            1 => format!("转载文章仅代表原作者观点，不代表{name}立场，其真实性由作者或稿源方负责。"),
            2 => "凡注明来源为其他媒体的作品，均转载自其它媒体，目的在于传递更多信息，并不代表本网赞同其观点和对其真实性负责。".to_owned(),
            _ => "文中观点仅供读者参考，不构成任何投资建议，据此操作风险自担。".to_owned(),
        };
        let contact = match self.rng.gen_range(0..4) {
            0 => "如涉及作品内容、版权和其它问题，请在三十日内与本网联系，我们将及时处理。"
                .to_owned(),
            1 => "如您认为本站内容侵犯了您的权益，请来信告知，本站核实后将立即删除。".to_owned(),
            2 => format!("如有侵权，请联系{email}，我们将在二十四小时内处理。"),
            _ => format!("举报电话：{phone}，举报邮箱：{email}。"),
        };
        let mut clauses = vec![rights, reuse, views, contact];
        if self.rng.gen_bool(0.3) {
            clauses.remove(self.rng.gen_range(1..clauses.len()));
        }
        format!("{opener}{}", clauses.concat())
    }

    /// Site `n`: its name (unique among `names`), and boilerplate of a length drawn from
    /// [`SITE_BOILERPLATE_CHARS`]; the articles whose headlines it lists join `links`.
    fn site(&mut self, n: usize, names: &mut HashSet<String>, links: &mut HashSet<usize>) -> Site {
        let name = loop {
            let stem = self.corpus_chars(2);
            let name = format!("{stem}{}", NAME_SUFFIXES.choose(&mut self.rng).unwrap());
            if names.insert(name.clone()) {
                break name;
            }
        };
        let target = self.rng.gen_range(SITE_BOILERPLATE_CHARS);
        loop {
            let letters = self.letters(4, 9);
            let tld = *[".com", ".cn", ".com.cn", ".net"]
                .choose(&mut self.rng)
                .unwrap();
            let domain = format!("{letters}{tld}");
            let mailbox = *["news", "tougao", "editor", "jubao", "service", "webmaster"]
                .choose(&mut self.rng)
                .unwrap();
            let email = format!("{mailbox}@{domain}");
            let phone = self.phone();

            let sections_n = self.rng.gen_range(5..=8);
            let sections: Vec<&str> = SECTIONS
                .choose_multiple(&mut self.rng, sections_n)
                .copied()
                .collect();
            let sep = *[" | ", "  ", " · ", "｜"].choose(&mut self.rng).unwrap();
            let nav = format!("{name}首页{sep}{}", sections.join(sep));
            let section = sections[0];
            let crumb = match self.rng.gen_range(0..3) {
                0 => format!("当前位置：{name} > {section} > 正文"),
                1 => format!("您现在的位置：首页 > {section}频道"),
                _ => format!("{name} > {section} > 详情"),
            };
            let share = match self.rng.gen_range(0..4) {
                0 => "分享到：微信 微博 QQ空间".to_owned(),
                1 => "扫一扫，分享到朋友圈".to_owned(),
                2 => format!("打开{name}客户端，阅读体验更佳"),
                _ => format!("关注{name}微信公众号，获取更多资讯"),
            };
            let disclaimer = self.disclaimer(&name, &email, &phone);

            let (editor, second) = (self.person(), self.person());
            let mut footer = vec![match self.rng.gen_range(0..4) {
                0 => format!("责任编辑：{editor}"),
                1 => format!("（编辑：{editor}）"),
                2 => format!("编辑：{editor}　审核：{second}"),
                _ => format!("本文编辑：{editor}　校对：{second}"),
            }];
            let (y1, y2) = (
                self.rng.gen_range(1998..=2012),
                self.rng.gen_range(2018..=2020),
            );
            footer.push(match self.rng.gen_range(0..4) {
                0 => format!("Copyright © {y1}-{y2} www.{domain} All Rights Reserved"),
                1 => format!("{name} 版权所有 © {y1}-{y2}"),
                2 => format!("版权所有：{name}（www.{domain}）　未经授权禁止复制或建立镜像"),
                _ => format!("© {y2} {name} 保留所有权利"),
            });
            let province = *PROVINCES.choose(&mut self.rng).unwrap();
            footer.push(format!(
                "{province}ICP备{}号-{}",
                self.digits(8),
                self.rng.gen_range(1..=3)
            ));
            if self.rng.gen_bool(0.5) {
                footer.push(format!("{province}公网安备 {}号", self.digits(14)));
            }
            let city = *CITIES.choose(&mut self.rng).unwrap();
            let road = self.corpus_chars(2);
            let kind = *["路", "街", "大道", "大街"].choose(&mut self.rng).unwrap();
            footer.push(format!(
                "地址：{city}{road}{kind}{}号　邮编：{}",
                self.rng.gen_range(1..=999),
                self.digits(6)
            ));
            footer.push(match self.rng.gen_range(0..3) {
                0 => format!("新闻热线：{phone}　广告合作：{}", self.phone()),
                1 => format!("联系电话：{phone}"),
                _ => format!("违法和不良信息举报电话：{phone}"),
            });
            if self.rng.gen_bool(0.5) {
                footer.push(format!("投稿邮箱：{email}"));
            }

            let headings = ["相关阅读", "相关新闻", "延伸阅读", "推荐阅读"];
            let more = ["热门文章", "猜你喜欢", "编辑推荐", "今日热点", "24小时热文"];
            let style = self.rng.gen_range(0..5);
            let heading = |h: &str| match style {
                0 => format!("{h}："),
                1 => format!("【{h}】"),
                2 => format!("—— {h} ——"),
                _ => h.to_owned(),
            };
            let link = |k: usize, t: &str| match style {
                0 => format!("· {t}"),
                1 => format!("{}. {t}", k + 1),
                2 => format!("> {t}"),
                3 => format!("【{}】{t}", k + 1),
                _ => t.to_owned(),
            };
            let mut lists = vec![vec![heading(headings.choose(&mut self.rng).unwrap())]];
            let second_heading = heading(more.choose(&mut self.rng).unwrap());
            let first_max = self.rng.gen_range(MIN_LINKS..=MAX_LINKS);

            let header = self.rng.gen_bool(0.5);
            let mut before = Vec::new();
            let mut blocks: Vec<Vec<String>> = vec![vec![disclaimer]];
            if header {
                before.push(nav);
                before.push(crumb);
            } else {
                footer.insert(0, nav);
            }
            let share_first = self.rng.gen_bool(0.5);
            let fixed: usize = before
                .iter()
                .chain(&blocks[0])
                .chain(&footer)
                .chain(&lists[0])
                .map(|l| chars(l))
                .sum::<usize>()
                + chars(&share);
            // Links until the target length: at least MIN_LINKS in the first list, the rest in
            // a second one; a headline that would pass the maximum is skipped.
            let mut own = HashSet::new();
            let mut total = fixed;
            for _ in 0..400 {
                let first = lists[0].len() - 1;
                if first >= MIN_LINKS && total >= target {
                    break;
                }
                let in_second = first >= first_max;
                if in_second && lists.len() == 1 {
                    if total + chars(&second_heading) > *SITE_BOILERPLATE_CHARS.end() {
                        break;
                    }
                    total += chars(&second_heading);
                    lists.push(vec![second_heading.clone()]);
                }
                let list = lists.len() - 1;
                if lists[list].len() > MAX_LINKS {
                    break;
                }
                let line = link(lists[list].len() - 1, &self.link_title(links, &mut own));
                if total + chars(&line) > *SITE_BOILERPLATE_CHARS.end() {
                    continue;
                }
                total += chars(&line);
                lists[list].push(line);
            }
            if lists[0].len() - 1 < MIN_LINKS || !SITE_BOILERPLATE_CHARS.contains(&total) {
                continue;
            }
            blocks.extend(lists);
            blocks.shuffle(&mut self.rng);
            let mut after = Vec::new();
            if share_first {
                after.push(share);
            } else {
                footer.insert(0, share);
            }
            after.extend(blocks.into_iter().flatten());
            after.extend(footer);
            let site = Site {
                key: format!("site{n}"),
                name,
                before,
                after,
            };
            debug_assert_eq!(site.boilerplate_chars(), total);
            return site;
        }
    }

    /// The site families: short items of one site (`site_boilerplate_long` negatives) and one
    /// item on two sites (`same_item_two_sites` positives).
    fn site_pairs(
        &mut self,
        config: &Config,
        is_related: &dyn Fn(usize, usize) -> bool,
    ) -> (Vec<Site>, Vec<LabelledPair>) {
        let articles = self.articles;
        let count = config.negatives.div_ceil(NEGATIVES_PER_SITE).max(2);
        let mut names = HashSet::new();
        let mut links = HashSet::new();
        let sites: Vec<Site> = (0..count)
            .map(|n| self.site(n, &mut names, &mut links))
            .collect();

        // Pools: leads of articles no site links to, pairwise unrelated within a site (by the
        // sentence index on the whole articles and by the oracle on the items), dealt to the
        // sites in turn.
        let mut order: Vec<usize> = (0..articles.len()).filter(|i| !links.contains(i)).collect();
        order.shuffle(&mut self.rng);
        let mut pools: Vec<Vec<Item>> = (0..count).map(|_| Vec::new()).collect();
        let mut turn = 0;
        for i in order {
            if pools.iter().all(|p| p.len() >= SITE_ITEMS) {
                break;
            }
            let Some(content) = self.short_item(i) else {
                continue;
            };
            let runs = oracle::runs(&[articles[i].title.as_str(), content.as_str()]);
            let fits = |pool: &Vec<Item>| {
                pool.len() < SITE_ITEMS
                    && pool.iter().all(|o| {
                        !is_related(o.source, i)
                            && oracle::overlap(&o.runs, &runs).verdict()
                                == oracle::Verdict::Unrelated
                    })
            };
            if let Some(s) = (0..count)
                .map(|k| (turn + k) % count)
                .find(|&s| fits(&pools[s]))
            {
                pools[s].push(Item {
                    source: i,
                    content,
                    runs,
                });
                turn = s + 1;
            }
        }

        let page = |site: &Site, item: &Item| {
            let a = &articles[item.source];
            Article {
                id: format!("{}~{}", a.id, site.key),
                title: a.title.clone(),
                content: site.page(&item.content),
            }
            .to_map()
        };
        let mut pairs = Vec::new();
        for (s, pool) in pools.iter().enumerate() {
            let quota = config.negatives / count + usize::from(s < config.negatives % count);
            let m = pool.len();
            let quota = quota.min(m * m.saturating_sub(1) / 2);
            // First pair off the whole pool, so that every item of the site is in the file,
            // then pairs at random.
            let mut idx: Vec<usize> = (0..m).collect();
            idx.shuffle(&mut self.rng);
            let mut chosen: Vec<(usize, usize)> = idx
                .chunks_exact(2)
                .map(|c| (c[0], c[1]))
                .take(quota)
                .collect();
            let mut seen: HashSet<(usize, usize)> =
                chosen.iter().map(|&(x, y)| (x.min(y), x.max(y))).collect();
            while chosen.len() < quota {
                let (x, y) = (self.rng.gen_range(0..m), self.rng.gen_range(0..m));
                if x != y && seen.insert((x.min(y), x.max(y))) {
                    chosen.push((x, y));
                }
            }
            for (x, y) in chosen {
                pairs.push(LabelledPair {
                    a: page(&sites[s], &pool[x]),
                    b: page(&sites[s], &pool[y]),
                    duplicate: false,
                    kind: Some("hard_negative".into()),
                    transformation: Some("site_boilerplate_long".into()),
                    size: None,
                    relation: None,
                    a_span: None,
                    b_span: None,
                });
            }
        }

        let carriers: Vec<usize> = (0..count).filter(|&s| !pools[s].is_empty()).collect();
        let mut seen = HashSet::new();
        let mut made = 0;
        let mut tries = 0;
        while made < config.per_cell && !carriers.is_empty() && tries < config.per_cell * 20 {
            tries += 1;
            let a = *carriers.choose(&mut self.rng).unwrap();
            let x = self.rng.gen_range(0..pools[a].len());
            let mut b = self.rng.gen_range(0..count - 1);
            if b >= a {
                b += 1;
            }
            if !seen.insert((a, x, b)) {
                continue;
            }
            let item = &pools[a][x];
            // What differs between the two pages, as a share of the item: both boilerplates.
            let touched = sites[a].boilerplate_chars() + sites[b].boilerplate_chars();
            pairs.push(LabelledPair {
                a: page(&sites[a], item),
                b: page(&sites[b], item),
                duplicate: true,
                kind: Some("positive".into()),
                transformation: Some("same_item_two_sites".into()),
                size: Some(round(touched as f64 / chars(&item.content) as f64)),
                relation: None,
                a_span: None,
                b_span: None,
            });
            made += 1;
        }
        (sites, pairs)
    }
}

/// The messy families alone, as [`generate`] appends them when [`Config::messy`] is on:
/// `per_cell` Traditional reposts of each [`TRADITIONAL`] style, then up to `negatives`
/// `site_boilerplate_long` negatives (two short items of one site, never of one article,
/// never related by the sentence index or the oracle) and up to `per_cell`
/// `same_item_two_sites` positives. They draw from stream [`MESSY_STREAM`] of the seed.
pub fn messy(
    articles: &[Article],
    config: &Config,
    mut progress: impl FnMut(&str),
) -> Vec<LabelledPair> {
    let related = related_pairs(articles);
    let is_related = |i: usize, j: usize| related.contains(&(i.min(j), i.max(j)));
    messy_with(articles, config, &is_related, &mut progress)
}

/// The pairs `(i, j)`, `i < j`, of articles sharing a fifth of their sentences (the sentence
/// index on title and content): not clean negatives.
fn related_pairs(articles: &[Article]) -> HashSet<(usize, usize)> {
    let texts: Vec<String> = articles
        .iter()
        .map(|a| format!("{}\n{}", a.title, a.content))
        .collect();
    SentenceIndex::new(&texts)
        .overlapping_pairs(0.2)
        .into_iter()
        .map(|(i, j, _)| (i, j))
        .collect()
}

fn messy_with(
    articles: &[Article],
    config: &Config,
    is_related: &dyn Fn(usize, usize) -> bool,
    progress: &mut dyn FnMut(&str),
) -> Vec<LabelledPair> {
    let mut g = Generator::new(articles, config.seed);
    g.rng.set_stream(MESSY_STREAM);
    let mut pairs = Vec::new();
    for (t, _) in TRADITIONAL {
        pairs.extend(g.positives(t, 0.0, config.per_cell));
    }
    progress("positives: traditional_chars, traditional_taiwan, traditional_hongkong");
    let (sites, site_pairs) = g.site_pairs(config, is_related);
    let negatives = site_pairs.iter().filter(|p| !p.duplicate).count();
    progress(&format!(
        "site boilerplate: {} sites ({}–{} characters of boilerplate), {negatives} site_boilerplate_long negatives, {} same_item_two_sites positives",
        sites.len(),
        sites.iter().map(Site::boilerplate_chars).min().unwrap_or(0),
        sites.iter().map(Site::boilerplate_chars).max().unwrap_or(0),
        site_pairs.len() - negatives
    ));
    pairs.extend(site_pairs);
    pairs
}

/// The ChaCha8 stream the partial-reprint kinds draw from (streams 0 and 1 make everything
/// before them, which adding them left as it was).
pub const PARTIAL_STREAM: u64 = 2;

/// The partial-reprint positives, in generation order: `a` is the full article, `b` a part of
/// it ([`CONTAINED_IN`]).
pub const PARTIAL_POSITIVES: &[&str] = &["lead_excerpt", "middle_passage"];

/// The partial-reprint hard negatives, in generation order ([`DIFFERENT`]).
pub const PARTIAL_NEGATIVES: &[&str] = &["digest_page", "shared_statement", "same_day_teasers"];

/// The shares of the full article's content a partial reprint keeps: its `size`.
pub const PARTIAL_SIZES: &[f64] = &[0.2, 0.25, 0.3, 0.4, 0.5];

/// Partial reprints, and the teasers of `same_day_teasers`, are cut from articles with at
/// least this many characters of content.
pub const PARTIAL_MIN_CHARS: usize = 1000;

/// Letters and digits a part holds, at least (as [`oracle::letters`] counts them): what a
/// teaser or passage adds (a "read more" line, a footer or source line, a title marker) is
/// at most about 12 runs of the oracle, which stays under 5% of the part's runs.
pub const PARTIAL_MIN_LETTERS: usize = 300;

/// A negative of the partial-reprint kinds shares at most this share of its smaller side's
/// runs with the other side ([`oracle::Overlap::containment`] on title and content): two
/// articles of one day can tell one story in sentences of their own, which the sentence
/// index does not see.
pub const PARTIAL_NEGATIVE_MAX_SHARED: f64 = 0.4;

/// A part keeps a share of the content within this much of the size it is labelled with.
pub const PARTIAL_TOLERANCE: f64 = 0.02;

/// A middle passage starts at or after this share of the article's content.
pub const PASSAGE_START: f64 = 0.25;

/// Articles whose first sentences make a digest page.
pub const DIGEST_ARTICLES: RangeInclusive<usize> = 4..=6;

/// The paired article's line takes at most this share of a digest page (characters), and
/// the article has at least 3 times the line's characters.
pub const DIGEST_MAX_SHARE: f64 = 0.25;

/// Characters of a quoted statement: one or two sentences of a third article.
pub const QUOTE_CHARS: RangeInclusive<usize> = 20..=90;

/// The quote takes at most this share of the smaller `shared_statement` item (characters).
pub const QUOTE_MAX_SHARE: f64 = 0.3;

/// Headline characters a title made from a passage's first words keeps, at most.
const SHORT_TITLE_CHARS: usize = 18;

const READ_MORE: &[&str] = &[
    "阅读全文",
    "点击查看全文",
    "未完待续",
    "（未完待续）",
    "展开全文",
    "阅读原文>>",
    "点击阅读全文 >>",
    "……【查看全文】",
];
const DIGEST_TITLES: &[&str] = &[
    "今日要闻",
    "新闻早班车",
    "要闻速览",
    "晚间新闻精选",
    "早读｜今天值得关注的新闻",
    "新闻简报",
];
const ATTRIBUTIONS: &[&str] = &[
    "有关部门表示：",
    "官方通报称：",
    "相关负责人表示：",
    "通报指出：",
    "官方回应称：",
    "声明称：",
];

/// The characters of a part of `total` characters labelled `size` may have.
fn share_range(total: usize, size: f64) -> RangeInclusive<usize> {
    let t = total as f64;
    ((size - PARTIAL_TOLERANCE) * t).ceil() as usize..=((size + PARTIAL_TOLERANCE) * t) as usize
}

/// The first words of `text` as a short headline: up to its first clause break after at
/// least 6 characters, at most [`SHORT_TITLE_CHARS`]; `None` when they hold fewer than 6
/// letters or digits.
fn short_title(text: &str) -> Option<String> {
    let mut out = String::new();
    for c in text.trim().chars() {
        let brk = matches!(
            c,
            '，' | '。' | '：' | '；' | '！' | '？' | '、' | ',' | ':' | ';' | ' ' | '　' | '\n'
        );
        if brk && chars(&out) >= 6 {
            break;
        }
        out.push(c);
        if chars(&out) >= SHORT_TITLE_CHARS {
            break;
        }
    }
    let out = out.trim().to_owned();
    (out.chars().filter(|c| c.is_alphanumeric()).count() >= 6).then_some(out)
}

/// The first sentence of `content`, trimmed, when it has 15–150 characters.
fn first_sentence(content: &str) -> Option<String> {
    let s = Doc::parse(content)
        .paras
        .first()?
        .first()?
        .trim()
        .to_owned();
    (15..=150).contains(&chars(&s)).then_some(s)
}

impl Generator<'_> {
    /// A headline for a teaser of article `i`: its own, its first clause, or its own with a
    /// marker.
    fn teaser_title(&mut self, i: usize) -> String {
        let title = self.articles[i].title.trim();
        match self.rng.gen_range(0..4) {
            0 => title.to_owned(),
            1 => short_title(title).unwrap_or_else(|| title.to_owned()),
            2 => format!("{title}（摘编）"),
            _ => format!("导读｜{title}"),
        }
    }

    /// The last line of a teaser: a "read more" line ([`READ_MORE`]), or a short site footer
    /// (the source and editor lines of the reposts' boilerplate).
    fn teaser_end(&mut self) -> String {
        if self.rng.gen_bool(0.6) {
            return (*READ_MORE.choose(&mut self.rng).unwrap()).to_owned();
        }
        if self.rng.gen_bool(0.5) {
            format!("（责任编辑：{}）", EDITORS.choose(&mut self.rng).unwrap())
        } else {
            format!("来源：{}", SOURCES.choose(&mut self.rng).unwrap())
        }
    }

    /// A teaser of article `i` keeping `size` of its content: its lead, cut at the sentence
    /// end nearest to `size` within [`PARTIAL_TOLERANCE`], under [`Generator::teaser_title`]
    /// and ending with [`Generator::teaser_end`]; `None` when no sentence ends there.
    fn lead_excerpt(&mut self, i: usize, size: f64) -> Option<Article> {
        let art = &self.articles[i];
        let content = &art.content;
        let cut = nearest_lead_cut(content, size)?;
        let lead = content[..cut].trim();
        if chars(&oracle::letters(lead)) < PARTIAL_MIN_LETTERS {
            return None;
        }
        let title = self.teaser_title(i);
        let end = self.teaser_end();
        Some(Article {
            id: format!("{}~lead", art.id),
            title,
            content: format!("{lead}\n{end}"),
        })
    }

    /// A passage of article `i` keeping `size` of its content: consecutive sentences (with
    /// their paragraph breaks) starting at or after [`PASSAGE_START`] of the text, chosen at
    /// random among those within [`PARTIAL_TOLERANCE`] of `size`; under a headline made of its
    /// own first words, plain or as another outlet's `【转载】`, with a source line on two
    /// thirds of them.
    fn middle_passage(&mut self, i: usize, size: f64) -> Option<Article> {
        let art = &self.articles[i];
        let total = chars(&art.content);
        let doc = Doc::parse(&art.content);
        // Every sentence: its paragraph, text, and first character in `doc.text()`.
        let mut sents: Vec<(usize, &str, usize)> = Vec::new();
        let mut at = 0;
        for (p, para) in doc.paras.iter().enumerate() {
            if p > 0 {
                at += 1;
            }
            for s in para {
                sents.push((p, s, at));
                at += chars(s);
            }
        }
        let range = share_range(total, size);
        let mut spans = Vec::new();
        for s in 0..sents.len() {
            if (sents[s].2 as f64) < PASSAGE_START * total as f64 {
                continue;
            }
            for e in s..sents.len() {
                let len = sents[e].2 + chars(sents[e].1) - sents[s].2;
                if len > *range.end() {
                    break;
                }
                if range.contains(&len) {
                    spans.push((s, e));
                }
            }
        }
        let &(s, e) = spans.choose(&mut self.rng)?;
        let mut text = String::new();
        for k in s..=e {
            if k > s && sents[k].0 != sents[k - 1].0 {
                text.push('\n');
            }
            text.push_str(sents[k].1);
        }
        let text = text.trim();
        if chars(&oracle::letters(text)) < PARTIAL_MIN_LETTERS {
            return None;
        }
        let own = short_title(text)?;
        let title = if self.rng.gen_bool(0.5) {
            own
        } else {
            format!("【转载】{own}")
        };
        let src = *SOURCES.choose(&mut self.rng).unwrap();
        let content = match self.rng.gen_range(0..3) {
            0 => format!("来源：{src}\n{text}"),
            1 => format!("{text}\n（来源：{src}）"),
            _ => text.to_owned(),
        };
        Some(Article {
            id: format!("{}~passage", art.id),
            title,
            content,
        })
    }

    /// `per_cell` positives of partial-reprint `kind` at `size`: a long article
    /// ([`PARTIAL_MIN_CHARS`]) and its part.
    fn partial_positives(&mut self, kind: &str, size: f64, per_cell: usize) -> Vec<LabelledPair> {
        let articles = self.articles;
        let mut out = Vec::with_capacity(per_cell);
        let mut tries = 0;
        while out.len() < per_cell && tries < per_cell * 50 {
            tries += 1;
            let i = self.pick();
            if chars(&articles[i].content) < PARTIAL_MIN_CHARS {
                continue;
            }
            let part = if kind == "lead_excerpt" {
                self.lead_excerpt(i, size)
            } else {
                self.middle_passage(i, size)
            };
            let Some(b) = part else {
                continue;
            };
            out.push(LabelledPair {
                a: articles[i].to_map(),
                b: b.to_map(),
                duplicate: true,
                kind: Some("positive".into()),
                transformation: Some(kind.into()),
                size: Some(size),
                relation: Some(CONTAINED_IN.into()),
                a_span: None,
                b_span: None,
            });
        }
        out
    }

    /// A digest page: the first sentences of [`DIGEST_ARTICLES`] pairwise unrelated articles
    /// of one category and day, one a line, under a digest headline; paired with one of
    /// them whose line is at most [`DIGEST_MAX_SHARE`] of the page.
    fn digest_page(
        &mut self,
        cats: &[Vec<usize>],
        is_related: &dyn Fn(usize, usize) -> bool,
    ) -> Option<(usize, Article)> {
        let articles = self.articles;
        let mut order = cats[self.rng.gen_range(0..cats.len())].clone();
        let n = self.rng.gen_range(DIGEST_ARTICLES);
        order.shuffle(&mut self.rng);
        let mut chosen: Vec<(usize, String)> = Vec::new();
        for j in order {
            if chosen.len() == n {
                break;
            }
            let Some(s) = first_sentence(&articles[j].content) else {
                continue;
            };
            if chosen.iter().all(|&(k, _)| !is_related(k, j)) {
                chosen.push((j, s));
            }
        }
        if chosen.len() < n {
            return None;
        }
        let style = self.rng.gen_range(0..4);
        let lines: Vec<String> = chosen
            .iter()
            .enumerate()
            .map(|(k, (j, s))| match style {
                0 => format!("{}. {s}", k + 1),
                1 => format!("【{}】{s}", articles[*j].title.trim()),
                2 => format!("· {s}"),
                _ => s.clone(),
            })
            .collect();
        let page: usize = lines.iter().map(|l| chars(l)).sum();
        let fits: Vec<usize> = (0..n)
            .filter(|&k| {
                let line = chars(&lines[k]);
                line as f64 <= DIGEST_MAX_SHARE * page as f64
                    && chars(&articles[chosen[k].0].content) >= 3 * line
            })
            .collect();
        let i = chosen[*fits.choose(&mut self.rng)?].0;
        Some((
            i,
            Article {
                id: format!("{}~digest", articles[i].id),
                title: (*DIGEST_TITLES.choose(&mut self.rng).unwrap()).to_owned(),
                content: lines.join("\n"),
            },
        ))
    }

    /// One or two consecutive sentences of article `k` ([`QUOTE_CHARS`]), trimmed.
    fn quote(&mut self, k: usize) -> Option<String> {
        let doc = Doc::parse(&self.articles[k].content);
        let sents: Vec<&str> = doc.paras.iter().flatten().map(|s| s.trim()).collect();
        if sents.is_empty() {
            return None;
        }
        let at = self.rng.gen_range(0..sents.len());
        let n = self.rng.gen_range(1..=2).min(sents.len() - at);
        let q = sents[at..at + n].concat();
        QUOTE_CHARS.contains(&chars(&q)).then_some(q)
    }

    /// The short item of article `x` ([`Generator::short_item`]) quoting `quote` under an
    /// attribution, as a paragraph of its own after one of its sentences.
    fn quoting_item(&mut self, x: usize, quote: &str) -> Option<String> {
        let lead = self.short_item(x)?;
        let sents = split_sentences(&lead);
        let at = self.rng.gen_range(1..=sents.len());
        let attribution = *ATTRIBUTIONS.choose(&mut self.rng).unwrap();
        let (head, tail) = (sents[..at].concat(), sents[at..].concat());
        let mut item = format!("{}\n{attribution}“{quote}”", head.trim_end());
        if !tail.trim().is_empty() {
            item.push('\n');
            item.push_str(tail.trim_start());
        }
        Some(item)
    }

    /// Two short items of unrelated articles `i` and `j` quoting the same statement of a
    /// third, `k`: the quote is at most [`QUOTE_MAX_SHARE`] of the smaller item.
    fn shared_statement(
        &mut self,
        is_related: &dyn Fn(usize, usize) -> bool,
    ) -> Option<(Article, Article)> {
        let articles = self.articles;
        let (i, j, k) = (self.pick(), self.pick(), self.pick());
        if i == j || i == k || j == k || is_related(i, j) || is_related(i, k) || is_related(j, k) {
            return None;
        }
        let quote = self.quote(k)?;
        let a = self.quoting_item(i, &quote)?;
        let b = self.quoting_item(j, &quote)?;
        if chars(&quote) as f64 > QUOTE_MAX_SHARE * chars(&a).min(chars(&b)) as f64 {
            return None;
        }
        let item = |x: usize, content: String| Article {
            id: format!("{}~statement", articles[x].id),
            title: articles[x].title.clone(),
            content,
        };
        Some((item(i, a), item(j, b)))
    }

    /// Teasers ([`Generator::lead_excerpt`], each of a share of [`PARTIAL_SIZES`]) of two
    /// unrelated long articles of one category and day.
    fn same_day_teasers(
        &mut self,
        cats: &[Vec<usize>],
        is_related: &dyn Fn(usize, usize) -> bool,
    ) -> Option<(Article, Article)> {
        let articles = self.articles;
        let (i, j) = self.same_day(cats);
        let long = |x: usize| chars(&articles[x].content) >= PARTIAL_MIN_CHARS;
        if i == j || is_related(i, j) || !long(i) || !long(j) {
            return None;
        }
        let (si, sj) = (
            *PARTIAL_SIZES.choose(&mut self.rng).unwrap(),
            *PARTIAL_SIZES.choose(&mut self.rng).unwrap(),
        );
        Some((self.lead_excerpt(i, si)?, self.lead_excerpt(j, sj)?))
    }
}

/// The partial-reprint kinds alone, as [`generate`] appends them when [`Config::partial`] is
/// on. They draw from stream [`PARTIAL_STREAM`] of the seed.
///
/// Positives ([`PARTIAL_POSITIVES`], `per_cell` of each [`PARTIAL_SIZES`] share, `size` the
/// share of the article's content kept, relation [`CONTAINED_IN`]): `a` is a long article
/// ([`PARTIAL_MIN_CHARS`]), `b` a part of it of at least [`PARTIAL_MIN_LETTERS`] letters:
/// - `lead_excerpt`: its lead cut at a sentence end, under its title or a variant, ending with
///   a "read more" line or a short site footer;
/// - `middle_passage`: a run of its sentences starting at or after [`PASSAGE_START`], under
///   a headline made of its own first words (or `【转载】` and them), with a source line or
///   not.
///
/// Hard negatives ([`PARTIAL_NEGATIVES`], up to `negatives` of each, relation [`DIFFERENT`]):
/// - `digest_page`: an article and a digest of the first sentences of 4–6 articles of its
///   category and day, its own among them;
/// - `shared_statement`: the short items of two articles quoting the same statement of a
///   third;
/// - `same_day_teasers`: teasers of two articles of one category and day.
///
/// The articles of a negative are never related by the sentence index, and its sides share
/// at most [`PARTIAL_NEGATIVE_MAX_SHARED`] of the smaller one.
pub fn partial(
    articles: &[Article],
    config: &Config,
    mut progress: impl FnMut(&str),
) -> Vec<LabelledPair> {
    let related = related_pairs(articles);
    let is_related = |i: usize, j: usize| related.contains(&(i.min(j), i.max(j)));
    partial_with(articles, config, &is_related, &mut progress)
}

fn partial_with(
    articles: &[Article],
    config: &Config,
    is_related: &dyn Fn(usize, usize) -> bool,
    progress: &mut dyn FnMut(&str),
) -> Vec<LabelledPair> {
    let mut g = Generator::new(articles, config.seed);
    g.rng.set_stream(PARTIAL_STREAM);
    let mut pairs = Vec::new();
    for kind in PARTIAL_POSITIVES {
        for &size in PARTIAL_SIZES {
            pairs.extend(g.partial_positives(kind, size, config.per_cell));
        }
    }
    progress(&format!(
        "partial reprints: {} positives ({})",
        pairs.len(),
        PARTIAL_POSITIVES.join(", ")
    ));
    let cats = categories(articles);
    let negative = |a: Article, b: Article, t: &str| LabelledPair {
        a: a.to_map(),
        b: b.to_map(),
        duplicate: false,
        kind: Some("hard_negative".into()),
        transformation: Some(t.into()),
        size: None,
        relation: Some(DIFFERENT.into()),
        a_span: None,
        b_span: None,
    };
    let mut counts = Vec::new();
    for t in PARTIAL_NEGATIVES {
        let (mut made, mut tries) = (0, 0);
        let needs_cats = *t != "shared_statement";
        while made < config.negatives
            && tries < config.negatives * 50
            && !(needs_cats && cats.is_empty())
        {
            tries += 1;
            let pair = match *t {
                "digest_page" => g
                    .digest_page(&cats, is_related)
                    .map(|(i, digest)| (articles[i].clone(), digest)),
                "shared_statement" => g.shared_statement(is_related),
                _ => g.same_day_teasers(&cats, is_related),
            };
            let Some((a, b)) = pair else {
                continue;
            };
            let runs = |x: &Article| oracle::runs(&[x.title.as_str(), x.content.as_str()]);
            if oracle::overlap(&runs(&a), &runs(&b)).containment <= PARTIAL_NEGATIVE_MAX_SHARED {
                pairs.push(negative(a, b, t));
                made += 1;
            }
        }
        counts.push(format!("{made} {t}"));
    }
    progress(&format!(
        "partial reprints: {} negatives",
        counts.join(", ")
    ));
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leads_end_at_sentence_ends_within_the_range() {
        // Sentence ends after 。 (with the closing quote), after ！, at a paragraph end and at
        // the end of the text.
        let text = "一二三四五。“六七八九。”十一二\n三四五！六七";
        let cut = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(b, _)| b);
        assert_eq!(
            lead_cuts(text, &(1..=100)),
            vec![cut(6), cut(13), cut(16), cut(21), cut(23)]
        );
        assert_eq!(lead_cuts(text, &(7..=16)), vec![cut(13), cut(16)]);
        assert_eq!(&text[..cut(13)], "一二三四五。“六七八九。”");
        assert!(lead_cuts(text, &(24..=30)).is_empty());
        assert!(lead_cuts("", &SHORT_ITEM_CHARS).is_empty());
    }

    /// Made-up articles: numbered headlines and sentences, no corpus text.
    fn made_up(n: usize) -> Vec<Article> {
        (0..n)
            .map(|i| Article {
                id: format!("a{i}"),
                title: format!("第{i}号测试标题讲述某地某事的进展情况"),
                content: (0..12)
                    .map(|s| format!("这是第{i}篇文章的第{s}句话，它讲述了一件虚构的事情。"))
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn sites_have_long_boilerplate_of_their_own() {
        let arts = made_up(300);
        let mut g = Generator::new(&arts, 3);
        let (mut names, mut links) = (HashSet::new(), HashSet::new());
        let sites: Vec<Site> = (0..6).map(|n| g.site(n, &mut names, &mut links)).collect();
        let titles: HashSet<&str> = arts.iter().map(|a| a.title.as_str()).collect();
        let mut seen_links = HashSet::new();
        for s in &sites {
            assert!(
                SITE_BOILERPLATE_CHARS.contains(&s.boilerplate_chars()),
                "{s:?}"
            );
            let lines: Vec<&String> = s.before.iter().chain(&s.after).collect();
            assert!(lines.iter().all(|l| !l.is_empty() && !l.contains('\n')));
            let listed: Vec<&str> = lines
                .iter()
                .filter_map(|l| titles.iter().find(|t| l.ends_with(**t)).copied())
                .collect();
            assert!(listed.len() >= MIN_LINKS, "{s:?}");
            for t in listed {
                assert!(seen_links.insert(t), "{t} listed twice");
            }
            let page = s.page("ITEM");
            assert_eq!(chars(&page), s.boilerplate_chars() + 4 + lines.len());
            assert!(page.contains("\nITEM\n") || page.starts_with("ITEM\n"));
        }
        assert_eq!(names.len(), sites.len());
    }
}
