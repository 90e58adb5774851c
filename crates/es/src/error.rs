//! The one error type of the crate ([`EsError`]), and how an answer of Elasticsearch becomes
//! one: its error type and reason ([`error_type_reason`]), a block that refuses writes
//! ([`blocked`]).

use std::path::PathBuf;

use serde_json::Value;

/// Everything talking to Elasticsearch can fail with. Messages say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EsError {
    #[error("{0}")]
    Config(String),

    #[error("CA certificate {}: {reason}; pass a PEM file with --es-ca-cert / NEARDUP_ES_CA_CERT", path.display())]
    CaCert { path: PathBuf, reason: String },

    #[error("cannot reach Elasticsearch ({detail}); check --es / NEARDUP_ES_URL and that the node is up (scripts/es-up starts a local one)")]
    Unreachable { detail: String },

    /// The certificate of an `https://` node was not trusted (signed by a CA this machine does
    /// not know, e.g. a cluster's own; expired; for another host). Not retried.
    #[error("the TLS connection to Elasticsearch failed: its certificate is not trusted ({detail}); a cluster whose certificate is signed by its own CA (as Elasticsearch's security setup makes) needs that CA: pass its PEM file with --es-ca-cert or NEARDUP_ES_CA_CERT (e.g. config/certs/http_ca.crt of the node)")]
    Tls { detail: String },

    /// A block on the index (or cluster) refuses every write (`index.blocks.write`,
    /// `index.blocks.read_only`, `cluster.blocks.read_only`: 403 `cluster_block_exception`):
    /// nothing written to it can succeed until it is lifted, so writers stop. The flood-stage
    /// block (`read_only_allow_delete`, 429) is transient instead: retried with backoff.
    #[error("index `{index}` is blocked for writes ({reason}); nothing more was sent. Lift the block with `{lift}` and run the same command again: it resumes where it stopped")]
    Blocked {
        index: String,
        reason: String,
        /// The request that lifts it.
        lift: String,
    },

    #[error("Elasticsearch refused the credentials (HTTP {status}: {reason}); check NEARDUP_ES_USER / NEARDUP_ES_PASSWORD or NEARDUP_ES_API_KEY and the user's privileges")]
    Unauthorized { status: u16, reason: String },

    #[error("index `{index}` does not exist; create it, or run `neardup es-init --index {index}` to create it with the fingerprint fields")]
    IndexNotFound { index: String },

    #[error("no index matches `{pattern}`; check --index (`GET _cat/indices` lists the indices)")]
    NoIndexMatches { pattern: String },

    #[error("index `{index}` has no mapping for the fingerprint fields {fields:?}; run `neardup es-init --index {index}` first (writing them unmapped would let Elasticsearch guess wrong types)")]
    NotInitialised { index: String, fields: Vec<String> },

    /// The index's field limit (`index.mapping.total_fields.limit`) leaves no room for the
    /// fingerprint fields `es-init` adds; nothing was added.
    #[error("index `{index}` cannot take the {fields} fingerprint fields: its field limit is reached ({reason}). Nothing was changed. Raise the limit with `PUT /{index}/_settings {{\"index.mapping.total_fields.limit\": {}}}` and run es-init again", room(.enough, .fields))]
    FieldLimit {
        index: String,
        fields: usize,
        reason: String,
        /// A limit with room for them, when the error said the current one.
        enough: Option<usize>,
    },

    #[error("index `{index}`: field `{field}` is already mapped as `{existing}`, but neardup needs `{wanted}`; {hint}")]
    MappingConflict {
        index: String,
        field: String,
        existing: String,
        wanted: String,
        hint: String,
    },

    #[error("{what}: HTTP {status} {error_type}: {reason}")]
    Status {
        what: String,
        status: u16,
        error_type: String,
        reason: String,
    },

    #[error("gave up after {attempts} attempts: {last}")]
    Exhausted { attempts: u32, last: Box<EsError> },

    /// A paged read lost its place: the scroll or point in time is gone, or a scroll page was
    /// lost in transit (never sent again: that would skip a page). Raised by [`crate::Cursor`];
    /// what reads again from a safe point depends on the caller.
    #[error("{what}: lost the scroll or point in time ({cause}); it expired (raise the keep-alive), its node restarted, or a scroll page was lost in transit. Start the read again")]
    ContextLost { what: String, cause: Box<EsError> },

    #[error("{what}: unexpected response from Elasticsearch: {detail}")]
    BadResponse { what: String, detail: String },

    #[error("document `{id}`: {reason}")]
    BadDocument { id: String, reason: String },

    #[error("no document with id `{id}` in `{index}`; check the id and --index (a document written less than a refresh interval ago, 1 s by default, is not searchable yet)")]
    DocumentNotFound { id: String, index: String },

    #[error("id `{id}` is in several indices ({}); pass just one of them with --index", indices.join(", "))]
    AmbiguousId { id: String, indices: Vec<String> },

    #[error(transparent)]
    BadText(#[from] neardup_core::input::BadTextField),

    #[error("index `{index}` holds {method} fingerprints of version `{stored}`, but this neardup computes `{computed}`: they are not comparable; re-run `neardup backfill` into a new index (es-init with the current version), or use the neardup release that wrote them")]
    VersionMismatch {
        index: String,
        method: neardup_core::Method,
        stored: String,
        computed: String,
    },

    #[error("index `{index}`: its `_meta.neardup` cannot be read: {detail}")]
    BadMeta { index: String, detail: String },

    #[error("index `{index}` links its duplicate groups by the texts of {}, but the article's text is read from {}: read those fields too (--field), or link the groups by yours with `neardup es-init --index {index} --group-text-field NAME` (repeat for several; or --group-by sketches), then `neardup regroup --index {index}`", grouped.join(", "), read.join(", "))]
    GroupTextFields {
        index: String,
        grouped: Vec<String>,
        read: Vec<String>,
    },
    #[error("the indices queried together hold no fingerprints in common ({}); query them separately, or es-init and back-fill them alike", indices.join("; "))]
    MetaMismatch { indices: Vec<String> },

    #[error("index `{index}` already holds {existing}, but {wanted} was asked for; {hint}")]
    MetaConflict {
        index: String,
        existing: String,
        wanted: String,
        hint: String,
    },

    /// The indices hold no fingerprints of the asked method; `held` is the one they hold.
    /// Worded without command-line flags: the CLI and the service each say how to ask.
    #[error("`{index}` holds {held} fingerprints only, not {asked}: ask by {held} (the index's default), or es-init it with both methods and back-fill it")]
    MethodNotHeld {
        index: String,
        held: neardup_core::Method,
        asked: neardup_core::Method,
    },

    #[error("k = {k} is too large: the four 16-bit block fields answer exactly for k ≤ 7 (a pair within 7 bits has a block within one bit); use -k 0..=7")]
    DistanceTooLarge { k: u32 },

    #[error("dedupe with SimHash needs k ≤ 3 (two fingerprints within 3 bits have an equal block to claim); got k = {k}")]
    DedupeDistance { k: u32 },
}

