//! Boilerplate learned from data, as a user meets it: `dedupe` learns it from its input,
//! `boilerplate learn` writes the artefact, a store records it. Built from the shipped
//! examples: short items (the leads of the original articles) on two sites whose own
//! boilerplate is longer than the items, and one item carried by both sites.

use crate::common;

use std::path::Path;

use common::{json_lines, neardup};
use neardup::store::{OpenOptions, Store};
use serde_json::{json, Value};

const SITES: [&str; 2] = ["青禾日报网", "远山资讯网"];

/// The site's own lines: a header, a disclaimer, related links and a footer, about 600
/// characters, the same on every page of the site and different from the other site's.
pub fn site_lines(site: usize) -> Vec<String> {
    let name = SITES[site];
    let words = [
        "责任编辑",
        "免责声明",
        "转载须知",
        "版权所有",
        "相关阅读",
        "热点推荐",
        "客户端下载",
        "扫码关注",
        "投稿邮箱",
        "举报电话",
        "新闻许可证",
        "广告合作",
        "联系我们",
        "网站地图",
        "读者热线",
        "法律顾问",
        "营业执照",
        "隐私政策",
    ];
    (0..14)
        .map(|i| {
            let w = |k: usize| words[(i * k + site * 5 + k) % words.len()];
            format!(
                "{name}{}：本站{}与{}专栏第{}期，{}请拨打{}热线{}号，{}另见{}页面。",
                w(1),
                w(2),
                w(3),
                i + site * 20 + 1,
                w(5),
                w(7),
                4000 + i * 37 + site * 911,
                w(11),
                w(13)
            )
        })
        .collect()
}

/// The lead of an article: its first sentences, up to about 200 characters.
fn lead(content: &str) -> String {
    let mut out = String::new();
    for s in content.split_inclusive('。') {
        if out.chars().count() > 120 {
            break;
        }
        out.push_str(s);
    }
    out
}

/// One page of `site`: header lines, the item, the rest of the site's lines.
pub fn page(site: usize, item: &str) -> String {
    let lines = site_lines(site);
    format!(
        "{}\n{item}\n{}",
        lines[..3].join("\n"),
        lines[3..].join("\n")
    )
}

/// The corpus: every original example's lead on one of the two sites (alternating), and
/// `ex-001`'s lead on the other site too, as `ex-001@other`.
pub fn corpus() -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(common::examples()).unwrap();
    let mut docs = Vec::new();
    let mut n = 0;
    for line in text.lines() {
        let a: Value = serde_json::from_str(line).unwrap();
        let id = a["id"].as_str().unwrap();
        let content = a["content"].as_str().unwrap_or_default();
        if id.contains('-') && id.matches('-').count() > 1 || content.chars().count() < 300 {
            continue;
        }
        let item = lead(content);
        let site = n % 2;
        n += 1;
        docs.push((
            id.to_owned(),
            json!({"id": id, "title": a["title"], "content": page(site, &item)}),
        ));
        if id == "ex-001" {
            docs.push((
                "ex-001@other".to_owned(),
                json!({"id": "ex-001@other", "title": a["title"], "content": page(1 - site, &item)}),
            ));
        }
    }
    assert!(n >= 24, "{n} items");
    docs
}

pub fn write_corpus(path: &Path) {
    let lines: Vec<String> = corpus().iter().map(|(_, d)| d.to_string()).collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn pairs(out: &str) -> Vec<(String, String)> {
    json_lines(out)
        .iter()
        .map(|l| {
            let (a, b) = (l["a"].as_str().unwrap(), l["b"].as_str().unwrap());
            (a.min(b).to_owned(), a.max(b).to_owned())
        })
        .collect()
}

#[test]
fn dedupe_learns_the_sites_boilerplate_from_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sites.jsonl");
    write_corpus(&file);
    let file = file.to_str().unwrap();

    let (code, out, err) = neardup(&["dedupe", "--pairs", "-i", file], b"");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("boilerplate learned from the input: bp1-"),
        "{err}"
    );
    assert!(err.contains("28 lines"), "{err}");
    assert_eq!(
        pairs(&out),
        [("ex-001".to_owned(), "ex-001@other".to_owned())],
        "{err}"
    );

    // Without it, the site's lines make different items near-duplicates.
    let (code, out, err) = neardup(&["dedupe", "--pairs", "--no-boilerplate", "-i", file], b"");
    assert_eq!(code, 0, "{err}");
    let without = pairs(&out);
    assert!(without.len() > 50, "{without:?}");

    // Standard input is read twice through a temporary file: the same answer.
    let text = std::fs::read(file).unwrap();
    let (code, out, err) = neardup(&["dedupe", "--pairs"], &text);
    assert_eq!(code, 0, "{err}");
    assert_eq!(pairs(&out).len(), 1, "{err}");
}

