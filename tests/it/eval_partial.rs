//! The generator's partial reprints on a sample of the real corpus (read from `../shared`,
//! never copied): lead excerpts and middle passages hold text of their article only, the
//! hard negatives share little; and adding them left every pair before them as it was.

use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use neardup::eval::generate::{self, Article, Config};
use neardup::eval::oracle;
use neardup::eval::{LabelledPair, CONTAINED_IN, DIFFERENT};
use serde_json::{Map, Value};

use crate::eval_messy::corpus;

/// Every 8th article of the corpus (2,020): a small sample with categories and days of
/// several articles.
fn sample() -> &'static [Article] {
    static SAMPLE: OnceLock<Vec<Article>> = OnceLock::new();
    SAMPLE.get_or_init(|| corpus().iter().step_by(8).cloned().collect())
}

/// 20 pairs per positive kind and size, 40 of each negative kind.
fn config() -> Config {
    Config {
        per_cell: 20,
        negatives: 40,
        ..Config::default()
    }
}

fn partial() -> &'static [LabelledPair] {
    static PAIRS: OnceLock<Vec<LabelledPair>> = OnceLock::new();
    PAIRS.get_or_init(|| generate::partial(sample(), &config(), |_| {}))
}

fn of(t: &str) -> Vec<&'static LabelledPair> {
    partial()
        .iter()
        .filter(|p| p.transformation.as_deref() == Some(t))
        .collect()
}

fn text<'a>(m: &'a Map<String, Value>, f: &str) -> &'a str {
    m[f].as_str().unwrap()
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn runs(m: &Map<String, Value>) -> Vec<u64> {
    oracle::runs(&[text(m, "title"), text(m, "content")])
}

/// The share of `part`'s runs (title and content, the corpus oracle's measure) found in
/// `full`.
fn share_in(part: &Map<String, Value>, full: &Map<String, Value>) -> f64 {
    let p = runs(part);
    oracle::overlap(&p, &runs(full)).shared as f64 / p.len() as f64
}

/// The id of the corpus article a generated one is made from (`<id>~<what>`).
fn source(m: &Map<String, Value>) -> &str {
    let id = text(m, "id");
    id.split_once('~').map_or(id, |(s, _)| s)
}

#[test]
fn the_partial_kinds_leave_every_earlier_pair_unchanged() {
    let config = Config {
        seed: 5,
        per_cell: 2,
        negatives: 4,
        real: 3,
        messy: true,
        partial: false,
        copies: false,
    };
    let before = generate::generate(sample(), &config, |_| {});
    let with = generate::generate(
        sample(),
        &Config {
            partial: true,
            ..config.clone()
        },
        |_| {},
    );
    assert_eq!(with[..before.len()], before[..]);
    // What follows is the partial kinds, exactly as `partial` makes them alone.
    assert_eq!(
        with[before.len()..],
        generate::partial(sample(), &config, |_| {})[..]
    );
    let new: Vec<&str> = with[before.len()..]
        .iter()
        .filter_map(|p| p.transformation.as_deref())
        .collect();
    let want: HashSet<&str> = generate::PARTIAL_POSITIVES
        .iter()
        .chain(generate::PARTIAL_NEGATIVES)
        .copied()
        .collect();
    assert_eq!(new.len(), 2 * 2 * 5 + 3 * 4);
    assert_eq!(new.iter().copied().collect::<HashSet<_>>(), want);
    assert!(before
        .iter()
        .all(|p| p.relation.is_none() && !want.contains(p.transformation.as_deref().unwrap())));
}

#[test]
fn partial_pairs_are_deterministic_for_a_seed() {
    assert_eq!(generate::partial(sample(), &config(), |_| {}), partial());
    let other = generate::partial(
        sample(),
        &Config {
            seed: config().seed + 1,
            ..config()
        },
        |_| {},
    );
    assert_ne!(other, partial());
}

/// The body of a part: its content without the line the generator adds (a "read more" line
/// or footer after a lead, a source line around a passage), as letters and digits.
fn body(p: &LabelledPair) -> String {
    let content = text(&p.b, "content");
    let lines: Vec<&str> = content.lines().collect();
    let kept = match p.transformation.as_deref() {
        Some("lead_excerpt") => &lines[..lines.len() - 1],
        _ if lines[0].starts_with("来源：") => &lines[1..],
        _ if lines[lines.len() - 1].starts_with("（来源：") => &lines[..lines.len() - 1],
        _ => &lines[..],
    };
    oracle::letters(&kept.join("\n"))
}

