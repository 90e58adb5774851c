//! `neardup formula learn`: learn the formula text of a corpus (windows of letters found in
//! many groups of unrelated documents: the clauses every admission notice quotes, the
//! attendance formula of every meeting bulletin) and write it as the artefact
//! `dedupe --align --formula PATH` and `es-init --formula PATH` take. See
//! docs/reference/local-store-commands.md (`dedupe --align`).

use neardup::es::{self, FieldNames, RetryPolicy, Scanner};
use neardup::pipeline;

use super::common::{self, CmdResult, InputArgs, ProfileArgs, Status};
use super::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Learn the formula windows of a corpus (`--input`) or an Elasticsearch index
    /// (`--index`) and write the artefact (JSON).
    Learn(LearnArgs),
}

#[derive(clap::Args, Debug)]
pub struct LearnArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Learn from the documents of this Elasticsearch index instead (alias or pattern;
    /// cluster from --es), their texts prepared as the index records (folding,
    /// boilerplate); --input is then not read.
    #[arg(long, value_name = "NAME")]
    index: Option<String>,
    #[command(flatten)]
    es: EsArgs,
    /// With --index: read at most N documents (the first ones, in the index's order). They
    /// are held in memory while learning.
    #[arg(long, default_value_t = es::FORMULA_SAMPLE, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    sample: u64,
    /// Text preparation: `--no-fold`, and `--boilerplate PATH` (the lines the texts it
    /// will judge drop; formula is counted over what is left).
    #[command(flatten)]
    profile: ProfileArgs,
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
    if let Some(index) = &args.index {
        common::ensure_usage(
            args.profile.boilerplate.is_none() && !args.profile.no_fold,
            "--index: the index records how its texts are prepared (folding, boilerplate); leave out --boilerplate and --no-fold",
        )?;
        return learn_from_index(&args, index);
    }
    common::ensure_usage(
        args.input.input != "-",
        "formula learn reads its input three times: give a file, not standard input",
    )?;
    common::ensure_usage(
        !args.input.pre_tokenized,
        "formula is learned from text, and --pre-tokenized input has none",
    )?;
    let fp = args.profile.fingerprinter()?;
    let spec = args.input.spec();
    let path = args.input.input.clone();
    let f = pipeline::learn_formula(|| neardup::input::open(&path), &spec, &fp)?;
    written(&args, &f, &path)
}

fn written(args: &LearnArgs, f: &neardup::align::Formula, from: &str) -> CmdResult {
    common::write_artefact(&args.output, f)?;
    if !args.quiet {
        eprintln!(
            "formula learn: {f} (from {from}); written to {}",
            if args.output == "-" {
                "standard output"
            } else {
                &args.output
            }
        );
    }
    Ok(Status::Done)
}

/// The texts of up to --sample documents of `index`, prepared as the index records.
fn learn_from_index(args: &LearnArgs, index: &str) -> CmdResult {
    let (_, client) = args.es.client()?;
    let fields = &args.input.fields;
    let learned = es_args::runtime()?.block_on(async {
        let retry = RetryPolicy::default();
        let meta = es::read_meta(&client, &retry, index, &FieldNames::default()).await?;
        let fp = meta.fingerprinter(index)?;
        let scanner = Scanner::new(client, retry);
        es::learn_formula(&scanner, index, fields, args.sample, &fp).await
    })?;
    written(
        args,
        &learned.formula,
        &format!("{} documents of index `{index}`", learned.read),
    )
}
