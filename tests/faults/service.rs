//! Faults under the service (`neardup serve`'s router in process, on every node's URL):
//! dedupe inserts of near-duplicates racing each other while the node holding the claims'
//! primary is SIGKILLed and restarted. The caller retries an answer of 5xx (what a client of
//! the service does), so a PUT whose first answer was lost is sent again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::Router;
use elasticsearch::http::Method;
use neardup::es::RetryPolicy;
use neardup::serve::{EsBackend, ServeConfig, Service};
use neardup::{Fingerprinter, Profile};
use serde_json::Value;

use crate::backfill::index_with;
use crate::check::{self, Row};
use crate::cluster::Cluster;
use crate::common::serve::{call, put_json, variants};

/// How a dedupe PUT ended, after retries of 5xx answers.
enum Answer {
    Created,
    /// 409 duplicate, with the ids it names.
    Duplicate(Vec<String>),
}

async fn put(app: &Router, index: &str, id: &str, article: &Value) -> Answer {
    let path = format!("/v1/{index}/articles/{id}?dedupe=true");
    loop {
        let (status, body, _) = call(app, put_json(&path, article)).await;
        match status {
            StatusCode::CREATED => return Answer::Created,
            StatusCode::CONFLICT => {
                assert_eq!(body["error"]["code"], "duplicate", "{id}: {body}");
                let ids = body["matches"]
                    .as_array()
                    .map(|m| {
                        m.iter()
                            .filter_map(|m| m["id"].as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                return Answer::Duplicate(ids);
            }
            s if s.is_server_error() => tokio::time::sleep(Duration::from_millis(500)).await,
            other => panic!("{id}: {other} {body}"),
        }
    }
}

/// Every variant of `wave` PUT at once; the answers by id.
async fn wave(
    app: &Router,
    index: &str,
    v: &[Value],
    wave: std::ops::Range<usize>,
) -> Vec<(String, Answer)> {
    let mut tasks = Vec::new();
    for i in wave {
        let (app, index, a) = (app.clone(), index.to_owned(), v[i].clone());
        tasks.push(tokio::spawn(async move {
            let id = format!("v{i}");
            let answer = put(&app, &index, &id, &a).await;
            (id, answer)
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

pub async fn dedupe(c: &Cluster) -> Row {
    let start = Instant::now();
    let client = c.client();
    let index = "faults-dedupe";
    let _ = neardup::es::send(
        &client,
        Method::Delete,
        &format!("/neardup-claims-{index}"),
        &[],
        None,
    )
    .await;
    index_with(c, &client, index, &[]).await;
    let app = Arc::new(Service::new(
        ServeConfig::default(),
        EsBackend {
            client: client.clone(),
            retry: RetryPolicy::default(),
        },
        Fingerprinter::for_profile(Profile::Default),
    ))
    .router();
    let v = variants(60);
    // Before, during and after the fault: 20 racing PUTs each.
    let mut answers = wave(&app, index, &v, 0..20).await;
    let claims = format!("neardup-claims-{index}");
    c.wait_green(&client, &claims).await;
    let node = c.primary_node(&client, &claims).await;
    c.kill(node);
    answers.extend(wave(&app, index, &v, 20..40).await);
    c.restart(node);
    answers.extend(wave(&app, index, &v, 40..60).await);
    c.wait_green(&client, index).await;

    let stored: BTreeSet<String> = check::all_docs(&client, index).await.into_keys().collect();
    let created: Vec<&String> = answers
        .iter()
        .filter(|(_, a)| matches!(a, Answer::Created))
        .map(|(id, _)| id)
        .collect();
    let lost = created.iter().filter(|id| !stored.contains(**id)).count() as u64;
    // A 409 is false when it names nothing stored but itself (its own earlier attempt, or
    // an article that is not there).
    let false_409s = answers
        .iter()
        .filter(|(id, a)| match a {
            Answer::Duplicate(ids) => !ids.iter().any(|m| m != id && stored.contains(m)),
            Answer::Created => false,
        })
        .count() as u64;
    let loaded: Vec<(String, Value)> = stored.iter().map(|id| (id.clone(), Value::Null)).collect();
    let f = check::fingerprints(&client, index, &loaded).await;
    for name in [index, claims.as_str()] {
        let _ = neardup::es::send(&client, Method::Delete, &format!("/{name}"), &[], None).await;
    }
    Row {
        scenario: "service dedupe inserts racing (60 near-duplicates), claims' primary SIGKILLed, restarted".into(),
        lost,
        wrong_or_missing: f.wrong + f.missing,
        near_duplicates: Some((stored.len() as u64).saturating_sub(1)),
        false_409s: Some(false_409s),
        completed: created.len() == 1 && stored.len() == 1,
        runs: 1,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}
