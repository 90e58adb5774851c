//! `neardup serve`: the HTTP service (see `neardup::serve`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use neardup::es::{self, RetryPolicy, Secret};
use neardup::serve::{self, EsBackend, ServeConfig, Service};

use super::common::{self, CmdResult, ProfileArgs, Status};
use super::es_args::{self, parse_duration, EsArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
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
    let (config, client) = args.es.client()?;
    let fingerprinter = args.profile.fingerprinter();
    es_args::runtime()?.block_on(async {
        let version = es::first_contact(&client, config.connect_timeout).await?;
        let service = Arc::new(Service::new(
            ServeConfig {
                body_limit: args.max_body,
                timeout: args.request_timeout,
                concurrency: args.max_concurrency,
                token,
                text_fields: args.text_fields.clone(),
            },
            EsBackend {
                client,
                retry: RetryPolicy::default(),
            },
            fingerprinter,
        ));
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
        let local = listener.local_addr()?;
        tracing::info!(
            listen = %local,
            elasticsearch = %config.display_urls(),
            es_version = %version,
            "serving"
        );
        serve::run(listener, service.router(), serve::shutdown_signal()).await?;
        Ok(Status::Done)
    })
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
