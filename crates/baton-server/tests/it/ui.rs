//! The dashboard (`/ui`, issue 21) over real HTTP on both backends: who may see it (the open
//! tenant on a loopback `Host` only, a signed-in key's tenant, another tenant's run a 404), the
//! pages and their filters, the timeline's original equal to the API's, the summary diff equal
//! to its JSON twin, a stale activation shown as a conflict that writes nothing, a form from
//! another site refused, and a page's size bounded whatever its messages hold.

use baton_core::{RunId, TenantId};
use baton_server::Config;
use reqwest::header::{COOKIE, HOST, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect;
use serde_json::{Value, json};

use crate::on_both_backends;
use crate::support::{Backend, TestServer};

on_both_backends!(
    the_open_tenant_is_shown_on_loopback_only_and_a_key_signs_in,
    pages_render_filter_and_link_their_json_twins,
    the_original_and_the_diff_match_the_api,
    a_stale_activation_shows_the_conflict_and_writes_nothing,
    a_page_stays_under_a_megabyte_whatever_its_messages_hold,
);

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

async fn open_server(backend: Backend) -> TestServer {
    TestServer::with_config(
        backend,
        Config {
            ui_open_tenant: Some(acme()),
            ..Config::default()
        },
    )
    .await
}

/// A client that does not follow redirects, so a test sees them.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(redirect::Policy::none())
        .build()
        .unwrap()
}