#[test]
fn the_learned_artefact_is_recorded_by_a_store_and_used_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sites.jsonl");
    write_corpus(&file);
    let file = file.to_str().unwrap();
    let artefact = dir.path().join("bp.json");
    let (code, _, err) = neardup(
        &[
            "boilerplate",
            "learn",
            "-i",
            file,
            "-o",
            artefact.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let learned: Value =
        serde_json::from_str(&std::fs::read_to_string(&artefact).unwrap()).unwrap();
    assert_eq!(learned["lines"].as_array().unwrap().len(), 28, "{learned}");
    let texts: Vec<&str> = learned["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    for site in 0..2 {
        for line in site_lines(site) {
            let normalised = neardup::text::normalise(&line);
            assert!(texts.contains(&normalised.as_str()), "{line}");
        }
    }
    let id = learned["id"].as_str().unwrap().to_owned();

    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    let bp = artefact.to_str().unwrap();
    let (code, _, err) = neardup(
        &["index", "--store", s, "-i", file, "--boilerplate", bp, "-q"],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let opened = Store::open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(opened.config().boilerplate.as_ref().unwrap().id(), id);
    assert!(
        opened.config().version.contains(&id),
        "{:?}",
        opened.config()
    );
    drop(opened);
    let (code, out, err) = neardup(&["similar", "--store", s, "--id", "ex-001"], b"");
    assert_eq!(code, 0, "{err}");
    let found: Vec<String> = json_lines(&out)
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(found, ["ex-001@other"], "{err}");
    // Opened again without the flag, the store uses what it records.
    let (code, _, err) = neardup(&["index", "--store", s, "-i", file], b"");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 new") && err.contains("0 replaced"), "{err}");

    // A damaged artefact is refused, naming the file and the fix.
    std::fs::write(
        &artefact,
        learned.to_string().replace(&id, "bp1-000000000000"),
    )
    .unwrap();
    let (code, _, err) = neardup(&["dedupe", "-i", file, "--boilerplate", bp], b"");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("bp.json") && err.contains("learn it again"),
        "{err}"
    );
}

/// An artefact serves only fingerprints made with the folding setting it was learned with,
/// and never the seed000 profile: both are usage errors naming the fix.
#[test]
fn an_artefact_learned_without_folding_is_refused_by_folding_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sites.jsonl");
    write_corpus(&file);
    let file = file.to_str().unwrap();
    let artefact = dir.path().join("unfolded.json");
    let bp = artefact.to_str().unwrap();
    let (code, _, err) = neardup(
        &[
            "boilerplate",
            "learn",
            "--no-fold",
            "-i",
            file,
            "-o",
            bp,
            "-q",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let learned: Value =
        serde_json::from_str(&std::fs::read_to_string(&artefact).unwrap()).unwrap();
    assert_eq!(learned["fold"], false);

    let (code, _, err) = neardup(&["dedupe", "-i", file, "--boilerplate", bp], b"");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unfolded.json") && err.contains("without --no-fold"),
        "{err}"
    );
    let (code, out, err) = neardup(
        &[
            "dedupe",
            "--pairs",
            "-i",
            file,
            "--boilerplate",
            bp,
            "--no-fold",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(pairs(&out).len(), 1, "{err}");

    let (code, _, err) = neardup(
        &[
            "fingerprint",
            "-i",
            file,
            "--profile",
            "seed000",
            "--boilerplate",
            bp,
            "--no-fold",
        ],
        b"",
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("seed000 profile never drops boilerplate"),
        "{err}"
    );
}

/// Writing the artefact to a device writes through it and leaves the device in place (it
/// was once replaced by a regular file through write-beside-and-rename).
#[test]
fn writing_the_artefact_to_dev_null_leaves_dev_null_a_device() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sites.jsonl");
    write_corpus(&file);
    let (code, _, err) = neardup(
        &[
            "boilerplate",
            "learn",
            "-i",
            file.to_str().unwrap(),
            "-o",
            "/dev/null",
            "-q",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let meta = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(meta.file_type().is_char_device(), "{meta:?}");
    assert!(!Path::new("/dev/null.tmp").exists());
}