#[test]
fn positives_are_leads_and_middle_passages_of_their_article() {
    let mut cells: BTreeMap<(String, String), usize> = BTreeMap::new();
    for t in generate::PARTIAL_POSITIVES {
        let pairs = of(t);
        for p in &pairs {
            assert!(p.duplicate);
            assert_eq!(p.kind(), "positive");
            assert_eq!(p.relation(), CONTAINED_IN);
            assert_eq!(source(&p.a), source(&p.b));
            assert_eq!(text(&p.a, "id"), source(&p.a), "a is the corpus article");
            let size = p.size.unwrap();
            *cells.entry((t.to_string(), format!("{size}"))).or_default() += 1;
            let full = oracle::letters(text(&p.a, "content"));
            let part = body(p);
            let at = full
                .find(&part)
                .unwrap_or_else(|| panic!("{t}: the part is not in its article: {part}"));
            // The share of the content kept, in letters and digits (the generator measures
            // characters, punctuation and line breaks included).
            let share = chars(&part) as f64 / chars(&full) as f64;
            assert!(
                (share - size).abs() <= generate::PARTIAL_TOLERANCE + 0.03,
                "{t} {size}: keeps {share:.3}"
            );
            let start = full[..at].chars().count() as f64 / chars(&full) as f64;
            if *t == "lead_excerpt" {
                assert_eq!(at, 0, "{t}: a lead starts the article");
            } else {
                assert!(start >= 0.2, "{t}: starts at {start:.3} of the article");
            }
            assert!(chars(text(&p.a, "content")) >= generate::PARTIAL_MIN_CHARS);
            assert!(chars(text(&p.b, "title")) >= 6);
            // The corpus oracle: the part's text (title, added lines and all) is the article's.
            let s = share_in(&p.b, &p.a);
            assert!(
                s >= 0.95,
                "{t} {size}: {s:.3} of the part's runs in the article"
            );
        }
    }
    for t in generate::PARTIAL_POSITIVES {
        for size in generate::PARTIAL_SIZES {
            assert_eq!(
                cells.get(&(t.to_string(), format!("{size}"))),
                Some(&config().per_cell),
                "{t} {size}"
            );
        }
    }
    // Passages come under their own headlines, some as another outlet's reprint.
    assert!(of("middle_passage")
        .iter()
        .any(|p| text(&p.b, "title").starts_with("【转载】")));
    assert!(of("middle_passage")
        .iter()
        .all(|p| text(&p.b, "title") != text(&p.a, "title")));
}

#[test]
fn hard_negatives_share_little_text() {
    let by_id: BTreeMap<&str, &Article> = sample().iter().map(|a| (a.id.as_str(), a)).collect();
    for t in generate::PARTIAL_NEGATIVES {
        let pairs = of(t);
        assert_eq!(pairs.len(), config().negatives, "{t}");
        for p in pairs {
            assert!(!p.duplicate);
            assert_eq!(p.kind(), "hard_negative");
            assert_eq!(p.relation(), DIFFERENT);
            // The generator keeps none above it: this checks that it measures what the
            // oracle does.
            let o = oracle::overlap(&runs(&p.a), &runs(&p.b));
            assert!(
                o.containment <= 0.4,
                "{t}: {:.3} of the smaller side shared",
                o.containment
            );
            let (sa, sb) = (source(&p.a), source(&p.b));
            match *t {
                "digest_page" => {
                    // The article's first sentence is a line of the digest, among 4–6.
                    assert_eq!(text(&p.a, "id"), sa);
                    assert_eq!(sa, sb);
                    let lines = text(&p.b, "content").lines().count();
                    assert!(generate::DIGEST_ARTICLES.contains(&lines), "{lines}");
                    let para = text(&p.a, "content")
                        .lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap();
                    let first = generate::split_sentences(para)[0].trim().to_owned();
                    assert!(text(&p.b, "content").contains(&first), "{first}");
                    assert!(o.shared > 0);
                }
                "shared_statement" => {
                    assert_ne!(sa, sb);
                    // Both quote the same statement, which neither article holds.
                    let quoted = |c: &str| -> HashSet<String> {
                        c.lines()
                            .filter_map(|l| {
                                let (_, q) = l.split_once('“')?;
                                Some(q.strip_suffix('”')?.to_owned())
                            })
                            .collect()
                    };
                    let shared: Vec<String> = quoted(text(&p.a, "content"))
                        .intersection(&quoted(text(&p.b, "content")))
                        .cloned()
                        .collect();
                    assert!(!shared.is_empty(), "{p:?}");
                    assert!(shared
                        .iter()
                        .all(|q| !by_id[sa].content.contains(q.as_str())
                            && !by_id[sb].content.contains(q.as_str())));
                }
                _ => {
                    // Teasers of two articles of one category and day.
                    assert_ne!(sa, sb);
                    assert_eq!(generate::category(sa), generate::category(sb));
                    for (side, id) in [(&p.a, sa), (&p.b, sb)] {
                        assert!(text(side, "id").ends_with("~lead"));
                        let lead = oracle::letters(text(side, "content"));
                        let full = oracle::letters(&by_id[id].content);
                        assert!(
                            chars(&lead) as f64 <= 0.6 * chars(&full) as f64,
                            "a teaser, not {id}"
                        );
                    }
                }
            }
        }
    }
}

/// The negatives made of two corpus articles (random, same category and day, same page, same
/// event) are ones the oracle counts false when reported: the shorter shares under a fifth of
/// its text. Two articles of one page can share most of a text in other sentence breaks (a
/// summary of a notice beside the notice), which the sentence index alone let through; and
/// no pair of one kind comes twice.
#[test]
fn corpus_negatives_share_no_text_and_never_repeat() {
    let config = Config {
        messy: false,
        partial: false,
        copies: false,
        ..config()
    };
    let pairs = generate::generate(corpus(), &config, |_| {});
    let kinds = ["random", "same_category_day", "same_day_page", "same_event"];
    let mut seen = HashSet::new();
    let mut counted = BTreeMap::new();
    for p in &pairs {
        let Some(t) = p.transformation.as_deref().filter(|t| kinds.contains(t)) else {
            continue;
        };
        *counted.entry(t).or_insert(0) += 1;
        let o = oracle::overlap(&runs(&p.a), &runs(&p.b));
        assert!(
            o.containment < oracle::FALSE_POSITIVE_BELOW,
            "{t}: {} and {} share {:.3} of the shorter text",
            text(&p.a, "id"),
            text(&p.b, "id"),
            o.containment
        );
        let (a, b) = (text(&p.a, "id"), text(&p.b, "id"));
        assert!(
            seen.insert((t, a.min(b), a.max(b))),
            "{t}: {a} and {b} twice"
        );
    }
    for t in kinds {
        assert!(counted.get(t).copied().unwrap_or(0) > 0, "no {t} pair");
    }
}
