//! `neardup es-init`: give an index the fingerprint fields (or create it with them).

use neardup::es::{self, BlockType, InitOutcome, RetryPolicy};

use super::common::{CmdResult, Status};
use super::es_args::{self, EsArgs, FieldArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    es: EsArgs,
    /// Index (or alias) to prepare; created when it does not exist.
    #[arg(long, value_name = "NAME")]
    index: String,
    /// Mapping of the four blocks: `short` (compatible with the older Java service) or
    /// `keyword`. See docs/elasticsearch.md for the measured difference.
    #[arg(long, default_value = "short", value_name = "TYPE")]
    block_type: BlockType,
    #[command(flatten)]
    fields: FieldArgs,
}

pub fn run(args: Args) -> CmdResult {
    let names = args.fields.names()?;
    let (config, client) = args.es.client()?;
    es_args::runtime()?.block_on(async {
        let retry = RetryPolicy::default();
        let version = es::first_contact(&client, config.connect_timeout).await?;
        let outcome = es::init_index(&client, &retry, &args.index, &names, args.block_type).await?;
        let what = match outcome {
            InitOutcome::Created => format!(
                "created index `{}` with the fingerprint fields ({} blocks)",
                args.index, args.block_type
            ),
            InitOutcome::Added(fields) => format!(
                "added {} to index `{}` ({} blocks)",
                fields.join(", "),
                args.index,
                args.block_type
            ),
            InitOutcome::Unchanged => format!(
                "index `{}` already has the fingerprint fields; nothing changed",
                args.index
            ),
        };
        println!(
            "{what} on {} (Elasticsearch {version})",
            config.display_urls()
        );
        Ok(Status::Done)
    })
}
