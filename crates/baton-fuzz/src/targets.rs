//! The pure targets: functions over bytes that must never panic, whatever the bytes.

use std::collections::BTreeMap;

use baton_core::key::{KeyInput, canonical_json, request_key};
use baton_core::{ContentBlock, Message, TenantId};
use serde_json::Value;

/// A target: a name, the folder of its seeds under `seeds/`, and the function to run.
pub struct Target {
    /// Its name in the report.
    pub name: &'static str,
    /// Its seeds' folder.
    pub seeds: &'static str,
    /// What runs on one input.
    pub run: fn(&[u8]),
}

/// Every pure target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "import",
        seeds: "import",
        run: import,
    },
    Target {
        name: "message",
        seeds: "message",
        run: message,
    },
    Target {
        name: "request",
        seeds: "request",
        run: request,
    },
    Target {
        name: "response",
        seeds: "response",
        run: response,
    },
    Target {
        name: "stream",
        seeds: "stream",
        run: stream,
    },
    Target {
        name: "request-key",
        seeds: "request",
        run: key,
    },
];

/// Every importer: format detection, then parsing under every format (not only the one
/// detected), then redaction of what parsed.
fn import(bytes: &[u8]) {
    let _ = baton_import::detect(bytes);
    for format in baton_import::Format::ALL {
        if let Ok(transcripts) = baton_import::parse(format, bytes) {
            for mut t in transcripts {
                t.redact();
            }
        }
    }
}

/// The message and content-block parsers: the core model's serde form, both vendors' message
/// shapes; what parses is rendered back and parsed again.
fn message(bytes: &[u8]) {
    let _ = serde_json::from_slice::<Message>(bytes);
    let _ = serde_json::from_slice::<ContentBlock>(bytes);
    let _ = serde_json::from_slice::<Vec<ContentBlock>>(bytes);
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let _ = baton_wire::detect(&value);
    if let Ok(m) = baton_wire::parse_message(&value) {
        let _ = baton_wire::anthropic::parse_message(&baton_wire::anthropic::render_message(&m));
        for v in baton_wire::openai::render_message(&m) {
            let _ = baton_wire::openai::parse_message(&v);
        }
    }
    if let Ok(m) = baton_wire::anthropic::parse_message(&value) {
        let _ = baton_wire::anthropic::check_messages(std::slice::from_ref(&m));
        let _ = serde_json::to_vec(&m);
    }
    if let Ok(m) = baton_wire::openai::parse_message(&value) {
        let _ = baton_wire::openai::check_messages(std::slice::from_ref(&m));
        let _ = serde_json::to_vec(&m);
    }
}

/// Whole request bodies of both vendors, and their message checks.
fn request(bytes: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    if let Ok(body) = baton_wire::anthropic::parse_request(&value) {
        let _ = baton_wire::anthropic::check_messages(&body.messages);
        let _ = baton_wire::anthropic::render_request(&body);
    }
    if let Ok(body) = baton_wire::openai::parse_request(&value) {
        let _ = baton_wire::openai::check_messages(&body.messages);
        let _ = baton_wire::openai::render_request(&body, baton_wire::MaxTokensField::MaxTokens);
    }
    if let Ok(body) = baton_wire::responses::parse_request(&value) {
        let _ = baton_wire::openai::check_messages(&body.messages);
    }
}

/// Response and error bodies of both vendors.
fn response(bytes: &[u8]) {
    let _ = baton_wire::anthropic::parse_response(bytes);
    let _ = baton_wire::anthropic::parse_error(bytes);
    let _ = baton_wire::openai::parse_response(bytes);
    let _ = baton_wire::openai::parse_error(bytes);
    let _ = baton_wire::openai::parse_embeddings(bytes);
    if let Ok(reply) = baton_wire::responses::parse_response(bytes) {
        let _ = baton_wire::responses::render_stream(&reply, "resp_fuzz");
    }
}

/// Both vendors' stream readers, fed the bytes in pieces whose sizes the bytes themselves pick
/// (so a mutant also varies where reads split an event), then finished.
fn stream(bytes: &[u8]) {
    let step = 1 + bytes.first().map_or(0, |b| usize::from(*b % 17));
    let mut anthropic = baton_wire::anthropic::Stream::default();
    let mut openai = baton_wire::openai::Stream::default();
    let mut responses = baton_wire::responses::Stream::default();
    let (mut a_ok, mut o_ok, mut r_ok) = (true, true, true);
    for piece in bytes.chunks(step) {
        a_ok = a_ok && anthropic.feed(piece).is_ok();
        o_ok = o_ok && openai.feed(piece).is_ok();
        r_ok = r_ok && responses.feed(piece).is_ok();
    }
    let _ = anthropic.finish();
    let _ = openai.finish();
    let _ = responses.finish();
    let mut sse = baton_wire::sse::Decoder::default();
    let _ = sse.push(bytes);
    let _ = sse.finish();
}

/// The request-key canonicalizer: no panic, and idempotent — the canonical form of a body
/// parses back to a value whose canonical form and key are the same.
fn key(bytes: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let tenant = TenantId::default_tenant();
    let versions = BTreeMap::new();
    let input = |body| KeyInput {
        tenant: &tenant,
        operation: "openai.chat_completions",
        body,
        versions: &versions,
        documents: &[],
    };
    let first = request_key(&input(&body));
    let canonical = canonical_json(&body);
    let again: Value = match serde_json::from_str(&canonical) {
        Ok(v) => v,
        Err(e) => panic!("the canonical form does not parse ({e}): {canonical}"),
    };
    assert_eq!(
        canonical_json(&again),
        canonical,
        "the canonical form is not a fixed point"
    );
    let second = request_key(&input(&again));
    assert_eq!(
        first.ok(),
        second.ok(),
        "a body and its canonical form have different keys"
    );
}
