//! `neardup fingerprint` as a user runs it.

use crate::common;

use common::{json_lines, neardup};
use serde_json::json;

fn examples() -> String {
    common::examples().to_str().unwrap().to_owned()
}

#[test]
fn example_corpus_in_input_order_with_all_fields() {
    let (code, out, err) = neardup(
        &["fingerprint", "--input", &examples(), "--threads", "2"],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let lines = json_lines(&out);
    let input = std::fs::read_to_string(common::examples()).unwrap();
    let ids: Vec<serde_json::Value> = input
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].clone())
        .collect();
    assert_eq!(
        lines.iter().map(|l| l["id"].clone()).collect::<Vec<_>>(),
        ids
    );
    let first = &lines[0];
    let hex = first["simhash"].as_str().unwrap();
    assert_eq!(hex.len(), 16);
    let v = u64::from_str_radix(hex, 16).unwrap();
    assert_eq!(first["u64"], v);
    let blocks = neardup::SimHash(v).blocks16();
    assert_eq!(first["blocks"], json!(blocks));
    assert!(first["version"].as_str().unwrap().starts_with("default-3;"));
    let short: Vec<_> = lines.iter().filter(|l| l["simhash"].is_null()).collect();
    assert!(short.iter().any(|l| l["id"] == "ex-030"));
    assert!(short.iter().all(|l| l["reason"] == "too_short"));
    assert!(err.contains("fingerprint: 40 documents"), "{err}");
}

#[test]
fn same_output_on_one_and_many_threads_and_from_stdin() {
    let input = std::fs::read(common::examples()).unwrap();
    let (_, one, _) = neardup(&["fingerprint", "-i", &examples(), "-j", "1", "-q"], b"");
    let (_, many, _) = neardup(&["fingerprint", "-i", &examples(), "-j", "4", "-q"], b"");
    let (code, stdin, err) = neardup(&["fingerprint", "-q"], &input);
    assert_eq!(code, 0);
    assert_eq!(one, many);
    assert_eq!(one, stdin);
    assert!(err.is_empty(), "--quiet prints nothing: {err}");
}

#[test]
fn bad_lines_are_named_counted_and_skipped() {
    let mut input = Vec::new();
    input.extend_from_slice(
        b"{\"id\": \"a\", \"content\": \"\xe5\x9b\xbe\xe4\xb9\xa6\xe9\xa6\x86\"}\n",
    );
    input.extend_from_slice(b"this is not json\n");
    input.extend_from_slice(b"{\"title\": \"no id\"}\n");
    input.extend_from_slice(b"{\"id\": \"b\", \"content\": \"\xff\xfe\"}\n");
    input.extend_from_slice(b"{\"id\": \"c\", \"body\": \"wrong field\"}\n");
    input.extend_from_slice(
        b"{\"id\": 42, \"title\": \"\xe6\xa0\x87\xe9\xa2\x98\", \"content\": \"\"}\n",
    );
    let (code, out, err) = neardup(&["fingerprint"], &input);
    assert_eq!(
        code, 3,
        "exit code 3 when lines were rejected; stderr: {err}"
    );
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "the good lines are still written");
    assert_eq!(lines[0]["id"], "a");
    assert_eq!(lines[1]["id"], 42, "integer ids are echoed as integers");
    assert!(err.contains("<stdin>:2: not valid JSON"), "{err}");
    assert!(err.contains("<stdin>:3: no `id` field"), "{err}");
    assert!(err.contains("<stdin>:4: not valid UTF-8"), "{err}");
    assert!(err.contains("<stdin>:5: none of the text fields"), "{err}");
    assert!(err.contains("4 bad lines"), "{err}");
}

#[test]
fn strict_stops_at_the_first_bad_line() {
    let input = b"{\"id\":\"a\",\"content\":\"x\"}\nbroken\n{\"id\":\"b\",\"content\":\"y\"}\n";
    let (code, out, err) = neardup(&["fingerprint", "--strict"], input);
    assert_eq!(code, 1);
    assert_eq!(
        json_lines(&out).len(),
        1,
        "lines before the bad one are written"
    );
    assert!(err.contains("<stdin>:2:"), "{err}");
    assert!(err.contains("--strict"), "{err}");
}

