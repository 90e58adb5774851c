//! `neardup-bench es-tracking`: what edit tracking costs the application's own writes. Two
//! indices es-init made alike, one with the final pipeline that tracks edits (es-init's
//! default), one without (`--no-tracking`); the application's bulk writes of whole articles
//! (`index` actions, as a re-index or a back-office script sends them, with the stored
//! version fields the pipeline then clears) go to each in turn, round after round in the same
//! run, and the medians of the rates are compared (issue 34's target: with ≥ 0.8 × without).

use std::time::Instant;

use anyhow::Context;
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{self, Body, IndexMeta, RetryPolicy, Tracking};
use neardup::input::{self, Lines};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use neardup::cli::common::{CmdResult, Status};
use neardup::cli::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
pub struct EsTrackingBench {
    #[command(flatten)]
    es: EsArgs,
    /// Real articles (JSON Lines with title and content), e.g. ../shared/data/zh_articles.jsonl.gz.
    #[arg(long, short)]
    input: String,
    /// Articles written per round (the first ones of the corpus, cycled with id suffixes).
    #[arg(long, default_value_t = 20_000)]
    docs: usize,
    /// Timed rounds per index (alternating); medians are reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    #[arg(long, default_value_t = 500)]
    bulk_size: usize,
    /// Bulk requests in flight at once.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
}

const WITH: &str = "neardup-bench-tracking-on";
const WITHOUT: &str = "neardup-bench-tracking-off";

pub fn run(args: EsTrackingBench) -> CmdResult {
    anyhow::ensure!(
        args.docs > 0 && args.runs > 0 && args.bulk_size > 0 && args.concurrency > 0,
        "--docs, --runs, --bulk-size and --concurrency must be positive"
    );
    let corpus = read_corpus(&args.input)?;
    anyhow::ensure!(!corpus.is_empty(), "{} holds no article", args.input);
    let (config, client) = args.es.client()?;
    es_args::runtime()?.block_on(async {
        let version = es::first_contact(&client, config.connect_timeout).await?;
        let retry = RetryPolicy::default();
        let meta = IndexMeta::default();
        for index in [WITH, WITHOUT] {
            let _ = es::untrack_edits(&client, &retry, index).await;
            let _ = es::send(&client, Method::Delete, &format!("/{index}"), &[], None).await;
            es::init_index(&client, &retry, index, &meta).await?;
        }
        match &es::track_edits(&client, &retry, WITH, false).await?[WITH] {
            Tracking::On(_) => {}
            other => anyhow::bail!("this cluster does not track edits ({other:?}): nothing to measure"),
        }
        let bodies = bulk_bodies(&corpus, &meta, args.docs, args.bulk_size);
        // One untimed round each: the documents exist, so every timed round overwrites them.
        for index in [WITH, WITHOUT] {
            write_all(&client, index, &bodies, args.concurrency).await?;
        }
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for run in 0..args.runs {
            // Alternate which goes first, so that neither always follows the other's merges.
            let order = if run % 2 == 0 { [WITH, WITHOUT] } else { [WITHOUT, WITH] };
            for index in order {
                let t = Instant::now();
                write_all(&client, index, &bodies, args.concurrency).await?;
                let rate = args.docs as f64 / t.elapsed().as_secs_f64();
                if index == WITH { with.push(rate) } else { without.push(rate) }
            }
        }
        // The pipeline did its work: the stored versions were cleared.
        es::request(&client, &retry, "refresh", Method::Post, &format!("/{WITH}/_refresh"), &[], None).await?;
        let stale = es::request(
            &client,
            &retry,
            "count stale",
            Method::Post,
            &format!("/{WITH}/_count"),
            &[],
            Some(&Body::Json(json!({ "query": { "exists": { "field": "simHashVersion" } } }))),
        )
        .await?;
        anyhow::ensure!(stale["count"] == 0, "the pipeline kept versions: {stale}");
        let (m_with, m_without) = (median(&mut with), median(&mut without));
        println!(
            "Elasticsearch {version} at {}: {} articles per round in bulks of {}, {} in flight, {} rounds each",
            config.display_urls(),
            args.docs,
            args.bulk_size,
            args.concurrency,
            args.runs
        );
        println!("| index | median docs/s | rounds (docs/s) |");
        println!("|---|---|---|");
        let show = |v: &[f64]| v.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(", ");
        println!("| with the tracking pipeline | {m_with:.0} | {} |", show(&with));
        println!("| without | {m_without:.0} | {} |", show(&without));
        println!("ratio with/without: {:.2}", m_with / m_without);
        es::untrack_edits(&client, &retry, WITH).await?;
        for index in [WITH, WITHOUT] {
            es::request(&client, &retry, "delete bench index", Method::Delete, &format!("/{index}"), &[], None).await?;
        }
        Ok(Status::Done)
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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

/// The `_bulk` bodies of `docs` whole articles (the corpus cycled), each with the version
/// fields an application re-indexing a stored article sends back.
fn bulk_bodies(
    corpus: &[(String, String)],
    meta: &IndexMeta,
    docs: usize,
    bulk: usize,
) -> Vec<String> {
    let simhash = meta.simhash.as_ref().map(|s| s.version.clone());
    let minhash = meta.minhash.as_ref().map(|m| m.stored_version());
    let mut out = Vec::new();
    let mut body = String::new();
    for i in 0..docs {
        let (title, content) = &corpus[i % corpus.len()];
        let doc = json!({
            "title": title,
            "content": content,
            "simHashVersion": simhash,
            "minHashVersion": minhash,
        });
        body += &format!(
            "{}\n{doc}\n",
            json!({ "index": { "_id": format!("a{i}") } })
        );
        if (i + 1) % bulk == 0 {
            out.push(std::mem::take(&mut body));
        }
    }
    if !body.is_empty() {
        out.push(body);
    }
    out
}

async fn write_all(
    client: &Elasticsearch,
    index: &str,
    bodies: &[String],
    concurrency: usize,
) -> anyhow::Result<()> {
    let mut set = JoinSet::new();
    let path = format!("/{index}/_bulk");
    for body in bodies {
        if set.len() >= concurrency {
            set.join_next().await.expect("a task")??;
        }
        let (client, path, body) = (client.clone(), path.clone(), Body::NdJson(body.clone()));
        set.spawn(async move {
            let r = es::request(
                &client,
                &RetryPolicy::default(),
                "bulk write",
                Method::Post,
                &path,
                &[],
                Some(&body),
            )
            .await?;
            anyhow::ensure!(r["errors"] == false, "bulk errors: {}", r["items"][0]);
            Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(())
}
