//! `/metrics`: from a registry of this server's own, never a global one, so several servers in
//! one process (the tests) count apart. The format follows `Accept`: OpenMetrics 1.0 when the
//! scraper asks for `application/openmetrics-text` (as Prometheus itself does), else the
//! Prometheus text format 0.0.4 that `promtool check metrics` and older scrapers read. Every
//! outcome of the cache, the ledger's conflicts and the compactions is there from the start, at 0.
//!
//! - `baton_http_requests_total{route,method,status}` and
//!   `baton_http_request_duration_seconds{route,method}` (the route is the matched template,
//!   `/v1/runs/{id}`, so ids never become labels);
//! - `baton_cache_requests_total{outcome}`: `hit`, `miss`, `coalesced`, `bypass`;
//! - `baton_ledger_conflicts_total{code}`: `mismatch`, `in_progress`, `fenced_out`, `failed`;
//! - `baton_compactions_total{outcome}`;
//! - `baton_tokens_saved_total{source}`: input tokens not sent upstream (`cache`: a hit or a
//!   coalesced call; `compaction`: what a compaction took out of the context).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::problem::Problem;
use crate::state::AppState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    route: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Read {
    read: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Code {
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Source {
    source: String,
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
    cache: Family<Outcome, Counter>,
    ledger_conflicts: Family<Code, Counter>,
    compactions: Family<Outcome, Counter>,
    tokens_saved: Family<Source, Counter>,
    captures: Family<Outcome, Counter>,
    capture_seconds: Histogram,
    capture_reads: Family<Read, Counter>,
    blocking: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every family registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("baton");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template, method and status",
            requests.clone(),
        );
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            // 50 µs to about 52 s.
            Histogram::new(exponential_buckets(0.000_05, 2.0, 21))
        });
        registry.register(
            "http_request_duration_seconds",
            "Time from a request's arrival to its response head, by route template and method",
            latency.clone(),
        );
        let cache = Family::<Outcome, Counter>::default();
        registry.register(
            "cache_requests",
            "Gateway and cache calls by outcome: hit, miss, coalesced, bypass",
            cache.clone(),
        );
        let ledger_conflicts = Family::<Code, Counter>::default();
        registry.register(
            "ledger_conflicts",
            "Ledger calls refused: mismatch, in_progress, fenced_out, failed",
            ledger_conflicts.clone(),
        );
        let compactions = Family::<Outcome, Counter>::default();
        registry.register(
            "compactions",
            "Compactions run through the API, by outcome",
            compactions.clone(),
        );
        let tokens_saved = Family::<Source, Counter>::default();
        registry.register(
            "tokens_saved",
            "Input tokens not sent upstream: by the cache (hits, coalesced calls) and by compaction",
            tokens_saved.clone(),
        );
        let captures = Family::<Outcome, Counter>::default();
        registry.register(
            "gateway_captures",
            "Gateway calls captured as runs, by outcome: stored, unchanged, branched, failed",
            captures.clone(),
        );
        for outcome in ["stored", "unchanged", "branched", "failed"] {
            let _ = captures.get_or_create(&Outcome {
                outcome: outcome.to_owned(),
            });
        }
        // 50 µs to about 52 s.
        let capture_seconds = Histogram::new(exponential_buckets(0.000_05, 2.0, 21));
        registry.register(
            "gateway_capture_duration_seconds",
            "Time one gateway capture took, from the answer to the run holding it",
            capture_seconds.clone(),
        );
        let capture_reads = Family::<Read, Counter>::default();
        registry.register(
            "gateway_capture_messages_read",
            "Request messages gateway captures parsed, by how the request was read: continued \
             (only the messages after the conversation's last capture) or whole",
            capture_reads.clone(),
        );
        for read in ["continued", "whole"] {
            let _ = capture_reads.get_or_create(&Read {
                read: read.to_owned(),
            });
        }
        let blocking = Gauge::default();
        registry.register(
            "blocking_tasks",
            "CPU work running on the blocking pool (growth reports); it stops when its request is gone",
            blocking.clone(),
        );
        for outcome in ["hit", "miss", "coalesced", "bypass"] {
            let _ = cache.get_or_create(&Outcome {
                outcome: outcome.to_owned(),
            });
        }
        for code in ["mismatch", "in_progress", "fenced_out", "failed"] {
            let _ = ledger_conflicts.get_or_create(&Code {
                code: code.to_owned(),
            });
        }
        for outcome in ["kept", "refused", "planned", "compacted", "conflict"] {
            let _ = compactions.get_or_create(&Outcome {
                outcome: outcome.to_owned(),
            });
        }
        for source in ["cache", "compaction"] {
            let _ = tokens_saved.get_or_create(&Source {
                source: source.to_owned(),
            });
        }
        Metrics {
            registry,
            blocking,
            requests,
            latency,
            cache,
            ledger_conflicts,
            compactions,
            tokens_saved,
            captures,
            capture_seconds,
            capture_reads,
        }
    }

    /// Counts the request messages a gateway capture parsed, read `continued` or `whole`.
    pub fn capture_read(&self, read: &str, messages: usize) {
        self.capture_reads
            .get_or_create(&Read {
                read: read.to_owned(),
            })
            .inc_by(messages as u64);
    }

    /// Counts a gateway capture by its outcome (`stored`, `unchanged`, `branched`, `failed`)
    /// and how long it took; `None` for one skipped as a repeat, which took no capture.
    pub fn capture(&self, outcome: &str, took: Option<std::time::Duration>) {
        self.captures
            .get_or_create(&Outcome {
                outcome: outcome.to_owned(),
            })
            .inc();
        if let Some(took) = took {
            self.capture_seconds.observe(took.as_secs_f64());
        }
    }

    /// Counts a cache outcome (`hit`, `miss`, `coalesced`, `bypass`).
    pub fn cache(&self, outcome: &str) {
        self.cache
            .get_or_create(&Outcome {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts a ledger conflict by its code.
    pub fn ledger_conflict(&self, code: &str) {
        self.ledger_conflicts
            .get_or_create(&Code {
                code: code.to_owned(),
            })
            .inc();
    }

    /// Counts a compaction by outcome.
    pub fn compaction(&self, outcome: &str) {
        self.compactions
            .get_or_create(&Outcome {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Adds tokens saved by `source` (`cache`, `compaction`).
    pub fn tokens_saved(&self, source: &str, tokens: u64) {
        self.tokens_saved
            .get_or_create(&Source {
                source: source.to_owned(),
            })
            .inc_by(tokens);
    }

    /// The gauge of CPU work running on the blocking pool.
    pub fn blocking_tasks(&self) -> Gauge {
        self.blocking.clone()
    }

    /// The registry as Prometheus text.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// Middleware: counts and times every request under its route template.
pub async fn track(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    tracing::Span::current().record("route", route.as_str());
    let method = request.method().as_str().to_owned();
    let response = next.run(request).await;
    let metrics = &state.metrics;
    metrics
        .latency
        .get_or_create(&LatencyLabels {
            route: route.clone(),
            method: method.clone(),
        })
        .observe(started.elapsed().as_secs_f64());
    metrics
        .requests
        .get_or_create(&RequestLabels {
            route,
            method,
            status: response.status().as_u16(),
        })
        .inc();
    response
}

/// The registry in the Prometheus text format 0.0.4: OpenMetrics without its `# EOF` and
/// `# UNIT` lines, and with each counter's `# HELP`/`# TYPE` named as its samples are
/// (`…_total`), which is how the older format names a counter.
pub fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(line) => out.push_str(&line),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// `GET /metrics`.
pub async fn scrape(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    match state.metrics.encode() {
        Ok(text) => {
            let (text, content_type) = match openmetrics {
                true => (
                    text,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
                false => (
                    prometheus_text(&text),
                    "text/plain; version=0.0.4; charset=utf-8",
                ),
            };
            let mut response = Body::from(text).into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            response
        }
        Err(e) => Problem::internal(&e).into_response(),
    }
}
