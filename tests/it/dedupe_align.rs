//! `neardup dedupe --align` (issue 43): alignment decides what MinHash finds. The input is a
//! sample of the real corpus (read from `../shared`, never copied), both sides of every
//! copied-text pair the generator makes of it, and a month of one daily bulletin: reposts
//! and reprinted passages are copies, round-ups share passages (with spans where the
//! reused text is), template instances are not copies, and nothing but copies is clustered.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use neardup::eval::generate;
use serde_json::{json, Value};

use crate::common::{json_lines, neardup};
use crate::eval_copies::{copies, sample};

/// A pair's answer read from `a`: the relation and the passages' spans on `a`'s side.
struct Answer {
    relation: String,
    /// `(field, start, end)` of each passage, on `a`'s side.
    spans: Vec<(u64, u64, u64)>,
}

fn reversed(relation: &str) -> &str {
    match relation {
        "contains" => "contained_in",
        "contained_in" => "contains",
        r => r,
    }
}

/// Every pair of `out` (`dedupe --align --pairs`), by `(a, b)` in both orders.
fn answers(out: &str) -> HashMap<(String, String), Answer> {
    let mut m = HashMap::new();
    for line in json_lines(out) {
        let (a, b) = (line["a"].as_str().unwrap(), line["b"].as_str().unwrap());
        let relation = line["relation"].as_str().unwrap();
        let side = |s: &str| -> Vec<(u64, u64, u64)> {
            line["passages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let x = &p[s];
                    let n = |k: &str| x[k].as_u64().unwrap();
                    (n("field"), n("start"), n("end"))
                })
                .collect()
        };
        for c in ["a_copied", "b_copied"] {
            let x = line[c].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&x), "{line}");
        }
        m.insert(
            (a.to_owned(), b.to_owned()),
            Answer {
                relation: relation.to_owned(),
                spans: side("a"),
            },
        );
        m.insert(
            (b.to_owned(), a.to_owned()),
            Answer {
                relation: reversed(relation).to_owned(),
                spans: side("b"),
            },
        );
    }
    m
}

/// The share of `want` (a character range of the content, field 1) the spans cover.
fn covered(spans: &[(u64, u64, u64)], want: [usize; 2]) -> f64 {
    let (lo, hi) = (want[0] as u64, want[1] as u64);
    let inside = (lo..hi)
        .filter(|&c| spans.iter().any(|&(f, s, e)| f == 1 && s <= c && c < e))
        .count();
    inside as f64 / (hi - lo).max(1) as f64
}

