//! The generator's copied-text kinds (issue 43) on a sample of the real corpus (read from
//! `../shared`, never copied): spans point at the copied text, the two articles quoting one
//! statement share no other run of 20 letters, template instances keep their fixed share with
//! the names mined from real text; and adding the kinds left every pair before them as it was.

use std::collections::HashSet;
use std::sync::OnceLock;

use neardup::eval::generate::{self, Article, Config};
use neardup::eval::{LabelledPair, COPIES_KINDS, SHARES_PASSAGE};
use serde_json::{Map, Value};

use crate::eval_messy::corpus;

/// Every 8th article of the corpus (2,020).
pub(crate) fn sample() -> &'static [Article] {
    static SAMPLE: OnceLock<Vec<Article>> = OnceLock::new();
    SAMPLE.get_or_init(|| corpus().iter().step_by(8).cloned().collect())
}

fn config() -> Config {
    Config {
        per_cell: 10,
        negatives: 20,
        ..Config::default()
    }
}

pub(crate) fn copies() -> &'static [LabelledPair] {
    static PAIRS: OnceLock<Vec<LabelledPair>> = OnceLock::new();
    PAIRS.get_or_init(|| generate::copies(sample(), &config(), |_| {}))
}

fn text<'a>(m: &'a Map<String, Value>, f: &str) -> &'a str {
    m[f].as_str().unwrap()
}

fn article(m: &Map<String, Value>) -> Article {
    Article::from_map(m).expect("a generated article has an id, a title and a content")
}

#[test]
fn the_copies_leave_every_earlier_pair_unchanged() {
    let config = Config {
        seed: 5,
        per_cell: 1,
        negatives: 2,
        real: 3,
        copies: false,
        ..Config::default()
    };
    let before = generate::generate(sample(), &config, |_| {});
    let with = generate::generate(
        sample(),
        &Config {
            copies: true,
            ..config.clone()
        },
        |_| {},
    );
    assert_eq!(with[..before.len()], before[..]);
    assert_eq!(
        with[before.len()..],
        generate::copies(sample(), &config, |_| {})[..]
    );
    let kinds: HashSet<&str> = with[before.len()..]
        .iter()
        .filter_map(|p| p.transformation.as_deref())
        .collect();
    assert_eq!(kinds, COPIES_KINDS.iter().copied().collect());
}

#[test]
fn copied_passages_are_where_the_spans_say() {
    let mut counts = std::collections::BTreeMap::new();
    for p in copies() {
        let t = p.transformation.as_deref().unwrap();
        *counts.entry(t).or_insert(0) += 1;
        let (Some(sa), Some(sb)) = (p.a_span, p.b_span) else {
            assert_eq!(t, "template_instances");
            continue;
        };
        let (x, y) = (
            generate::span_text(text(&p.a, "content"), sa),
            generate::span_text(text(&p.b, "content"), sb),
        );
        assert!(!x.trim().is_empty(), "{t}");
        if t == "reworded_passage" {
            assert_ne!(x, y);
        } else {
            assert_eq!(x, y, "{t}");
        }
        if p.relation() == SHARES_PASSAGE {
            assert!(!p.duplicate);
            assert_eq!(p.kind(), "shared_passage");
        }
        if t == "shared_quote" {
            let (a, b) = (article(&p.a), article(&p.b));
            assert_eq!(generate::shared_runs_outside(&a, &b, &x), 0);
            assert!(generate::SHARED_QUOTE_CHARS.contains(&x.chars().count()));
        }
    }
    let c = config();
    for (t, n) in [
        ("template_instances", c.negatives),
        ("template_repost", c.per_cell),
        ("compilation", c.per_cell),
        ("shared_quote", c.per_cell),
        (
            "wrapped_excerpt",
            c.per_cell * generate::WRAPPED_SIZES.len(),
        ),
        (
            "reworded_passage",
            c.per_cell * generate::REWORDED_SIZES.len(),
        ),
    ] {
        assert_eq!(counts.get(t), Some(&n), "{t}");
    }
}

#[test]
fn template_instances_keep_their_fixed_share_with_mined_names() {
    let pools = generate::Pools::mine(sample());
    assert!(pools.people.len() >= 100 && pools.places.len() >= 100 && pools.orgs.len() >= 50);
    for family in generate::TEMPLATE_FAMILIES {
        let series = generate::template_series(sample(), family, 30, 17).unwrap();
        let contents: HashSet<&str> = series.iter().map(|a| a.content.as_str()).collect();
        assert_eq!(contents.len(), 30, "{family}");
        for a in &series {
            assert!(generate::TEMPLATE_CHARS.contains(&a.content.chars().count()));
        }
    }
}
