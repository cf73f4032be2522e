//! History over HTTP: appending Anthropic and OpenAI messages, paging, recall, search, and the
//! assembled context with its tokens and vendor renderings.

use baton_core::{Role, RunId, Seq, TenantId};
use reqwest::Method;
use serde_json::{Value, json};

use crate::on_both_backends;
use crate::support::{Backend, TestServer, assert_problem, send};

on_both_backends!(
    messages_of_both_shapes_are_appended_paged_and_recalled,
    a_bad_batch_appends_nothing,
    search_finds_originals_and_refuses_bad_queries,
    context_has_its_parts_tokens_and_vendor_renderings,
);

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn rid(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

/// Creates run `id` as `acme`.
async fn create_run(server: &TestServer, id: &str, goal: Option<&str>, rules: Option<&str>) {
    let (status, body) = server
        .post("/v1/runs", json!({"id": id, "goal": goal, "rules": rules}))
        .await;
    assert_eq!(status, 201, "{body}");
}

/// Appends `messages` (format auto) to `run`; returns the seqs.
async fn append(server: &TestServer, run: &str, messages: Value) -> Vec<u64> {
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run}/messages"),
            json!({"messages": messages}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    body["seqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect()
}

async fn last_seq(server: &TestServer, run: &str) -> u64 {
    server
        .store
        .run(&acme(), &rid(run))
        .await
        .unwrap()
        .last_seq
        .0
}

async fn messages_of_both_shapes_are_appended_paged_and_recalled(backend: Backend) {
    let server = TestServer::start(backend).await;
    create_run(&server, "r1", None, None).await;
    // Anthropic: a question, a tool call, its result.
    let seqs = append(
        &server,
        "r1",
        json!([
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Cargo.toml\nsrc"},
            ]},
        ]),
    )
    .await;
    assert_eq!(seqs, [1, 2, 3]);
    // OpenAI, said explicitly: a call and its `tool` message.
    let (status, body) = server
        .post(
            "/v1/runs/r1/messages",
            json!({
                "format": "openai",
                "tokenizer": "bytes",
                "messages": [
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_9", "type": "function",
                         "function": {"name": "cat", "arguments": "{\"path\":\"Cargo.toml\"}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_9", "content": "[package]"},
                ],
            }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["seqs"], json!([4, 5]));
    assert!(
        body["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.as_u64() > Some(0))
    );

    // The store holds baton's model of each, with the counts the response named.
    let stored = server
        .store
        .read_range(&acme(), &rid("r1"), Seq(1), None)
        .await
        .unwrap();
    let roles: Vec<Role> = stored.iter().map(|e| e.message.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::Tool
        ]
    );
    assert_eq!(
        stored[3].message.tool_use_ids().collect::<Vec<_>>(),
        ["call_9"]
    );
    assert_eq!(body["tokens"], json!([stored[3].tokens, stored[4].tokens]));

    // The whole history, then pages.
    let (status, page) = server.get("/v1/runs/r1/messages").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["messages"].as_array().unwrap().len(), 5);
    assert_eq!(page["next_from"], Value::Null);
    assert_eq!(page["messages"][1]["role"], "assistant");
    assert_eq!(page["messages"][1]["content"][1]["type"], "tool_use");
    assert_eq!(page["messages"][1]["content"][1]["id"], "toolu_1");
    let seqs_of = |page: &Value| -> Vec<u64> {
        page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["seq"].as_u64().unwrap())
            .collect()
    };
    let (_, page) = server.get("/v1/runs/r1/messages?limit=2").await;
    assert_eq!(seqs_of(&page), [1, 2]);
    assert_eq!(page["next_from"], 3);
    let (_, page) = server.get("/v1/runs/r1/messages?from=3&limit=2").await;
    assert_eq!(seqs_of(&page), [3, 4]);
    assert_eq!(page["next_from"], 5);
    let (_, page) = server.get("/v1/runs/r1/messages?from=5&limit=2").await;
    assert_eq!(seqs_of(&page), [5]);
    assert_eq!(page["next_from"], Value::Null);
    let (_, page) = server.get("/v1/runs/r1/messages?from=2&to=3").await;
    assert_eq!(seqs_of(&page), [2, 3]);
    assert_eq!(page["next_from"], Value::Null);
    let (_, page) = server.get("/v1/runs/r1/messages?from=2&to=3&limit=1").await;
    assert_eq!(seqs_of(&page), [2]);
    assert_eq!(page["next_from"], 3);
    let (_, page) = server.get("/v1/runs/r1/messages?from=99").await;
    assert_eq!(seqs_of(&page), Vec::<u64>::new());

    // Recall one original in full.
    let (status, one) = server.get("/v1/runs/r1/messages/5").await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["role"], "tool");
    assert_eq!(one["content"][0]["type"], "tool_result");
    assert_eq!(one["content"][0]["tool_use_id"], "call_9");
    assert_eq!(one["content"][0]["content"][0]["text"], "[package]");
    assert!(one["created_at"].as_str().is_some());
    assert_problem(
        &server.get("/v1/runs/r1/messages/6").await,
        404,
        "not-found",
    );
    assert_problem(
        &server.get("/v1/runs/r1/messages/0").await,
        404,
        "not-found",
    );
    assert_problem(
        &server.get("/v1/runs/r1/messages/notanumber").await,
        400,
        "bad-request",
    );

    // Bad parameters are problems.
    for bad in ["limit=0", "limit=1001", "from=0", "from=-1", "form=1"] {
        assert_problem(
            &server.get(&format!("/v1/runs/r1/messages?{bad}")).await,
            400,
            "bad-request",
        );
    }
    // Unknown runs, and another tenant's run, do not exist.
    assert_problem(
        &server.get("/v1/runs/nope/messages").await,
        404,
        "not-found",
    );
    assert_problem(
        &server.get("/v1/runs/nope/messages/1").await,
        404,
        "not-found",
    );
    let theirs = send(
        server
            .client
            .get(server.url("/v1/runs/r1/messages/1"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    let theirs = send(
        server
            .client
            .get(server.url("/v1/runs/r1/messages"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    server.stop().await;
}

async fn a_bad_batch_appends_nothing(backend: Backend) {
    let server = TestServer::start(backend).await;
    create_run(&server, "r1", None, None).await;

    // One bad message in the middle: the batch is refused, naming it.
    let bad = server
        .post(
            "/v1/runs/r1/messages",
            json!({"messages": [
                {"role": "user", "content": "fine"},
                {"role": "user", "content": [{"type": "image", "url": "x"}]},
                {"role": "assistant", "content": "also fine"},
            ]}),
        )
        .await;
    assert_problem(&bad, 422, "invalid-message");
    assert_eq!(bad.1["index"], 1);
    assert!(
        bad.1["detail"].as_str().unwrap().contains("messages[1]"),
        "{}",
        bad.1
    );
    // An Anthropic block sent as OpenAI, and a role neither shape has.
    let wrong_shape = server
        .post(
            "/v1/runs/r1/messages",
            json!({"format": "openai", "messages": [
                {"role": "user", "content": "ok"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
            ]}),
        )
        .await;
    assert_problem(&wrong_shape, 422, "invalid-message");
    assert_eq!(wrong_shape.1["index"], 1);
    let no_role = server
        .post(
            "/v1/runs/r1/messages",
            json!({"messages": [{"role": "narrator", "content": "x"}]}),
        )
        .await;
    assert_problem(&no_role, 422, "invalid-message");
    assert_eq!(no_role.1["index"], 0);

    // An empty batch, a bad body, an unknown field, an unknown format or tokenizer.
    assert_problem(
        &server
            .post("/v1/runs/r1/messages", json!({"messages": []}))
            .await,
        400,
        "bad-request",
    );
    let raw = |body: &'static str| {
        send(
            server
                .req(Method::POST, "/v1/runs/r1/messages")
                .header("content-type", "application/json")
                .body(body),
        )
    };
    assert_problem(&raw("{\"messages\": [").await, 400, "invalid-json");
    assert_problem(
        &raw("{\"messages\": [{\"role\":\"user\",\"content\":\"x\"}], \"extra\": 1}").await,
        422,
        "invalid-body",
    );
    assert_problem(
        &raw("{\"messages\": [{\"role\":\"user\",\"content\":\"x\"}], \"format\": \"gemini\"}")
            .await,
        422,
        "invalid-body",
    );
    assert_problem(
        &raw("{\"messages\": [{\"role\":\"user\",\"content\":\"x\"}], \"tokenizer\": \"p50k\"}")
            .await,
        422,
        "invalid-body",
    );
    assert_problem(&raw("{}").await, 422, "invalid-body");
    let text = send(
        server
            .req(Method::POST, "/v1/runs/r1/messages")
            .header("content-type", "text/plain")
            .body("{\"messages\": []}"),
    )
    .await;
    assert_problem(&text, 415, "unsupported-media-type");
    assert_eq!(last_seq(&server, "r1").await, 0);

    // Unknown run, another tenant's run, a bad id.
    let one = json!({"messages": [{"role": "user", "content": "hi"}]});
    assert_problem(
        &server.post("/v1/runs/nope/messages", one.clone()).await,
        404,
        "not-found",
    );
    let theirs = send(
        server
            .client
            .post(server.url("/v1/runs/r1/messages"))
            .bearer_auth(&server.other_key)
            .json(&one),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    assert_problem(
        &server.post("/v1/runs/bad%20id/messages", one.clone()).await,
        400,
        "bad-request",
    );
    assert_eq!(last_seq(&server, "r1").await, 0);

    // A cancelled run takes nothing.
    assert_eq!(
        append(&server, "r1", json!([{"role": "user", "content": "first"}])).await,
        [1]
    );
    assert_eq!(server.post("/v1/runs/r1/cancel", json!({})).await.0, 200);
    assert_problem(
        &server.post("/v1/runs/r1/messages", one).await,
        409,
        "run-not-active",
    );
    assert_eq!(last_seq(&server, "r1").await, 1);
    server.stop().await;
}

async fn search_finds_originals_and_refuses_bad_queries(backend: Backend) {
    let server = TestServer::start(backend).await;
    create_run(&server, "r1", None, None).await;
    append(
        &server,
        "r1",
        json!([
            {"role": "user", "content": "the database times out on Friday"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "timeout", "path": "src/db.rs"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "src/db.rs:12: let timeout = 30;"},
            ]},
            {"role": "assistant", "content": "The database timeout is 30 seconds."},
        ]),
    )
    .await;
    let seqs = |body: &Value| -> Vec<u64> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["seq"].as_u64().unwrap())
            .collect()
    };
    let (status, found) = server.get("/v1/runs/r1/search?q=database").await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(seqs(&found), [1, 4]);
    let (_, found) = server.get("/v1/runs/r1/search?q=db.rs").await;
    assert_eq!(seqs(&found), [2, 3]);
    let (_, found) = server
        .get("/v1/runs/r1/search?q=db.rs&kind=tool_result")
        .await;
    assert_eq!(seqs(&found), [3]);
    assert_eq!(found["messages"][0]["content"][0]["type"], "tool_result");
    let (_, found) = server.get("/v1/runs/r1/search?q=grep&kind=tool_use").await;
    assert_eq!(seqs(&found), [2]);
    let (_, found) = server.get("/v1/runs/r1/search?q=database&limit=1").await;
    assert_eq!(seqs(&found), [1]);
    let (_, found) = server
        .get("/v1/runs/r1/search?q=nowhere%20to%20be%20found")
        .await;
    assert_eq!(seqs(&found), Vec::<u64>::new());

    // A summary covering the messages hides nothing from recall.
    let (status, body) = server
        .post(
            "/v1/runs/r1/summaries",
            json!({"base": null, "cut": 3, "claims": [
                {"kind": "verified", "text": "timeout is 30", "source_seq": 3},
            ]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (_, found) = server.get("/v1/runs/r1/search?q=database").await;
    assert_eq!(seqs(&found), [1, 4]);

    // A query the store cannot run (no words) is invalid (422); parameters that cannot be
    // read (a limit of 0 or too large, an unknown kind, no q) are 400.
    assert_problem(
        &server.get("/v1/runs/r1/search?q=%21%21%21").await,
        422,
        "invalid-request",
    );
    for bad in [
        "q=database&limit=0",
        "q=database&limit=5000",
        "q=database&kind=image",
        "kind=text",
    ] {
        assert_problem(
            &server.get(&format!("/v1/runs/r1/search?{bad}")).await,
            400,
            "bad-request",
        );
    }
    assert_problem(
        &server.get("/v1/runs/nope/search?q=database").await,
        404,
        "not-found",
    );
    let theirs = send(
        server
            .client
            .get(server.url("/v1/runs/r1/search?q=database"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    server.stop().await;
}

async fn context_has_its_parts_tokens_and_vendor_renderings(backend: Backend) {
    let server = TestServer::start(backend).await;
    create_run(
        &server,
        "r1",
        Some("fix the flaky test"),
        Some("never push to main"),
    )
    .await;
    append(
        &server,
        "r1",
        json!([
            {"role": "user", "content": "keep it read-only"},
            {"role": "assistant", "content": "Understood, I will only read."},
            {"role": "user", "content": "what does the test do?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "tests/flaky.rs"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "sleep(10ms); assert!(done)"},
            ]},
        ]),
    )
    .await;
    let sum_parts = |t: &Value| {
        ["preamble", "summary", "pinned", "messages"]
            .iter()
            .map(|k| t[k].as_u64().unwrap())
            .sum::<u64>()
    };

    // No summary: the preamble holds rules and goal, the messages every message.
    let (status, ctx) = server.get("/v1/runs/r1/context").await;
    assert_eq!(status, 200, "{ctx}");
    assert_eq!(ctx["summary"], Value::Null);
    assert_eq!(ctx["goal"], "fix the flaky test");
    assert_eq!(ctx["messages"].as_array().unwrap().len(), 5);
    assert!(
        ctx["preamble"]
            .as_str()
            .unwrap()
            .contains("never push to main")
    );
    let tokens = &ctx["tokens"];
    assert!(tokens["preamble"].as_u64().unwrap() > 0);
    assert_eq!(tokens["summary"], 0);
    assert_eq!(tokens["pinned"], 0);
    assert_eq!(sum_parts(tokens), tokens["total"].as_u64().unwrap());
    let stored = server.store.context(&acme(), &rid("r1")).await.unwrap();
    assert_eq!(tokens["total"], stored.tokens);
    assert_eq!(
        tokens["messages"],
        stored
            .messages
            .iter()
            .map(|e| u64::from(e.tokens))
            .sum::<u64>()
    );

    // A summary through seq 2 and a pin on seq 1: the summary replaces 1..=2, the pin is
    // carried whole.
    let (status, body) = server
        .post(
            "/v1/runs/r1/summaries",
            json!({"base": null, "cut": 2, "claims": [
                {"kind": "constraint", "text": "read-only", "source_seq": 1},
            ]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let sid = body["id"].as_u64().unwrap();
    assert_eq!(
        send(server.req(Method::PUT, "/v1/runs/r1/pins/1")).await.0,
        200
    );
    let (_, ctx) = server.get("/v1/runs/r1/context").await;
    assert_eq!(ctx["summary"]["id"], sid);
    assert_eq!(ctx["summary"]["coverage"], 2);
    assert_eq!(ctx["summary"]["claims"][0]["kind"], "constraint");
    assert_eq!(ctx["pinned"][0]["seq"], 1);
    let seqs: Vec<u64> = ctx["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [3, 4, 5]);
    let tokens = &ctx["tokens"];
    assert!(tokens["summary"].as_u64().unwrap() > 0, "{tokens}");
    assert!(tokens["pinned"].as_u64().unwrap() > 0, "{tokens}");
    assert_eq!(sum_parts(tokens), tokens["total"].as_u64().unwrap());
    assert_eq!(
        tokens["total"],
        server
            .store
            .context(&acme(), &rid("r1"))
            .await
            .unwrap()
            .tokens
    );
    assert_eq!(ctx["rendered"], Value::Null);

    // Rendered for Anthropic: the preamble is the system text, the tool result a user message.
    let (status, ctx) = server.get("/v1/runs/r1/context?format=anthropic").await;
    assert_eq!(status, 200, "{ctx}");
    let rendered = &ctx["rendered"];
    assert_eq!(rendered["format"], "anthropic");
    assert!(rendered["system"].as_str().unwrap().contains("# Goal"));
    let messages = rendered["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    // For OpenAI: the preamble is the first message, the result a `tool` message.
    let (_, ctx) = server.get("/v1/runs/r1/context?format=openai").await;
    let rendered = &ctx["rendered"];
    assert_eq!(rendered["system"], Value::Null);
    let messages = rendered["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "t1");
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "t1");

    assert_problem(
        &server.get("/v1/runs/r1/context?format=gemini").await,
        400,
        "bad-request",
    );
    assert_problem(&server.get("/v1/runs/nope/context").await, 404, "not-found");
    let theirs = send(
        server
            .client
            .get(server.url("/v1/runs/r1/context"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    server.stop().await;
}
