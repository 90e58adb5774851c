//! `neardup es-init`: give an index the fingerprint fields of its methods (or create it with
//! them) and record what it holds in the mapping's `_meta`.

use neardup::es::{
    self, BlockType, FormatRequest, GroupLink, GroupMeta, GroupOrder, IndexMeta, InitOutcome,
    LayoutRequest, MetaSource, RetryPolicy, Tracking,
};
use neardup::{FingerprintConfig, Method, Methods, MinHashParams, Profile};
use std::path::PathBuf;
use std::sync::Arc;

use super::common::{self, ensure_usage, CmdResult, Status};
use super::es_args::{self, EsArgs, FieldArgs, MinHashFieldArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    es: EsArgs,
    /// Index (or alias) to prepare; created when it does not exist.
    #[arg(long, value_name = "NAME")]
    index: String,
    /// Methods the index holds (comma-separated): `minhash` (the quality method), `simhash`
    /// (the four `short` blocks of the design card and the older Java service), or both.
    #[arg(long, value_delimiter = ',', default_value = "simhash,minhash", value_parser = common::parse_method, value_name = "M,M")]
    methods: Vec<Method>,
    /// SimHash profile the index holds. Default: what the index already holds (its `_meta`;
    /// `seed000` for an index of the older Java service; the version its documents carry),
    /// else `default`.
    #[arg(long, value_parser = common::parse_profile)]
    profile: Option<Profile>,
    /// Words were segmented without jieba's HMM.
    #[arg(long)]
    no_hmm: bool,
    /// Texts are not folded from Traditional into Simplified. Default: what the index records
    /// (an index recorded before folding existed does not fold), else fold.
    #[arg(long)]
    no_fold: bool,
    /// Replace the fingerprint versions `_meta` records for the methods the index holds with
    /// the ones these settings make (by default: its profile and parameters, this neardup's
    /// text pipeline, folding on), then run `neardup backfill` to re-fingerprint every
    /// document. The explicit step of an upgrade; see docs/elasticsearch.md ("Upgrading an
    /// index").
    #[arg(long)]
    upgrade: bool,
    /// Drop the boilerplate lines of this artefact (`neardup boilerplate learn`) before
    /// segmentation; recorded in `_meta`. Default: what the index records, else none. A
    /// different one on an index that records one needs --upgrade (re-learning).
    #[arg(long, value_name = "PATH", conflicts_with = "no_boilerplate")]
    boilerplate: Option<PathBuf>,
    /// Record this formula artefact (`neardup formula learn`) in `_meta`: the formula text
    /// aligned lookups (`similar --align`) do not count as copied. It decides no fingerprint,
    /// so it replaces a recorded one without --upgrade. Default: what the index records.
    #[arg(long, value_name = "PATH")]
    formula: Option<PathBuf>,
    /// With --upgrade: stop dropping the boilerplate the index records.
    #[arg(long, requires = "upgrade")]
    no_boilerplate: bool,
    /// MinHash parameters (see `neardup dedupe --help`); default: what the index records, else
    /// the default.
    #[arg(long, value_name = "SPEC", value_parser = common::parse_minhash_params)]
    minhash_params: Option<MinHashParams>,
    /// How the MinHash fields hold a signature: `compact` (band terms of 36 bits in 6
    /// characters, the lowest --signature-bits bits of each minimum, a version code: about
    /// 40 % of the bytes) or `full` (64-bit band terms, whole minima, the version string:
    /// the layout of indices made before the compact one). Default: what the index records,
    /// else `compact`. Another layout than the recorded one needs --upgrade, then `neardup
    /// backfill` (docs/elasticsearch.md, "The compact layout").
    #[arg(long, value_name = "LAYOUT", value_parser = ["compact", "full"])]
    layout: Option<String>,
    /// Bits kept of each MinHash minimum in the compact layout, 1 to 28 or 32: 8 changes no
    /// decision on the held-out pairs; 4 changes a few and saves about 150 B per article.
    /// Default: what the index records, else 8.
    #[arg(long, value_name = "BITS")]
    signature_bits: Option<u8>,
    /// Hold no containment fields (fields format 4: a term for each of the first 64 MinHash
    /// minima and the distinct shingle count, which find partial copies: excerpts, teasers,
    /// passages). An index answers near-duplicates only then. Default: what the index
    /// records (format 3's terms for every minimum included); a new index, and one moved by
    /// --upgrade, holds them in format 4 (in the compact layout). docs/elasticsearch.md,
    /// "Containment: fields formats 4 and 3".
    #[arg(long)]
    no_containment: bool,
    /// Mapping of the four blocks: `short` (compatible with the older Java service) or
    /// `keyword`. See docs/elasticsearch.md for the measured difference.
    #[arg(long, default_value = "short", value_name = "TYPE")]
    block_type: BlockType,
    #[command(flatten)]
    fields: FieldArgs,
    #[command(flatten)]
    minhash_fields: MinHashFieldArgs,
    /// The `keyword` field every article's duplicate group label goes into (the id of its
    /// group's representative; docs/elasticsearch.md "Duplicate groups"). Default: what the
    /// index records, else `nearDupGroup`.
    #[arg(long, value_name = "NAME", conflicts_with = "no_groups")]
    group_field: Option<String>,
    /// Label each duplicate group with its earliest article by this field of the articles
    /// (a date, number or string; a dotted path allowed), e.g. `publishDate`: a batch's
    /// copies near no stored article take the id of the one with the smallest value
    /// (numbers before strings, a missing value last, then the smaller id). A new article
    /// joins the group it is near even when it is earlier than its representative (a write
    /// never relabels others). Default: what the index records, else the first
    /// fingerprinted. An index keeps the order it was given.
    #[arg(long, value_name = "FIELD", conflicts_with = "no_groups")]
    group_order: Option<String>,
    /// What joins two articles in a group, for every writer and `regroup`: `sketches` (what
    /// `similar` links at the index's default tolerance) or `texts` (MinHash finds candidates
    /// down to 0.1, their texts are aligned, and only copies join: two instances of one
    /// template, or two articles sharing a passage, stay apart; MinHash only; a write reads
    /// its candidates' texts, about 1.3× the time). Default: what the index records, else
    /// `texts` where the index holds MinHash and `sketches` where it holds SimHash only.
    /// Another one than the recorded one replaces it; run `neardup regroup` to join what is
    /// stored by it.
    #[arg(long, value_name = "sketches|texts", value_parser = ["sketches", "texts"], conflicts_with = "no_groups")]
    group_by: Option<String>,
    /// Where groups are linked by texts: a text field the groups align; repeat for several,
    /// joined in order. Give the fields the worker reads (its --field) [default: what the
    /// index records, else title and content].
    #[arg(
        long = "group-text-field",
        value_name = "NAME",
        conflicts_with = "no_groups"
    )]
    group_text_fields: Vec<String>,
    /// Keep no duplicate group labels (an index that records them keeps them).
    #[arg(long)]
    no_groups: bool,
    /// Do not track edits: no final pipeline marks an edited article's fingerprints stale
    /// (one es-init installed is removed, with its pipeline); the worker then sees edits only
    /// with --changed-field. Default: track them where the cluster can (docs/elasticsearch.md,
    /// "Edits").
    #[arg(long, conflicts_with = "chain_final_pipeline")]
    no_tracking: bool,
    /// Where the index already has a final pipeline of its own, run it first inside
    /// neardup's edit-tracking pipeline (es-init refuses otherwise; it never replaces it).
    #[arg(long)]
    chain_final_pipeline: bool,
}

