//! Flags shared by the subcommands that talk to Elasticsearch: where the cluster is, how to
//! log in, and the names of the fingerprint fields. Secrets come from flags or the
//! environment and never show in `--help`, `Debug` output, logs or error messages.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use neardup::es::{Auth, EsConfig, FieldNames, IndexMeta, MinHashFieldNames, Secret};
use neardup::{FingerprintConfig, Fingerprinter, Thresholds};

use super::common::ProfileArgs;

/// Connection to the cluster.
#[derive(clap::Args, Clone)]
pub struct EsArgs {
    /// Elasticsearch URL (required); several nodes comma-separated. Credentials in the URL
    /// (`https://user:pass@host:9200`) are used as basic auth.
    #[arg(
        long = "es",
        env = "NEARDUP_ES_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub url: Option<String>,
    /// User for HTTP basic auth (with --es-password).
    #[arg(long = "es-user", env = "NEARDUP_ES_USER", value_name = "USER")]
    pub user: Option<String>,
    /// Password for basic auth. Prefer the environment variable: flags show in `ps`.
    #[arg(
        long = "es-password",
        env = "NEARDUP_ES_PASSWORD",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub password: Option<String>,
    /// API key: `id:api_key`, or the base64 `encoded` value Elasticsearch returns.
    #[arg(
        long = "es-api-key",
        env = "NEARDUP_ES_API_KEY",
        value_name = "KEY",
        hide_env_values = true,
        conflicts_with_all = ["user", "password"]
    )]
    pub api_key: Option<String>,
    /// PEM file of the CA that signed the cluster's HTTPS certificate (self-signed clusters).
    #[arg(long = "es-ca-cert", env = "NEARDUP_ES_CA_CERT", value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,
    /// Timeout of one request to Elasticsearch.
    #[arg(long = "es-timeout", default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// How long the first contact may take. It is not retried: a refused connection or an
    /// unknown host fails at once; requests are retried only once the cluster has answered.
    #[arg(long = "es-connect-timeout", default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub connect_timeout: Duration,
    /// Gzip what is sent to Elasticsearch and ask for gzipped answers: for a slow link to
    /// the cluster. Off by default: on a fast network it only adds time to every request.
    /// The variable takes 1/0, true/false, yes/no, on/off.
    #[arg(
        long = "es-compress",
        env = "NEARDUP_ES_COMPRESS",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub compress: bool,
}

impl fmt::Debug for EsArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |o: &Option<String>| o.as_ref().map(|_| "<redacted>");
        f.debug_struct("EsArgs")
            .field(
                "url",
                &self.url.as_deref().map(|url| {
                    EsConfig::new(url).map_or_else(|_| "<invalid>".into(), |c| c.display_urls())
                }),
            )
            .field("user", &self.user)
            .field("password", &redacted(&self.password))
            .field("api_key", &redacted(&self.api_key))
            .field("ca_cert", &self.ca_cert)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("compress", &self.compress)
            .finish()
    }
}

impl EsArgs {
    /// The library's connection config.
    pub fn config(&self) -> anyhow::Result<EsConfig> {
        let url = self.url.as_deref().ok_or_else(|| {
            super::common::usage("no Elasticsearch URL: give --es URL or set NEARDUP_ES_URL")
        })?;
        for secret in [&self.password, &self.api_key].into_iter().flatten() {
            super::common::register_secret(secret);
            if let Some((_, key)) = secret.split_once(':') {
                super::common::register_secret(key);
            }
        }
        let mut c = EsConfig::new(url)?;
        match (&self.user, &self.password, &self.api_key) {
            (Some(user), Some(pw), None) => {
                c.auth = Auth::Basic {
                    user: user.clone(),
                    password: Secret::new(pw.clone()),
                }
            }
            (Some(_), None, _) => {
                return Err(super::common::usage(
                    "--es-user needs a password: set NEARDUP_ES_PASSWORD (or --es-password)",
                ))
            }
            (None, Some(_), _) => {
                return Err(super::common::usage(
                    "a password was given without a user: set NEARDUP_ES_USER (or --es-user)",
                ))
            }
            (None, None, Some(key)) => c.auth = Auth::ApiKey(Secret::new(key.clone())),
            (None, None, None) => {}
            (Some(_), Some(_), Some(_)) => {
                return Err(super::common::usage(
                    "give either a user and password or an API key, not both",
                ))
            }
        }
        if let Auth::Basic { password, .. } = &c.auth {
            super::common::register_secret(password.expose());
        }
        c.ca_cert = self.ca_cert.clone();
        c.timeout = self.timeout;
        c.connect_timeout = self.connect_timeout;
        c.compression = self.compress;
        Ok(c)
    }

