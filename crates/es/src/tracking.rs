//! Edit tracking on a cluster: installing and removing the final pipeline that makes any write
//! that is not neardup's own clear an article's fingerprint versions
//! ([`super::schema::tracking_pipeline`]), so the worker's "missing or outdated" query finds
//! every edited article without `--changed-field`. `es-init` calls [`track_edits`] (by
//! default) or [`untrack_edits`] (`--no-tracking`) after [`super::init_index`].
//!
//! Installing, per concrete index: the pipeline is tried on the cluster first (`_simulate`):
//! a cluster without an ingest node, without the `script` processor or with inline scripts
//! disabled gets no pipeline ([`Tracking::Unavailable`], nothing changed). Then the pipeline is
//! stored, set as `index.final_pipeline`, and recorded in `_meta.neardup.tracking` (in that
//! order: a writer that reads `_meta` in between marks nothing yet, and its writes only look
//! stale, which the worker repairs). An index whose final pipeline is the user's is refused,
//! unless asked to chain (the user's pipeline then runs first, inside neardup's). Removing
//! undoes it in the reverse order and restores the user's final pipeline.

use std::collections::BTreeMap;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Map, Value};

use super::init::{mappings, put_meta};
use super::schema::{
    tracking_pipeline, tracking_pipeline_name, FieldNames, IndexMeta, TrackingMeta, TRACKING_MARKER,
};
use super::{path_segment, request, Body, EsError, RetryPolicy};

/// What [`track_edits`] or [`untrack_edits`] did with one concrete index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tracking {
    /// Edits are tracked by this final pipeline (installed now, or brought up to date).
    On(TrackingMeta),
    /// The cluster cannot run the pipeline (the reason): edits are not tracked, nothing was
    /// changed, and the worker sees edits only with a changed field (`--changed-field`).
    Unavailable(String),
    /// Edits are not tracked; `true` when tracking was removed now.
    Off(bool),
}

/// Installs (or updates, after a method was added) edit tracking on every concrete index
/// behind `index`. An index whose `index.final_pipeline` is the user's is refused
/// ([`EsError::Config`], nothing changed) unless `chain`: the user's pipeline then runs first,
/// inside neardup's, and is restored by [`untrack_edits`].
pub async fn track_edits(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    chain: bool,
) -> Result<BTreeMap<String, Tracking>, EsError> {
    let all = mappings(client, retry, index).await?;
    // Check every index before changing any.
    let mut plans = Vec::new();
    for (concrete, m) in &all {
        let meta = IndexMeta::from_mapping(concrete, &m["mappings"], &FieldNames::default())?;
        let ours = tracking_pipeline_name(concrete);
        let chained = match final_pipeline(client, retry, concrete).await? {
            None => None,
            Some(p) if p == ours => meta.tracking.as_ref().and_then(|t| t.chained.clone()),
            Some(p) if chain => Some(p),
            Some(p) => {
                return Err(EsError::Config(format!(
                    "index `{concrete}` has its own final pipeline `{p}`: es-init never replaces it; pass --chain-final-pipeline to run it inside neardup's edit tracking, or --no-tracking (the worker then sees edits only with --changed-field)"
                )))
            }
        };
        plans.push((concrete, m, meta, ours, chained));
    }
    let mut out = BTreeMap::new();
    let lacking = lacks_ingest(client, retry).await?;
    let mut bulk_updates = None;
    for (concrete, m, mut meta, ours, chained) in plans {
        let why_not = match &lacking {
            Some(why) => Some(why.clone()),
            None => try_pipeline(client, retry, &meta).await?,
        };
        if let Some(why) = why_not {
            out.insert(concrete.clone(), Tracking::Unavailable(why));
            continue;
        }
        let bulk_updates = match bulk_updates {
            Some(b) => b,
            None => *bulk_updates.insert(bulk_updates_run_pipelines(client, retry).await?),
        };
        let tracking = TrackingMeta {
            pipeline: ours.clone(),
            chained: chained.clone(),
            bulk_updates,
        };
        let body = Body::Json(tracking_pipeline(&meta, chained.as_deref()));
        request(
            client,
            retry,
            &format!("index `{concrete}`: put the edit-tracking pipeline `{ours}`"),
            Method::Put,
            &format!("/_ingest/pipeline/{}", path_segment(&ours)),
            &[],
            Some(&body),
        )
        .await?;
        set_final_pipeline(client, retry, concrete, Some(&ours)).await?;
        if meta.tracking.as_ref() != Some(&tracking) {
            meta.tracking = Some(tracking.clone());
            put_meta(
                client,
                retry,
                concrete,
                m,
                &meta,
                "record edit tracking in _meta",
            )
            .await?;
        }
        out.insert(concrete.clone(), Tracking::On(tracking));
    }
    Ok(out)
}

