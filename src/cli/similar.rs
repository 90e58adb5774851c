//! `neardup similar`: the documents near one document, text, article or fingerprint, in a
//! local store (`--store DIR`) or in Elasticsearch (`--index NAME`, cluster from `--es`).
//!
//! Both backends take the same query flags with the same meaning: `--id` (a stored
//! document, itself left out), `--text` (plain text or HTML), `--input` (a file holding one
//! JSON Lines article, whose own id is left out) and `--fingerprint`; the same
//! `--method`/`-k`/`--threshold`, `--format`, and exit code 4 when the query is too short to
//! have a fingerprint. A store answers with its own method, Elasticsearch with the one its
//! indices record in `_meta` (MinHash where held); MinHash matches carry `similarity`, SimHash
//! ones `distance`. On Elasticsearch, `--ids-from` looks up many ids over one connection.

use std::io::{BufRead, Write};

use anyhow::Context;
use clap::ArgGroup;
use neardup::es::{
    self, EsError, FilterMode, IndexMeta, Near, Paging, QueryFingerprint, RetryPolicy, Similar,
    SimilarOptions,
};
use neardup::input;
use neardup::pipeline::sketch_body;
use neardup::relation::AlignRule;
use neardup::store::Match;
use neardup::{Fingerprinter, Method, Methods, Score, SimHash, Sketch, Tolerance};

use super::common::ProfileArgs;
use super::common::{self, CmdResult, MethodArgs, RelationArgs, Searched, Status};
use super::es_args::{self, EsArgs, FieldArgs};
use super::store_args::{self, StoreChoice};

#[derive(clap::Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["store", "index"])))]
#[command(group(ArgGroup::new("query").required(true).args(["id", "ids_from", "text", "input", "fingerprint"])))]
pub struct Args {
    #[command(flatten)]
    local: StoreChoice,
    /// Search these Elasticsearch indices: a name, alias or pattern; several comma-separated
    /// (`articles-2024,articles-2025`). The cluster is --es (or NEARDUP_ES_URL).
    #[arg(
        long,
        value_name = "NAME[,NAME…]",
        conflicts_with = "store",
        help_heading = "Elasticsearch"
    )]
    index: Option<String>,
    /// Documents near this stored document (itself left out).
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// Documents near each stored document whose id is on a line of this file (`-` reads
    /// standard input), over one connection: one JSON line per id, `{"id", "matches": […]}`
    /// or `{"id", "error"}` (exit 3 when some id failed).
    #[arg(
        long,
        value_name = "FILE|-",
        requires = "index",
        conflicts_with = "format"
    )]
    ids_from: Option<String>,
    /// Documents near this text (plain text or HTML).
    #[arg(long, value_name = "TEXT")]
    text: Option<String>,
    /// Documents near the one JSON Lines article in this file (`.gz` is decompressed; `-`
    /// reads standard input); its own id is left out. A plain text goes in --text.
    #[arg(long, short, value_name = "PATH")]
    input: Option<String>,
    /// Documents near this SimHash fingerprint (16 hex digits, as `neardup fingerprint`
    /// prints): on an index holding MinHash too, add --method simhash or -k.
    #[arg(long, value_name = "HEX")]
    fingerprint: Option<SimHash>,
    /// Text field of the --input article (and, on Elasticsearch, of a document without a
    /// stored fingerprint; dotted paths allowed); repeat for several, joined in order.
    #[arg(long = "field", value_name = "NAME", default_values = neardup::input::DEFAULT_TEXT_FIELDS)]
    fields: Vec<String>,
    /// Field holding the --input article's id.
    #[arg(long, default_value = "id", value_name = "NAME")]
    id_field: String,
    /// A store is searched with its own method, Elasticsearch indices with the one they record
    /// (MinHash where held) unless --method, -k or --threshold asks for another.
    #[command(flatten)]
    method: MethodArgs,
    #[command(flatten)]
    relation: RelationArgs,
    /// Elasticsearch: the texts decide (with --id, --ids-from, --text or --input). MinHash
    /// finds candidates down to a similarity of 0.1, their texts are read from `_source`
    /// (--field) and aligned with the query's, and a match is a copy only when one text holds the other's letters,
    /// facts included (`near_duplicate`, `contains`, `contained_in`), or `shares_passage`
    /// when they share a passage without either being a copy. Formula text the index records
    /// (`es-init --formula`) does not count. Matches carry `query_copied`, `match_copied`
    /// and the shared `passages` (spans of both texts). A local store keeps no texts.
    #[arg(long, conflicts_with_all = ["threshold", "k", "no_containment", "method", "fingerprint"])]
    align: bool,
    /// Output: `json` (one `{"id","similarity"}` or `{"id","distance"}` line per match, with
    /// `"index"` on Elasticsearch) or `table`.
    #[arg(long, default_value = "json", value_name = "json|table")]
    format: Format,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten, next_help_heading = "Elasticsearch")]
    es: EsArgs,
    /// Where the exact rule (distance ≤ k, or similarity ≥ threshold) is checked: `server` (a
    /// painless script filter; only matches cross the network; falls back to `client` when
    /// the cluster refuses scripts) or `client` (every candidate's blocks or signature are
    /// fetched and checked here). Both give the same matches.
    #[arg(
        long,
        default_value = "server",
        value_name = "server|client",
        help_heading = "Elasticsearch"
    )]
    filter: FilterMode,
    /// Candidates per page.
    #[arg(
        long,
        default_value_t = 1000,
        value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..),
        help_heading = "Elasticsearch"
    )]
    page_size: usize,
    /// How to page when the candidates exceed a page: `auto` (point in time where the
    /// cluster has it, else scroll), `pit` or `scroll`.
    #[arg(
        long,
        default_value = "auto",
        value_name = "auto|pit|scroll",
        help_heading = "Elasticsearch"
    )]
    paging: Paging,
    #[command(flatten, next_help_heading = "Elasticsearch")]
    field_names: FieldArgs,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Json,
    Table,
}

