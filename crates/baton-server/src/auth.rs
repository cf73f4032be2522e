//! Who is calling: `Authorization: Bearer bk_…` names a key, the key names a tenant.
//!
//! Every route under `/v1/` takes a [`Caller`], so every store call it makes is scoped to the
//! key's tenant; no route takes a tenant from the path, the query or the body, so a request can
//! never name another tenant. A missing, malformed, unknown or revoked key is a 401 with the
//! same answer for each (the detail says which of "missing" or "not valid", never more).

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use baton_core::TenantId;
use baton_store::keys::{KeyHash, well_formed};

use crate::problem::Problem;
use crate::state::AppState;

/// The authenticated caller of a request.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The tenant every store call of the request acts for.
    pub tenant: TenantId,
    /// The public id of the key it used.
    pub key_id: String,
}

/// The bearer token of `headers`, if there is one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Finds the live key `presented` names; a 401 when there is none.
pub async fn authenticate(state: &AppState, presented: Option<&str>) -> Result<Caller, Problem> {
    let Some(key) = presented else {
        return Err(Problem::unauthorized(
            "no API key: send `Authorization: Bearer <key>` (make one with `baton keys create --tenant T`)",
        ));
    };
    let invalid = || Problem::unauthorized("the API key is not valid (unknown or revoked)");
    if !well_formed(key) {
        return Err(invalid());
    }
    match state.store.authenticate(&KeyHash::of(key)).await? {
        Some(found) => Ok(Caller {
            tenant: found.tenant,
            key_id: found.id,
        }),
        None => Err(invalid()),
    }
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let caller = authenticate(state, bearer(&parts.headers)).await?;
        tracing::Span::current().record("tenant", caller.tenant.as_str());
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}
