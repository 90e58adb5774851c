//! The figures, computed from what the cluster holds: every document against the
//! library's own fingerprint of its text (brute force), and the table rows.

use std::collections::BTreeMap;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{self, fingerprint_fields_json, sketch_source, IndexMeta, RetryPolicy};
use neardup::{Fingerprinter, Profile};
use serde_json::{json, Value};

/// Every document of `index` (`_id` → `_source`), read with a scroll after a refresh.
pub async fn all_docs(client: &Elasticsearch, index: &str) -> BTreeMap<String, Value> {
    let retry = RetryPolicy::default();
    let seg = es::path_segment(index);
    es::request(
        client,
        &retry,
        "refresh",
        Method::Post,
        &format!("/{seg}/_refresh"),
        &[],
        None,
    )
    .await
    .unwrap();
    let mut out = BTreeMap::new();
    let body = es::Body::Json(json!({"size": 1000, "sort": ["_doc"]}));
    let mut r = es::request(
        client,
        &retry,
        "scroll",
        Method::Post,
        &format!("/{seg}/_search"),
        &[("scroll", "2m")],
        Some(&body),
    )
    .await
    .unwrap();
    loop {
        let hits = r["hits"]["hits"].as_array().cloned().unwrap_or_default();
        if hits.is_empty() {
            break;
        }
        for h in hits {
            out.insert(h["_id"].as_str().unwrap().to_owned(), h["_source"].clone());
        }
        let id = r["_scroll_id"].as_str().unwrap().to_owned();
        let body = es::Body::Json(json!({"scroll": "2m", "scroll_id": id}));
        r = es::request(
            client,
            &retry,
            "scroll",
            Method::Post,
            "/_search/scroll",
            &[],
            Some(&body),
        )
        .await
        .unwrap();
    }
    out
}

/// How the documents that were loaded stand against their own text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fingerprints {
    /// Loaded (acknowledged) documents no longer in the index.
    pub absent: u64,
    /// Documents without the fingerprint fields of the index's current versions.
    pub missing: u64,
    /// Documents whose stored fields differ from the library's fields for their text.
    pub wrong: u64,
    /// Documents carrying exactly the library's fields.
    pub right: u64,
    /// Documents in the index that were never loaded (doubled or stray).
    pub extra: u64,
}

/// Checks every loaded id: present, and its fingerprint fields (both methods, the index's
/// names and versions) equal to what [`fingerprint_fields_json`] makes of its title and
/// content.
pub async fn fingerprints(
    client: &Elasticsearch,
    index: &str,
    loaded: &[(String, Value)],
) -> Fingerprints {
    let meta = es::read_meta(client, &RetryPolicy::default(), index, &Default::default())
        .await
        .unwrap();
    let docs = all_docs(client, index).await;
    let fp = Fingerprinter::for_profile(Profile::Default);
    let fields = ["title".to_string(), "content".to_string()];
    let mut f = Fingerprints::default();
    for (id, _) in loaded {
        let Some(src) = docs.get(id) else {
            f.absent += 1;
            continue;
        };
        let want = expected_fields(&fp, &meta, src, &fields);
        if want.keys().all(|k| src.get(k).is_none_or(Value::is_null))
            || !want.keys().all(|k| src.get(k).is_some())
        {
            f.missing += 1;
        } else if want.iter().all(|(k, v)| src.get(k) == Some(v)) {
            f.right += 1;
        } else {
            f.wrong += 1;
        }
    }
    f.extra = docs.len() as u64 - (loaded.len() as u64 - f.absent);
    f
}

pub fn expected_fields(
    fp: &Fingerprinter,
    meta: &IndexMeta,
    src: &Value,
    fields: &[String],
) -> serde_json::Map<String, Value> {
    let sketches =
        sketch_source(fp, meta.methods(), src, fields).expect("test documents hold text");
    fingerprint_fields_json(meta, &sketches)
}

/// One row of the table: the figures for a scenario (`None`: not what it measures).
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub scenario: String,
    pub lost: u64,
    pub wrong_or_missing: u64,
    pub near_duplicates: Option<u64>,
    pub false_409s: Option<u64>,
    pub groups_consistent: Option<bool>,
    pub completed: bool,
    /// Runs of the job (1 = it rode the fault out; more = resumed by rerunning it).
    pub runs: u32,
    pub seconds: u64,
}

impl Row {
    pub fn markdown(&self) -> String {
        let opt = |v: Option<u64>| v.map_or("–".to_owned(), |v| v.to_string());
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.scenario,
            self.lost,
            self.wrong_or_missing,
            opt(self.near_duplicates),
            opt(self.false_409s),
            self.groups_consistent
                .map_or("–", |c| if c { "yes" } else { "NO" }),
            if self.completed { "yes" } else { "NO" },
            self.runs,
            self.seconds
        )
    }

    /// The targets, asserted.
    pub fn assert_targets(&self) {
        assert_eq!(self.lost, 0, "{}: acknowledged writes lost", self.scenario);
        assert_eq!(
            self.wrong_or_missing, 0,
            "{}: wrong or missing fingerprints",
            self.scenario
        );
        assert_eq!(
            self.near_duplicates.unwrap_or(0),
            0,
            "{}: near-duplicates created",
            self.scenario
        );
        assert_eq!(
            self.false_409s.unwrap_or(0),
            0,
            "{}: false 409s",
            self.scenario
        );
        assert_ne!(
            self.groups_consistent,
            Some(false),
            "{}: group labels",
            self.scenario
        );
        assert!(self.completed, "{}: the job completed", self.scenario);
    }
}

pub const HEADER: &str = "| scenario | acknowledged writes lost | wrong or missing fingerprints | near-duplicates created | false 409s | group labels consistent | job completed | runs | seconds |\n|---|---|---|---|---|---|---|---|---|";
