//! `neardup-bench allpairs` and `neardup-bench similar`: speed and memory of the local index.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use neardup::allpairs::simhash::AllPairs;
use neardup::input::{self, InputSpec, Lines};
use neardup::pipeline::fingerprint_body;
use neardup::relation::MatchOptions;
use neardup::store::{OpenOptions, Store, StoreConfig};
use neardup::{Method, SimHash, Sketch, Tolerance};
use rayon::prelude::*;

use neardup::cli::common::{self, CmdResult, ProfileArgs, Status};

#[derive(clap::Args, Debug)]
pub struct AllPairsBench {
    /// Random fingerprints to pair up; repeat for several sizes (e.g. 1000000 and 10000000).
    #[arg(long, value_name = "N")]
    random: Vec<usize>,
    /// Also pair up the fingerprints of this JSON Lines corpus (`.gz` is fine).
    #[arg(long, short, value_name = "PATH")]
    input: Option<String>,
    /// Distance.
    #[arg(short, default_value_t = 3)]
    k: u32,
    /// Thread counts to measure, comma-separated (default: 1 and all cores).
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    threads: Vec<usize>,
    /// Timed runs per configuration; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seed of the random fingerprints.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Groups up to this size are compared pair by pair, larger ones split again (tuning).
    #[arg(long, default_value_t = neardup::allpairs::simhash::DEFAULT_LEAF_SIZE)]
    leaf: usize,
    #[command(flatten)]
    profile: ProfileArgs,
}

#[derive(clap::Args, Debug)]
pub struct SimilarBench {
    /// Store to query; with --random and no store there yet, one is built first.
    #[arg(long, value_name = "DIR")]
    store: PathBuf,
    /// Build the store from N random fingerprints (ids `r0`, `r1`, …) if it does not exist.
    #[arg(long, value_name = "N")]
    random: Option<usize>,
    /// Query distance (default: the store's k).
    #[arg(short)]
    k: Option<u32>,
    /// Queries to time.
    #[arg(long, default_value_t = 10_000)]
    queries: usize,
    /// Seed of the random fingerprints.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// MinHash store: also write every answer (mode, query id, the matches' ids and
    /// relations, sorted) to this file, one line a query and mode, to compare two builds.
    #[arg(long, value_name = "PATH")]
    answers: Option<PathBuf>,
    /// MinHash store: every stored document once as a query, instead of --queries drawn at
    /// random.
    #[arg(long)]
    every_document: bool,
}

/// SplitMix64: a small, good-enough generator for benchmark data (no dependency needed).
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn random_fps(n: usize, seed: u64) -> Vec<SimHash> {
    let mut r = SplitMix(seed);
    (0..n).map(|_| SimHash(r.next_u64())).collect()
}

/// Resident memory figures of this process from /proc (Linux), in bytes.
fn mem_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok()
}

/// Resets the peak-RSS counter (Linux ≥ 4.0); false where that is not possible.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn allpairs(args: AllPairsBench) -> CmdResult {
    common::ensure_usage(args.runs > 0, "--runs must be at least 1")?;
    anyhow::ensure!(
        !args.random.is_empty() || args.input.is_some(),
        "nothing to measure: give --random N and/or --input PATH"
    );
    let finder = AllPairs::new(args.k)?.leaf_size(args.leaf);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if args.threads.is_empty() {
        if cores > 1 {
            vec![1, cores]
        } else {
            vec![1]
        }
    } else {
        args.threads.clone()
    };
    println!(
        "all pairs within k = {}; {} runs each, median reported; peak = resident memory above the process's baseline during the first run, input included",
        args.k, args.runs
    );
    println!("| data | fingerprints | threads | seconds | pairs | comparisons | largest bucket | peak B/fp |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut sets: Vec<(String, Option<usize>)> = args
        .random
        .iter()
        .map(|&n| (format!("random (seed {})", args.seed), Some(n)))
        .collect();
    if let Some(path) = &args.input {
        sets.push((path.clone(), None));
    }
    for (name, n) in sets {
        let base = mem_kb("VmRSS:").unwrap_or(0) * 1024;
        let fps = match n {
            Some(n) => random_fps(n, args.seed),
            None => corpus_fps(&name, &args.profile)?,
        };
        for &t in &threads {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
            let mut secs = Vec::with_capacity(args.runs);
            let mut peak = 0u64;
            let mut last = None;
            for run in 0..args.runs {
                // Memory is read on the first run of a data set only: later runs reuse
                // memory the allocator kept from earlier ones.
                // A corpus's texts were allocated before its fingerprints: no clean baseline.
                let can_reset = n.is_some() && t == threads[0] && run == 0 && reset_peak();
                let started = Instant::now();
                let m = pool.install(|| finder.run(&fps));
                secs.push(started.elapsed().as_secs_f64());
                if can_reset {
                    peak = peak.max((mem_kb("VmHWM:").unwrap_or(0) * 1024).saturating_sub(base));
                }
                last = Some(m);
            }
            let m = last.expect("at least one run");
            let bpf = if peak > 0 && !fps.is_empty() {
                format!("{:.1}", peak as f64 / fps.len() as f64)
            } else {
                "n/a".into()
            };
            println!(
                "| {name} | {} | {t} | {:.3} | {} | {} | {} | {bpf} |",
                fps.len(),
                median(secs),
                m.pair_count(),
                m.stats.comparisons,
                m.stats.largest_bucket.iter().max().copied().unwrap_or(0),
            );
        }
    }
    Ok(Status::Done)
}

