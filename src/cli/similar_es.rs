//! `neardup similar --es URL --index NAME --id ID`: near duplicates of a document (or of a
//! text, or a fingerprint) in Elasticsearch.

use std::io::{Read, Write};

use anyhow::Context;
use neardup::es::{
    self, FilterMode, Paging, QueryFingerprint, RetryPolicy, Similar, SimilarOptions,
};
use neardup::SimHash;

use super::common::{self, CmdResult, ProfileArgs, Status};
use super::es_args::{self, EsArgs, FieldArgs};

#[derive(clap::Args, Debug)]
pub struct EsSimilarArgs {
    #[command(flatten)]
    es: EsArgs,
    /// Index, alias or pattern to search; several comma-separated (`articles-2024,articles-2025`).
    #[arg(long, value_name = "NAME[,NAME…]")]
    index: String,
    /// Id of the document whose near duplicates to find (it is left out of the results).
    #[arg(long, value_name = "ID",
          required_unless_present_any = ["text", "input", "fingerprint"],
          conflicts_with_all = ["text", "input", "fingerprint"])]
    id: Option<String>,
    /// A text not in the index (plain text or HTML) to find near duplicates of.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["input", "fingerprint"])]
    text: Option<String>,
    /// Read the query text (plain text or HTML) from a file; `-` reads standard input.
    #[arg(long, short, value_name = "PATH", conflicts_with = "fingerprint")]
    input: Option<String>,
    /// A fingerprint (16 hex digits, as `neardup fingerprint` prints) to find documents near.
    #[arg(long, value_name = "HEX")]
    fingerprint: Option<SimHash>,
    /// Largest Hamming distance to report (at most 3 with the four 16-bit blocks).
    #[arg(
        short = 'k',
        long = "max-distance",
        default_value_t = 3,
        value_name = "K"
    )]
    k: u32,
    /// Where the exact distance is checked: `server` (a painless script filter; only matches
    /// cross the network; falls back to `client` when the cluster refuses scripts) or
    /// `client` (every candidate's blocks are fetched and checked here).
    #[arg(long, default_value = "server", value_name = "server|client")]
    filter: FilterMode,
    /// Output: `json` (one `{"id","index","distance"}` line per match) or `table`.
    #[arg(long, default_value = "json", value_name = "json|table")]
    format: Format,
    /// Text field fingerprinted when the document has no stored fingerprint (dotted paths
    /// allowed); repeat for several, joined in order.
    #[arg(long = "field", value_name = "NAME", default_values = ["title", "content"])]
    fields: Vec<String>,
    /// Candidates per page.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    page_size: usize,
    /// How to page when the candidates exceed a page: `auto` (point in time where the
    /// cluster has it, else scroll), `pit` or `scroll`.
    #[arg(long, default_value = "auto", value_name = "auto|pit|scroll")]
    paging: Paging,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    field_names: FieldArgs,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Json,
    Table,
}

pub fn run(args: EsSimilarArgs) -> CmdResult {
    anyhow::ensure!(args.page_size > 0, "--page-size must be at least 1");
    let names = args.field_names.names()?;
    let (_, client) = args.es.client()?;
    let text = match (&args.text, &args.input) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => Some(read_text(path)?),
        _ => None,
    };
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
    let similar = Similar::with_options(client, args.profile.fingerprinter(), options, retry);
    let index = args.index.as_str();
    let found = es_args::runtime()?.block_on(async {
        // Fails fast, in one line, when the node is down or refuses the credentials.
        es::server_version(similar.scanner().client(), &RetryPolicy::none()).await?;
        match (&args.id, &text, args.fingerprint) {
            (Some(id), _, _) => similar.by_id(index, id, args.k).await,
            (None, Some(t), _) => similar.by_text(index, t, args.k).await,
            (None, None, Some(fp)) => similar.by_fingerprint(index, fp, args.k).await,
            _ => unreachable!("clap requires one of --id, --text, --input, --fingerprint"),
        }
        .map_err(anyhow::Error::from)
    })?;

    if let QueryFingerprint::TooShort(why) = &found.query {
        let what = match &args.id {
            Some(id) => format!("document `{id}` has no stored fingerprint and its text"),
            None => "the query text".to_owned(),
        };
        eprintln!("error: {what} is too short to fingerprint ({why}), so nothing can be near it");
        return Ok(Status::NoFingerprint);
    }

    let mut out = common::stdout();
    match args.format {
        Format::Json => {
            for m in &found.matches {
                serde_json::to_writer(&mut out, m)?;
                out.write_all(b"\n")?;
            }
        }
        Format::Table => {
            let origin = match &found.query {
                QueryFingerprint::Stored(_) => "stored",
                QueryFingerprint::Computed(_) => "computed from the text",
                _ => "given",
            };
            let fp = found.query.simhash().expect("not too short");
            writeln!(
                out,
                "{} within distance {} of fingerprint {} ({origin}); {} candidates read",
                plural(found.matches.len(), "match", "matches"),
                args.k,
                fp.to_hex(),
                found.transferred,
            )?;
            if !found.matches.is_empty() {
                let iw = found
                    .matches
                    .iter()
                    .map(|m| m.index.chars().count())
                    .chain([5])
                    .max()
                    .unwrap_or(5);
                writeln!(out, "distance  {:iw$}  id", "index")?;
                for m in &found.matches {
                    writeln!(out, "{:>8}  {:iw$}  {}", m.distance, m.index, m.id)?;
                }
            }
        }
    }
    common::flush(&mut out)?;
    Ok(Status::Done)
}

fn read_text(path: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    if path == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the query text from standard input")?;
    } else {
        text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the query text from {path}"))?;
    }
    Ok(text)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
