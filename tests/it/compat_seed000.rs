//! Golden vectors of the older Java service: every one reproduced bit for bit.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use neardup::{Fingerprinter, Profile, SimHash};
use serde_json::Value;

struct Vector {
    tokens: Vec<String>,
    bits: Option<String>,
    blocks: Option<[i16; 4]>,
    u64: Option<u64>,
}

fn vectors() -> Vec<Vector> {
    let path = common::shared_dir().join("compat/seed000_vectors.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let v: Vec<Vector> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Vector {
                tokens: serde_json::from_value(v["tokens"].clone()).unwrap(),
                bits: serde_json::from_value(v["bits"].clone()).unwrap(),
                blocks: serde_json::from_value(v["blocks"].clone()).unwrap(),
                u64: serde_json::from_value(v["u64"].clone()).unwrap(),
            }
        })
        .collect();
    assert!(
        v.len() >= 300,
        "expected the full vector file, got {}",
        v.len()
    );
    assert!(
        v.iter().any(|x| x.bits.is_none()),
        "vectors include too-short cases"
    );
    v
}

#[test]
fn library_reproduces_every_vector() {
    let fp = Fingerprinter::for_profile(Profile::Seed000);
    for (i, v) in vectors().iter().enumerate() {
        let got = fp.fingerprint_tokens(&v.tokens);
        match (&v.bits, got) {
            (Some(bits), Ok(f)) => {
                let want = u64::from_str_radix(bits, 2).unwrap();
                assert_eq!(f.simhash, SimHash(want), "vector {i}");
                assert_eq!(Some(f.simhash.0), v.u64, "vector {i}");
                assert_eq!(Some(f.simhash.blocks16()), v.blocks, "vector {i}");
            }
            (None, Err(_)) => {}
            (want, got) => panic!("vector {i}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn cli_reproduces_every_vector() {
    let vectors = vectors();
    let mut input = String::new();
    for (i, v) in vectors.iter().enumerate() {
        input.push_str(&serde_json::json!({"id": i, "tokens": v.tokens}).to_string());
        input.push('\n');
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "fingerprint",
            "--profile",
            "seed000",
            "--pre-tokenized",
            "--input",
            "-",
            "--quiet",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), vectors.len());
    for (i, (v, line)) in vectors.iter().zip(&lines).enumerate() {
        assert_eq!(line["id"], i, "output keeps input order");
        match &v.bits {
            Some(bits) => {
                let want = u64::from_str_radix(bits, 2).unwrap();
                assert_eq!(line["simhash"], format!("{want:016x}"), "vector {i}");
                assert_eq!(line["u64"], want, "vector {i}");
                assert_eq!(
                    line["blocks"],
                    serde_json::json!(v.blocks.unwrap()),
                    "vector {i}"
                );
            }
            None => {
                assert!(line["simhash"].is_null(), "vector {i}");
                assert_eq!(line["reason"], "too_short", "vector {i}");
            }
        }
    }
}
