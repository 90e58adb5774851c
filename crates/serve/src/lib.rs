//! `neardup serve`: the HTTP service an article API calls (feature `serve`).
//!
//! Built on axum (tokio's own HTTP framework, on hyper; the tower middleware it shares with
//! the rest of the tokio ecosystem gives the body limit, timeout and load shedding), with
//! Prometheus metrics from the `prometheus` crate. The binary's `serve` subcommand only parses
//! flags and calls [`run`].
//!
//! Production manners, all in [`Service::router`]:
//! - every body is limited to [`ServeConfig::body_limit`] bytes (413 beyond),
//! - every request to `/v1/…` has [`ServeConfig::timeout`] to finish (504 after it),
//! - at most [`ServeConfig::concurrency`] requests to `/v1/…` run at once; more are refused
//!   at once with 503 and `Retry-After: 1` rather than queued (a caller's retry is cheaper
//!   than a queue that grows until every request times out),
//! - `/v1/…` needs `Authorization: Bearer <token>` when a token is configured (401 without),
//! - one log line per request (method, route template, status, milliseconds; never headers,
//!   bodies or the token), JSON when the CLI is asked for JSON logs,
//! - [`run`] stops accepting on shutdown and lets requests in flight finish.
//!
//! Errors are JSON: `{"error": {"code": "not_found", "message": "…"}}`.

mod config;
mod error;
mod metrics;
mod on_es;
mod on_store;
mod service;
mod shapes;

pub use config::ServeConfig;
pub use error::{ApiError, ErrorCode};
pub use metrics::Metrics;
pub use on_es::EsBackend;
pub use on_store::StoreBackend;
pub use service::{run, shutdown_signal, Backend, Service, OPENAPI, PAGE};
