//! The request-key test vectors in `request_key_vectors.json`.
//!
//! Each case derives the key of two literal request bodies, `a` and `b`, and checks that the keys
//! are equal (`"same": true`) or differ (`"same": false`). `a_with` / `b_with` override the file's
//! default tenant, operation, versions or documents for one side; `key` pins the exact key of
//! side `a`, so a change of the derivation fails here until `KEY_VERSION` and the file are bumped.

use std::collections::BTreeMap;

use baton_core::TenantId;
use baton_core::key::{RequestKey, request_key_from_bytes};
use serde::Deserialize;

const VECTORS: &str = include_str!("request_key_vectors.json");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(rename = "description")]
    _description: String,
    defaults: Side,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    same: bool,
    a: String,
    b: String,
    #[serde(default)]
    a_with: Overrides,
    #[serde(default)]
    b_with: Overrides,
    key: Option<RequestKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Side {
    tenant: TenantId,
    operation: String,
    versions: BTreeMap<String, String>,
    documents: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Overrides {
    tenant: Option<TenantId>,
    operation: Option<String>,
    versions: Option<BTreeMap<String, String>>,
    documents: Option<Vec<String>>,
}

fn key_of(defaults: &Side, with: &Overrides, body: &str) -> RequestKey {
    let tenant = with.tenant.as_ref().unwrap_or(&defaults.tenant);
    let operation = with.operation.as_ref().unwrap_or(&defaults.operation);
    let versions = with.versions.as_ref().unwrap_or(&defaults.versions);
    let documents = with.documents.as_ref().unwrap_or(&defaults.documents);
    request_key_from_bytes(tenant, operation, body.as_bytes(), versions, documents)
        .unwrap_or_else(|err| panic!("body {body:?}: {err}"))
}

#[test]
fn vectors() {
    let file: File = serde_json::from_str(VECTORS).expect("request_key_vectors.json parses");
    let mut failures = Vec::new();
    let (mut n_same, mut n_different, mut n_golden) = (0, 0, 0);
    for case in &file.cases {
        let a = key_of(&file.defaults, &case.a_with, &case.a);
        let b = key_of(&file.defaults, &case.b_with, &case.b);
        if (a == b) != case.same {
            let expected = if case.same { "one key" } else { "two keys" };
            failures.push(format!(
                "{}: expected {expected}, got {a} and {b}",
                case.name
            ));
        }
        if case.same {
            n_same += 1;
        } else {
            n_different += 1;
        }
        if let Some(golden) = case.key {
            n_golden += 1;
            if a != golden {
                failures.push(format!("{}: key {a}, pinned {golden}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(n_same >= 20 && n_different >= 20 && n_golden >= 3);
}

#[test]
fn vector_names_are_unique() {
    let file: File = serde_json::from_str(VECTORS).expect("request_key_vectors.json parses");
    let mut names: Vec<&str> = file.cases.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "duplicate case names");
}