impl EsError {
    /// Whether trying again later may succeed (429, 5xx, connection errors).
    pub fn is_transient(&self) -> bool {
        match self {
            EsError::Unreachable { .. } => true,
            EsError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }

    /// The HTTP status of a server error, if it came with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            EsError::Status { status, .. } | EsError::Unauthorized { status, .. } => Some(*status),
            EsError::Blocked { .. } => Some(403),
            EsError::IndexNotFound { .. } => Some(404),
            EsError::Exhausted { last, .. } => last.status(),
            EsError::ContextLost { cause, .. } => cause.status(),
            _ => None,
        }
    }
}

/// The field limit to suggest in [`EsError::FieldLimit`]'s message.
fn room(enough: &Option<usize>, fields: &usize) -> String {
    enough.map_or_else(
        || format!("<the fields it has + {fields}>"),
        |n| n.to_string(),
    )
}

/// [`EsError::Blocked`] when an error (a whole answer's or one bulk item's) is a block that
/// refuses every write: 403 `cluster_block_exception`. `index` names the index written to
/// when the reason does not (`index [news] blocked by: [FORBIDDEN/8/index write (api)];`).
/// The flood-stage block answers 429 and is not one: it is retried.
pub(crate) fn blocked(
    status: u16,
    error_type: &str,
    reason: &str,
    index: Option<&str>,
) -> Option<EsError> {
    if status != 403 || error_type != "cluster_block_exception" {
        return None;
    }
    let named = reason
        .split_once("index [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(name, _)| name.to_owned());
    let index = named
        .or(index.map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    let setting = |s: &str| format!(r#"PUT /{index}/_settings {{"{s}": false}}"#);
    let lift = if reason.contains("cluster read-only / allow delete") {
        r#"PUT /_cluster/settings {"persistent": {"cluster.blocks.read_only_allow_delete": false}}"#
            .to_owned()
    } else if reason.contains("cluster read-only") {
        r#"PUT /_cluster/settings {"persistent": {"cluster.blocks.read_only": false}}"#.to_owned()
    } else if reason.contains("allow delete") {
        setting("index.blocks.read_only_allow_delete")
    } else if reason.contains("index read-only") {
        setting("index.blocks.read_only")
    } else if reason.contains("index write") {
        setting("index.blocks.write")
    } else {
        format!("PUT /{index}/_settings with the index.blocks.* setting it names set to false (GET /{index}/_settings lists them)")
    };
    Some(EsError::Blocked {
        index,
        reason: format!("HTTP 403 {error_type}: {reason}"),
        lift,
    })
}

/// `(type, reason)` of an Elasticsearch error body (`{"error": {"type", "reason"}}`, or the
/// plain `{"error": "..."}` some endpoints return).
pub fn error_type_reason(body: &Value) -> (String, String) {
    let err = &body["error"];
    match err {
        Value::Object(_) => {
            let ty = err["type"].as_str().unwrap_or("error").to_owned();
            let mut reason = err["reason"].as_str().unwrap_or("").to_owned();
            let cause = &err["caused_by"];
            if let Some(cause_reason) = cause["reason"].as_str() {
                // OpenSearch and newer Elasticsearch name a search's real error (e.g.
                // `script_exception`) only in the cause's type.
                reason = match cause["type"]
                    .as_str()
                    .filter(|t| Some(*t) != err["type"].as_str())
                {
                    Some(cause_type) => {
                        format!("{reason} (caused by: {cause_type}: {cause_reason})")
                    }
                    None => format!("{reason} (caused by: {cause_reason})"),
                };
            } else if let Some(root) = err["root_cause"]
                .get(0)
                .filter(|r| r["type"] != err["type"])
            {
                // Search failures ("all shards failed") carry the real error only here.
                reason = format!(
                    "{reason} (root cause: {}: {})",
                    root["type"].as_str().unwrap_or("error"),
                    root["reason"].as_str().unwrap_or("")
                );
            }
            (ty, reason)
        }
        Value::String(s) => ("error".into(), s.clone()),
        _ => ("error".into(), truncate(&body.to_string(), 300)),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
