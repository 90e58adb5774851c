//! `neardup serve`: the HTTP service (see `neardup::serve`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::ArgGroup;
use neardup::es::{self, RetryPolicy, Secret};
use neardup::serve::{self, Backend, EsBackend, ServeConfig, Service, StoreBackend};
use neardup::store::StoreError;

use super::common::ProfileArgs;
use super::common::{self, CmdResult, Status};
use super::es_args::{self, parse_duration, EsArgs};
use super::store_args::{self, StoreChoice};

#[derive(clap::Args, Debug)]
#[command(group(ArgGroup::new("backend").required(true).multiple(true).args(["store", "url"])))]
pub struct Args {
    #[command(flatten)]
    local: StoreChoice,
    #[command(flatten)]
    es: EsArgs,
    /// Address and port to listen on.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// A file holding the bearer token every `/v1` request must carry
    /// (`Authorization: Bearer <token>`); surrounding whitespace is ignored.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = ServeConfig::default().body_limit, value_name = "BYTES")]
    max_body: usize,
    /// Time a `/v1` request has to finish before it is answered 504.
    #[arg(long = "timeout", default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    request_timeout: Duration,
    /// `/v1` requests answered at once; more are refused at once with 503.
    #[arg(long, default_value_t = ServeConfig::default().concurrency, value_name = "N")]
    max_concurrency: usize,
    /// Article fields fingerprinted, in order (comma-separated; dotted paths allowed).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "title,content",
        value_name = "F,F"
    )]
    text_fields: Vec<String>,
    /// How long what an Elasticsearch index holds (`_meta`, mapping) is remembered before it
    /// is read again: a method `es-init` adds is used within this time, with no restart.
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    meta_ttl: Duration,
    #[command(flatten)]
    profile: ProfileArgs,
}

pub fn run(args: Args) -> CmdResult {
    common::ensure_usage(args.max_body > 0, "--max-body must be positive")?;
    common::ensure_usage(
        args.max_concurrency > 0,
        "--max-concurrency must be positive",
    )?;
    let token = match &args.token_file {
        None => None,
        Some(path) => Some(read_token(path)?),
    };
    let config = ServeConfig {
        body_limit: args.max_body,
        timeout: args.request_timeout,
        concurrency: args.max_concurrency,
        token,
        text_fields: args.text_fields.clone(),
        meta_ttl: args.meta_ttl,
    };
    match &args.local.store {
        Some(dir) => {
            // NEARDUP_ES_URL in the environment does not stand in the way of --store; a
            // cluster given on the command line does.
            let from_env = std::env::var("NEARDUP_ES_URL").ok();
            common::ensure_usage(
                args.es.url.is_none() || args.es.url == from_env,
                "--store and --es: serve from one of them (a service answers from one backend)",
            )?;
            serve_store(&args, dir, config)
        }
        None => serve_es(&args, config),
    }
}

fn serve_es(args: &Args, serve_config: ServeConfig) -> CmdResult {
    let (config, client) = args.es.client()?;
    let fingerprinter = args.profile.for_store(None)?;
    es_args::runtime()?.block_on(async {
        let version = es::first_contact(&client, config.connect_timeout).await?;
        let backend = EsBackend {
            client,
            retry: RetryPolicy::default(),
        };
        let about = format!("Elasticsearch {version} at {}", config.display_urls());
        listen(
            args,
            Service::new(serve_config, backend, fingerprinter),
            &about,
        )
        .await
    })
}

fn serve_store(args: &Args, dir: &std::path::Path, serve_config: ServeConfig) -> CmdResult {
    let store = args.local.open(dir).map_err(|e| {
        if matches!(e.downcast_ref(), Some(StoreError::NotFound { .. })) {
            anyhow::anyhow!(
                "{e} (an empty store: `neardup index --store {} --input /dev/null`, with \
                 `--method simhash` for SimHash)",
                dir.display()
            )
        } else {
            e
        }
    })?;
    let fingerprinter = args.profile.for_store(Some(store.config()))?;
    let name = StoreBackend::name_of(dir);
    let about = format!(
        "the local store {} as index `{name}` ({})",
        dir.display(),
        store_args::describe(store.config())
    );
    let backend = Backend::Store(StoreBackend::new(store, name, fingerprinter.clone())?);
    es_args::runtime()?.block_on(async {
        listen(
            args,
            Service::new(serve_config, backend, fingerprinter),
            &about,
        )
        .await
    })
}

/// Binds `--listen` and serves until SIGTERM or Ctrl-C.
async fn listen(args: &Args, service: Service, about: &str) -> CmdResult {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
    let local = listener.local_addr()?;
    tracing::info!(listen = %local, backend = %about, "serving");
    serve::run(
        listener,
        Arc::new(service).router(),
        serve::shutdown_signal(),
    )
    .await?;
    Ok(Status::Done)
}

/// The token in `path`, registered so no log line can show it.
fn read_token(path: &PathBuf) -> anyhow::Result<Secret> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read the token file {} (--token-file)",
            path.display()
        )
    })?;
    let token = text.trim();
    common::ensure_usage(
        !token.is_empty(),
        &format!("the token file {} is empty (--token-file)", path.display()),
    )?;
    common::register_secret(token);
    Ok(Secret::new(token))
}
