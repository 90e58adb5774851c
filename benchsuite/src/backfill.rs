//! `neardup-bench backfill`: is neardup the bottleneck of a back-fill? Times the back-fill of
//! real articles next to the raw rate of the same guarded bulk partial updates with values
//! computed beforehand (what Elasticsearch itself takes on this machine), alternating the two.
//!
//! One index is loaded once (the corpus cycled with id suffixes up to `--docs`), holding the
//! `--methods` asked for (both by default, recorded in its `_meta` as `es-init` does). Each raw
//! pass writes precomputed values of every method under bench-only versions, which leaves
//! every document "missing" for the next back-fill pass; each back-fill pass writes the real
//! ones. So both passes update every document once, every method in the same partial update,
//! with the same bulk size and concurrency.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::backfill::{Backfill, BackfillConfig, Hit, Linking, Paging, WalkSpec, Walker};
use neardup::es::regroup::{regroup, Phase, RegroupConfig, RegroupReport};
use neardup::es::Scanner;
use neardup::es::{
    self, Body, EsIndexer, FieldNames, FingerprintUpdate, IndexMeta, MinHashFieldNames, RetryPolicy,
};
use neardup::input::{self, Lines};
use neardup::{Fingerprint, Fingerprinter, Methods, MinHashFingerprint, Sketches};
use rayon::prelude::*;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use neardup::cli::common::{self, CmdResult, ProfileArgs, Status};
use neardup::cli::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
pub struct BackfillBench {
    #[command(flatten)]
    es: EsArgs,
    /// Real articles (JSON Lines with title and content), e.g. ../shared/data/zh_articles.jsonl.gz.
    #[arg(long, short)]
    input: String,
    /// Documents in the index (the corpus is cycled, ids suffixed).
    #[arg(long, default_value_t = 100_000)]
    docs: usize,
    /// Timed passes of each kind; medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[arg(long, default_value_t = 500)]
    bulk_size: usize,
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// Replicas of each shard (a cluster of several nodes: `scripts/es-up --nodes 3`).
    #[arg(long, default_value_t = 0)]
    replicas: u32,
    /// Each back-fill pass runs this many slices at once (`backfill --slice I/N`, I = 0..N):
    /// N jobs in this process, each with its own state file, bulks and reader, as N
    /// processes on other machines would be.
    #[arg(long, default_value_t = 1)]
    slices: u32,
    /// Reuse the index if it already holds --docs documents (named neardup-bench-backfill).
    #[arg(long)]
    keep: bool,
    /// Methods the index holds and the back-fill writes (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "simhash,minhash", value_parser = common::parse_method, value_name = "M,M")]
    methods: Vec<neardup::Method>,
    /// Duplicate groups the index keeps and the back-fill labels: `none` (the figures before
    /// 2026-11-30), `sketches`, or `texts` (what `es-init` gives a new index holding MinHash).
    /// The raw passes write no labels: the ratio then says what labelling costs as well.
    #[arg(long, value_enum, default_value_t = GroupsArg::None)]
    groups: GroupsArg,
    /// How the back-fill links the groups (`backfill --linking`): `join` (the default: each
    /// article its own group, then one regroup by the join, counted in the pass's time; with
    /// several slices, once all have finished, as a user runs it) or `search` (each labelled
    /// by a search as it is written).
    #[arg(long, value_enum, default_value_t = LinkingArg::Join, value_name = "join|search")]
    linking: LinkingArg,
    /// The index's `refresh_interval` (`-1`: off, as many set it for a bulk load; then the
    /// labels' searches see only what was there, and the grouper's memory of what it labelled
    /// does the rest). Default: Elasticsearch's (1s).
    #[arg(long, value_name = "DURATION")]
    refresh_interval: Option<String>,
    #[command(flatten)]
    profile: ProfileArgs,
}

impl BackfillBench {
    /// The index's `refresh_interval`: the one asked, else Elasticsearch's default.
    fn refresh_interval(&self) -> &str {
        self.refresh_interval.as_deref().unwrap_or("1s")
    }
}

/// `--linking`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum LinkingArg {
    Join,
    Search,
}

