//! How both backends encode what they store: integers at the database's range, run statuses,
//! tool-call id lists and summary bodies. One place, so a file written by one backend reads the
//! same as a row of the other.

use baton_core::{Claim, RunStatus, Seq};

use crate::Error;

/// A count or seq as the databases' signed 64-bit integer.
pub fn to_i64(value: u64) -> Result<i64, Error> {
    i64::try_from(value).map_err(|_| Error::Corrupt {
        what: format!("value {value} exceeds the database's integer range"),
    })
}

/// A seq or id a caller names, for a lookup: past the databases' range it becomes `i64::MAX`,
/// which no row has, so the lookup answers "not found" instead of failing.
pub fn lookup_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored integer that must not be negative; `what` names it in the error.
pub fn to_u64(value: i64, what: &str) -> Result<u64, Error> {
    u64::try_from(value).map_err(|_| Error::Corrupt {
        what: format!("{what} is negative: {value}"),
    })
}

/// A stored run status.
pub fn parse_status(s: &str) -> Result<RunStatus, Error> {
    RunStatus::parse(s).ok_or_else(|| Error::Corrupt {
        what: format!("run status {s:?}"),
    })
}

/// Tool-call ids as stored beside a history row: a JSON list, or `None` when there are none.
pub fn ids_json(ids: Vec<&str>) -> Option<String> {
    if ids.is_empty() {
        return None;
    }
    serde_json::to_string(&ids).ok()
}

/// Reads what [`ids_json`] wrote for the row at `seq`.
pub fn parse_ids(json: Option<String>, seq: Seq) -> Result<Vec<String>, Error> {
    match json {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(&text).map_err(|e| Error::Corrupt {
            what: format!("tool ids of seq {seq}: {e}"),
        }),
    }
}

/// A summary's stored body: `{"claims": [...]}`, an object so later fields fit beside them.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct SummaryBody {
    /// What the summary says.
    pub claims: Vec<Claim>,
}

/// Reads a stored import digest: 64 lowercase hex digits.
pub fn parse_digest(hex: &str) -> Result<crate::Digest, Error> {
    let corrupt = || Error::Corrupt {
        what: format!("import digest {hex:?}"),
    };
    if hex.len() != 64 {
        return Err(corrupt());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(corrupt)?, 16)
            .map_err(|_| corrupt())?;
    }
    Ok(crate::Digest(out))
}

/// Model names as stored beside an imported run: a JSON list.
pub fn models_json(models: &[String]) -> Result<String, Error> {
    serde_json::to_string(models).map_err(|e| Error::Corrupt {
        what: format!("model names do not serialize: {e}"),
    })
}

/// Reads what [`models_json`] wrote.
pub fn parse_models(json: &str) -> Result<Vec<String>, Error> {
    serde_json::from_str(json).map_err(|e| Error::Corrupt {
        what: format!("model names {json:?}: {e}"),
    })
}