    /// A client for the cluster.
    pub fn client(&self) -> anyhow::Result<(EsConfig, elasticsearch::Elasticsearch)> {
        let c = self.config()?;
        let client = c.client()?;
        Ok((c, client))
    }
}

/// Names of the fingerprint fields (defaults: those of the older Java service).
#[derive(clap::Args, Debug, Clone)]
pub struct FieldArgs {
    /// The four block fields, highest bits first, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "simHashA,simHashB,simHashC,simHashD",
        value_name = "A,B,C,D"
    )]
    pub block_fields: Vec<String>,
    /// Field of the whole fingerprint (`long`, the 64 bits as a signed integer).
    #[arg(long, default_value = "simHash", value_name = "NAME")]
    pub simhash_field: String,
    /// Field of the fingerprint version (`keyword`).
    #[arg(long, default_value = "simHashVersion", value_name = "NAME")]
    pub version_field: String,
    /// Field saying why a document has no fingerprint (`keyword`, e.g. `too_short`).
    #[arg(long, default_value = "simHashReason", value_name = "NAME")]
    pub reason_field: String,
}

impl FieldArgs {
    pub fn names(&self) -> anyhow::Result<FieldNames> {
        let blocks: [String; 4] =
            self.block_fields
                .clone()
                .try_into()
                .map_err(|v: Vec<String>| {
                    super::common::usage(format!(
                        "--block-fields needs exactly four names, got {}",
                        v.len()
                    ))
                })?;
        let names = FieldNames {
            blocks,
            simhash: self.simhash_field.clone(),
            version: self.version_field.clone(),
            reason: self.reason_field.clone(),
        };
        names.validate()?;
        Ok(names)
    }
}

/// Names of the MinHash fields.
#[derive(clap::Args, Debug, Clone)]
pub struct MinHashFieldArgs {
    /// The MinHash fields: band terms (`keyword`), signature (`binary`), version and reason
    /// (`keyword`), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "minHashBands,minHashSignature,minHashVersion,minHashReason",
        value_name = "BANDS,SIG,VERSION,REASON"
    )]
    pub minhash_fields: Vec<String>,
}

impl MinHashFieldArgs {
    pub fn names(&self) -> anyhow::Result<MinHashFieldNames> {
        let [bands, signature, version, reason]: [String; 4] = self
            .minhash_fields
            .clone()
            .try_into()
            .map_err(|v: Vec<String>| {
                super::common::usage(format!(
                    "--minhash-fields needs exactly four names, got {}",
                    v.len()
                ))
            })?;
        Ok(MinHashFieldNames {
            bands,
            signature,
            version,
            reason,
        })
    }
}

/// A tokio runtime for one subcommand.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Parses `500ms`, `10s`, `5m`, `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: use e.g. 500ms, 10s, 5m or 1h"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