/// What a query found, from either backend.
struct Found {
    /// What was searched for.
    tolerance: Tolerance,
    matches: Vec<Match>,
    /// The query fingerprint and where it came from, when known.
    query: Option<(SimHash, &'static str)>,
    /// Candidates read (Elasticsearch).
    transferred: Option<u64>,
}

/// The query as given on the command line, the --input article already read.
enum Query {
    Id(String),
    Text(String),
    /// A sketch (--fingerprint, or --input's article), where it came from, and the id to
    /// leave out.
    Sketch(Sketch, &'static str, Option<String>),
}

/// What was too short to fingerprint, and why.
type TooShort = (String, neardup::TooShort);

pub fn run(args: Args) -> CmdResult {
    let found = match (&args.local.store, &args.index) {
        (Some(dir), _) => search_store(&args, dir)?,
        (None, Some(index)) if args.ids_from.is_some() => return search_es_ids(&args, index),
        (None, Some(index)) => search_es(&args, index)?,
        (None, None) => unreachable!("clap requires --store or --index"),
    };
    match found {
        Ok(found) => print(&args, &found),
        Err((what, why)) => {
            eprintln!(
                "error: {what} is too short to fingerprint ({why}), so nothing can be near it"
            );
            Ok(Status::NoFingerprint)
        }
    }
}

type Outcome = Result<Found, TooShort>;

/// Reads the query: --input's one article is sketched here, with `fp` and `method`; an
/// article too short to fingerprint is the inner `Err`.
fn query(
    args: &Args,
    fp: &Fingerprinter,
    method: Method,
) -> anyhow::Result<Result<Query, TooShort>> {
    if let Some(id) = &args.id {
        return Ok(Ok(Query::Id(id.clone())));
    }
    if let Some(text) = &args.text {
        return Ok(Ok(Query::Text(text.clone())));
    }
    if let Some(f) = args.fingerprint {
        if method != Method::SimHash {
            return Err(common::usage(
                "--fingerprint takes a SimHash fingerprint, but the query's method is minhash (the store's or index's own, or asked for): query with --id, --text or --input, or pass --method simhash where SimHash is held",
            ));
        }
        return Ok(Ok(Query::Sketch(Sketch::SimHash(f), "given", None)));
    }
    let (id, texts) = input_article(args)?;
    let what = format!("article `{id}`");
    Ok(
        sketch_body(fp, Methods::only(method), &input::Body::Fields(texts))
            .into_sketch(method)
            .map(|s| Query::Sketch(s, "computed from the article", Some(id.key())))
            .map_err(|why| (what, why)),
    )
}

/// The one JSON Lines article of --input (standard input without it): its id and its text
/// fields (--field), in order.
fn input_article(args: &Args) -> anyhow::Result<(input::DocId, Vec<String>)> {
    let path = args.input.as_deref().unwrap_or("-");
    let source = input::open(path)?;
    let mut docs = input::articles(source.reader, &source.name, &args.id_field, &args.fields);
    let doc = docs.next().with_context(|| {
        format!(
            "{} holds no article; `similar --input` takes one",
            source.name
        )
    })??;
    anyhow::ensure!(
        docs.next().is_none(),
        "{} holds more than one article; `similar` takes one (use `neardup check` for many)",
        source.name
    );
    Ok((doc.id, doc.texts))
}

fn search_store(args: &Args, dir: &std::path::Path) -> anyhow::Result<Outcome> {
    common::ensure_usage(
        !args.align,
        "--align reads the texts of the matches, and a local store keeps none: query an Elasticsearch index (--index), or align a file with `neardup dedupe --align`",
    )?;
    let store = args.local.open(dir)?;
    let tolerance = args.method.for_store(&store)?;
    let options = args.relation.options();
    let method = store.method();
    let fp = args.profile.for_store(Some(store.config()))?;
    let query = match query(args, &fp, method)? {
        Ok(q) => q,
        Err(too_short) => return Ok(Err(too_short)),
    };
    let (matches, query) = match query {
        Query::Id(id) => {
            let m = store
                .similar_to_id(&id, tolerance, &options)?
                .with_context(|| {
                    format!(
                        "no fingerprint for `{id}` in store {}: it was never indexed, or its text \
                     was too short to fingerprint (`neardup index` counts those as too short)",
                        dir.display()
                    )
                })?;
            (m, None)
        }
        Query::Text(text) => {
            store_args::ensure_comparable(&store, &fp, false)?;
            let sketch = fp
                .sketch_fields(Methods::only(method), &[&text])
                .into_sketch(method);
            match sketch {
                Ok(s) => (
                    store.similar(s.clone(), tolerance, None, &options)?,
                    simhash_of(&s).map(|f| (f, "computed from the text")),
                ),
                Err(why) => return Ok(Err(("the --text".to_owned(), why))),
            }
        }
        Query::Sketch(s, origin, own_id) => {
            if own_id.is_some() {
                store_args::ensure_comparable(&store, &fp, false)?;
            }
            let shown = simhash_of(&s).map(|f| (f, origin));
            (
                store.similar(s, tolerance, own_id.as_deref(), &options)?,
                shown,
            )
        }
    };
    Ok(Ok(Found {
        tolerance,
        matches,
        query,
        transferred: None,
    }))
}

/// The SimHash of a sketch, to show in the table header.
fn simhash_of(s: &Sketch) -> Option<SimHash> {
    match s {
        Sketch::SimHash(f) => Some(*f),
        Sketch::MinHash(_) => None,
    }
}

/// The Elasticsearch side of a query: one runtime and connection, one [`Similar`], what the
/// indices hold and the tolerance asked for.
struct EsQuery {
    runtime: tokio::runtime::Runtime,
    similar: Similar,
    meta: IndexMeta,
    tolerance: Tolerance,
    /// The tolerance and whether partial copies count (`--no-containment`).
    near: Near,
}

fn connect_es(args: &Args, index: &str) -> anyhow::Result<EsQuery> {
    // Usage errors of the method flags come before the cluster is contacted.
    args.method.distance.resolve(Searched::Elasticsearch)?;
    args.method.for_index(Method::default())?;
    let names = args.field_names.names()?;
    let (config, client) = args.es.client()?;
    let options = SimilarOptions {
        filter: args.filter,
        page_size: args.page_size,
        paging: args.paging,
        text_fields: args.fields.clone(),
        names,
        ..SimilarOptions::default()
    };
    // An interactive lookup: a couple of quick retries, not the minutes a worker rides out.
    let retry = RetryPolicy {
        max_retries: 2,
        ..RetryPolicy::default()
    };
    // The fingerprinter comes from the indices' `_meta` (seed000 for the Java layout).
    let similar = Similar::with_options(client, None, options, retry);
    let runtime = es_args::runtime()?;
    let meta = runtime.block_on(async {
        // Fails fast, in one line, when the node is down or refuses the credentials.
        es::first_contact(similar.scanner().client(), config.connect_timeout).await?;
        similar.index_meta(index).await
    })?;
    check_profile(args, index, &meta)?;
    let method = args.method.for_index(meta.default_method())?;
    let tolerance = args.method.tolerance(method, Searched::Elasticsearch)?;
    Ok(EsQuery {
        runtime,
        similar,
        meta,
        tolerance,
        near: Near::new(tolerance, args.relation.options()),
    })
}

/// Elasticsearch indices record their SimHash profile, so `--profile` is not needed there; one
/// that makes another SimHash version than the indices hold is a usage error.
fn check_profile(args: &Args, index: &str, meta: &IndexMeta) -> anyhow::Result<()> {
    let Some(profile) = args.profile.profile else {
        return Ok(());
    };
    let asked = args.profile.for_store(None)?;
    let asked = asked.version_of(Method::SimHash, false);
    match meta.version(Method::SimHash) {
        Some(held) if held == asked => Ok(()),
        Some(held) => Err(common::usage(format!(
            "--profile {profile} makes SimHash version `{asked}`, but `{index}` holds `{held}`: leave --profile out (the index records its own)"
        ))),
        None => Err(common::usage(format!(
            "--profile {profile} is a SimHash profile, but `{index}` holds no SimHash fingerprints ({meta}): leave --profile out"
        ))),
    }
}

fn search_es(args: &Args, index: &str) -> anyhow::Result<Outcome> {
    let es = connect_es(args, index)?;
    if args.align {
        return search_es_aligned(args, index, &es);
    }
    let method = es.tolerance.method();
    let fp = es.meta.fingerprinter(index)?;
    let query = match query(args, &fp, method)? {
        Ok(q) => q,
        Err(too_short) => return Ok(Err(too_short)),
    };
    let (found, own_id) = es.runtime.block_on(async {
        match &query {
            Query::Id(id) => es
                .similar
                .by_id(index, id, es.near)
                .await
                .map(|f| (f, None)),
            Query::Text(t) => es
                .similar
                .by_text(index, t, es.near)
                .await
                .map(|f| (f, None)),
            Query::Sketch(s, _, own) => es
                .similar
                .by_fingerprint(index, s.clone(), es.near)
                .await
                .map(|found| (found, own.clone())),
        }
    })?;
    let origin = match (&found.query, &query) {
        (QueryFingerprint::TooShort(why), _) => {
            let what = match &query {
                Query::Id(id) => format!("document `{id}` has no stored fingerprint and its text"),
                _ => "the --text".to_owned(),
            };
            return Ok(Err((what, why.clone())));
        }
        (QueryFingerprint::Stored(_), _) => "stored",
        (QueryFingerprint::Computed(_), Query::Id(_)) => "computed from the document",
        (QueryFingerprint::Computed(_), _) => "computed from the text",
        (QueryFingerprint::Given(_), Query::Sketch(_, origin, _)) => origin,
        (QueryFingerprint::Given(_), _) => "given",
    };
    Ok(Ok(Found {
        tolerance: es.tolerance,
        query: found.query.simhash().map(|f| (f, origin)),
        transferred: Some(found.transferred),
        matches: others(found.matches, own_id.as_deref()),
    }))
}

/// `--align`: the texts of the query (--id, --text or --input) and of MinHash's candidates
/// are aligned, and the rule decides.
fn search_es_aligned(args: &Args, index: &str, es: &EsQuery) -> anyhow::Result<Outcome> {
    let rule = &AlignRule::DEFAULT;
    let (found, what, own_id) = if let Some(id) = &args.id {
        let found = es
            .runtime
            .block_on(es.similar.aligned_by_id(index, id, rule))?;
        let what = format!("document `{id}` has no stored fingerprint and its text");
        (found, what, None)
    } else if let Some(text) = &args.text {
        let found = es
            .runtime
            .block_on(es.similar.aligned_by_text(index, text, rule))?;
        (found, "the --text".to_owned(), None)
    } else {
        let (id, texts) = input_article(args)?;
        let found = es
            .runtime
            .block_on(es.similar.aligned_by_texts(index, &texts, rule))?;
        (found, format!("article `{id}`"), Some(id.key()))
    };
    if let QueryFingerprint::TooShort(why) = &found.query {
        return Ok(Err((what, why.clone())));
    }
    formula_note(index, &es.meta);
    Ok(Ok(Found {
        // The candidates' floor.
        tolerance: found.tolerance,
        query: None,
        transferred: Some(found.transferred),
        matches: others(found.matches, own_id.as_deref()),
    }))
}

/// `matches` without the query's own id, if it has one (--input's article).
fn others(matches: Vec<Match>, own_id: Option<&str>) -> Vec<Match> {
    matches
        .into_iter()
        .filter(|m| own_id != Some(m.id.as_str()))
        .collect()
}

/// Says on standard error when the indices record no formula text for aligned lookups to
/// leave out.
fn formula_note(index: &str, meta: &IndexMeta) {
    if meta.formula.is_none() {
        eprintln!(
            "note: `{index}` records no formula (the worker records one once the index holds 1,000 documents; or `neardup formula learn --index {index}`, then `es-init --formula`): text that templates share counts as copied"
        );
    }
}

/// `--ids-from`: one JSON line per id, in input order, with its matches or its error. Errors
/// of one id (not found, in several indices, unreadable, too short) are its line; others
/// (the cluster, the index) end the command.
fn search_es_ids(args: &Args, index: &str) -> CmdResult {
    let path = args.ids_from.as_deref().expect("--ids-from was given");
    let source = input::open(path)?;
    let es = connect_es(args, index)?;
    if args.align {
        formula_note(index, &es.meta);
    }
    let mut out = common::stdout();
    let mut failed = 0usize;
    for line in source.reader.lines() {
        let line = line.with_context(|| format!("reading ids from {}", source.name))?;
        let id = line.trim();
        if id.is_empty() {
            continue;
        }
        let answer = es.runtime.block_on(async {
            if args.align {
                es.similar
                    .aligned_by_id(index, id, &AlignRule::DEFAULT)
                    .await
            } else {
                es.similar.by_id(index, id, es.near).await
            }
        });
        let line = match answer {
            Ok(found) => match &found.query {
                QueryFingerprint::TooShort(why) => {
                    failed += 1;
                    serde_json::json!({ "id": id, "error": format!(
                        "document `{id}` has no stored fingerprint and its text is too short to fingerprint ({why}), so nothing can be near it"
                    ) })
                }
                _ => serde_json::json!({ "id": id, "matches": found.matches }),
            },
            Err(e) if one_id_error(&e) => {
                failed += 1;
                serde_json::json!({ "id": id, "error": e.to_string() })
            }
            Err(e) => return Err(e.into()),
        };
        serde_json::to_writer(&mut out, &line).context("writing output")?;
        out.write_all(b"\n").context("writing output")?;
        // A caller feeding ids through a pipe reads each answer as it comes.
        out.flush().context("writing output")?;
    }
    common::flush(&mut out)?;
    Ok(if failed > 0 {
        Status::BadInput
    } else {
        Status::Done
    })
}

/// An error that concerns one looked-up id, not the cluster or the indices.
fn one_id_error(e: &EsError) -> bool {
    matches!(
        e,
        EsError::DocumentNotFound { .. }
            | EsError::AmbiguousId { .. }
            | EsError::BadDocument { .. }
            | EsError::BadText(_)
    )
}

/// The width of the table's relation column: its longest name, `near_duplicate`.
const RELATION_WIDTH: usize = 14;

fn print(args: &Args, found: &Found) -> CmdResult {
    let mut out = common::stdout();
    match args.format {
        Format::Json => {
            for m in &found.matches {
                serde_json::to_writer(&mut out, m).context("writing output")?;
                out.write_all(b"\n").context("writing output")?;
            }
        }
        Format::Table => {
            let n = found.matches.len();
            let mut header = format!(
                "{} {}",
                common::plural(n, "match", "matches"),
                match found.tolerance {
                    Tolerance::Distance(k) => format!("within distance {k}"),
                    Tolerance::Similarity(t) => match args.relation.options().containment {
                        Some(c) =>
                            format!("with similarity ≥ {t} or containment ≥ {}", c.threshold),
                        None => format!("with similarity ≥ {t}"),
                    },
                },
            );
            if let Some((fp, origin)) = found.query {
                header.push_str(&format!(" of fingerprint {} ({origin})", fp.to_hex()));
            }
            if let Some(t) = found.transferred {
                header.push_str(&format!("; {t} candidates read"));
            }
            writeln!(out, "{header}")?;
            if n > 0 {
                let iw = found
                    .matches
                    .iter()
                    .filter_map(|m| m.index.as_ref().map(|i| i.chars().count()))
                    .chain([5])
                    .max()
                    .unwrap_or(5);
                let has_index = found.matches.iter().any(|m| m.index.is_some());
                let has_relation = found.matches.iter().any(|m| m.relation.is_some());
                let label = match found.tolerance {
                    Tolerance::Distance(_) => "distance",
                    Tolerance::Similarity(_) => "similarity",
                };
                let mut head = label.to_owned();
                if has_relation {
                    head.push_str(&format!("  {:RELATION_WIDTH$}  containment", "relation"));
                }
                if has_index {
                    head.push_str(&format!("  {:iw$}", "index"));
                }
                writeln!(out, "{head}  id")?;
                for m in &found.matches {
                    let mut row = match m.score {
                        Score::Distance(d) => format!("{d:>8}"),
                        Score::Similarity(s) => format!("{s:>10.3}"),
                    };
                    if has_relation {
                        let relation = m.relation.map_or("", |r| r.name());
                        let containment = m
                            .containment
                            .map_or_else(|| "-".to_owned(), |c| format!("{c:.3}"));
                        row.push_str(&format!("  {relation:RELATION_WIDTH$}  {containment:>11}"));
                    }
                    if let Some(index) = &m.index {
                        row.push_str(&format!("  {index:iw$}"));
                    } else if has_index {
                        row.push_str(&format!("  {:iw$}", ""));
                    }
                    writeln!(out, "{row}  {}", m.id)?;
                }
            }
        }
    }
    common::flush(&mut out)?;
    Ok(Status::Done)
}
