//! Signing in with an API key, and out. The key lives in a session cookie (no expiry: gone
//! when the browser closes), `HttpOnly` so no script reads it, `SameSite=Strict` and scoped to
//! the dashboard's path.

use std::sync::Arc;

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use baton_store::keys::{KeyHash, well_formed};
use maud::html;
use serde::Deserialize;

use super::Params;
use crate::access::{COOKIE, cookie, same_origin};
use crate::{BASE, Failure, Ui, layout};

/// Why the sign-in page is shown.
#[derive(Debug, Default, Deserialize)]
pub struct Shown {
    /// The signed-in key stopped working (revoked).
    pub expired: Option<String>,
}

/// The sign-in form.
pub async fn form(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Params(shown): Params<Shown>,
) -> Response {
    let stale = cookie(&headers, COOKIE).is_some() && shown.expired.is_some();
    let page = sign_in_page(
        &ui,
        stale.then_some("The key this browser signed in with is no longer valid."),
    );
    if stale {
        // Forget the dead key, so the next page does not come back here.
        return ([(header::SET_COOKIE, clear_cookie())], page).into_response();
    }
    page.into_response()
}

fn sign_in_page(ui: &Ui, problem: Option<&str>) -> maud::Markup {
    layout::page(
        "Sign in",
        None,
        None,
        html! {
            h1 { "Sign in" }
            @if let Some(problem) = problem { p.problem { (problem) } }
            p { "Paste an API key (" code { "baton keys create --tenant T" } "). The dashboard shows that key's tenant; the key stays in this browser session only." }
            @if ui.open_tenant.is_some() {
                p.muted { "On this machine the dashboard also opens without a key, for the local tenant: " a href={ (BASE) "/runs" } { "go to the runs" } "." }
            }
            form method="post" action={ (BASE) "/sign-in" } {
                input type="password" name="key" autocomplete="off" size="70" placeholder="bk_…" required;
                " "
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// The form's fields.
#[derive(Debug, Deserialize)]
pub struct Key {
    key: String,
}

/// Checks the key; on success sets the session cookie and goes to the runs.
pub async fn sign_in(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Form(form): Form<Key>,
) -> Result<Response, Failure> {
    same_origin(&headers)?;
    let key = form.key.trim();
    let found = if well_formed(key) {
        ui.store.authenticate(&KeyHash::of(key)).await?
    } else {
        None
    };
    if found.is_none() {
        let page = sign_in_page(
            &ui,
            Some("That key is not valid (unknown, revoked or mistyped)."),
        );
        return Ok((StatusCode::UNAUTHORIZED, page).into_response());
    }
    let cookie = format!("{COOKIE}={key}; Path={BASE}; HttpOnly; SameSite=Strict");
    Ok((
        [(header::SET_COOKIE, cookie)],
        Redirect::to(&format!("{BASE}/runs")),
    )
        .into_response())
}

/// Forgets the key.
pub async fn sign_out(headers: HeaderMap) -> Result<Response, Failure> {
    same_origin(&headers)?;
    Ok((
        [(header::SET_COOKIE, clear_cookie())],
        Redirect::to(&format!("{BASE}/sign-in")),
    )
        .into_response())
}

fn clear_cookie() -> String {
    format!("{COOKIE}=; Path={BASE}; HttpOnly; SameSite=Strict; Max-Age=0")
}