#[test]
fn dedupe_align_tells_copies_templates_and_shared_passages_apart() {
    let mut docs: BTreeMap<String, Value> = BTreeMap::new();
    let mut add = |id: &str, title: &str, content: &str| {
        docs.insert(
            id.to_owned(),
            json!({"id": id, "title": title, "content": content}),
        );
    };
    for a in sample() {
        add(&a.id, &a.title, &a.content);
    }
    for p in copies() {
        for m in [&p.a, &p.b] {
            let a = generate::Article::from_map(m).unwrap();
            add(&a.id, &a.title, &a.content);
        }
    }
    let series = generate::template_series(sample(), "weather_forecast", 30, 11).unwrap();
    for a in &series {
        add(&a.id, &a.title, &a.content);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    for d in docs.values() {
        writeln!(f, "{d}").unwrap();
    }
    drop(f);
    let input = path.to_str().unwrap();

    let (code, out, err) = neardup(&["dedupe", "--align", "--pairs", "-i", input], b"");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("learned from the input"), "{err}");
    // The formula as an artefact: the same answers as learning it from the input.
    let bp = dir.path().join("bp.json");
    let (code, _, err) = neardup(
        &[
            "boilerplate",
            "learn",
            "-i",
            input,
            "-o",
            bp.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let bp = bp.to_str().unwrap();
    let (code, learned, err) = neardup(
        &[
            "dedupe",
            "--align",
            "--pairs",
            "-i",
            input,
            "--boilerplate",
            bp,
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (code, artefact_bp, err) =
        neardup(&["formula", "learn", "-i", input, "--boilerplate", bp], b"");
    assert_eq!(code, 0, "{err}");
    let with_bp = dir.path().join("formula-bp.json");
    std::fs::write(&with_bp, artefact_bp).unwrap();
    let (code, given, err) = neardup(
        &[
            "dedupe",
            "--align",
            "--pairs",
            "-i",
            input,
            "--boilerplate",
            bp,
            "--formula",
            with_bp.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("given"), "{err}");
    assert!(!learned.is_empty());
    assert_eq!(given, learned);
    // A formula learned from unfolded text does not serve folded texts.
    let artefact = dir.path().join("formula.json");
    let (code, _, err) = neardup(
        &[
            "formula",
            "learn",
            "-i",
            input,
            "--no-fold",
            "-o",
            artefact.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = neardup(
        &[
            "dedupe",
            "--align",
            "-i",
            input,
            "--formula",
            artefact.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("learn it again without --no-fold"), "{err}");
    let (code, _, err) = neardup(&["dedupe", "--align", "-i", input, "--formula", bp], b"");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a formula artefact"), "{err}");

    let got = answers(&out);
    let relation = |a: &str, b: &str| got.get(&(a.to_owned(), b.to_owned()));
    let id = |m: &serde_json::Map<String, Value>| m["id"].as_str().unwrap().to_owned();

    // Per kind: pairs, found as the kind should be, claimed as a copy wrongly.
    let mut tally: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for p in copies() {
        let kind = p.transformation.as_deref().unwrap();
        let answer = relation(&id(&p.a), &id(&p.b));
        let r = answer.map(|x| x.relation.as_str());
        let copy = matches!(r, Some("near_duplicate" | "contains" | "contained_in"));
        let found = match kind {
            "template_instances" => r.is_none(),
            "template_repost" => r == Some("near_duplicate"),
            "compilation" | "shared_quote" => {
                r == Some("shares_passage")
                    && covered(&answer.unwrap().spans, p.a_span.unwrap()) >= 0.9
            }
            // b is a part of a: read from a, a contains b.
            "wrapped_excerpt" | "reworded_passage" => r == Some("contains"),
            k => panic!("a kind this test does not know: {k}"),
        };
        let wrong = copy && matches!(kind, "template_instances" | "compilation" | "shared_quote");
        let t = tally.entry(kind).or_default();
        *t = (t.0 + 1, t.1 + usize::from(found), t.2 + usize::from(wrong));
    }
    eprintln!("per kind (pairs, found, wrongly claimed as copies): {tally:?}");
    let share = |kind: &str| {
        let (n, found, _) = tally[kind];
        found as f64 / n as f64
    };
    // Template instances and shared quotes are never copies; round-ups share passages
    // where the reused text is; reposts and reworded passages are copies.
    for (kind, (_, _, wrong)) in &tally {
        assert_eq!(*wrong, 0, "{kind}: {tally:?}");
    }
    // Not yet met (docs/measurements/copied-text.md): template instances left apart in
    // every relation (3 in 20 are reported as sharing a passage: their template is too rare
    // in the input to be learned as formula), shared quotes found (no candidate) and wrapped
    // excerpts found. What holds is held.
    assert!(share("template_instances") >= 0.8, "{tally:?}");
    assert!(share("compilation") >= 0.9, "{tally:?}");
    assert!(share("template_repost") >= 0.8, "{tally:?}");
    assert!(share("reworded_passage") >= 0.9, "{tally:?}");

    // A month of one daily bulletin: no two days are copies.
    for (i, x) in series.iter().enumerate() {
        for y in &series[i + 1..] {
            let r = relation(&x.id, &y.id).map(|a| a.relation.as_str());
            assert!(
                !matches!(r, Some("near_duplicate" | "contains" | "contained_in")),
                "{} {} {r:?}",
                x.id,
                y.id
            );
        }
    }

    // Clusters hold copies only: a shared passage joins nothing.
    let (code, out, err) = neardup(&["dedupe", "--align", "-i", input], b"");
    assert_eq!(code, 0, "{err}");
    for c in json_lines(&out) {
        let members: Vec<&str> = c["cluster"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let linked = members.iter().enumerate().any(|(i, x)| {
            members[i + 1..].iter().any(|y| {
                matches!(
                    relation(x, y).map(|a| a.relation.as_str()),
                    Some("near_duplicate" | "contains" | "contained_in")
                )
            })
        });
        assert!(linked, "{members:?}");
        assert!(
            members
                .iter()
                .filter(|m| m.starts_with("weather_forecast"))
                .count()
                <= 1,
            "{members:?}"
        );
    }
}

#[test]
fn dedupe_align_refuses_what_it_cannot_align() {
    let ex = crate::common::examples();
    let ex = ex.to_str().unwrap();
    for (args, says) in [
        (
            vec!["dedupe", "--align", "-i", ex, "--method", "simhash"],
            "--align works with MinHash",
        ),
        (
            vec!["dedupe", "--align", "-i", ex, "--threshold", "0.5"],
            "--threshold",
        ),
        (
            vec!["dedupe", "--align", "-i", ex, "--pre-tokenized"],
            "--pre-tokenized",
        ),
    ] {
        let (code, _, err) = neardup(&args, b"");
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
