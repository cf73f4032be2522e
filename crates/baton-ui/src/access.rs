//! Who is looking: the signed-in key's tenant, or the open tenant on loopback (see the crate
//! docs), and whether a form comes from the dashboard itself.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use baton_core::TenantId;
use baton_store::keys::{KeyHash, well_formed};

use crate::{BASE, Failure, Ui};

/// The session cookie holding the signed-in key.
pub(crate) const COOKIE: &str = "baton_key";

/// The tenant a request may see.
#[derive(Clone, Debug)]
pub struct Viewer {
    /// The tenant.
    pub tenant: TenantId,
    /// Whether a key was signed in (else the open tenant is shown).
    pub signed_in: bool,
}

impl FromRequestParts<Arc<Ui>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, ui: &Arc<Ui>) -> Result<Self, Response> {
        if let Some(key) = cookie(&parts.headers, COOKIE) {
            if well_formed(key) {
                match ui.store.authenticate(&KeyHash::of(key)).await {
                    Ok(Some(found)) => {
                        return Ok(Viewer {
                            tenant: found.tenant,
                            signed_in: true,
                        });
                    }
                    Ok(None) => {}
                    Err(e) => return Err(Failure::from(e).into_response()),
                }
            }
            // A revoked or garbled key: sign in again (the sign-in page clears it).
            return Err(Redirect::to(&format!("{BASE}/sign-in?expired=1")).into_response());
        }
        match &ui.open_tenant {
            Some(tenant) if loopback_host(&parts.headers) => Ok(Viewer {
                tenant: tenant.clone(),
                signed_in: false,
            }),
            _ => Err(Redirect::to(&format!("{BASE}/sign-in")).into_response()),
        }
    }
}

/// The value of cookie `name`, if the request sends it.
pub(crate) fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether the request's `Host` names this machine's loopback (`localhost`, `127.0.0.1`,
/// `[::1]`, with any port): a page served for a rebound DNS name carries that name instead.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Refuses (403) a form the browser says another site sent: an `Origin` that is not this
/// host's, or `Sec-Fetch-Site: cross-site`/`same-site`. A client that sends neither header
/// (not a browser) is let through: it holds the key or the loopback already.
pub(crate) fn same_origin(headers: &HeaderMap) -> Result<(), Failure> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site")
        && !matches!(site, "same-origin" | "none")
    {
        return Err(forbidden());
    }
    if let Some(origin) = text("origin") {
        let host = text("host").unwrap_or("");
        let bare = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if bare != Some(host) {
            return Err(forbidden());
        }
    }
    Ok(())
}

fn forbidden() -> Failure {
    Failure {
        status: StatusCode::FORBIDDEN,
        message: "this form was sent from another site: nothing was changed".into(),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.append(*k, HeaderValue::from_static(v));
        }
        headers
    }

    #[test]
    fn only_loopback_names_are_loopback() {
        for host in [
            "localhost",
            "127.0.0.1:8080",
            "[::1]:9",
            "LOCALHOST:1",
            "127.1.2.3",
        ] {
            assert!(loopback_host(&with(&[("host", host)])), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:80",
            "10.0.0.1:80",
            "localhost.evil.example",
        ] {
            assert!(!loopback_host(&with(&[("host", host)])), "{host}");
        }
        assert!(!loopback_host(&HeaderMap::new()));
    }

    #[test]
    fn a_form_from_another_site_is_refused() {
        let ok = with(&[("host", "127.0.0.1:9"), ("origin", "http://127.0.0.1:9")]);
        assert!(same_origin(&ok).is_ok());
        assert!(same_origin(&with(&[("host", "127.0.0.1:9")])).is_ok());
        let other = with(&[("host", "127.0.0.1:9"), ("origin", "http://evil.example")]);
        assert!(same_origin(&other).is_err());
        let cross = with(&[("host", "127.0.0.1:9"), ("sec-fetch-site", "cross-site")]);
        assert!(same_origin(&cross).is_err());
    }

    #[test]
    fn cookies_are_found_by_name() {
        let headers = with(&[("cookie", "a=1; baton_key=bk_x_y; b=2")]);
        assert_eq!(cookie(&headers, COOKIE), Some("bk_x_y"));
        assert_eq!(cookie(&headers, "c"), None);
    }
}