/// Waits for SIGINT or SIGTERM. The first sets `stop` and calls `first`, so a long-running
/// command finishes the work in flight; a second exits at once with code 130, printing `hint`.
pub async fn watch_signals(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    hint: &'static str,
    mut first: impl FnMut(),
) {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    loop {
        #[cfg(unix)]
        let terminated = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let terminated = std::future::pending::<()>();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminated => {}
        }
        if stop.swap(true, std::sync::atomic::Ordering::SeqCst) {
            if hint.is_empty() {
                eprintln!("second signal: exiting now");
            } else {
                eprintln!("second signal: exiting now; {hint}");
            }
            std::process::exit(130);
        }
        first();
    }
}

/// The fingerprint settings of a writer (`worker`, `backfill`): what the index records in its
/// `_meta`. A flag that asks for something else is refused, naming both versions.
impl ProfileArgs {
    /// The fingerprinter that makes what `held` records (for `index`, named in messages), with
    /// --min-words; a usage error when a flag asks for another version of a method it holds.
    pub fn for_index(&self, index: &str, held: &IndexMeta) -> anyhow::Result<Fingerprinter> {
        let config = held.fingerprint_config();
        let mut asked = config.clone();
        if let Some(p) = self.profile {
            anyhow::ensure!(
                held.simhash.is_some(),
                super::common::usage(format!(
                    "--profile {p}: index `{index}` holds no SimHash fingerprints; leave --profile out"
                ))
            );
            asked.profile = p;
        }
        if self.no_hmm {
            asked.hmm = false;
        }
        if self.no_fold {
            asked.fold = false;
        }
        if self.boilerplate.is_some() {
            asked.boilerplate = self.load_boilerplate(asked.fold)?;
        }
        if let Some(m) = self.minhash_params {
            anyhow::ensure!(
                held.minhash.is_some(),
                super::common::usage(format!(
                    "--minhash-params {m}: index `{index}` holds no MinHash signatures; leave --minhash-params out"
                ))
            );
            asked.minhash = m;
        }
        let (want, have) = (
            Fingerprinter::versions(&asked),
            Fingerprinter::versions(&config),
        );
        for (method, flag, want, have) in [
            (
                held.simhash.is_some(),
                "--profile/--no-hmm/--no-fold/--boilerplate",
                &want.simhash,
                &have.simhash,
            ),
            (
                held.minhash.is_some(),
                "--minhash-params/--no-hmm/--no-fold/--boilerplate",
                &want.minhash,
                &have.minhash,
            ),
        ] {
            if method && want != have {
                return Err(super::common::usage(format!(
                    "{flag} ask for fingerprint version `{want}`, but index `{index}` holds `{have}` (its _meta): leave the flag out to write what the index holds, or es-init another index for these settings and back-fill it"
                )));
            }
        }
        Ok(Fingerprinter::new(FingerprintConfig {
            thresholds: Thresholds {
                min_words: self.min_words,
                ..Thresholds::default()
            },
            ..config
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn es_compress_reaches_the_connection_config() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            es: EsArgs,
        }
        let config = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["neardup", "--es", "http://es:9200"], args].concat())
                .unwrap();
            cli.es.config().unwrap()
        };
        assert!(!config(&[]).compression, "off by default");
        assert!(config(&["--es-compress"]).compression);
        // The variable (no other test reads it).
        for (value, on) in [
            ("1", true),
            ("yes", true),
            ("true", true),
            ("0", false),
            ("off", false),
        ] {
            std::env::set_var("NEARDUP_ES_COMPRESS", value);
            let c = config(&[]);
            std::env::remove_var("NEARDUP_ES_COMPRESS");
            assert_eq!(c.compression, on, "NEARDUP_ES_COMPRESS={value}");
        }
    }

    #[test]
    fn secrets_never_in_debug() {
        let a = EsArgs {
            url: Some("https://u:hunter2@es:9200".into()),
            user: None,
            password: Some("pw-secret".into()),
            api_key: Some("id:key-secret".into()),
            ca_cert: None,
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            compress: false,
        };
        let d = format!("{a:?}");
        for s in ["hunter2", "pw-secret", "key-secret"] {
            assert!(!d.contains(s), "{d}");
        }
    }
}
