//! Claims: short-lived locks in Elasticsearch that make "insert unless a near-duplicate is
//! stored" race-free across processes.
//!
//! Elasticsearch has no transactions, and a document written less than a refresh interval ago
//! is invisible to search, so "search, then insert" lets two near-duplicates sent at the same
//! moment both in. A writer therefore first **claims the keys its sketch is found by** (the
//! LSH band terms of a MinHash signature, the four block values of a SimHash): one small
//! document per key in a claims index, created with `op_type=create`, which Elasticsearch
//! grants to exactly one writer. Holding all of them, it searches; if nothing near is stored,
//! it writes the article with `refresh=wait_for` (so the article is searchable before the
//! claims go) and then releases the claims. A writer that finds a key claimed waits until it
//! is released, then claims it and searches: it now sees the article written meanwhile.
//!
//! **Why exactly one of several near-duplicates gets in.** Two texts that a query would call
//! near-duplicates share at least one key (that is how the query finds them). Whichever of two
//! writers claims a shared key first finishes (search, write, refresh) before the other can
//! claim it, so the other's search sees the first article.
//!
//! **No deadlock.** Keys are claimed one at a time in one global order (sorted), so a writer
//! only ever waits for a key greater than every key it holds; a cycle of waits would need a
//! key smaller than one already held.
//!
//! **Crashes and limits.** A claim carries a lease (`expires_at`, epoch milliseconds of the
//! claimant's clock). A writer that finds an expired claim deletes it — guarded by the
//! claim's `_seq_no`/`_primary_term`, so it cannot delete a successor's — and claims the key.
//! A claimant must therefore finish within its lease (the service's request timeout is kept
//! below it), and the clocks of the service's hosts must agree to well within the lease.
//! Releases are guarded the same way. Writers that do not claim (a bulk back-fill, another
//! application) are only seen once Elasticsearch has refreshed their documents.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Value};

use super::{check, path_segment, send, Body, EsError, RetryPolicy};

/// Claims for one article index, kept in their own index.
#[derive(Clone, Debug)]
pub struct Claims {
    client: Elasticsearch,
    retry: RetryPolicy,
    index: String,
    /// How long a claim protects its key if its holder never releases it.
    pub lease: Duration,
    /// How long to wait between two looks at a claimed key.
    pub poll: Duration,
}

/// Keys a writer holds; give them back with [`Claims::release`].
#[derive(Debug)]
#[must_use = "claims must be released"]
pub struct Held {
    /// `(key, _seq_no, _primary_term)` of each claim created.
    claims: Vec<(String, u64, u64)>,
}

impl Held {
    /// The keys held, in claim order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.claims.iter().map(|(k, _, _)| k.as_str())
    }
}

/// Why claiming failed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("key `{key}` stayed claimed (by `{holder}`) past the deadline; retry the request")]
    Timeout { key: String, holder: String },
    #[error(transparent)]
    Es(#[from] EsError),
}

impl Claims {
    /// Claims for `index`, kept in `neardup-claims-{index}`, with a 30 s lease.
    pub fn new(client: Elasticsearch, retry: RetryPolicy, index: &str) -> Claims {
        Claims {
            client,
            retry,
            index: format!("neardup-claims-{index}"),
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(5),
        }
    }

    /// The claims index's name.
    pub fn index(&self) -> &str {
        &self.index
    }

    /// Creates the claims index if it is missing (one shard: claims are tiny and few).
    pub async fn ensure_index(&self) -> Result<(), EsError> {
        let body = Body::Json(json!({
            "settings": { "number_of_shards": 1, "auto_expand_replicas": "0-1" },
            "mappings": { "dynamic": false, "properties": {
                "holder": { "type": "keyword" },
                "expires_at": { "type": "long" }
            } }
        }));
        let path = format!("/{}", path_segment(&self.index));
        let what = format!("claims index `{}`: create", self.index);
        self.retry
            .run(|| async {
                let reply = send(&self.client, Method::Put, &path, &[], Some(&body)).await?;
                if reply.body["error"]["type"] == "resource_already_exists_exception" {
                    return Ok(());
                }
                check(&what, reply).map(|_| ())
            })
            .await
    }

