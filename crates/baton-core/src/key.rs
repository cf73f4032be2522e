//! Request keys: which model calls are "the same request", for the response cache, in-flight
//! deduplication and the call log.
//!
//! A [`RequestKey`] is SHA-256 over the canonical JSON encoding of this object, derivation
//! version [`KEY_VERSION`]:
//!
//! ```text
//! {
//!   "v":         "baton.request-key.v1",          KEY_VERSION
//!   "tenant":    "acme",                          the tenant scope
//!   "operation": "openai.chat_completions",       what kind of call (never empty)
//!   "body":      { … },                           the whole request body, minus IGNORED_FIELDS
//!   "versions":  {"preprocess_version": "3", …},  caller-declared versions
//!   "documents": ["sha256:…", …]                  content hashes of referenced documents
//! }                                                (sorted by bytes, deduplicated)
//! ```
//!
//! Why each part is there:
//!
//! - **The whole body**, as the provider receives it: the model and every setting are inside it,
//!   so a field an API adds tomorrow (`reasoning_effort`, say) changes the key without a change
//!   here. Fields are removed by a **deny-list**, [`IGNORED_FIELDS`], never kept by an allow-list:
//!   an allow-list falls behind new API fields and then serves a cached answer to a request that
//!   asked for something else, while a field missing from the deny-list only costs a cache miss.
//!   Only top-level fields are removed (a `"stream"` key inside a message is content). Each
//!   ignored field provably leaves the model's output unchanged: `stream` and `stream_options`
//!   choose how the reply is delivered, `user` and `metadata` label the call for abuse monitoring
//!   and the caller's bookkeeping, `store` asks the provider to keep a copy.
//! - **`versions`**: what the body does not show but the result depends on, such as the schema
//!   the result is parsed with (`schema_version`) or the code that built the prompt
//!   (`preprocess_version`). The caller names them; bumping one retires every key made with it.
//! - **`documents`**: the content hashes of documents the request refers to by name or id, so an
//!   edited document gives a new key even when the body only names it. Their order and
//!   repetitions do not matter.
//! - **`tenant`**: two tenants never share an entry, even for identical requests, so neither can
//!   learn from timing what the other asked, nor plant an answer for the other. A key is **never
//!   a permission**: knowing one grants nothing, and a cache lookup still checks that the caller
//!   may read the entry.
//! - **`v`**: a derivation that changes bumps [`KEY_VERSION`], so every key changes and old entries
//!   are never read under a new meaning.
//! - **SHA-256**, all 256 bits: a key stands for its request with no practical chance of a
//!   collision, accidental or crafted. A 64-bit non-cryptographic hash collides by chance after
//!   some 2^32 entries, and on purpose whenever someone wants it to.
//!
//! # The canonical encoding
//!
//! RFC 8785, the JSON Canonicalization Scheme (JCS), through `serde_json_canonicalizer`: no
//! whitespace, object members sorted by the UTF-16 code units of their names at every depth,
//! strings in their shortest escaped form, numbers in ECMAScript's `Number.prototype.toString`
//! form. So whitespace, member order and the spelling of escapes and numbers do not change a key:
//! `"\u00e9"` and `"é"` are one string, and `1`, `1.0`, `1e0`, `10e-1` and `1E+0` are one number
//! (as are `0.5` and `5e-1`, and `0` and `-0`). Array order and everything else do change it.
//! Strings are compared as written: no Unicode normalization (`"é"` and `"e\u0301"` differ).
//!
//! One refinement of RFC 8785, for numbers: JCS writes every number as the nearest IEEE double,
//! and so does `serde_json_canonicalizer`, even for an integer `serde_json` parsed exactly as a
//! `u64` or `i64`: it would write `9007199254740993` (2^53 + 1) as `9007199254740992`, giving two
//! different seeds one key. Here an integer written without a fraction or exponent that fits in
//! `i64` or `u64` is written as its exact decimal digits instead. Up to 2^53 in magnitude these
//! are the digits JCS writes, so the encodings agree; beyond, they stay exact. Every other number
//! (a fraction, an exponent, an integer beyond `u64`) is the nearest double in JCS form, so
//! `9007199254740993.0` and `9007199254740992` are one number, `9007199254740993` another.
//!
//! A body with a repeated member name keeps the last value, as `serde_json` (and Python's `json`)
//! read it. A number beyond the range of a double is not JSON that can be keyed ([`KeyError::NotJson`]).
//!
//! ```
//! use std::collections::BTreeMap;
//! use baton_core::key::{request_key_from_bytes, RequestKey};
//! use baton_core::TenantId;
//!
//! let tenant = TenantId::new("acme")?;
//! let versions = BTreeMap::from([("schema_version".to_owned(), "1".to_owned())]);
//! let key = |body: &str| {
//!     request_key_from_bytes(&tenant, "openai.chat_completions", body.as_bytes(), &versions, &[])
//! };
//! let a = key(r#"{"model": "gpt-4o", "temperature": 1, "stream": true}"#)?;
//! let b = key(r#"{"temperature":1.0,"model":"gpt-4o"}"#)?;
//! assert_eq!(a, b);
//! assert_ne!(a, key(r#"{"model":"gpt-4o","temperature":0.5}"#)?);
//! assert_eq!(a.to_string().parse::<RequestKey>()?, a);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

