//! One module per page; this one holds what they share.

pub mod auth;
pub mod duplicates;
pub mod growth;
pub mod run;
pub mod runs;
pub mod summaries;
pub mod usage;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use baton_core::RunId;
use serde::de::DeserializeOwned;

use crate::{BASE, Failure};

/// `/ui` itself: the runs.
pub async fn home() -> Redirect {
    Redirect::to(&format!("{BASE}/runs"))
}

/// A path under `/ui` that is no page.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    Failure::not_found(format!("no page at {}", uri.path())).into_response()
}

/// A page's query string, parsed; a bad one is a 400 page that says what was wrong.
pub struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Failure> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(t)| Params(t))
            .map_err(|e| Failure::bad(e.body_text()))
    }
}

/// A form's empty field is no value.
pub(crate) fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// The run a path names.
pub(crate) fn run_id(id: &str) -> Result<RunId, Failure> {
    RunId::new(id).map_err(|e| Failure::bad(format!("run id {id:?}: {e}")))
}

/// The link to a run's timeline at `seq`.
pub(crate) fn seq_link(run: &RunId, seq: u64) -> String {
    format!(
        "{BASE}/runs/{}?from={seq}#seq-{seq}",
        crate::layout::encode(run.as_str()),
    )
}
