//! `neardup-bench es-groups`: duplicate groups as an article API meets them.
//!
//! The distinct articles of a labelled pairs file (`neardup eval --generate`, a seed you did
//! not tune on) are bulk-loaded, without fingerprints, into two fresh indices; `es-init`'s
//! description with and without groups is recorded in them; one worker pass fingerprints
//! each (the real `Worker`, batches of 500). Then: how many articles carry a label, the share
//! of positive pairs whose articles share a group (a `collapse` on the field lists them
//! once) and of negative pairs that do (wrongly merged stories), per pair kind; and the
//! field's cost, from `_stats` of two copies of the grouped index (with and without the
//! field, the same documents in the same order) force-merged to one segment.

use std::collections::{BTreeMap, HashMap};
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use elasticsearch::http::Method as Http;
use elasticsearch::Elasticsearch;
use neardup::es::{
    self, BlockType, Body, EsIndexer, FieldNames, GroupLink, GroupMeta, IndexMeta,
    MinHashFieldNames, RetryPolicy, ScanOptions, Scanner, Worker, WorkerConfig,
};
use neardup::eval::read_pairs;
use neardup::Methods;
use serde_json::{json, Value};

use neardup::cli::common::{CmdResult, ProfileArgs, Status};
use neardup::cli::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:
  neardup eval --generate --seed 12 -i ../shared/data/zh_articles.jsonl.gz -o pairs-12.jsonl
  neardup-bench es-groups --es http://127.0.0.1:9200 --pairs pairs-12.jsonl")]
pub struct EsGroupsBench {
    #[command(flatten)]
    es: EsArgs,
    /// Labelled pairs (JSON Lines, as `neardup eval --generate` writes them).
    #[arg(long, value_name = "PATH")]
    pairs: PathBuf,
    /// Prefix of the two indices (`{prefix}-groups`, `{prefix}-plain`): deleted first, and
    /// afterwards unless --keep.
    #[arg(long, default_value = "neardup-bench-groups")]
    index: String,
    /// Keep the indices afterwards.
    #[arg(long)]
    keep: bool,
    /// Fingerprint without learned boilerplate. By default the boilerplate is learned from
    /// the loaded articles first, as `neardup boilerplate learn --es … --index …` then
    /// `es-init --boilerplate` do (docs/evaluation.md: without it, the items of one site
    /// link through their site's boilerplate).
    #[arg(long)]
    no_boilerplate: bool,
    /// After the worker pass, also run `neardup regroup` on the grouped index (the groups
    /// become the connected components of what `similar` links) and report the shares again.
    #[arg(long)]
    regroup: bool,
    /// What joins two articles in a group (`es-init --group-by`): `sketches`, or `texts`
    /// (aligned; the worker learns the formula from the loaded index before its pass, as it
    /// keeps it current).
    #[arg(long, default_value = "sketches", value_parser = ["sketches", "texts"])]
    group_by: String,
    /// Both indices without the containment fields (fields format 2, `es-init
    /// --no-containment`): groups of near-duplicates only, to compare the write rate.
    #[arg(long)]
    no_containment: bool,
    #[command(flatten)]
    profile: ProfileArgs,
}