#[test]
fn custom_fields_and_html_content() {
    let input = concat!(
        r#"{"doc": "h1", "body": "<div><p>青禾市图书馆完成改造后重新开放，新增自习座位三百个。</p><script>var x=1;</script><p>延长夜间开放时间，设立少儿阅读区和数字资源体验区，方便市民借阅图书。</p></div>"}"#,
        "\n",
        r#"{"doc": "p1", "body": "青禾市图书馆完成改造后重新开放，新增自习座位三百个。\n延长夜间开放时间，设立少儿阅读区和数字资源体验区，方便市民借阅图书。"}"#,
        "\n"
    );
    let (code, out, err) = neardup(
        &["fingerprint", "--field", "body", "--id-field", "doc"],
        input.as_bytes(),
    );
    assert_eq!(code, 0, "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines[0]["id"], "h1");
    assert_eq!(lines[0]["simhash"], lines[1]["simhash"]);
}

#[test]
fn gzip_input_and_missing_file() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("a.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    enc.write_all(&std::fs::read(common::examples()).unwrap())
        .unwrap();
    enc.finish().unwrap();
    let (code, from_gz, _) = neardup(&["fingerprint", "-q", "-i", gz.to_str().unwrap()], b"");
    assert_eq!(code, 0);
    let (_, plain, _) = neardup(&["fingerprint", "-q", "-i", &examples()], b"");
    assert_eq!(from_gz, plain);

    let (code, _, err) = neardup(&["fingerprint", "-i", "/nonexistent/x.jsonl"], b"");
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/x.jsonl"), "{err}");
    assert_eq!(
        err.matches("No such file").count(),
        1,
        "the cause once: {err}"
    );
}

#[test]
fn unknown_profile_is_a_usage_error() {
    let (code, _, err) = neardup(&["fingerprint", "--profile", "nope"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("default") && err.contains("seed000"), "{err}");
}

/// `head -c N corpus.jsonl.gz > t.gz`: the good lines are written, then one error, then the
/// run ends with exit code 3 (it used to loop forever on the read error).
#[test]
fn a_truncated_gz_writes_the_good_lines_and_ends_with_one_error() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let corpus = std::fs::read(common::examples()).unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for _ in 0..20 {
        enc.write_all(&corpus).unwrap();
    }
    let gz = enc.finish().unwrap();
    let path = dir.path().join("t.gz");
    std::fs::write(&path, &gz[..gz.len() / 2]).unwrap();
    let (code, out, err) = neardup(&["fingerprint", "-i", path.to_str().unwrap(), "-q"], b"");
    assert_eq!(code, 3, "{err}");
    let written = json_lines(&out).len();
    let total = 20
        * corpus
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
    assert!(written > 0 && written < total, "{written} of {total}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("t.gz:") && errors[0].contains("truncated"),
        "{err}"
    );
}

/// A line over the cap is reported by number and skipped; the others are written.
#[test]
fn a_huge_line_is_named_not_loaded() {
    let line = format!(
        "{{\"id\":\"a\",\"content\":\"{}\"}}\n{{\"id\":\"b\",\"content\":\"x\"}}\n",
        "长".repeat(12 << 20)
    );
    let (code, out, err) = neardup(&["fingerprint", "-q"], line.as_bytes());
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("<stdin>:1: line longer than"), "{err}");
    assert_eq!(json_lines(&out).len(), 1);
}

/// Every line carries the MinHash signature (128 values) and its version beside the SimHash
/// fields, and the signature is the library's.
#[test]
fn output_has_the_minhash_signature_beside_the_simhash_fields() {
    let (code, out, err) = neardup(&["fingerprint", "-i", &examples(), "-q"], b"");
    assert_eq!(code, 0, "{err}");
    let lines = json_lines(&out);
    let fp = neardup::Fingerprinter::for_profile(neardup::Profile::Default);
    let input = std::fs::read_to_string(common::examples()).unwrap();
    let first = &lines[0];
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        // In key order (serde_json's map is sorted).
        [
            "blocks",
            "id",
            "minhash",
            "minhash_version",
            "simhash",
            "u64",
            "version"
        ]
    );
    assert_eq!(first["minhash_version"], fp.minhash_version());
    for (line, article) in lines.iter().zip(input.lines()) {
        let id = line["id"].as_str().unwrap();
        if line["minhash"].is_null() {
            continue;
        }
        let values: Vec<u64> = line["minhash"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().expect("a number"))
            .collect();
        assert_eq!(values.len(), 128, "{id}");
        assert!(values.iter().all(|&v| v <= u64::from(u32::MAX)), "{id}");
        let article: serde_json::Value = serde_json::from_str(article).unwrap();
        let fields = [
            article["title"].as_str().unwrap(),
            article["content"].as_str().unwrap(),
        ];
        let want = fp.minhash_fields(&fields).unwrap().signature;
        let want: Vec<u64> = want.values().iter().map(|&v| u64::from(v)).collect();
        assert_eq!(values, want, "{id}");
        // The SimHash fields are still there and still the library's.
        assert_eq!(
            line["simhash"],
            fp.fingerprint_fields(&fields).unwrap().simhash.to_hex(),
            "{id}"
        );
    }
    assert_eq!(lines.iter().filter(|l| l["minhash"].is_array()).count(), 38);
}

/// Too short for MinHash: `minhash` is null and the reason is given, whether or not the
/// SimHash profile found the text long enough.
#[test]
fn a_too_short_line_has_a_null_minhash_and_its_reason() {
    for (profile, simhash_null) in [("default", true), ("seed000", false)] {
        let (code, out, err) = neardup(
            &["fingerprint", "-i", &examples(), "-q", "--profile", profile],
            b"",
        );
        assert_eq!(code, 0, "{err}");
        let lines = json_lines(&out);
        let short = lines.iter().find(|l| l["id"] == "ex-029").unwrap();
        assert!(short["minhash"].is_null(), "{profile}: {short}");
        assert_eq!(short["minhash_reason"], "too_short", "{profile}");
        assert_eq!(
            short["minhash_detail"], "3 distinct words, at least 8 needed",
            "{profile}"
        );
        assert_eq!(
            short["simhash"].is_null(),
            simhash_null,
            "{profile}: {short}"
        );
        assert!(short.get("minhash_version").is_none(), "{profile}: {short}");
        // Lines with a signature have no MinHash reason.
        let long = lines.iter().find(|l| l["id"] == "ex-001").unwrap();
        assert!(long["minhash"].is_array());
        assert!(long.get("minhash_reason").is_none(), "{long}");
    }
}

#[test]
fn an_empty_input_is_warned_about() {
    for input in [&b""[..], b"\n  \n"] {
        let (code, out, err) = neardup(&["fingerprint"], input);
        assert_eq!(code, 0, "{err}");
        assert!(out.is_empty());
        assert!(
            err.contains("warning: the input holds no articles"),
            "{err}"
        );
    }
    let (_, _, err) = neardup(&["fingerprint", "-i", &examples(), "-q"], b"");
    assert!(!err.contains("no articles"), "{err}");
}
