//! The generator's messy families on the real corpus (read from `../shared`, never copied):
//! Traditional-character reposts, and short items under site boilerplate longer than
//! themselves; and that adding them left every pair before them as it was.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::sync::OnceLock;

use neardup::eval::generate::{self, Article, Config};
use neardup::eval::oracle::{self, Verdict};
use neardup::eval::real::SentenceIndex;
use neardup::eval::LabelledPair;
use neardup::text::{Folder, TraditionalStyle};
use serde_json::{Map, Value};

use crate::common;

/// The shared corpus as the generator reads it.
pub(crate) fn corpus() -> &'static [Article] {
    static ARTICLES: OnceLock<Vec<Article>> = OnceLock::new();
    ARTICLES.get_or_init(|| {
        let path = common::shared_dir().join("data/zh_articles.jsonl.gz");
        let f = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        std::io::BufReader::new(flate2::read::GzDecoder::new(f))
            .lines()
            .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
            .collect()
    })
}

/// 5 sites (200 negatives at 40 per site), 30 pairs per positive kind.
fn config() -> Config {
    Config {
        per_cell: 30,
        negatives: 200,
        ..Config::default()
    }
}

fn messy() -> &'static [LabelledPair] {
    static PAIRS: OnceLock<Vec<LabelledPair>> = OnceLock::new();
    PAIRS.get_or_init(|| generate::messy(corpus(), &config(), |_| {}))
}

fn of(t: &str) -> Vec<&'static LabelledPair> {
    messy()
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

#[test]
fn the_messy_families_leave_every_earlier_pair_unchanged() {
    let arts: Vec<Article> = std::fs::read_to_string(common::examples())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let config = Config {
        seed: 5,
        per_cell: 2,
        negatives: 4,
        real: 3,
        messy: false,
        partial: false,
        copies: false,
    };
    let before = generate::generate(&arts, &config, |_| {});
    let with = generate::generate(
        &arts,
        &Config {
            messy: true,
            ..config.clone()
        },
        |_| {},
    );
    assert!(with.len() > before.len());
    assert_eq!(with[..before.len()], before[..]);
    // What follows is the messy families, exactly as `messy` makes them alone.
    assert_eq!(
        with[before.len()..],
        generate::messy(&arts, &config, |_| {})[..]
    );
    let new: HashSet<&str> = with[before.len()..]
        .iter()
        .filter_map(|p| p.transformation.as_deref())
        .collect();
    let want: HashSet<&str> = generate::TRADITIONAL
        .iter()
        .map(|(t, _)| *t)
        .chain(["site_boilerplate_long", "same_item_two_sites"])
        .collect();
    assert_eq!(new, want);
    assert!(before
        .iter()
        .all(|p| !want.contains(p.transformation.as_deref().unwrap_or(""))));
}

#[test]
fn messy_pairs_are_deterministic_for_a_seed() {
    let again = generate::messy(corpus(), &config(), |_| {});
    assert_eq!(again, messy());
    let other = generate::messy(
        corpus(),
        &Config {
            seed: config().seed + 1,
            ..config()
        },
        |_| {},
    );
    assert_ne!(other, messy());
}