pub fn run(args: EsGroupsBench) -> CmdResult {
    let path = args.pairs.display().to_string();
    let file = std::fs::File::open(&args.pairs).with_context(|| format!("opening {path}"))?;
    let pairs = read_pairs(BufReader::new(file), &path)?;
    anyhow::ensure!(!pairs.is_empty(), "{path} holds no pairs");
    let (docs, ids) = super::es_recall::documents(&pairs);
    let mut fp = args.profile.fingerprinter()?;
    if !args.no_boilerplate {
        let fields = WorkerConfig::default().text_fields;
        let mut learner = fp.boilerplate_learner(neardup::text::boilerplate::DEFAULT_SAMPLE);
        for (id, doc) in &docs {
            let texts = neardup::input::field_texts(doc, &fields)
                .with_context(|| format!("{path}: article {id}"))?;
            learner.add(&texts);
        }
        let learned = learner.finish(None);
        println!("boilerplate learned from the articles: {learned}");
        fp = neardup::Fingerprinter::new(neardup::FingerprintConfig {
            boilerplate: Some(std::sync::Arc::new(learned)),
            ..fp.config().clone()
        });
    }
    let plain = IndexMeta::new(
        fp.config(),
        Methods::BOTH,
        BlockType::Short,
        FieldNames::default(),
        MinHashFieldNames::default(),
    )
    .with_containment(!args.no_containment);
    let by_texts = args.group_by == "texts";
    let grouped = IndexMeta {
        group: Some(GroupMeta {
            link: match by_texts {
                true => GroupLink::Texts {
                    fields: WorkerConfig::default().text_fields,
                },
                false => GroupLink::Sketches,
            },
            ..GroupMeta::default()
        }),
        ..plain.clone()
    };
    let (config, client) = args.es.client()?;
    let retry = RetryPolicy::default();
    es_args::runtime()?.block_on(async {
        let version = es::server_version(&client, &retry).await?;
        let mut sizes = Vec::new();
        let mut labels = HashMap::new();
        let mut regrouped = None;
        for (suffix, meta) in [("groups", &grouped), ("plain", &plain)] {
            let index = format!("{}-{suffix}", args.index);
            let _ = es::send(&client, Http::Delete, &format!("/{}", es::path_segment(&index)), &[], None).await?;
            es::init_index(&client, &retry, &index, meta).await?;
            load(&client, &index, &docs).await?;
            let indexer = EsIndexer::new(client.clone(), index.clone(), meta.clone(), fp.clone())?
                .with_retry(retry.clone());
            let mut worker = Worker::new(indexer, WorkerConfig::default());
            if by_texts && meta.group.is_some() {
                super::es::refresh(&client, &retry, &index).await?;
                let started = Instant::now();
                let f = worker.keep_formula().await?.context("no formula learned")?;
                println!(
                    "{index}: formula {} learned from {} articles ({} windows) in {:.1} s",
                    f.id,
                    f.read,
                    f.windows,
                    started.elapsed().as_secs_f64()
                );
            }
            let started = Instant::now();
            let report = worker.pass(&AtomicBool::new(false)).await?;
            let took = started.elapsed();
            anyhow::ensure!(report.writes.failed.is_empty(), "{index}: {:?}", report.writes.failed);
            println!(
                "{index}: worker pass fingerprinted {} of {} articles ({} too short) in {:.1} s ({:.0} articles/s)",
                report.fingerprinted,
                docs.len(),
                report.too_short,
                took.as_secs_f64(),
                report.seen as f64 / took.as_secs_f64()
            );
            if meta.group.is_some() {
                labels = read_labels(&client, &index).await?;
                // Measured on two fresh copies of this index, in the same document order,
                // with and without the field: the worker's updates leave soft-deleted
                // versions that retention leases keep through a force merge, and `_source`
                // compresses by blocks of neighbouring documents.
                for drop in [None, Some("nearDupGroup")] {
                    let copy = format!("{index}-copy");
                    copy_index(&client, &index, &copy, drop).await?;
                    sizes.push(force_merged_bytes(&client, &copy).await?);
                    es::request(&client, &retry, "delete copy", Http::Delete, &format!("/{}", es::path_segment(&copy)), &[], None).await?;
                }
                if args.regroup {
                    let work = std::env::temp_dir().join(format!("neardup-bench-groups-{}.redb", std::process::id()));
                    let mut rc = neardup::es::regroup::RegroupConfig::new(&index);
                    rc.state = work.clone();
                    rc.restart = true;
                    let started = Instant::now();
                    let r = neardup::es::regroup::regroup(client.clone(), &rc, &AtomicBool::new(false), |_| {}, |_| Ok(())).await?;
                    let _ = std::fs::remove_file(&work);
                    println!(
                        "{index}: regroup in {:.1} s: {} groups of two or more (largest {}), {} labels changed",
                        started.elapsed().as_secs_f64(),
                        r.shared_groups,
                        r.largest_group,
                        r.written
                    );
                    regrouped = Some(read_labels(&client, &index).await?);
                }
            }
            if !args.keep {
                es::request(&client, &retry, "delete bench index", Http::Delete, &format!("/{}", es::path_segment(&index)), &[], None).await?;
            }
        }
        println!();
        println!(
            "Elasticsearch {version} at {}; {} pairs of {path}; {} distinct articles",
            config.display_urls(),
            pairs.len(),
            docs.len()
        );
        shares("after es-init + one worker pass", &labels, &docs, &pairs, &ids);
        if let Some(regrouped) = &regrouped {
            shares("after a regroup", regrouped, &docs, &pairs, &ids);
        }
        let (with, without) = (sizes[0], sizes[1]);
        println!();
        println!(
            "store bytes of two copies of the grouped index, force-merged to one segment: with the field {with}, without {without}: the field costs {:.1} bytes per article (target ≤ 50)",
            (with as f64 - without as f64) / docs.len() as f64
        );
        Ok(Status::Done)
    })
}