pub fn run(args: Args) -> CmdResult {
    common::ensure_usage(
        !args.methods.is_empty(),
        "--methods needs at least one method",
    )?;
    let names = args.fields.names()?;
    let minhash_names = args.minhash_fields.names()?;
    let (config, client) = args.es.client()?;
    es_args::runtime()?.block_on(async {
        let retry = RetryPolicy::default();
        let version = es::first_contact(&client, config.connect_timeout).await?;
        let hmm = !args.no_hmm;
        let methods = Methods {
            simhash: args.methods.contains(&Method::SimHash),
            minhash: args.methods.contains(&Method::MinHash),
        };
        let profile = match args.profile {
            Some(p) => p,
            None if methods.simhash => {
                es::existing_profile(&client, &retry, &args.index, &names, hmm)
                    .await?
                    .unwrap_or_default()
            }
            None => Profile::default(),
        };
        let recorded = recorded(&client, &retry, &args.index, &names).await?;
        let recorded_minhash = recorded
            .iter()
            .filter_map(|m| m.minhash.as_ref())
            .find(|m| m.fields == minhash_names);
        let minhash = match args.minhash_params {
            Some(p) => p,
            None => recorded_minhash.map(|m| m.params).unwrap_or_default(),
        };
        let layout = match (args.layout.as_deref(), args.signature_bits) {
            (Some("full"), Some(_)) => {
                return Err(common::usage(
                    "--signature-bits: the full layout keeps whole minima; leave it out, or pass --layout compact",
                ))
            }
            (Some("full"), None) => LayoutRequest::Full,
            (Some(_), bits) | (None, bits @ Some(_)) => LayoutRequest::Compact {
                signature_bits: bits,
            },
            (None, None) => LayoutRequest::Recorded,
        };
        // Folding is kept as recorded unless an upgrade or --no-fold asks otherwise. A new
        // index folds; one written before `_meta` existed (the Java service's, or an early
        // neardup's) did not.
        let fold = !args.no_fold
            && (args.upgrade
                || recorded
                    .first()
                    .is_none_or(|m| m.source == MetaSource::Recorded && m.fold));
        let boilerplate = match (&args.boilerplate, args.no_boilerplate) {
            (Some(path), _) => {
                ensure_usage(
                    !(methods.simhash && profile == Profile::Seed000),
                    "--boilerplate: the seed000 profile never drops boilerplate (the older Java service did not); leave it out, or es-init an index of another profile",
                )?;
                Some(Arc::new(common::read_boilerplate(path, fold)?))
            }
            (None, true) => None,
            (None, false) => recorded
                .iter()
                .find(|m| m.source == MetaSource::Recorded)
                .and_then(|m| m.boilerplate.clone()),
        };
        // The link in force without flags: what the index records, else a new index's.
        let current_link = recorded
            .iter()
            .find_map(|m| m.group.as_ref().map(|g| g.link.clone()))
            .unwrap_or_else(|| GroupLink::for_new_index(methods.minhash));
        let link = match (args.group_by.as_deref(), &args.group_text_fields[..]) {
            (Some("sketches"), []) => GroupLink::Sketches,
            (Some("sketches"), _) => {
                return Err(common::usage(
                    "--group-text-field goes with --group-by texts: leave it out, or pass --group-by texts",
                ))
            }
            (Some(_), []) => GroupLink::Texts {
                fields: match &current_link {
                    GroupLink::Texts { fields } => fields.clone(),
                    GroupLink::Sketches => neardup::input::default_text_fields(),
                },
            },
            (Some(_), fields) => GroupLink::Texts {
                fields: fields.to_vec(),
            },
            (None, []) => current_link,
            (None, fields) => match current_link {
                GroupLink::Texts { .. } => GroupLink::Texts {
                    fields: fields.to_vec(),
                },
                GroupLink::Sketches => {
                    return Err(common::usage(
                        "--group-text-field goes with --group-by texts: pass --group-by texts too",
                    ))
                }
            },
        };
        let group = (!args.no_groups).then(|| {
            let recorded = recorded.iter().find_map(|m| m.group.clone());
            GroupMeta {
                field: args
                    .group_field
                    .clone()
                    .or_else(|| recorded.as_ref().map(|g| g.field.clone()))
                    .unwrap_or_else(|| es::schema::DEFAULT_GROUP_FIELD.to_owned()),
                order: match &args.group_order {
                    Some(field) => GroupOrder::Earliest {
                        field: field.clone(),
                    },
                    None => recorded.map(|g| g.order).unwrap_or_default(),
                },
                link,
            }
        });
        let wanted = IndexMeta::new(
            &FingerprintConfig {
                profile,
                hmm,
                minhash,
                fold,
                boilerplate,
                ..FingerprintConfig::default()
            },
            methods,
            args.block_type,
            names,
            minhash_names,
        );
        let format = FormatRequest {
            layout,
            no_containment: args.no_containment,
            upgrade: args.upgrade,
        };
        let mut wanted = format.apply(recorded_minhash, wanted);
        wanted.group = group;
        if let Some(path) = &args.formula {
            wanted.formula = Some(Arc::new(common::read_formula(path, fold)?));
        }
        let outcome = match args.upgrade {
            true => es::upgrade_index(&client, &retry, &args.index, &wanted).await?,
            false => es::init_index(&client, &retry, &args.index, &wanted).await?,
        };
        let what = match outcome {
            InitOutcome::Created => {
                format!("created index `{}` holding {wanted}", args.index)
            }
            InitOutcome::Added { fields, meta } => {
                let mut did = Vec::new();
                if !fields.is_empty() {
                    did.push(format!("added {}", fields.join(", ")));
                }
                if meta {
                    did.push("recorded what it holds in _meta".to_owned());
                }
                format!("index `{}`: {} ({wanted})", args.index, did.join("; "))
            }
            InitOutcome::Unchanged => format!(
                "index `{}` already holds {wanted}; nothing changed",
                args.index
            ),
        };
        println!(
            "{what} on {} (Elasticsearch {version})",
            config.display_urls()
        );
        let tracking = match args.no_tracking {
            true => es::untrack_edits(&client, &retry, &args.index).await?,
            false => {
                es::track_edits(&client, &retry, &args.index, args.chain_final_pipeline).await?
            }
        };
        for (index, t) in tracking {
            match t {
                Tracking::On(t) => match t.chained {
                    Some(user) => println!(
                        "index `{index}`: edits tracked by the final pipeline `{}` (after your pipeline `{user}`)",
                        t.pipeline
                    ),
                    None => println!(
                        "index `{index}`: edits tracked by the final pipeline `{}`",
                        t.pipeline
                    ),
                },
                Tracking::Unavailable(why) => println!(
                    "index `{index}`: edits are NOT tracked: {why}; the worker sees edits only with --changed-field"
                ),
                Tracking::Off(true) => {
                    println!("index `{index}`: edit tracking removed (pipeline and setting)")
                }
                Tracking::Off(false) => {}
            }
        }
        Ok(Status::Done)
    })
}

/// What the indices behind `index` record; none when it does not exist or holds nothing yet.
async fn recorded(
    client: &elasticsearch::Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    names: &neardup::es::FieldNames,
) -> anyhow::Result<Vec<IndexMeta>> {
    match es::read_each(client, retry, index, names).await {
        Ok(each) => Ok(each.into_values().collect()),
        Err(es::EsError::IndexNotFound { .. } | es::EsError::NotInitialised { .. }) => {
            Ok(Vec::new())
        }
        Err(e) => Err(e.into()),
    }
}
