//! `neardup formula learn`: learn the formula text of a corpus (windows of letters found in
//! many groups of unrelated documents: the clauses every admission notice quotes, the
//! attendance formula of every meeting bulletin) and write it as the artefact
//! `dedupe --align --formula PATH` takes. See docs/reference/local-store-commands.md
//! (`dedupe --align`).

use neardup::pipeline;

use super::common::{self, CmdResult, InputArgs, ProfileArgs, Status};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Learn the formula windows of a corpus (`--input`) and write the artefact (JSON).
    Learn(LearnArgs),
}

#[derive(clap::Args, Debug)]
pub struct LearnArgs {
    #[command(flatten)]
    input: InputArgs,
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
    common::write_artefact(&args.output, &f)?;
    if !args.quiet {
        eprintln!(
            "formula learn: {f} (from {path}); written to {}",
            if args.output == "-" {
                "standard output"
            } else {
                &args.output
            }
        );
    }
    Ok(Status::Done)
}
