//! Tests for request keys: the canonical encoding byte for byte, numbers, bad input and the
//! key's text form. The same-or-different vectors live in `tests/request_key_vectors.json`.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{
    IGNORED_FIELDS, KEY_VERSION, KeyError, KeyInput, RequestKey, request_key,
    request_key_from_bytes, write_canonical, write_value,
};
use crate::TenantId;

// --- Fixtures -----------------------------------------------------------------------------------

fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn versions() -> BTreeMap<String, String> {
    BTreeMap::from([("schema_version".to_owned(), "1".to_owned())])
}

/// The canonical bytes of `body` with the fixture tenant and versions.
fn canonical(body: &Value, documents: &[String]) -> String {
    let tenant = tenant();
    let versions = versions();
    let input = KeyInput {
        tenant: &tenant,
        operation: "openai.chat_completions",
        body,
        versions: &versions,
        documents,
    };
    let mut out = Vec::new();
    write_canonical(&input, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// `value` as this module encodes it.
fn encode(value: &Value) -> String {
    let mut out = Vec::new();
    write_value(&mut out, value).unwrap();
    String::from_utf8(out).unwrap()
}

fn key(body: &str) -> Result<RequestKey, KeyError> {
    request_key_from_bytes(
        &tenant(),
        "openai.chat_completions",
        body.as_bytes(),
        &versions(),
        &[],
    )
}

/// Checks that each spelling of a number parses to what `expected` encodes.
fn check_numbers(spellings: &[&str], expected: &str) {
    for spelling in spellings {
        let value: Value = serde_json::from_str(spelling).unwrap();
        assert_eq!(encode(&value), expected, "{spelling}");
    }
}

// --- The encoding ---------------------------------------------------------------------------------

#[test]
fn canonical_encoding_is_pinned() {
    let body = json!({"stream": true, "model": "gpt-4o", "temperature": 1.0, "user": "u"});
    let docs = [
        "sha256:b".to_owned(),
        "sha256:a".to_owned(),
        "sha256:b".to_owned(),
    ];
    assert_eq!(
        canonical(&body, &docs),
        r#"{"body":{"model":"gpt-4o","temperature":1},"documents":["sha256:a","sha256:b"],"operation":"openai.chat_completions","tenant":"acme","v":"baton.request-key.v1","versions":{"schema_version":"1"}}"#
    );
}

#[test]
fn envelope_is_what_the_crate_canonicalizes() {
    // The envelope is written by hand; it must be the JCS form of the object the docs describe.
    let body = json!({"model": "m", "n": 2, "messages": [{"role": "user", "content": "h\u{e9}"}],
                      "stream": true, "metadata": {"a": 1}});
    let docs = ["z".to_owned(), "a".to_owned()];
    let envelope = json!({
        "v": KEY_VERSION,
        "tenant": "acme",
        "operation": "openai.chat_completions",
        "body": {"model": "m", "n": 2, "messages": [{"role": "user", "content": "h\u{e9}"}]},
        "versions": {"schema_version": "1"},
        "documents": ["a", "z"],
    });
    assert_eq!(
        canonical(&body, &docs),
        serde_json_canonicalizer::to_string(&envelope).unwrap()
    );
}

#[test]
fn every_ignored_field_is_removed_at_the_top_level_only() {
    for field in IGNORED_FIELDS {
        let mut with = json!({"model": "m", "messages": [{"role": "user", "content": "x"}]});
        let without = with.clone();
        with[*field] = json!({"any": "value"});
        assert_eq!(canonical(&with, &[]), canonical(&without, &[]), "{field}");

        let mut nested = without.clone();
        nested["messages"][0][*field] = json!(true);
        assert_ne!(
            canonical(&nested, &[]),
            canonical(&without, &[]),
            "nested {field}"
        );
    }
}

#[test]
fn members_sort_by_utf16_code_units() {
    // RFC 8785 section 3.2.3: U+1F600 (a surrogate pair in UTF-16) sorts before U+FB33, although
    // it is after it in UTF-8 and code-point order.
    let value: Value = serde_json::from_str(
        r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",
            "1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control",
            "\u00f6":"Latin Small Letter O With Diaeresis","</script>":"Browser Challenge"}"#,
    )
    .unwrap();
    assert_eq!(
        encode(&value),
        "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"</script>\":\"Browser Challenge\",\
         \"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\
         \"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\
         \"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
    );
}

#[test]
fn version_names_sort_by_utf16_code_units_too() {
    let tenant = tenant();
    let versions = BTreeMap::from([
        ("\u{fb33}".to_owned(), "1".to_owned()),
        ("\u{1f600}".to_owned(), "2".to_owned()),
    ]);
    let input = KeyInput {
        tenant: &tenant,
        operation: "op",
        body: &json!({}),
        versions: &versions,
        documents: &[],
    };
    let mut out = Vec::new();
    write_canonical(&input, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.ends_with("\"versions\":{\"\u{1f600}\":\"2\",\"\u{fb33}\":\"1\"}}"),
        "{out}"
    );
}

#[test]
fn strings_take_their_shortest_escaped_form() {
    let value: Value =
        serde_json::from_str(r#""caf\u00e9 \/ \u0041 \u2028 \u007f \u001f \t \" \\""#).unwrap();
    assert_eq!(
        encode(&value),
        "\"caf\u{e9} / A \u{2028} \u{7f} \\u001f \\t \\\" \\\\\""
    );
}

// --- Numbers --------------------------------------------------------------------------------------

#[test]
fn one_number_has_one_form() {
    check_numbers(&["1", "1.0", "1e0", "1E0", "1e+0", "10e-1", "0.1e1"], "1");
    check_numbers(&["0.5", "5e-1", "0.50", "50E-2"], "0.5");
    check_numbers(&["0", "-0", "0.0", "-0.0", "0e5"], "0");
    check_numbers(&["100", "1e2", "100.000"], "100");
    check_numbers(&["-3", "-3.0", "-0.3e1"], "-3");
    check_numbers(&["1e21", "1000000000000000000000"], "1e+21");
    check_numbers(&["1e-7", "0.0000001"], "1e-7");
    check_numbers(&["0.1", "1e-1"], "0.1");
}

#[test]
fn integers_beyond_2_pow_53_stay_exact() {
    // The crate alone writes every number as its nearest double.
    let above: Value = serde_json::from_str("9007199254740993").unwrap();
    assert_eq!(
        serde_json_canonicalizer::to_string(&above).unwrap(),
        "9007199254740992"
    );
    // Here an integer that fits in i64 or u64 keeps its digits.
    check_numbers(&["9007199254740993"], "9007199254740993");
    check_numbers(
        &["9007199254740992", "9007199254740993.0"],
        "9007199254740992",
    );
    check_numbers(&["18446744073709551615"], "18446744073709551615");
    check_numbers(&["-9223372036854775808"], "-9223372036854775808");
    // Beyond u64 an integer is a double, like anything with a fraction or an exponent.
    check_numbers(
        &["18446744073709551616", "18446744073709551615.0"],
        "18446744073709552000",
    );
    assert_ne!(
        key(r#"{"seed":9007199254740993}"#).unwrap(),
        key(r#"{"seed":9007199254740992}"#).unwrap()
    );
}

/// Any JSON value whose integers are all exact doubles.
fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(1i64 << 53)..=(1i64 << 53)).prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Wherever RFC 8785 is exact (integers up to 2^53), the encoding is the crate's JCS.
    #[test]
    fn encoding_is_jcs(value in arb_value()) {
        prop_assert_eq!(encode(&value), serde_json_canonicalizer::to_string(&value).unwrap());
    }

    /// Re-reading the encoding gives the same encoding: it is a fixed point.
    #[test]
    fn encoding_is_a_fixed_point(value in arb_value()) {
        let once = encode(&value);
        let again: Value = serde_json::from_str(&once).unwrap();
        prop_assert_eq!(encode(&again), once);
    }

    #[test]
    fn large_integers_keep_their_digits(n in any::<u64>(), m in any::<i64>()) {
        prop_assert_eq!(encode(&json!(n)), n.to_string());
        prop_assert_eq!(encode(&json!(m)), m.to_string());
    }
}

// --- Bad input -----------------------------------------------------------------------------------

#[test]
fn a_body_that_is_not_json_names_the_parse_error() {
    let err = key("{\"model\": \"m\",\n  \"temperature\": }").unwrap_err();
    assert!(matches!(err, KeyError::NotJson { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "request body is not JSON: expected value at line 2 column 18"
    );

    for (body, detail) in [
        ("", "EOF while parsing a value at line 1 column 0"),
        ("{} x", "trailing characters at line 1 column 4"),
        ("{\"n\": 1e400}", "number out of range at line 1 column 11"),
    ] {
        match key(body) {
            Err(KeyError::NotJson { detail: got }) => assert_eq!(got, detail, "{body:?}"),
            other => panic!("{body:?}: {other:?}"),
        }
    }
    let not_utf8 = request_key_from_bytes(&tenant(), "op", b"{\"a\":\"\xff\"}", &versions(), &[]);
    assert!(
        matches!(&not_utf8, Err(KeyError::NotJson { detail }) if detail.contains("line 1")),
        "{not_utf8:?}"
    );
}

#[test]
fn a_body_that_is_not_an_object_is_refused() {
    for (body, found) in [
        ("[{\"model\":\"m\"}]", "array"),
        ("\"hello\"", "string"),
        ("42", "number"),
        ("true", "boolean"),
        ("null", "null"),
    ] {
        let err = key(body).unwrap_err();
        assert!(
            matches!(err, KeyError::NotAnObject { found: f } if f == found),
            "{body}: {err:?}"
        );
    }
    assert_eq!(
        key("[]").unwrap_err().to_string(),
        "request body is a JSON array, expected an object"
    );
}

#[test]
fn an_empty_operation_is_refused() {
    let tenant = tenant();
    let err = request_key(&KeyInput {
        tenant: &tenant,
        operation: "",
        body: &json!({"model": "m"}),
        versions: &BTreeMap::new(),
        documents: &[],
    })
    .unwrap_err();
    assert!(matches!(err, KeyError::EmptyOperation));
    assert_eq!(err.to_string(), "operation name is empty");
}

#[test]
fn from_bytes_is_request_key_of_the_parsed_body() {
    let text = r#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#;
    let body: Value = serde_json::from_str(text).unwrap();
    let tenant = tenant();
    let versions = versions();
    let docs = ["d".to_owned()];
    let input = KeyInput {
        tenant: &tenant,
        operation: "openai.chat_completions",
        body: &body,
        versions: &versions,
        documents: &docs,
    };
    assert_eq!(
        request_key(&input).unwrap(),
        request_key_from_bytes(
            &tenant,
            "openai.chat_completions",
            text.as_bytes(),
            &versions,
            &docs
        )
        .unwrap()
    );
}

// --- RequestKey as text ---------------------------------------------------------------------------

const HEX: &str = "00ff10a0b1c2d3e4f5061728394a5b6c7d8e9fa0b1c2d3e4f5061728394a5b6c";

#[test]
fn display_debug_and_parse_round_trip() {
    let key: RequestKey = HEX.parse().unwrap();
    assert_eq!(key.0[0], 0x00);
    assert_eq!(key.0[1], 0xff);
    assert_eq!(key.0[31], 0x6c);
    assert_eq!(key.to_string(), HEX);
    assert_eq!(format!("{key:?}"), HEX);
    assert_eq!(HEX.to_uppercase().parse::<RequestKey>().unwrap(), key);
}

#[test]
fn serde_form_is_the_hex_string() {
    let key: RequestKey = HEX.parse().unwrap();
    let text = serde_json::to_string(&key).unwrap();
    assert_eq!(text, format!("\"{HEX}\""));
    assert_eq!(serde_json::from_str::<RequestKey>(&text).unwrap(), key);
    let err = serde_json::from_str::<RequestKey>("\"abc\"").unwrap_err();
    assert!(err.to_string().contains("expected 64 hex digits"), "{err}");
    assert!(serde_json::from_str::<RequestKey>("42").is_err());
}

#[test]
fn malformed_hex_is_refused_with_what_is_wrong() {
    let cases = [
        (String::new(), "expected 64 hex digits, found 0 characters"),
        (
            "abc".to_owned(),
            "expected 64 hex digits, found 3 characters",
        ),
        (
            format!("{HEX}0"),
            "expected 64 hex digits, found 65 characters",
        ),
        (
            format!("{}g", &HEX[..63]),
            "'g' at position 63 is not a hex digit",
        ),
        (
            format!(" {}", &HEX[1..]),
            "' ' at position 0 is not a hex digit",
        ),
        (
            format!("{}\u{e9}", &HEX[..63]),
            "'\u{e9}' at position 63 is not a hex digit",
        ),
    ];
    for (text, reason) in cases {
        match text.parse::<RequestKey>() {
            Err(err @ KeyError::InvalidKey { .. }) => {
                assert_eq!(
                    err.to_string(),
                    format!("invalid request key {text:?}: {reason}")
                );
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn keys_are_sha256_of_the_canonical_bytes() {
    use sha2::{Digest, Sha256};
    let body = json!({"model": "m"});
    let tenant = tenant();
    let versions = versions();
    let input = KeyInput {
        tenant: &tenant,
        operation: "openai.chat_completions",
        body: &body,
        versions: &versions,
        documents: &[],
    };
    let expected: [u8; 32] = Sha256::digest(canonical(&body, &[]).as_bytes()).into();
    assert_eq!(request_key(&input).unwrap(), RequestKey(expected));
}
