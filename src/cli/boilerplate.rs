//! `neardup boilerplate learn`: learn the lines that recur across many documents (a site's
//! disclaimer, related links, footer) from a JSON Lines corpus or an Elasticsearch index, and
//! write them as the artefact `--boilerplate PATH` takes (`index`, `es-init`, `fingerprint`,
//! `dedupe`). See the README, "Boilerplate".

use anyhow::Context;
use neardup::es::{RetryPolicy, Scanner};
use neardup::input::{self, InputSpec};
use neardup::text::boilerplate::{Learner, DEFAULT_SAMPLE};
use neardup::{FingerprintConfig, Fingerprinter};

use super::common::{self, CmdResult, Status};
use super::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Learn boilerplate lines from a corpus (`--input`) or an index (`--index`) and write the
    /// artefact (JSON, with each line's text for reading).
    Learn(LearnArgs),
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["input", "index"])))]
pub struct LearnArgs {
    /// JSON Lines articles to learn from (`-` = standard input; `.gz` is fine).
    #[arg(long, short, value_name = "PATH")]
    input: Option<String>,
    /// Or the documents of this Elasticsearch index (alias or pattern; cluster from --es).
    #[arg(long, value_name = "NAME")]
    index: Option<String>,
    #[command(flatten)]
    es: EsArgs,
    /// Text fields of each document (dotted paths allowed), as the fingerprints use them.
    #[arg(long = "field", value_name = "NAME", default_values = neardup::input::DEFAULT_TEXT_FIELDS)]
    fields: Vec<String>,
    /// A line is boilerplate when at least N documents hold it (default: 10, or one document
    /// in 2,000 when that is more).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..))]
    min_docs: Option<u64>,
    /// Read at most N documents (the first ones; an index in its own order).
    #[arg(long, default_value_t = DEFAULT_SAMPLE as u64, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    sample: u64,
    /// Learn from text that is not folded from Traditional into Simplified (for stores and
    /// indices made with --no-fold).
    #[arg(long)]
    no_fold: bool,
    /// Where to write the artefact (`-` = standard output).
    #[arg(long, short, default_value = "-", value_name = "PATH")]
    output: String,
    /// No summary on standard error.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(args: Args) -> CmdResult {
    match args.command {
        Command::Learn(args) => learn(args),
    }
}

fn learn(args: LearnArgs) -> CmdResult {
    let fp = Fingerprinter::new(FingerprintConfig {
        fold: !args.no_fold,
        ..FingerprintConfig::default()
    });
    let mut learner = fp.boilerplate_learner(args.sample as usize);
    let source = if let Some(path) = &args.input {
        from_file(path, &args.fields, &mut learner)?;
        path.clone()
    } else {
        let index = args
            .index
            .as_deref()
            .expect("clap requires --input or --index");
        from_index(&args, index, &mut learner)?;
        format!("index `{index}`")
    };
    let read = learner.docs();
    let b = learner.finish(args.min_docs.map(|n| n as usize));
    common::write_artefact(&args.output, &b)?;
    if !args.quiet {
        eprintln!(
            "boilerplate learn: {b} (from {read} distinct documents of {source}); written to {}",
            if args.output == "-" {
                "standard output"
            } else {
                &args.output
            }
        );
        if b.is_empty() {
            eprintln!("warning: no line recurs in enough documents; the artefact drops nothing");
        }
    }
    Ok(Status::Done)
}

fn from_file(path: &str, fields: &[String], learner: &mut Learner) -> anyhow::Result<()> {
    let id_field = InputSpec::default().id_field;
    let source = input::open(path)?;
    for (line, raw) in input::Lines::new(source.reader) {
        let raw = raw.with_context(|| format!("{path}:{line}"))?;
        match input::parse_article(&raw, &id_field, fields) {
            Ok(article) => learner.add(&article.texts),
            Err(e) => eprintln!("{path}:{line}: skipped: {e}"),
        }
        if learner.is_full() {
            break;
        }
    }
    Ok(())
}

fn from_index(args: &LearnArgs, index: &str, learner: &mut Learner) -> anyhow::Result<()> {
    let (_, client) = args.es.client()?;
    es_args::runtime()?.block_on(async {
        let scanner = Scanner::new(client, RetryPolicy::default());
        scanner
            .each_text(index, &args.fields, |texts| {
                learner.add(&texts);
                !learner.is_full()
            })
            .await
    })?;
    Ok(())
}