/// Removes edit tracking from every concrete index behind `index`: `_meta` stops recording
/// it (writers stop marking), the final pipeline becomes the user's one it chained (or none),
/// and neardup's pipeline is deleted.
pub async fn untrack_edits(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
) -> Result<BTreeMap<String, Tracking>, EsError> {
    let all = mappings(client, retry, index).await?;
    let mut out = BTreeMap::new();
    for (concrete, m) in &all {
        let mut meta = IndexMeta::from_mapping(concrete, &m["mappings"], &FieldNames::default())?;
        let ours = tracking_pipeline_name(concrete);
        let current = final_pipeline(client, retry, concrete).await?;
        let recorded = meta.tracking.take();
        if recorded.is_none() && current.as_deref() != Some(ours.as_str()) {
            out.insert(concrete.clone(), Tracking::Off(false));
            continue;
        }
        if recorded.is_some() {
            put_meta(
                client,
                retry,
                concrete,
                m,
                &meta,
                "record edit tracking in _meta",
            )
            .await?;
        }
        if current.as_deref() == Some(ours.as_str()) {
            let restore = recorded.as_ref().and_then(|t| t.chained.as_deref());
            set_final_pipeline(client, retry, concrete, restore).await?;
        }
        let what = format!("index `{concrete}`: delete the edit-tracking pipeline `{ours}`");
        match request(
            client,
            retry,
            &what,
            Method::Delete,
            &format!("/_ingest/pipeline/{}", path_segment(&ours)),
            &[],
            None,
        )
        .await
        {
            Ok(_) | Err(EsError::Status { status: 404, .. }) => {}
            Err(e) => return Err(e),
        }
        out.insert(concrete.clone(), Tracking::Off(true));
    }
    Ok(out)
}

/// The `index.final_pipeline` of a concrete index, if it has one.
async fn final_pipeline(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    concrete: &str,
) -> Result<Option<String>, EsError> {
    let r = request(
        client,
        retry,
        &format!("index `{concrete}`: read index.final_pipeline"),
        Method::Get,
        &format!("/{}/_settings/index.final_pipeline", path_segment(concrete)),
        &[("flat_settings", "true")],
        None,
    )
    .await?;
    Ok(r[concrete]["settings"]["index.final_pipeline"]
        .as_str()
        .filter(|p| *p != "_none")
        .map(str::to_owned))
}

async fn set_final_pipeline(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    concrete: &str,
    pipeline: Option<&str>,
) -> Result<(), EsError> {
    request(
        client,
        retry,
        &format!("index `{concrete}`: set index.final_pipeline"),
        Method::Put,
        &format!("/{}/_settings", path_segment(concrete)),
        &[],
        Some(&Body::Json(json!({ "index.final_pipeline": pipeline }))),
    )
    .await?;
    Ok(())
}

/// Why the cluster cannot run an index pipeline at all (no node has the ingest role), if so.
async fn lacks_ingest(
    client: &Elasticsearch,
    retry: &RetryPolicy,
) -> Result<Option<String>, EsError> {
    let r = request(
        client,
        retry,
        "cluster: count ingest nodes",
        Method::Get,
        "/_nodes/ingest:true/_none",
        &[],
        None,
    )
    .await?;
    Ok((r["_nodes"]["total"].as_u64() == Some(0))
        .then(|| "the cluster has no ingest node (node.roles lacks `ingest`)".to_owned()))
}