/// The Traditional reposts are the OpenCC conversion of their style, hold Traditional
/// characters, and fold back to (nearly) the original.
#[test]
fn traditional_reposts_are_traditional_and_fold_back() {
    let folder = Folder::shared();
    for &(t, style) in generate::TRADITIONAL {
        let pairs = of(t);
        assert_eq!(pairs.len(), config().per_cell, "{t}");
        let mut jaccards = Vec::new();
        for p in pairs {
            assert!(p.duplicate);
            assert_eq!(p.kind(), "positive");
            assert_eq!(p.size, Some(0.0));
            for f in ["title", "content"] {
                assert_eq!(
                    text(&p.b, f),
                    folder.to_traditional(text(&p.a, f), style),
                    "{t} {f}"
                );
            }
            let (a, b) = (text(&p.a, "content"), text(&p.b, "content"));
            let cjk = b.chars().filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c));
            let traditional = cjk
                .clone()
                .filter(|&c| folder.is_traditional_char(c))
                .count();
            let share = traditional as f64 / cjk.count() as f64;
            assert!(
                share >= 0.1,
                "{t}: {share:.3} of the characters Traditional"
            );
            // Against the original as the detector reads it: a few Sina articles quote
            // Traditional posts, which folding turns Simplified on both sides. Phrase tables
            // cost a little on the way back (支援 → 支持, 鲶鱼 → 鲇鱼, 整合 → 集成).
            let o = oracle::overlap(
                &oracle::runs(&[folder.fold(a).as_ref()]),
                &oracle::runs(&[folder.fold(b).as_ref()]),
            );
            assert!(o.jaccard >= 0.8, "{t}: folds back to {:.3}", o.jaccard);
            jaccards.push(o.jaccard);
        }
        let mean = jaccards.iter().sum::<f64>() / jaccards.len() as f64;
        assert!(
            mean >= 0.97,
            "{t}: mean run Jaccard after folding {mean:.4}"
        );
    }
    // Taiwan phrasing is more than characters: some article reads differently from s2t.
    assert!(of("traditional_taiwan").iter().any(|p| {
        let a = text(&p.a, "content");
        folder.to_traditional(a, TraditionalStyle::Taiwan)
            != folder.to_traditional(a, TraditionalStyle::Characters)
    }));
}

/// One page: the site key and the source article's id (`<id>~<site>`).
fn site_of(page: &Map<String, Value>) -> (String, String) {
    let (id, site) = text(page, "id").rsplit_once('~').unwrap();
    (site.to_owned(), id.to_owned())
}

/// A site's boilerplate as the lines every page of it starts and ends with.
struct Boilerplate {
    before: Vec<String>,
    after: Vec<String>,
}

impl Boilerplate {
    fn chars(&self) -> usize {
        self.before
            .iter()
            .chain(&self.after)
            .map(|l| chars(l))
            .sum()
    }

    /// The item of a page: what is between the boilerplate lines.
    fn item(&self, page: &str) -> String {
        let lines: Vec<&str> = page.split('\n').collect();
        assert!(lines.len() > self.before.len() + self.after.len());
        assert_eq!(lines[..self.before.len()], self.before[..]);
        assert_eq!(lines[lines.len() - self.after.len()..], self.after[..]);
        lines[self.before.len()..lines.len() - self.after.len()].join("\n")
    }
}

/// The boilerplate of each site: the longest run of lines all its pages start with, and the
/// longest all end with.
fn boilerplates(pages: &[&Map<String, Value>]) -> BTreeMap<String, Boilerplate> {
    let mut by_site: BTreeMap<String, Vec<Vec<&str>>> = BTreeMap::new();
    for p in pages {
        by_site
            .entry(site_of(p).0)
            .or_default()
            .push(text(p, "content").split('\n').collect());
    }
    by_site
        .into_iter()
        .map(|(site, pages)| {
            let first = &pages[0];
            let head = (0..first.len())
                .take_while(|&i| pages.iter().all(|p| p.get(i) == first.get(i)))
                .count();
            let tail = (1..=first.len())
                .take_while(|&i| {
                    pages
                        .iter()
                        .all(|p| p.len() >= i && p[p.len() - i] == first[first.len() - i])
                })
                .count();
            let own = |ls: &[&str]| ls.iter().map(|l| (*l).to_owned()).collect();
            let b = Boilerplate {
                before: own(&first[..head]),
                after: own(&first[first.len() - tail..]),
            };
            (site, b)
        })
        .collect()
}