use crate::TenantId;

/// Version tag mixed into every key; bump it when the derivation changes.
pub const KEY_VERSION: &str = "baton.request-key.v1";

/// Top-level request-body fields that provably do not change a model's output; removed before
/// hashing.
pub const IGNORED_FIELDS: &[&str] = &["stream", "stream_options", "user", "metadata", "store"];

/// The SHA-256 of a request's canonical encoding (see the [module docs](self)).
///
/// `Display`, `Debug` and its serde form are 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey(pub [u8; 32]);

/// What a key is derived from.
#[derive(Clone, Copy, Debug)]
pub struct KeyInput<'a> {
    /// The tenant scope.
    pub tenant: &'a TenantId,
    /// What kind of call, e.g. `"anthropic.messages"` or `"openai.chat_completions"`.
    pub operation: &'a str,
    /// The whole request body as the provider receives it (model and settings inside).
    pub body: &'a Value,
    /// Caller-declared versions: `schema_version`, `preprocess_version`, …
    pub versions: &'a BTreeMap<String, String>,
    /// Content hashes of referenced documents; order and repetitions do not matter.
    pub documents: &'a [String],
}

/// Why a key could not be derived or parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The body bytes are not JSON.
    #[error("request body is not JSON: {detail}")]
    NotJson {
        /// The parse error, with its line and column.
        detail: String,
    },
    /// The body is JSON but not an object.
    #[error("request body is a JSON {found}, expected an object")]
    NotAnObject {
        /// What it is instead: `array`, `string`, `number`, `boolean` or `null`.
        found: &'static str,
    },
    /// The operation name is empty.
    #[error("operation name is empty")]
    EmptyOperation,
    /// Text that is not a request key.
    #[error("invalid request key {value:?}: {reason}")]
    InvalidKey {
        /// The offending text (truncated).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The canonical encoder refused a value. `serde_json` values cannot hold what it refuses
    /// (NaN, infinities), so this is a bug if it is ever seen.
    #[error("cannot encode request canonically: {detail}")]
    Encode {
        /// The encoder's error.
        detail: String,
    },
}

/// Derives the key of a request.
pub fn request_key(input: &KeyInput<'_>) -> Result<RequestKey, KeyError> {
    let mut hasher = HashWriter(Sha256::new());
    write_canonical(input, &mut hasher)?;
    Ok(RequestKey(hasher.0.finalize().into()))
}

/// Parses bytes as JSON first; a body that is not JSON is [`KeyError::NotJson`] naming the parse
/// error (line/column).
pub fn request_key_from_bytes(
    tenant: &TenantId,
    operation: &str,
    body: &[u8],
    versions: &BTreeMap<String, String>,
    documents: &[String],
) -> Result<RequestKey, KeyError> {
    let body: Value = serde_json::from_slice(body).map_err(|err| KeyError::NotJson {
        detail: err.to_string(),
    })?;
    request_key(&KeyInput {
        tenant,
        operation,
        body: &body,
        versions,
        documents,
    })
}

/// Any JSON value in the canonical form the key hashes (RFC 8785, whole numbers exact): two
/// values are the same JSON exactly when their canonical forms are equal. The duplicate-work
/// report compares tool inputs with it.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and serde_json values hold nothing the encoder refuses.
    let _ = write_value(&mut out, value);
    String::from_utf8(out).unwrap_or_default()
}