/// Runs the pipeline for `meta` (without a chained one) on two documents with `_simulate`:
/// `None` when it keeps the versions of a marked write and clears those of another, else why
/// not (no `script` processor, inline scripts disabled, …).
async fn try_pipeline(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    meta: &IndexMeta,
) -> Result<Option<String>, EsError> {
    let versions = meta.version_fields();
    let mut own = Map::new();
    for v in &versions {
        own.insert((*v).to_owned(), json!("v"));
    }
    let other = Value::Object(own.clone());
    own.insert(TRACKING_MARKER.to_owned(), json!(true));
    let body = json!({
        "pipeline": tracking_pipeline(meta, None),
        "docs": [ { "_source": own }, { "_source": other } ],
    });
    let r = match request(
        client,
        retry,
        "cluster: try the edit-tracking pipeline",
        Method::Post,
        "/_ingest/pipeline/_simulate",
        &[],
        Some(&Body::Json(body)),
    )
    .await
    {
        Ok(r) => r,
        Err(EsError::Status {
            status: 400..=499,
            error_type,
            reason,
            ..
        }) => {
            return Ok(Some(format!(
                "the cluster cannot run its pipeline ({error_type}: {reason})"
            )))
        }
        Err(e) => return Err(e),
    };
    let docs = &r["docs"];
    for d in docs.as_array().into_iter().flatten() {
        if !d["error"].is_null() {
            let (t, reason) = super::error_type_reason(d);
            return Ok(Some(format!(
                "the cluster cannot run its pipeline ({t}: {reason})"
            )));
        }
    }
    let kept = &docs[0]["doc"]["_source"];
    let cleared = &docs[1]["doc"]["_source"];
    let works = versions
        .iter()
        .all(|v| kept[*v] == "v" && cleared.get(*v).is_none())
        && kept.get(TRACKING_MARKER).is_none();
    Ok((!works).then(|| format!("its pipeline did not do what it should on this cluster: {r}")))
}

/// Whether the cluster runs an index's final pipeline for the `update` actions of a `_bulk`
/// (Elasticsearch 7.10 and OpenSearch 3 run it for a single `_update` but not for those),
/// tried on a scratch index and pipeline that are deleted again.
async fn bulk_updates_run_pipelines(
    client: &Elasticsearch,
    retry: &RetryPolicy,
) -> Result<bool, EsError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name = format!("neardup-tracking-probe-{}-{nanos}", std::process::id());
    let result = probe(client, retry, &name).await;
    for path in [format!("/{name}"), format!("/_ingest/pipeline/{name}")] {
        let _ = super::send(client, Method::Delete, &path, &[], None).await;
    }
    result
}

async fn probe(client: &Elasticsearch, retry: &RetryPolicy, name: &str) -> Result<bool, EsError> {
    let what = "cluster: try the final pipeline on a bulk update (scratch index)";
    let counts = json!({ "processors": [ { "script": {
        "lang": "painless",
        "source": "ctx.runs = (ctx.runs == null ? 0 : ctx.runs) + 1",
    } } ] });
    let put = |path: String, body: Value| async move {
        request(
            client,
            retry,
            what,
            Method::Put,
            &path,
            &[],
            Some(&Body::Json(body)),
        )
        .await
    };
    put(format!("/_ingest/pipeline/{name}"), counts).await?;
    put(
        format!("/{name}"),
        json!({ "settings": {
            "index.final_pipeline": name,
            "index.number_of_shards": 1,
            "index.number_of_replicas": 0,
        } }),
    )
    .await?;
    let body = format!(
        "{}\n{}\n{}\n{}\n",
        json!({ "index": { "_id": "1" } }),
        json!({ "a": 1 }),
        json!({ "update": { "_id": "1" } }),
        json!({ "doc": { "a": 2 } }),
    );
    let r = request(
        client,
        retry,
        what,
        Method::Post,
        &format!("/{name}/_bulk"),
        &[("refresh", "true")],
        Some(&Body::NdJson(body)),
    )
    .await?;
    if r["errors"] != false {
        return Err(EsError::BadResponse {
            what: what.into(),
            detail: r.to_string(),
        });
    }
    let doc = request(
        client,
        retry,
        what,
        Method::Get,
        &format!("/{name}/_doc/1"),
        &[],
        None,
    )
    .await?;
    Ok(doc["_source"]["runs"].as_u64() == Some(2))
}
