//! `GET /metrics`: Prometheus text exposition of requests, latencies and Elasticsearch errors.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// The service's metrics, in their own registry (nothing global, so two services in one
/// process, as in tests, do not mix their counts).
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Requests answered, by route template, HTTP method and status code.
    pub requests: IntCounterVec,
    /// Seconds from request to response, by route template.
    pub latency: HistogramVec,
    /// Requests being answered now.
    pub in_flight: IntGauge,
    /// Elasticsearch calls that failed, by kind (`unreachable`, `status_5xx`, …).
    pub es_errors: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new("neardup_http_requests_total", "HTTP requests answered"),
            &["route", "method", "status"],
        )
        .expect("valid metric");
        // From 0.25 ms to 10 s: a lookup is milliseconds, a dedupe insert tens of them.
        let buckets = vec![
            0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            5.0, 10.0,
        ];
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "neardup_http_request_duration_seconds",
                "Time from request to response",
            )
            .buckets(buckets),
            &["route"],
        )
        .expect("valid metric");
        let in_flight = IntGauge::new("neardup_http_in_flight", "Requests being answered now")
            .expect("valid metric");
        let es_errors = IntCounterVec::new(
            Opts::new(
                "neardup_es_errors_total",
                "Elasticsearch calls that failed, by kind",
            ),
            &["kind"],
        )
        .expect("valid metric");
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            Box::new(in_flight.clone()),
            Box::new(es_errors.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Metrics {
            registry,
            requests,
            latency,
            in_flight,
            es_errors,
        }
    }

    /// Counts a failed Elasticsearch call.
    pub fn es_error(&self, e: &neardup_es::EsError) {
        let kind = match e.status() {
            Some(s) if s >= 500 => "status_5xx",
            Some(429) => "status_429",
            Some(_) => "status_4xx",
            None if e.is_transient() => "unreachable",
            None => "other",
        };
        self.es_errors.with_label_values(&[kind]).inc();
    }

    /// The text exposition format (version 0.0.4).
    pub fn render(&self) -> (String, String) {
        let encoder = TextEncoder::new();
        let mut buf = Vec::new();
        encoder
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding cannot fail");
        (
            encoder.format_type().to_owned(),
            String::from_utf8(buf).expect("text encoder writes UTF-8"),
        )
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
