//! CPU benchmarks (criterion): fingerprinting by each method beside bare jieba-rs
//! segmentation of the same text, and SimHash all-pairs. `cargo bench` (add a name to pick
//! one: `cargo bench -- fingerprint`).
//!
//! The articles are the first `NEARDUP_BENCH_DOCS` (default 300) of `NEARDUP_BENCH_CORPUS`
//! (default `../shared/data/zh_articles.jsonl.gz`, title and content). The whole-corpus
//! figures of BENCHMARKS.md come from `neardup-bench fingerprint`, which also times
//! start-up and all threads.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use neardup::input::{self, Body, InputSpec, Lines};
use neardup::pipeline::sketch_body;
use neardup::{AllPairs, Fingerprinter, Method, Methods, Profile, SimHash};

fn corpus() -> Vec<Body> {
    let path = std::env::var("NEARDUP_BENCH_CORPUS").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/data/zh_articles.jsonl.gz"
        )
        .to_owned()
    });
    let limit: usize = std::env::var("NEARDUP_BENCH_DOCS")
        .ok()
        .map(|n| n.parse().expect("NEARDUP_BENCH_DOCS is a number"))
        .unwrap_or(300);
    let spec = InputSpec {
        text_fields: vec!["title".into(), "content".into()],
        ..InputSpec::default()
    };
    let source = input::open(&path).unwrap_or_else(|e| {
        panic!("{path}: {e} (set NEARDUP_BENCH_CORPUS to a JSON Lines corpus)")
    });
    Lines::new(source.reader)
        .take(limit)
        .map(|(line, raw)| {
            let raw = raw.unwrap_or_else(|e| panic!("{path}:{line}: {e}"));
            input::parse_line(&raw, &spec)
                .unwrap_or_else(|e| panic!("{path}:{line}: {e}"))
                .body
        })
        .collect()
}

fn bytes(docs: &[Body]) -> u64 {
    docs.iter()
        .map(|b| match b {
            Body::Fields(f) => f.iter().map(String::len).sum::<usize>(),
            Body::Tokens(t) => t.iter().map(String::len).sum::<usize>(),
        })
        .sum::<usize>() as u64
}

fn fingerprint(c: &mut Criterion) {
    let docs = corpus();
    let fp = Fingerprinter::for_profile(Profile::Default);
    // Loads the dictionary and the IDF table outside the measurements.
    let _ = fp.sketch_fields(Methods::BOTH, &["预热"]);
    let jieba = neardup::text::segment::jieba();
    let mut g = c.benchmark_group("fingerprint");
    g.throughput(Throughput::Bytes(bytes(&docs)));
    g.sample_size(10);
    g.bench_function("bare jieba-rs cut (HMM on)", |b| {
        b.iter(|| {
            docs.iter()
                .map(|d| match d {
                    Body::Fields(f) => f.iter().map(|t| jieba.cut(t, true).len()).sum(),
                    Body::Tokens(t) => t.len(),
                })
                .sum::<usize>()
        })
    });
    for (name, methods) in [
        ("simhash", Methods::only(Method::SimHash)),
        ("minhash", Methods::only(Method::MinHash)),
        ("both", Methods::BOTH),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                docs.iter()
                    .filter(|d| sketch_body(&fp, methods, d).too_short().is_some())
                    .count()
            })
        });
    }
    g.finish();
}

fn allpairs(c: &mut Criterion) {
    // SplitMix64: seeded, so every run sees the same fingerprints.
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let fps: Vec<SimHash> = (0..100_000).map(|_| SimHash(next())).collect();
    let mut g = c.benchmark_group("allpairs");
    g.sample_size(10);
    for k in [3, 7] {
        let finder = AllPairs::new(k).expect("k ≤ 7");
        g.bench_function(format!("100k random fingerprints, k = {k}"), |b| {
            b.iter_batched(|| &fps, |f| finder.run(f), BatchSize::SmallInput)
        });
    }
    g.finish();
}

criterion_group!(benches, fingerprint, allpairs);
criterion_main!(benches);