/// How many articles carry a label, and the share of pairs of each kind whose two articles
/// share a group.
fn shares(
    when: &str,
    labels: &HashMap<String, String>,
    docs: &[(String, Value)],
    pairs: &[neardup::eval::LabelledPair],
    ids: &[[String; 2]],
) {
    println!();
    println!("{when}:");
    let labelled = docs
        .iter()
        .filter(|(id, _)| labels.contains_key(id))
        .count();
    println!("labelled: {labelled} of {} articles", docs.len());
    let groups: std::collections::HashSet<&String> = labels.values().collect();
    println!(
        "groups: {} (a collapse on the field lists {} articles)",
        groups.len(),
        groups.len()
    );
    let same = |[a, b]: &[String; 2]| labels.contains_key(a) && labels.get(a) == labels.get(b);
    let mut kinds: BTreeMap<(bool, String), (usize, usize)> = BTreeMap::new();
    for (p, pair_ids) in pairs.iter().zip(ids) {
        let e = kinds.entry((p.duplicate, p.group())).or_default();
        e.0 += 1;
        e.1 += usize::from(same(pair_ids));
    }
    let total = |dup: bool| {
        kinds
            .iter()
            .filter(|((d, _), _)| *d == dup)
            .fold((0, 0), |(n, s), (_, (a, b))| (n + a, s + b))
    };
    let (pos, pos_same) = total(true);
    let (neg, neg_same) = total(false);
    println!();
    println!("| pairs | pairs | share a group | share |");
    println!("|---|---|---|---|");
    println!(
        "| duplicates (target ≥ 0.99) | {pos} | {pos_same} | {:.4} |",
        pos_same as f64 / pos.max(1) as f64
    );
    println!(
        "| negatives (target ≤ 0.005) | {neg} | {neg_same} | {:.4} |",
        neg_same as f64 / neg.max(1) as f64
    );
    for ((dup, kind), (n, s)) in &kinds {
        let what = if *dup { "duplicate" } else { "negative" };
        println!(
            "| {what}: {kind} | {n} | {s} | {:.4} |",
            *s as f64 / *n as f64
        );
    }
}

/// Bulk-loads `docs` (no fingerprints) and refreshes.
async fn load(client: &Elasticsearch, index: &str, docs: &[(String, Value)]) -> anyhow::Result<()> {
    let retry = RetryPolicy::default();
    let path = es::path_segment(index);
    for chunk in docs.chunks(1000) {
        let mut nd = String::new();
        for (id, doc) in chunk {
            nd.push_str(&json!({ "index": { "_id": id } }).to_string());
            nd.push('\n');
            nd.push_str(&doc.to_string());
            nd.push('\n');
        }
        super::es_similar::bulk_load(client, &retry, &path, nd).await?;
    }
    es::request(
        client,
        &retry,
        "refresh",
        Http::Post,
        &format!("/{path}/_refresh"),
        &[],
        None,
    )
    .await?;
    Ok(())
}