impl From<LinkingArg> for Linking {
    fn from(a: LinkingArg) -> Linking {
        match a {
            LinkingArg::Join => Linking::Join,
            LinkingArg::Search => Linking::Search,
        }
    }
}

/// `--groups`: the duplicate groups of the bench index.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum GroupsArg {
    None,
    Sketches,
    Texts,
}

impl GroupsArg {
    /// The groups part of the index's `_meta`, as `es-init --group-by` records it.
    fn meta(self) -> Option<es::GroupMeta> {
        let link = match self {
            GroupsArg::None => return None,
            GroupsArg::Sketches => es::GroupLink::Sketches,
            GroupsArg::Texts => es::GroupLink::for_new_index(true),
        };
        Some(es::GroupMeta {
            link,
            ..es::GroupMeta::default()
        })
    }
}

const INDEX: &str = "neardup-bench-backfill";

pub fn run(args: BackfillBench) -> CmdResult {
    common::ensure_usage(
        args.docs > 0 && args.runs > 0,
        "--docs and --runs must be positive",
    )?;
    let corpus = read_corpus(&args.input)?;
    anyhow::ensure!(!corpus.is_empty(), "{}: no articles", args.input);
    let fp = args.profile.fingerprinter()?;
    let methods = Methods {
        simhash: args.methods.contains(&neardup::Method::SimHash),
        minhash: args.methods.contains(&neardup::Method::MinHash),
    };
    common::ensure_usage(
        methods.simhash || methods.minhash,
        "--methods needs at least one method",
    )?;
    let meta = IndexMeta {
        group: args.groups.meta(),
        ..IndexMeta::new(
            fp.config(),
            methods,
            es::BlockType::Short,
            FieldNames::default(),
            MinHashFieldNames::default(),
        )
    };
    meta.validate()?;
    let (config, client) = args.es.client()?;
    es_args::runtime()?.block_on(async {
        let retry = RetryPolicy::default();
        let version = es::server_version(&client, &retry).await?;
        load(&client, &retry, &args, &meta, &corpus).await?;
        println!(
            "Elasticsearch {version} at {}; {} documents ({} real articles cycled), {} shard(s), {} replica(s); back-fill in {} slice(s); methods {}; groups {} (linked by {:?}); refresh interval {}; bulk {} x {} in flight (per slice); {} threads",
            config.display_urls(),
            args.docs,
            corpus.len(),
            args.shards,
            args.replicas,
            args.slices,
            args.methods.iter().map(|m| m.name()).collect::<Vec<_>>().join(","),
            format!("{:?}", args.groups).to_lowercase(),
            args.linking,
            args.refresh_interval(),
            args.bulk_size,
            args.concurrency,
            rayon::current_num_threads()
        );
        // The values the raw passes write: the real sketches, computed before any timing.
        let fps: Vec<Sketches> = corpus
            .par_iter()
            .map(|(t, c)| fp.sketch_fields(methods, &[t.as_str(), c.as_str()]))
            .collect();
        let mut raw = Vec::new();
        let mut backfill = Vec::new();
        println!("| pass | kind | docs | seconds | docs/s |");
        println!("|---|---|---|---|---|");
        for run in 0..args.runs {
            if let Some(g) = &meta.group {
                // Every pass back-fills articles without a label, as a first back-fill does:
                // the last pass's labels taken off first, not timed.
                take_labels_off(&client, &retry, &g.field).await?;
            }
            let (n, secs) = raw_pass(&client, &args, &meta, &fp, &fps, run).await?;
            println!("| {} | raw bulk updates | {n} | {secs:.2} | {:.0} |", run + 1, n as f64 / secs);
            raw.push(n as f64 / secs);
            let (n, secs) = backfill_pass(&client, &args, &fp).await?;
            println!("| {} | neardup backfill | {n} | {secs:.2} | {:.0} |", run + 1, n as f64 / secs);
            backfill.push(n as f64 / secs);
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (r, b) = (median(&mut raw), median(&mut backfill));
        println!();
        println!(
            "median: raw {r:.0} docs/s, backfill {b:.0} docs/s, backfill/raw = {:.1} %",
            100.0 * b / r
        );
        if !args.keep {
            es::request(&client, &retry, "delete bench index", Method::Delete, &format!("/{INDEX}"), &[], None).await?;
        }
        Ok(Status::Done)
    })
}

fn read_corpus(path: &str) -> anyhow::Result<Vec<(String, String)>> {
    let source = input::open(path)?;
    let mut out = Vec::new();
    for (line, raw) in Lines::new(source.reader) {
        let raw = raw.with_context(|| format!("{path}:{line}"))?;
        let v: Value = serde_json::from_slice(&raw).with_context(|| format!("{path}:{line}"))?;
        let s = |f: &str| v[f].as_str().unwrap_or_default().to_owned();
        out.push((s("title"), s("content")));
    }
    Ok(out)
}

async fn load(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    args: &BackfillBench,
    meta: &IndexMeta,
    corpus: &[(String, String)],
) -> anyhow::Result<()> {
    if args.keep {
        if let Ok(r) = es::request(
            client,
            retry,
            "count",
            Method::Get,
            &format!("/{INDEX}/_count"),
            &[],
            None,
        )
        .await
        {
            let held = es::read_meta(client, retry, INDEX, &FieldNames::default()).await;
            if r["count"].as_u64() == Some(args.docs as u64) && held.ok().as_ref() == Some(meta) {
                return Ok(());
            }
        }
    }
    let _ = es::send(client, Method::Delete, &format!("/{INDEX}"), &[], None).await;
    es::request(
        client,
        retry,
        "create bench index",
        Method::Put,
        &format!("/{INDEX}"),
        &[],
        Some(&Body::Json(json!({
            "settings": {
                "number_of_shards": args.shards,
                "number_of_replicas": args.replicas,
                "refresh_interval": args.refresh_interval(),
            },
        }))),
    )
    .await?;
    es::init_index(client, retry, INDEX, meta).await?;
    let started = Instant::now();
    for start in (0..args.docs).step_by(2000) {
        let mut nd = String::new();
        for i in start..(start + 2000).min(args.docs) {
            let (t, c) = &corpus[i % corpus.len()];
            nd += &json!({"index": {"_id": format!("a{}-{}", i % corpus.len(), i / corpus.len())}})
                .to_string();
            nd.push('\n');
            nd += &json!({"title": t, "content": c, "n": i}).to_string();
            nd.push('\n');
        }
        bulk(client, retry, "loading", nd).await?;
    }
    refresh(client, retry).await?;
    eprintln!(
        "loaded {} documents in {:.1} s",
        args.docs,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn truncate(s: &str) -> &str {
    &s[..s.char_indices().nth(500).map_or(s.len(), |(i, _)| i)]
}

/// Reads every id with its guard (untimed), then times writing precomputed sketches of every
/// method under bench-only versions with the same bulk size and concurrency as the back-fill.
async fn raw_pass(
    client: &Elasticsearch,
    args: &BackfillBench,
    meta: &IndexMeta,
    fp: &Fingerprinter,
    fps: &[Sketches],
    run: usize,
) -> anyhow::Result<(usize, f64)> {
    let retry = RetryPolicy::default();
    let hits = walk(client, &retry, json!({"match_all": {}})).await?;
    let version: Arc<str> = Arc::from(format!("bench-raw-{run}"));
    let corpus_len = fps.len();
    // Too-short texts get a zero SimHash and some article's signature here: with the bench
    // versions, every document is "missing" again for the next back-fill pass.
    let any_signature = fps
        .iter()
        .find_map(|s| s.minhash.as_ref().and_then(|m| m.as_ref().ok()))
        .map(|m| m.signature.clone());
    let updates: Vec<FingerprintUpdate> = hits
        .into_iter()
        .map(|h| {
            let k: usize = h.id[1..]
                .split('-')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let real = &fps[k % corpus_len];
            let simhash = real.simhash.as_ref().map(|o| {
                Ok(Fingerprint {
                    simhash: o.as_ref().map_or(neardup::SimHash(0), |f| f.simhash),
                    version: Arc::clone(&version),
                })
            });
            let minhash = real.minhash.as_ref().map(|o| {
                let signature = match o {
                    Ok(f) => f.signature.clone(),
                    Err(_) => any_signature.clone().expect("some article has a signature"),
                };
                Ok(MinHashFingerprint {
                    signature,
                    version: Arc::clone(&version),
                })
            });
            FingerprintUpdate {
                id: h.id,
                guard: Some((h.seq_no, h.primary_term)),
                sketches: Sketches { simhash, minhash },
                order: None,
                texts: None,
            }
        })
        .collect();
    let n = updates.len();
    // The raw writes carry no group labels (--groups): the fields alone.
    let fields_only = IndexMeta {
        group: None,
        ..meta.clone()
    };
    let indexer = Arc::new(EsIndexer::new(
        client.clone(),
        INDEX,
        fields_only,
        fp.clone(),
    )?);
    let sem = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    let mut chunks = updates.into_iter().peekable();
    while chunks.peek().is_some() {
        let chunk: Vec<_> = chunks.by_ref().take(args.bulk_size).collect();
        let permit = Arc::clone(&sem).acquire_owned().await?;
        let indexer = Arc::clone(&indexer);
        tasks.spawn(async move {
            let r = indexer.update_fingerprints(&chunk).await;
            drop(permit);
            r
        });
    }
    while let Some(r) = tasks.join_next().await {
        let r = r??;
        anyhow::ensure!(
            r.failed.is_empty() && r.conflicts.is_empty(),
            "raw pass: {:?}",
            r.failed.first()
        );
    }
    Ok((n, started.elapsed().as_secs_f64()))
}

/// Sets `field` to null in every document of the bench index that holds it (a walk and
/// bulk updates: not `_update_by_query`, which some nodes lack), then refreshes.
async fn take_labels_off(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    field: &str,
) -> anyhow::Result<()> {
    let labelled = walk(client, retry, json!({"exists": {"field": field}})).await?;
    for page in labelled.chunks(5000) {
        let mut nd = String::new();
        for h in page {
            nd += &json!({"update": {"_id": h.id}}).to_string();
            nd.push('\n');
            nd += &json!({"doc": {field: null}}).to_string();
            nd.push('\n');
        }
        bulk(client, retry, "take the group labels off", nd).await?;
    }
    refresh(client, retry).await
}

/// Every document of the bench index that `query` matches, its `_seq_no` and
/// `_primary_term` as a search sees them: after a refresh, so the last pass's writes (a
/// regroup's labels among them) are seen, and the writes they guard do not conflict.
async fn walk(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    query: Value,
) -> anyhow::Result<Vec<Hit>> {
    refresh(client, retry).await?;
    let spec = WalkSpec {
        index: INDEX.into(),
        query,
        fields: vec![],
        page_size: 5000,
        preference: None,
        keep_alive: std::time::Duration::from_secs(120),
        slice: None,
    };
    let mut walker = Walker::open(
        &Scanner::new(client.clone(), retry.clone()),
        Paging::Scroll,
        spec,
    );
    let mut hits = Vec::new();
    loop {
        let page = walker.next_page().await.map_err(|e| e.into_inner())?;
        if page.is_empty() {
            break;
        }
        hits.extend(page);
    }
    walker.close().await;
    Ok(hits)
}

/// One `_bulk` request of `nd` to the bench index; any item's failure is an error.
async fn bulk(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    what: &str,
    nd: String,
) -> anyhow::Result<()> {
    let r = es::request(
        client,
        retry,
        what,
        Method::Post,
        &format!("/{INDEX}/_bulk"),
        &[],
        Some(&Body::NdJson(nd)),
    )
    .await?;
    anyhow::ensure!(
        r["errors"] == false,
        "{what} failed: {}",
        truncate(&r.to_string())
    );
    Ok(())
}

/// Makes what was written to the bench index searchable.
async fn refresh(client: &Elasticsearch, retry: &RetryPolicy) -> anyhow::Result<()> {
    es::request(
        client,
        retry,
        "refresh",
        Method::Post,
        &format!("/{INDEX}/_refresh"),
        &[],
        None,
    )
    .await?;
    Ok(())
}

/// Times a back-fill of every document (all stale after a raw pass): `--slices` jobs at once,
/// slice I of N each; the rate is every slice's documents over the time until the last ends.
async fn backfill_pass(
    client: &Elasticsearch,
    args: &BackfillBench,
    fp: &Fingerprinter,
) -> anyhow::Result<(usize, f64)> {
    let dir = tempfile_dir()?;
    let n = args.slices.max(1);
    if args.refresh_interval.is_some() {
        // The raw pass's writes made searchable, as a periodic refresh would have: the walk
        // reads the versions it guards its updates with.
        refresh(client, &RetryPolicy::default()).await?;
    }
    let mut jobs = JoinSet::new();
    let started = Instant::now();
    let phases = PhaseClock::default();
    for i in 0..n {
        let slice = es::Slice::new(i, n)?;
        let mut c = BackfillConfig::new(INDEX).with_slice(Some(slice));
        c.state_path = dir.join(format!("state-{i}.jsonl"));
        c.failed_path = dir.join(format!("failed-{i}.jsonl"));
        c.bulk_size = args.bulk_size;
        c.concurrency = args.concurrency;
        c.linking = args.linking.into();
        let job = Backfill::new(client.clone(), fp.clone(), c);
        let phases = phases.clone();
        jobs.spawn(async move {
            let progress = Arc::new(move |p: &neardup::es::backfill::Progress| {
                if let Some(r) = &p.regroup {
                    phases.note(r.phase);
                }
            });
            let r = job.run(&AtomicBool::new(false), progress).await;
            (i, r)
        });
    }
    let mut scanned = 0;
    let mut per_slice = Vec::new();
    let mut pending = false;
    while let Some(done) = jobs.join_next().await {
        let (i, r) = done?;
        let r = r?;
        anyhow::ensure!(
            r.counts.failed + r.counts.bad == 0,
            "back-fill pass, slice {i}/{n}: {:?}",
            r.counts
        );
        for g in r.regroups.values() {
            phases.print(g);
        }
        pending |= !r.regroup_pending.is_empty();
        scanned += r.counts.scanned as usize;
        per_slice.push((i, r.counts.scanned, started.elapsed().as_secs_f64()));
    }
    if pending {
        // What a user of slices runs once every slice has finished.
        let c = RegroupConfig {
            state: dir.join("regroup.redb"),
            ..RegroupConfig::new(INDEX)
        };
        let g = regroup(
            client.clone(),
            &c,
            &AtomicBool::new(false),
            |p| phases.note(p.phase),
            |_| Ok(()),
        )
        .await?;
        phases.print(&g);
    }
    let secs = started.elapsed().as_secs_f64();
    if n > 1 {
        per_slice.sort_unstable_by_key(|p| p.0);
        for (i, docs, done) in per_slice {
            println!(
                "|   | slice {i}/{n} | {docs} | {done:.2} | {:.0} |",
                docs as f64 / done
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((scanned, secs))
}

/// When a regroup entered each phase, from its progress: where its time went.
#[derive(Clone, Default)]
struct PhaseClock(Arc<std::sync::Mutex<Vec<(Phase, Instant)>>>);

impl PhaseClock {
    fn note(&self, phase: Phase) {
        let mut seen = self.0.lock().unwrap();
        if seen.last().is_none_or(|(p, _)| *p != phase) {
            seen.push((phase, Instant::now()));
        }
    }

    /// `g`'s row of the pass's table, with where its time went ([`PhaseClock::spent`]).
    fn print(&self, g: &RegroupReport) {
        println!(
            "|   | regroup by the join | {} articles, {} changed ({}) | {:.2} | |",
            g.articles,
            g.changed,
            self.spent(),
            g.elapsed_secs
        );
    }

    /// `link 1.20 s, choose 0.10 s, write 0.40 s`: each phase until the next began (the
    /// last until now); then forgotten, for the next regroup.
    fn spent(&self) -> String {
        let seen = std::mem::take(&mut *self.0.lock().unwrap());
        let now = Instant::now();
        seen.iter()
            .enumerate()
            .filter(|(_, (p, _))| *p != Phase::Done)
            .map(|(i, (p, at))| {
                let end = seen.get(i + 1).map_or(now, |n| n.1);
                format!("{} {:.2} s", p.name(), (end - *at).as_secs_f64())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("neardup-bench-backfill-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