    /// Claims every key (sorted, once each) for `holder`, waiting for claimed keys until
    /// `deadline`. On failure nothing stays held.
    pub async fn acquire(
        &self,
        keys: &[String],
        holder: &str,
        deadline: Instant,
    ) -> Result<Held, ClaimError> {
        let mut keys: Vec<&String> = keys.iter().collect();
        keys.sort();
        keys.dedup();
        let mut held = Held {
            claims: Vec::with_capacity(keys.len()),
        };
        for key in keys {
            match self.claim_one(key, holder, deadline).await {
                Ok((seq_no, term)) => held.claims.push((key.clone(), seq_no, term)),
                Err(e) => {
                    self.release(held).await;
                    return Err(e);
                }
            }
        }
        Ok(held)
    }

    /// Gives the keys back. Each delete is guarded by the claim's sequence number, so a claim
    /// that expired and was taken over is left to its new holder. Failures are logged: the
    /// lease frees the key later.
    pub async fn release(&self, held: Held) {
        for (key, seq_no, term) in held.claims {
            let path = format!("/{}/_doc/{}", path_segment(&self.index), path_segment(&key));
            let (s, t) = (seq_no.to_string(), term.to_string());
            let r = send(
                &self.client,
                Method::Delete,
                &path,
                &[("if_seq_no", &s), ("if_primary_term", &t)],
                None,
            )
            .await;
            match r {
                Ok(reply) if matches!(reply.status.as_u16(), 200..=299 | 404 | 409) => {}
                Ok(reply) => {
                    tracing::warn!(key = %key, status = reply.status.as_u16(), "could not release a claim; its lease will free it")
                }
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "could not release a claim; its lease will free it")
                }
            }
        }
    }

    async fn claim_one(
        &self,
        key: &str,
        holder: &str,
        deadline: Instant,
    ) -> Result<(u64, u64), ClaimError> {
        let doc_path = format!("/{}/_doc/{}", path_segment(&self.index), path_segment(key));
        let create_path = format!(
            "/{}/_create/{}",
            path_segment(&self.index),
            path_segment(key)
        );
        loop {
            let expires_at = now_ms() + self.lease.as_millis() as i64;
            let body = Body::Json(json!({ "holder": holder, "expires_at": expires_at }));
            // Not retried blindly: a create whose answer was lost may have succeeded, and
            // then the retry would see our own claim as someone else's. A transient failure
            // ends the attempt; the caller's request fails and can be retried.
            let reply = send(&self.client, Method::Put, &create_path, &[], Some(&body)).await?;
            if reply.status.as_u16() == 409 {
                // Claimed: look at the claim (a realtime get, no refresh needed).
                let got = send(&self.client, Method::Get, &doc_path, &[], None).await?;
                if got.status.as_u16() == 404 {
                    continue; // released meanwhile
                }
                let got = check(&format!("claim `{key}`: read"), got)?;
                let holder_now = got["_source"]["holder"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if got["_source"]["expires_at"].as_i64().unwrap_or(0) < now_ms() {
                    self.delete_expired(&doc_path, &got).await?;
                    continue;
                }
                if Instant::now() + self.poll > deadline {
                    return Err(ClaimError::Timeout {
                        key: key.to_owned(),
                        holder: holder_now,
                    });
                }
                tokio::time::sleep(self.poll).await;
                continue;
            }
            let created = check(&format!("claim `{key}`: create"), reply)?;
            let seq_no = created["_seq_no"].as_u64();
            let term = created["_primary_term"].as_u64();
            match (seq_no, term) {
                (Some(s), Some(t)) => return Ok((s, t)),
                _ => {
                    return Err(EsError::BadResponse {
                        what: format!("claim `{key}`: create"),
                        detail: format!("no _seq_no/_primary_term in {created}"),
                    }
                    .into())
                }
            }
        }
    }

    /// Deletes an expired claim, only if it is still the one read.
    async fn delete_expired(&self, doc_path: &str, got: &Value) -> Result<(), EsError> {
        let (Some(s), Some(t)) = (got["_seq_no"].as_u64(), got["_primary_term"].as_u64()) else {
            return Ok(());
        };
        let (s, t) = (s.to_string(), t.to_string());
        let reply = send(
            &self.client,
            Method::Delete,
            doc_path,
            &[("if_seq_no", &s), ("if_primary_term", &t)],
            None,
        )
        .await?;
        if matches!(reply.status.as_u16(), 404 | 409) {
            return Ok(()); // released or taken over meanwhile
        }
        tracing::info!(claim = %doc_path, holder = %got["_source"]["holder"], "took over an expired claim");
        check("delete an expired claim", reply).map(|_| ())
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