/// Calls `each` with every hit of `index` (through the library's one paging layer,
/// `_source` as `source` asks).
async fn scroll(
    client: &Elasticsearch,
    index: &str,
    source: Value,
    mut each: impl FnMut(&Value),
) -> anyhow::Result<()> {
    let scanner = Scanner::new(client.clone(), RetryPolicy::default());
    let mut cursor = scanner.cursor(index, json!({ "_source": source }), &ScanOptions::default());
    loop {
        let hits = cursor.next_page().await?;
        if hits.is_empty() {
            cursor.close().await;
            return Ok(());
        }
        hits.iter().for_each(&mut each);
    }
}

/// Every article's group label, by id.
async fn read_labels(
    client: &Elasticsearch,
    index: &str,
) -> anyhow::Result<HashMap<String, String>> {
    let retry = RetryPolicy::default();
    super::es::refresh(client, &retry, index).await?;
    let mut out = HashMap::new();
    scroll(client, index, json!(["nearDupGroup"]), |h| {
        if let (Some(id), Some(label)) = (h["_id"].as_str(), h["_source"]["nearDupGroup"].as_str())
        {
            out.insert(id.to_owned(), label.to_owned());
        }
    })
    .await?;
    Ok(out)
}

/// Copies `src` (mapping and documents, in `_doc` order) into a new index `dst` (one shard,
/// no replica), without the field `drop` when given.
async fn copy_index(
    client: &Elasticsearch,
    src: &str,
    dst: &str,
    drop: Option<&str>,
) -> anyhow::Result<()> {
    let retry = RetryPolicy::default();
    let m = es::request(
        client,
        &retry,
        "mapping",
        Http::Get,
        &format!("/{}/_mapping", es::path_segment(src)),
        &[],
        None,
    )
    .await?;
    let mut mappings = m[src]["mappings"].clone();
    if let (Some(f), Some(props)) = (drop, mappings["properties"].as_object_mut()) {
        props.remove(f);
    }
    let _ = es::send(
        client,
        Http::Delete,
        &format!("/{}", es::path_segment(dst)),
        &[],
        None,
    )
    .await?;
    es::request(
        client,
        &retry,
        "create copy",
        Http::Put,
        &format!("/{}", es::path_segment(dst)),
        &[],
        Some(&Body::Json(json!({
            "settings": { "number_of_shards": 1, "number_of_replicas": 0 },
            "mappings": mappings,
        }))),
    )
    .await?;
    let mut docs = Vec::new();
    scroll(client, src, json!(true), |h| {
        let mut source = h["_source"].clone();
        if let (Some(f), Some(o)) = (drop, source.as_object_mut()) {
            o.remove(f);
        }
        docs.push((h["_id"].as_str().unwrap_or_default().to_owned(), source));
    })
    .await?;
    load(client, dst, &docs).await
}

/// Store bytes of the index's primaries after a force merge to one segment.
async fn force_merged_bytes(client: &Elasticsearch, index: &str) -> anyhow::Result<u64> {
    let retry = RetryPolicy::default();
    let p = es::path_segment(index);
    let call = |what: &'static str,
                method: Http,
                path: String,
                query: &'static [(&'static str, &'static str)]| {
        let retry = retry.clone();
        async move { es::request(client, &retry, what, method, &path, query, None).await }
    };
    call("refresh", Http::Post, format!("/{p}/_refresh"), &[]).await?;
    // Until one segment without deleted documents is left (a force merge request can come
    // back before its merge is done, e.g. when the client times out and retries).
    for _ in 0..120 {
        call(
            "force merge",
            Http::Post,
            format!("/{p}/_forcemerge"),
            &[("max_num_segments", "1")],
        )
        .await?;
        let r = call(
            "stats",
            Http::Get,
            format!("/{p}/_stats/docs,store,segments,merge"),
            &[],
        )
        .await?;
        let pr = &r["_all"]["primaries"];
        let n = |v: &Value| v.as_u64().unwrap_or(u64::MAX);
        if n(&pr["segments"]["count"]) == 1
            && n(&pr["docs"]["deleted"]) == 0
            && n(&pr["merges"]["current"]) == 0
        {
            return Ok(n(&pr["store"]["size_in_bytes"]));
        }
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
    anyhow::bail!("{index} did not merge to one segment without deleted documents in 10 minutes")
}
