//! The page shell every page shares, and small formatting helpers.

use maud::{DOCTYPE, Markup, html};

use crate::{BASE, Viewer};

/// A whole page: `title`, the navigation (with who is looking), a link to the page's JSON
/// twin when it has one, and `body`.
pub(crate) fn page(
    title: &str,
    viewer: Option<&Viewer>,
    json: Option<&str>,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · baton" }
                // No icon to fetch: the browser would ask the server root for /favicon.ico.
                link rel="icon" href="data:,";
                link rel="stylesheet" href={ (BASE) "/assets/baton.css" };
                script src={ (BASE) "/assets/htmx.min.js" } defer {}
            }
            body {
                nav.top {
                    a.brand href={ (BASE) "/runs" } { "baton" }
                    a href={ (BASE) "/runs" } { "Runs" }
                    a href={ (BASE) "/usage" } { "Usage" }
                    a href={ (BASE) "/duplicates" } { "Duplicate work" }
                    span.spacer {}
                    @if let Some(json) = json {
                        a.json href=(json) title="The same view as JSON, from the API" { "JSON" }
                    }
                    @match viewer {
                        Some(v) if v.signed_in => {
                            span.who { "tenant " b { (v.tenant.as_str()) } }
                            form.inline method="post" action={ (BASE) "/sign-out" } {
                                button type="submit" { "Sign out" }
                            }
                        }
                        Some(v) => {
                            span.who { "tenant " b { (v.tenant.as_str()) } " (local)" }
                            a href={ (BASE) "/sign-in" } { "Sign in with a key" }
                        }
                        None => {}
                    }
                }
                main { (body) }
            }
        }
    }
}

/// `n` with thousands separators, as the usage tables show it.
pub(crate) fn count(n: u64) -> String {
    baton_usage::table::thousands(n)
}

/// Dollars, to the cent (to a tenth of a cent under a dollar).
pub(crate) fn dollars(x: f64) -> String {
    if x < 1.0 {
        format!("${x:.3}")
    } else {
        format!("${x:.2}")
    }
}

/// A time as `YYYY-MM-DD HH:MM` UTC.
pub(crate) fn when(t: baton_core::Timestamp) -> String {
    let text = t.to_string();
    // RFC 3339 with milliseconds: `2026-12-02T10:00:00.000Z`.
    match (text.get(..10), text.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time}"),
        _ => text,
    }
}

/// `text` cut to `n` characters, with an ellipsis when it was longer.
pub(crate) fn cut(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A query string from `pairs`, leaving out empty values; `?` first when not empty.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        out.push(if out.is_empty() { '?' } else { '&' });
        out.push_str(k);
        out.push('=');
        out.push_str(&encode(v));
    }
    out
}

/// `text` percent-encoded for a query value.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/' | b':') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_queries_read_well() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(100), "100");
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hi", 2), "hi");
        assert_eq!(
            query(&[("a", "x y&"), ("b", ""), ("c", "1")]),
            "?a=x%20y%26&c=1"
        );
        assert_eq!(query(&[("a", "")]), "");
    }
}