/// GET `path` of the dashboard; the status and the HTML.
async fn page(server: &TestServer, path: &str) -> (u16, String) {
    let response = client().get(server.url(path)).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// Run `id` of `acme` with `n` messages: a user prompt, then assistant turns calling a tool
/// and its results.
async fn seed(server: &TestServer, id: &str, goal: &str, n: usize) {
    let (status, body) = server
        .post("/v1/runs", json!({"id": id, "goal": goal}))
        .await;
    assert_eq!(status, 201, "{body}");
    let mut messages = vec![json!({"role": "user", "content": format!("please {goal}")})];
    let mut i = 0;
    while messages.len() < n {
        i += 1;
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("step {i}")},
            {"type": "tool_use", "id": format!("t{i}"), "name": "grep", "input": {"pattern": format!("needle{i}")}},
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": format!("found needle{i} in src/lib.rs")},
        ]}));
    }
    let (status, body) = server
        .post(
            &format!("/v1/runs/{id}/messages"),
            json!({"messages": messages}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

async fn install(server: &TestServer, run: &str, base: Value, cut: u64, claims: Value) -> u64 {
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run}/summaries"),
            json!({"base": base, "cut": cut, "claims": claims}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_u64().unwrap()
}

async fn the_open_tenant_is_shown_on_loopback_only_and_a_key_signs_in(backend: Backend) {
    let server = open_server(backend).await;
    seed(&server, "fix-login", "fix the login bug", 5).await;
    let (status, html) = page(&server, "/ui/runs").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("fix-login"), "{html}");

    // A rebound DNS name pointing here is not loopback: no data, a sign-in instead.
    let response = client()
        .get(server.url("/ui/runs"))
        .header(HOST, "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()[LOCATION], "/ui/sign-in");

    // Without an open tenant, every visitor signs in; a bad key is refused.
    let closed = TestServer::start(backend).await;
    seed(&closed, "fix-login", "fix the login bug", 5).await;
    let response = client().get(closed.url("/ui/runs")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 303);
    let form = |key: &str| {
        client()
            .post(closed.url("/ui/sign-in"))
            .form(&[("key", key)])
            .send()
    };
    let refused = form("bk_000000000000_0000").await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    assert!(refused.headers().get(SET_COOKIE).is_none());
    let signed = form(&closed.key).await.unwrap();
    assert_eq!(signed.status().as_u16(), 303);
    let cookie = signed.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        !cookie.contains("Max-Age") && !cookie.contains("Expires"),
        "a session cookie: {cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let seen = client()
        .get(closed.url("/ui/runs"))
        .header(COOKIE, &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(seen.status().as_u16(), 200);
    assert!(seen.text().await.unwrap().contains("fix-login"));

    // Another tenant's key sees none of acme's runs, and not one by its id.
    let other = client()
        .post(closed.url("/ui/sign-in"))
        .form(&[("key", closed.other_key.as_str())])
        .send()
        .await
        .unwrap();
    let other_pair = other.headers()[SET_COOKIE].to_str().unwrap();
    let other_pair = other_pair.split(';').next().unwrap().to_owned();
    for path in ["/ui/runs", "/ui/runs/fix-login", "/ui/runs/fix-login/seq/1"] {
        let response = client()
            .get(closed.url(path))
            .header(COOKIE, &other_pair)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert!(
            !body.contains("please fix the login bug"),
            "{path} leaked: {body}"
        );
        if path != "/ui/runs" {
            assert_eq!(status, 404, "{path}");
        }
    }
    // A revoked key's cookie goes back to the sign-in page, which forgets it.
    let id = closed.key.split('_').nth(1).unwrap().to_owned();
    closed
        .store
        .revoke_api_keys(baton_store::Revoke::Id(&id), baton_core::Timestamp::now())
        .await
        .unwrap();
    let after = client()
        .get(closed.url("/ui/runs"))
        .header(COOKIE, &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status().as_u16(), 303);
    assert_eq!(after.headers()[LOCATION], "/ui/sign-in?expired=1");
}

async fn pages_render_filter_and_link_their_json_twins(backend: Backend) {
    let server = open_server(backend).await;
    seed(&server, "fix-login", "fix the login bug", 9).await;
    seed(&server, "add-cache", "add a cache", 5).await;
    install(
        &server,
        "fix-login",
        Value::Null,
        5,
        json!([{"kind": "goal", "text": "fix the login bug", "source_seq": 1}]),
    )
    .await;
    let (_, all) = page(&server, "/ui/runs").await;
    assert!(all.contains("fix-login") && all.contains("add-cache"));
    assert!(all.contains(r#"href="/v1/runs?"#), "the JSON twin: {all}");
    let (status, some) = page(&server, "/ui/runs?q=cache").await;
    assert_eq!(status, 200);
    assert!(
        some.contains("add-cache") && !some.contains("fix-login"),
        "{some}"
    );
    let (status, sorted) = page(&server, "/ui/runs?sort=messages").await;
    assert_eq!(status, 200);
    assert!(sorted.find("fix-login").unwrap() < sorted.find("add-cache").unwrap());
    let (status, reversed) = page(&server, "/ui/runs?sort=messages&order=asc").await;
    assert_eq!(status, 200);
    assert!(reversed.find("fix-login").unwrap() > reversed.find("add-cache").unwrap());
    for (bad, says) in [
        ("/ui/runs?sort=size", "sort \"size\""),
        ("/ui/runs?since=yesterday", "since \"yesterday\""),
        ("/ui/runs?page=9", "page 9"),
        ("/ui/runs?per=0", "per 0"),
        ("/ui/runs?color=red", "color"),
        ("/ui/usage?report=hourly", "report \"hourly\""),
        ("/ui/runs/fix-login/growth?strategy=magic", "magic"),
    ] {
        let (status, html) = page(&server, bad).await;
        assert_eq!(status, 400, "{bad}: {html}");
        assert!(html.contains(&says.replace('"', "&quot;")), "{bad}: {html}");
    }

    let (status, run) = page(&server, "/ui/runs/fix-login").await;
    assert_eq!(status, 200, "{run}");
    assert!(run.contains(r#"id="seq-9""#), "every message on the page");
    assert!(
        run.contains("class=\"band active\""),
        "the active summary's band"
    );
    assert!(run.contains("tool call <b>grep</b>"), "{run}");
    assert!(
        run.contains("/ui/runs/fix-login?from=1#seq-1"),
        "the claim's source link"
    );
    assert!(run.contains(r#"href="/v1/runs/fix-login""#));
    for path in [
        "/ui/runs/fix-login/summaries",
        "/ui/runs/fix-login/growth",
        "/ui/runs/fix-login/growth?strategy=sliding&compare=none,budget",
        "/ui/usage",
        "/ui/usage?report=blocks",
        "/ui/usage?report=session",
        "/ui/duplicates",
        "/ui/duplicates?tools=true",
        "/ui/assets/htmx.min.js",
        "/ui/assets/baton.css",
    ] {
        let (status, html) = page(&server, path).await;
        assert_eq!(status, 200, "{path}: {html}");
    }
    let (_, growth) = page(&server, "/ui/runs/fix-login/growth?compare=none").await;
    assert!(
        growth.contains(
            r#"hx-get="/ui/runs/fix-login/growth/chart?strategy=structured&amp;compare=none""#
        ),
        "the page loads its chart: {growth}"
    );
    let (status, chart) = page(&server, "/ui/runs/fix-login/growth/chart?compare=none").await;
    assert_eq!(status, 200, "{chart}");
    assert!(
        chart.contains("<svg") && chart.contains("compacted: none"),
        "{chart}"
    );
    let (status, _) = page(&server, "/ui/runs/fix-login/growth/chart?compare=magic").await;
    assert_eq!(status, 400);
    // Three strategies replayed side by side: the table keeps the order asked for, and each row
    // is what the API's report of that strategy alone says.
    let (status, chart) = page(
        &server,
        "/ui/runs/fix-login/growth/chart?strategy=sliding&compare=none,structured",
    )
    .await;
    assert_eq!(status, 200, "{chart}");
    let mut at = 0;
    for strategy in ["sliding", "none", "structured"] {
        let (status, alone) = server
            .get(&format!("/v1/runs/fix-login/growth?strategy={strategy}"))
            .await;
        assert_eq!(status, 200, "{alone}");
        let thousands = |v: &serde_json::Value| baton_usage::table::thousands(v.as_u64().unwrap());
        let row = format!(
            r#"<td>{strategy}</td><td class="num">{}</td><td class="num">{}</td>"#,
            thousands(&alone["full_total"]),
            thousands(&alone["context_total"])
        );
        let found = chart[at..]
            .find(&row)
            .unwrap_or_else(|| panic!("{row} after byte {at} of {chart}"));
        at += found + row.len();
    }
    let (_, tools) = page(&server, "/ui/duplicates?tools=true").await;
    assert!(tools.contains("grep"), "{tools}");
    let (status, html) = page(&server, "/ui/runs/nope").await;
    assert_eq!(status, 404, "{html}");
    let (status, _) = page(&server, "/ui/no-such-page").await;
    assert_eq!(status, 404);
}

/// The text of the first `<pre …>` element of `html`, unescaped.
fn first_pre(html: &str) -> String {
    let start = html.find("<pre").unwrap();
    let body = &html[start..];
    let body = &body[body.find('>').unwrap() + 1..body.find("</pre>").unwrap()];
    body.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

async fn the_original_and_the_diff_match_the_api(backend: Backend) {
    let server = open_server(backend).await;
    seed(&server, "r1", "ship <it> & \"go\"", 7).await;
    let (status, fragment) = page(&server, "/ui/runs/r1/seq/2").await;
    assert_eq!(status, 200, "{fragment}");
    let shown: Value = serde_json::from_str(&first_pre(&fragment)).unwrap();
    let (_, api) = server.get("/v1/runs/r1/messages/2").await;
    assert_eq!(shown, api, "the original is the API's message");
    let (status, _) = page(&server, "/ui/runs/r1/seq/99").await;
    assert_eq!(status, 404);

    let v1 = install(
        &server,
        "r1",
        Value::Null,
        3,
        json!([
            {"kind": "goal", "text": "ship it", "source_seq": 1},
            {"kind": "hypothesis", "text": "the cache is stale", "source_seq": 2},
            {"kind": "verified", "text": "grep finds needle1", "source_seq": 3},
        ]),
    )
    .await;
    let v2 = install(
        &server,
        "r1",
        json!(v1),
        5,
        json!([
            {"kind": "goal", "text": "ship it today", "source_seq": 1},
            {"kind": "verified", "text": "grep finds needle1", "source_seq": 3},
            {"kind": "next_step", "text": "release", "source_seq": 5},
        ]),
    )
    .await;
    let (status, diff) = page(&server, &format!("/ui/runs/r1/diff?from={v1}&to={v2}")).await;
    assert_eq!(status, 200, "{diff}");
    let (status, twin) = server
        .get(&format!("/v1/runs/r1/summaries/diff?from={v1}&to={v2}"))
        .await;
    assert_eq!(status, 200, "{twin}");
    assert_eq!(twin["added"][0]["text"], "release");
    assert_eq!(twin["dropped"][0]["text"], "the cache is stale");
    assert_eq!(twin["changed"][0]["before"]["text"], "ship it");
    assert_eq!(twin["changed"][0]["after"]["text"], "ship it today");
    assert_eq!(twin["unchanged"], 1);
    let section = |name: &str| {
        let at = diff.find(&format!("<h2>{name}</h2>")).unwrap();
        diff[at..].split("<h2>").nth(1).unwrap().to_owned()
    };
    assert!(section("Added").contains("release") && !section("Added").contains("stale"));
    assert!(section("Dropped").contains("the cache is stale"));
    assert!(section("Changed").contains("ship it today"));
    assert!(diff.contains(&format!("/v1/runs/r1/summaries/diff?from={v1}&amp;to={v2}")));
    // A version of another run is no side of this run's diff.
    seed(&server, "r2", "other", 3).await;
    let other = install(
        &server,
        "r2",
        Value::Null,
        1,
        json!([{"kind": "goal", "text": "x", "source_seq": 1}]),
    )
    .await;
    let (status, _) = page(&server, &format!("/ui/runs/r1/diff?from={v1}&to={other}")).await;
    assert_eq!(status, 404);
    let (status, _) = server
        .get(&format!("/v1/runs/r1/summaries/diff?from={v1}&to={other}"))
        .await;
    assert_eq!(status, 404);
}

async fn a_stale_activation_shows_the_conflict_and_writes_nothing(backend: Backend) {
    let server = open_server(backend).await;
    seed(&server, "r1", "ship", 7).await;
    let claims = json!([{"kind": "goal", "text": "ship", "source_seq": 1}]);
    let v1 = install(&server, "r1", Value::Null, 3, claims.clone()).await;
    let v2 = install(&server, "r1", json!(v1), 5, claims.clone()).await;
    // The page shows v2 active and offers v1.
    let (_, list) = page(&server, "/ui/runs/r1/summaries").await;
    assert!(
        list.contains(&format!(r#"name="base" value="{v2}""#)),
        "{list}"
    );
    // Meanwhile someone installs v3.
    let v3 = install(&server, "r1", json!(v2), 7, claims).await;
    let active = || async {
        server
            .store
            .run(&acme(), &RunId::new("r1").unwrap())
            .await
            .unwrap()
            .active_summary_id
            .map(|s| s.0)
    };
    let activate = |base: String, origin: Option<&'static str>| {
        let mut request = client()
            .post(server.url(&format!("/ui/runs/r1/summaries/{v1}/activate")))
            .form(&[("base", base)]);
        if let Some(origin) = origin {
            request = request.header(ORIGIN, origin);
        }
        request.send()
    };
    let stale = activate(v2.to_string(), None).await.unwrap();
    assert_eq!(stale.status().as_u16(), 409);
    let html = stale.text().await.unwrap();
    assert!(
        html.contains(&format!(
            "<b>v{v2}</b> as the active version, but <b>v{v3}</b> is active now"
        )),
        "{html}"
    );
    assert_eq!(active().await, Some(v3), "a lost race writes nothing");
    // A form from another site is refused before anything is read or written.
    let forged = activate(v3.to_string(), Some("http://evil.example"))
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 403);
    assert_eq!(active().await, Some(v3));
    // With the base the page now shows, it activates.
    let done = activate(v3.to_string(), None).await.unwrap();
    assert_eq!(done.status().as_u16(), 303);
    assert_eq!(active().await, Some(v1));
    let (_, list) = page(&server, "/ui/runs/r1/summaries?activated=1").await;
    assert!(list.contains("is now active"));
}

async fn a_page_stays_under_a_megabyte_whatever_its_messages_hold(backend: Backend) {
    let server = open_server(backend).await;
    let (status, _) = server.post("/v1/runs", json!({"id": "big"})).await;
    assert_eq!(status, 201);
    let blob = "0123456789abcdef".repeat(2_048); // 32 KiB a message
    let messages: Vec<Value> = (0..300)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("{i} {blob}")})
        })
        .collect();
    for batch in messages.chunks(100) {
        let (status, body) = server
            .post("/v1/runs/big/messages", json!({"messages": batch}))
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let mut from = 1;
    let mut seen = 0;
    while from <= 300 {
        let (status, html) = page(&server, &format!("/ui/runs/big?from={from}")).await;
        assert_eq!(status, 200);
        assert!(
            html.len() < 1_000_000,
            "page from {from}: {} bytes",
            html.len()
        );
        let shown = html.matches("<article").count();
        assert!(shown > 0, "a page shows at least one message");
        seen += shown;
        from += shown as u64;
        if from <= 300 {
            assert!(
                html.contains(&format!("?from={from}\" "))
                    || html.contains(&format!("?from={from}\"")),
                "the next page starts after the last shown"
            );
        }
    }
    assert_eq!(seen, 300, "the pages together show every message once");
}