/// Writes the canonical encoding of `input`: the bytes [`request_key`] hashes.
fn write_canonical<W: Write>(input: &KeyInput<'_>, out: &mut W) -> Result<(), KeyError> {
    if input.operation.is_empty() {
        return Err(KeyError::EmptyOperation);
    }
    let body = match input.body {
        Value::Object(map) => map,
        other => {
            return Err(KeyError::NotAnObject {
                found: json_type(other),
            });
        }
    };
    let mut documents: Vec<&str> = input.documents.iter().map(String::as_str).collect();
    documents.sort_unstable();
    documents.dedup();

    // Member names in UTF-16 order, as JCS sorts them (all ASCII, so byte order too).
    raw(out, b"{\"body\":")?;
    write_object(
        out,
        body.iter()
            .filter(|(name, _)| !IGNORED_FIELDS.contains(&name.as_str())),
    )?;
    raw(out, b",\"documents\":[")?;
    for (i, document) in documents.iter().enumerate() {
        if i > 0 {
            raw(out, b",")?;
        }
        leaf(out, document)?;
    }
    raw(out, b"],\"operation\":")?;
    leaf(out, &input.operation)?;
    raw(out, b",\"tenant\":")?;
    leaf(out, &input.tenant.as_str())?;
    raw(out, b",\"v\":")?;
    leaf(out, &KEY_VERSION)?;
    raw(out, b",\"versions\":")?;
    let mut versions: Vec<(&String, &String)> = input.versions.iter().collect();
    versions.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    raw(out, b"{")?;
    for (i, (name, version)) in versions.into_iter().enumerate() {
        if i > 0 {
            raw(out, b",")?;
        }
        leaf(out, name)?;
        raw(out, b":")?;
        leaf(out, version)?;
    }
    raw(out, b"}}")
}

/// Writes a JSON value in JCS form, integers that fit `i64`/`u64` exactly (see the module docs).
fn write_value<W: Write>(out: &mut W, value: &Value) -> Result<(), KeyError> {
    match value {
        Value::Null => raw(out, b"null"),
        Value::Bool(true) => raw(out, b"true"),
        Value::Bool(false) => raw(out, b"false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => leaf(out, text),
        Value::Array(items) => {
            raw(out, b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    raw(out, b",")?;
                }
                write_value(out, item)?;
            }
            raw(out, b"]")
        }
        Value::Object(map) => write_object(out, map.iter()),
    }
}

fn write_object<'a, W: Write>(
    out: &mut W,
    members: impl Iterator<Item = (&'a String, &'a Value)>,
) -> Result<(), KeyError> {
    let mut members: Vec<_> = members.collect();
    members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    raw(out, b"{")?;
    for (i, (name, value)) in members.into_iter().enumerate() {
        if i > 0 {
            raw(out, b",")?;
        }
        leaf(out, name)?;
        raw(out, b":")?;
        write_value(out, value)?;
    }
    raw(out, b"}")
}

fn write_number<W: Write>(out: &mut W, number: &Number) -> Result<(), KeyError> {
    if let Some(n) = number.as_u64() {
        raw(out, n.to_string().as_bytes())
    } else if let Some(n) = number.as_i64() {
        raw(out, n.to_string().as_bytes())
    } else if let Some(n) = number.as_f64() {
        leaf(out, &n)
    } else {
        Err(KeyError::Encode {
            detail: format!("number {number} has no double value"),
        })
    }
}

/// A string or double in JCS form, written by `serde_json_canonicalizer`.
fn leaf<W: Write, T: Serialize>(out: &mut W, value: &T) -> Result<(), KeyError> {
    serde_json_canonicalizer::to_writer(value, out).map_err(|err| KeyError::Encode {
        detail: err.to_string(),
    })
}

fn raw<W: Write>(out: &mut W, bytes: &[u8]) -> Result<(), KeyError> {
    out.write_all(bytes).map_err(|err| KeyError::Encode {
        detail: err.to_string(),
    })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Feeds what is written to a hasher.
struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// --- RequestKey as text ---------------------------------------------------------------------------

impl fmt::Display for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for RequestKey {
    type Err = KeyError;

    /// Parses 64 hex digits (either case).
    fn from_str(s: &str) -> Result<Self, KeyError> {
        let invalid = |reason: String| KeyError::InvalidKey {
            value: s.chars().take(80).collect(),
            reason,
        };
        let n_chars = s.chars().count();
        if n_chars != 64 {
            return Err(invalid(format!(
                "expected 64 hex digits, found {n_chars} characters"
            )));
        }
        if let Some((at, c)) = s.chars().enumerate().find(|(_, c)| !c.is_ascii_hexdigit()) {
            return Err(invalid(format!(
                "{c:?} at position {at} is not a hex digit"
            )));
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(s.as_bytes().chunks_exact(2)) {
            *byte = (hex_value(pair[0]) << 4) | hex_value(pair[1]);
        }
        Ok(Self(bytes))
    }
}

/// The value of an ASCII hex digit (checked by the caller).
fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => 0,
    }
}

impl Serialize for RequestKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RequestKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