fn corpus_fps(path: &str, profile: &ProfileArgs) -> anyhow::Result<Vec<SimHash>> {
    let spec = InputSpec::default();
    let source = input::open(path)?;
    let mut bodies = Vec::new();
    for (line, raw) in Lines::new(source.reader) {
        let raw = raw.with_context(|| format!("{path}:{line}"))?;
        let doc = input::parse_line(&raw, &spec).with_context(|| format!("{path}:{line}"))?;
        bodies.push(doc.body);
    }
    let fp = profile.fingerprinter()?;
    Ok(bodies
        .par_iter()
        .filter_map(|b| fingerprint_body(&fp, b).ok().map(|f| f.simhash))
        .collect())
}

pub fn similar(args: SimilarBench) -> CmdResult {
    common::ensure_usage(args.queries > 0, "--queries must be at least 1")?;
    let opts = OpenOptions::default();
    let exists = Store::exists(&args.store);
    let store = match (exists, args.random) {
        (true, _) => Store::open(&args.store, &opts)?,
        (false, Some(n)) => build_random_store(&args.store, n, args.seed)?,
        (false, None) => anyhow::bail!(
            "no store at {}: build one with `neardup index` or pass --random N",
            args.store.display()
        ),
    };
    if store.method() == Method::MinHash {
        return similar_minhash(&store, &args);
    }
    let k = args.k.unwrap_or(store.config().k);
    let snapshot = store.snapshot()?;
    let n = snapshot.len()?;
    anyhow::ensure!(n > 0, "store {} is empty", args.store.display());
    // Queries: half near a random stored fingerprint (when the store was built from random
    // fingerprints with this seed, a flipped copy of one; else plain random), half random.
    let stored = args.random.map(|n| random_fps(n, args.seed));
    let mut r = SplitMix(args.seed ^ 0x5eed);
    let queries: Vec<SimHash> = (0..args.queries)
        .map(|i| match (&stored, i % 2) {
            (Some(s), 0) if !s.is_empty() => {
                let base = s[(r.next_u64() % s.len() as u64) as usize];
                let mut v = base.0;
                for _ in 0..k.min(3) {
                    v ^= 1 << (r.next_u64() % 64);
                }
                SimHash(v)
            }
            _ => SimHash(r.next_u64()),
        })
        .collect();
    // Warm the page cache and the B-tree nodes.
    for q in queries.iter().take(1000) {
        snapshot.similar(
            &Sketch::SimHash(*q),
            Tolerance::Distance(k),
            None,
            &MatchOptions::NEAR_DUPLICATES_ONLY,
        )?;
    }
    let mut lat = Vec::with_capacity(queries.len());
    let mut found = 0usize;
    for q in &queries {
        let t = Instant::now();
        let s = store.snapshot()?;
        found += s
            .similar(
                &Sketch::SimHash(*q),
                Tolerance::Distance(k),
                None,
                &MatchOptions::NEAR_DUPLICATES_ONLY,
            )?
            .len();
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    let p = |q: f64| lat[((lat.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "store {} ({} documents, built for k = {}); {} queries at k = {k}, each in its own read transaction",
        args.store.display(),
        n,
        store.config().k,
        queries.len()
    );
    println!("| median µs | p90 µs | p99 µs | max µs | results/query |");
    println!("|---|---|---|---|---|");
    println!(
        "| {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
        p(0.5),
        p(0.9),
        p(0.99),
        lat[lat.len() - 1],
        found as f64 / queries.len() as f64
    );
    Ok(Status::Done)
}

/// `similar` on a MinHash store: stored documents as queries (themselves left out), at the
/// default threshold, near-duplicates only and with containment (the default of `similar`)
/// taking turns query by query (each first on every other query), each query in its own
/// read transaction.
fn similar_minhash(store: &Store, args: &SimilarBench) -> CmdResult {
    let docs = store.snapshot()?.documents()?;
    anyhow::ensure!(!docs.is_empty(), "store {} is empty", args.store.display());
    let mut r = SplitMix(args.seed ^ 0x5eed);
    let queries: Vec<&(String, Sketch)> = if args.every_document {
        docs.iter().collect()
    } else {
        (0..args.queries)
            .map(|_| &docs[(r.next_u64() % docs.len() as u64) as usize])
            .collect()
    };
    let tolerance = Tolerance::Similarity(neardup::Threshold::default());
    let modes = [
        ("near-duplicates only", MatchOptions::NEAR_DUPLICATES_ONLY),
        ("with containment", MatchOptions::default()),
    ];
    let run = |(id, sketch): &(String, Sketch), opts: &MatchOptions| {
        store
            .snapshot()
            .and_then(|s| s.similar(sketch, tolerance, Some(id), opts))
    };
    // Warm the page cache and the B-tree nodes.
    for q in queries.iter().take(1000) {
        for (_, opts) in &modes {
            run(q, opts)?;
        }
    }
    let mut lat = vec![Vec::with_capacity(queries.len()); modes.len()];
    let mut found = vec![0usize; modes.len()];
    let mut answers = Vec::new();
    // Each mode goes first on every other query: the second one reads pages the first has
    // just brought into the cache.
    for (i, q) in queries.iter().enumerate() {
        for m in [i % 2, 1 - i % 2] {
            let t = Instant::now();
            let matches = run(q, &modes[m].1)?;
            lat[m].push(t.elapsed().as_secs_f64() * 1e6);
            found[m] += matches.len();
            if args.answers.is_some() {
                let mut ids: Vec<String> = matches
                    .iter()
                    .map(|x| format!("{} {:?}", x.id, x.relation))
                    .collect();
                ids.sort_unstable();
                answers.push(format!("{}\t{}\t{}", modes[m].0, q.0, ids.join(", ")));
            }
        }
    }
    if let Some(path) = &args.answers {
        answers.sort_unstable();
        answers.dedup();
        std::fs::write(path, answers.join("\n") + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "store {} ({} MinHash documents); {} stored documents as queries at threshold {}, each in its own read transaction, the two modes taking turns (each first on every other query)",
        args.store.display(),
        docs.len(),
        queries.len(),
        neardup::Threshold::default()
    );
    println!("| matches | median µs | p90 µs | p99 µs | max µs | results/query |");
    println!("|---|---|---|---|---|---|");
    for (m, (name, _)) in modes.iter().enumerate() {
        let l = &mut lat[m];
        l.sort_by(f64::total_cmp);
        let p = |q: f64| l[((l.len() as f64 - 1.0) * q).round() as usize];
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
            p(0.5),
            p(0.9),
            p(0.99),
            l[l.len() - 1],
            found[m] as f64 / queries.len() as f64
        );
    }
    Ok(Status::Done)
}

fn build_random_store(dir: &std::path::Path, n: usize, seed: u64) -> anyhow::Result<Store> {
    let config = StoreConfig {
        method: Method::SimHash,
        profile: "bench-random".into(),
        version: format!("random-u64;seed={seed}"),
        k: 3,
        minhash: None,
        fold: false,
        boilerplate: None,
    };
    let store = Store::create_or_open(dir, &config, &OpenOptions::default())?;
    let fps = random_fps(n, seed);
    let started = Instant::now();
    let ids: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
    for (chunk_ids, chunk_fps) in ids.chunks(50_000).zip(fps.chunks(50_000)) {
        let docs: Vec<(&str, SimHash)> = chunk_ids
            .iter()
            .map(String::as_str)
            .zip(chunk_fps.iter().copied())
            .collect();
        store.upsert_batch(&docs)?;
    }
    eprintln!(
        "built {} with {n} random fingerprints in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(store)
}
