//! baton's web dashboard, served by `baton serve` under `/ui`.
//!
//! Pages are rendered on the server ([`maud`] templates, charts as SVG drawn here), so a page
//! is one request and works without script; the one script is a vendored htmx
//! (`assets/htmx-2.0.11.min.js`, 0BSD), which loads a message's original into the timeline on
//! click. Nothing is fetched from elsewhere: no CDN, no Node build.
//!
//! - [`pages::runs`]: the tenant's runs, filtered, sorted, paginated;
//! - [`pages::run`]: a run's timeline, its summary versions as coverage bands over the seq
//!   axis, pins, the working state with each claim linked to its source seq, and the next
//!   call's context by part;
//! - [`pages::summaries`]: a run's versions, one version's claims, the diff of two, and
//!   activating a version by compare-and-swap (a lost race shows the conflict);
//! - [`pages::growth`]: a run's input tokens per model call, whole transcript against
//!   compacted, strategies side by side, with the usage the provider reported;
//! - [`pages::usage`] and [`pages::duplicates`]: the usage and duplicate-work reports.
//!
//! Every page links its JSON twin under `/v1/` (the same views, from `baton-view` and
//! `baton-reports`), and keeps its state in the URL's query, so a link shows what its sender
//! saw.
//!
//! # Who sees what
//!
//! A page shows one tenant's data. With a signed-in key (`/ui/sign-in`: the key is kept in an
//! `HttpOnly`, `SameSite=Strict` session cookie scoped to `/ui`, gone when the browser closes)
//! it is the key's tenant. Without one, [`Ui::open_tenant`] (set by `baton serve` when it
//! listens on loopback only) is shown, and only to requests whose `Host` is a loopback name,
//! so a page on another site that rebinds its DNS name to 127.0.0.1 gets nothing. Otherwise the
//! visitor is sent to sign in. A form that changes something (activating a summary, signing in
//! or out) is refused when the browser says it comes from another site (`Origin`,
//! `Sec-Fetch-Site`).

mod access;
mod layout;
pub mod pages;
mod svg;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use baton_core::prices::PriceTable;
use baton_core::{RunId, Seq, TenantId};
use baton_store::Store;
use baton_view::GrowthReport;

pub use access::Viewer;

/// Where the dashboard is mounted; every link it draws starts with it.
pub const BASE: &str = "/ui";

/// What the dashboard serves from.
pub struct Ui {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The tenant shown to a visitor who has not signed in, on a loopback `Host` only; `None`:
    /// every visitor signs in with a key.
    pub open_tenant: Option<TenantId>,
    /// The prices costs are shown at.
    pub prices: PriceTable,
    /// Growth replays already made, by run, length and strategy (see [`Ui::new`]).
    growth: Mutex<HashMap<GrowthKey, GrowthReport>>,
}

/// What a growth replay depends on: a run that grew is replayed again.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GrowthKey {
    pub tenant: TenantId,
    pub run: RunId,
    pub last: Seq,
    pub strategy: String,
    pub budget: Option<u64>,
}

/// Growth replays the memo keeps; past it, it starts over (the cheapest bound that never
/// grows with the store).
const GROWTH_MEMO: usize = 64;

impl Ui {
    /// The dashboard over `store`. A run's growth replay (CPU work that grows with the run)
    /// is kept while the run does not grow, so a second look costs nothing; the tokenizer
    /// vocabularies it counts with start loading now, so the first look does not wait for them.
    pub fn new(store: Arc<dyn Store>, open_tenant: Option<TenantId>, prices: PriceTable) -> Self {
        baton_reports::preload();
        Ui {
            store,
            open_tenant,
            prices,
            growth: Mutex::default(),
        }
    }

    pub(crate) fn growth_memo(&self, key: &GrowthKey) -> Option<GrowthReport> {
        let memo = self.growth.lock().unwrap_or_else(PoisonError::into_inner);
        memo.get(key).cloned()
    }

    pub(crate) fn remember_growth(&self, key: GrowthKey, report: GrowthReport) {
        let mut memo = self.growth.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.len() >= GROWTH_MEMO {
            memo.clear();
        }
        memo.insert(key, report);
    }
}

/// The dashboard's routes, relative to [`BASE`] (mount with `nest_service(BASE, …)`).
pub fn router(ui: Ui) -> Router {
    Router::new()
        .route("/", get(pages::home))
        .route(
            "/sign-in",
            get(pages::auth::form).post(pages::auth::sign_in),
        )
        .route("/sign-out", post(pages::auth::sign_out))
        .route("/runs", get(pages::runs::page))
        .route("/runs/{id}", get(pages::run::page))
        .route("/runs/{id}/seq/{seq}", get(pages::run::original))
        .route("/runs/{id}/summaries", get(pages::summaries::list))
        .route("/runs/{id}/summaries/{sid}", get(pages::summaries::version))
        .route(
            "/runs/{id}/summaries/{sid}/activate",
            post(pages::summaries::activate),
        )
        .route("/runs/{id}/diff", get(pages::summaries::diff))
        .route("/runs/{id}/growth", get(pages::growth::page))
        .route("/runs/{id}/growth/chart", get(pages::growth::chart))
        .route("/usage", get(pages::usage::page))
        .route("/duplicates", get(pages::duplicates::page))
        .route("/assets/htmx.min.js", get(htmx))
        .route("/assets/baton.css", get(css))
        .fallback(pages::not_found)
        .with_state(Arc::new(ui))
}

/// The vendored htmx, cached for a day (its name carries no version, its content does).
async fn htmx() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../assets/htmx-2.0.11.min.js"),
    )
}

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../assets/baton.css"),
    )
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        body,
    )
        .into_response()
}

/// A page that could not be shown: its status and what to tell the visitor.
#[derive(Debug)]
pub struct Failure {
    status: StatusCode,
    message: String,
}

impl Failure {
    /// A 400: the request (a filter, a page number) is wrong, as `message` says.
    pub fn bad(message: impl Into<String>) -> Self {
        Failure {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// A 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Failure {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }
}

impl From<baton_store::Error> for Failure {
    fn from(e: baton_store::Error) -> Self {
        use baton_store::ErrorKind;
        let status = match e.kind() {
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Invalid => StatusCode::BAD_REQUEST,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %e, "dashboard: store error");
            return Failure {
                status,
                message: "the store failed; the server's log says why".into(),
            };
        }
        Failure {
            status,
            message: e.to_string(),
        }
    }
}

impl From<baton_reports::Error> for Failure {
    fn from(e: baton_reports::Error) -> Self {
        match e {
            baton_reports::Error::Invalid(m) => Failure::bad(m),
            baton_reports::Error::Store(e) => e.into(),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error").to_owned();
        let body = layout::page(
            &title,
            None,
            None,
            maud::html! {
                h1 { (self.status.as_u16()) " " (title) }
                p.problem { (self.message) }
                p { a href={ (BASE) "/runs" } { "Back to the runs" } }
            },
        );
        (self.status, body).into_response()
    }
}