#[test]
fn site_pages_are_short_items_under_long_boilerplate() {
    let arts = corpus();
    let by_id: HashMap<&str, usize> = arts
        .iter()
        .enumerate()
        .map(|(i, a)| (a.id.as_str(), i))
        .collect();
    let negatives = of("site_boilerplate_long");
    let positives = of("same_item_two_sites");
    assert_eq!(negatives.len(), config().negatives);
    assert_eq!(positives.len(), config().per_cell);
    let pages: Vec<&Map<String, Value>> = negatives
        .iter()
        .chain(&positives)
        .flat_map(|p| [&p.a, &p.b])
        .collect();
    let sites = boilerplates(&pages);
    assert_eq!(sites.len(), 5, "200 negatives at 40 per site");

    // Every page: the site's boilerplate around a lead of its article, 150–400 characters
    // cut at a sentence end; the boilerplate is 500–800 characters, longer than the item.
    let mut items: BTreeMap<&str, HashSet<String>> = BTreeMap::new();
    for page in &pages {
        let (site, source) = site_of(page);
        let b = &sites[&site];
        let item = b.item(text(page, "content"));
        let original = &arts[by_id[source.as_str()]];
        assert_eq!(text(page, "title"), original.title);
        assert!(original.content.starts_with(&item), "{site}: {item}");
        assert!(
            generate::lead_cuts(&original.content, &generate::SHORT_ITEM_CHARS)
                .contains(&item.len()),
            "{site}: {item} is not a lead of 150–400 characters ending a sentence"
        );
        assert!(
            generate::SITE_BOILERPLATE_CHARS.contains(&b.chars()),
            "{site}: {}",
            b.chars()
        );
        assert!(b.chars() >= chars(&item), "{site}");
        items
            .entry(sites.keys().find(|k| **k == site).unwrap())
            .or_default()
            .insert(source);
    }
    for (site, sources) in &items {
        assert!(
            sources.len() >= 20,
            "{site} carries {} items",
            sources.len()
        );
    }
    // Sites differ, and share little boilerplate text.
    let runs: Vec<(&String, Vec<u64>)> = sites
        .iter()
        .map(|(k, b)| (k, oracle::runs(&[b.before.join("\n"), b.after.join("\n")])))
        .collect();
    for (x, (kx, rx)) in runs.iter().enumerate() {
        for (ky, ry) in &runs[x + 1..] {
            let o = oracle::overlap(rx, ry);
            assert!(o.containment < 0.3, "{kx} and {ky} share {o:?}");
        }
    }

    // Negatives: two different, unrelated items of one site.
    let texts: Vec<String> = arts
        .iter()
        .map(|a| format!("{}\n{}", a.title, a.content))
        .collect();
    let index = SentenceIndex::new(&texts);
    for p in &negatives {
        assert!(!p.duplicate);
        assert_eq!(p.kind(), "hard_negative");
        let ((sa, ia), (sb, ib)) = (site_of(&p.a), site_of(&p.b));
        assert_eq!(sa, sb);
        assert_ne!(ia, ib);
        assert!(index.containment(by_id[ia.as_str()], by_id[ib.as_str()]) < 0.2);
        let item = |page: &Map<String, Value>| {
            let b = &sites[&sa];
            oracle::runs(&[
                text(page, "title").to_owned(),
                b.item(text(page, "content")),
            ])
        };
        assert_eq!(
            oracle::overlap(&item(&p.a), &item(&p.b)).verdict(),
            Verdict::Unrelated
        );
    }
    // Positives: one item on two sites.
    for p in &positives {
        assert!(p.duplicate);
        assert_eq!(p.kind(), "positive");
        let ((sa, ia), (sb, ib)) = (site_of(&p.a), site_of(&p.b));
        assert_ne!(sa, sb);
        assert_eq!(ia, ib);
        assert_eq!(
            sites[&sa].item(text(&p.a, "content")),
            sites[&sb].item(text(&p.b, "content"))
        );
        assert!(p.size.unwrap() > 1.0, "both boilerplates outweigh the item");
    }
    // Some sites put part of their boilerplate before the item, some put all of it after.
    assert!(sites.values().any(|b| !b.before.is_empty()));
    assert!(sites.values().any(|b| b.before.is_empty()));
}
