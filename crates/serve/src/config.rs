//! The service's limits and settings.

use std::time::Duration;

use neardup_es::Secret;

/// Limits and settings of the service.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Time a `/v1/…` request has to finish.
    pub timeout: Duration,
    /// `/v1/…` requests answered at once; more get 503.
    pub concurrency: usize,
    /// Bearer token required on `/v1/…`, if any.
    pub token: Option<Secret>,
    /// Article fields fingerprinted, in order (dotted paths allowed).
    pub text_fields: Vec<String>,
    /// How long what an Elasticsearch index holds (its `_meta` and mapping) is remembered
    /// before it is read again: a method `es-init` adds is used within this time.
    pub meta_ttl: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            body_limit: 2 * 1024 * 1024,
            timeout: Duration::from_secs(10),
            concurrency: 64,
            token: None,
            text_fields: neardup_core::input::default_text_fields(),
            meta_ttl: neardup_es::SimilarOptions::default().describe_ttl,
        }
    }
}
