//! How both backends encode what they store: integers at the database's range, run statuses,
//! tool-call id lists and summary bodies. One place, so a file written by one backend reads the
//! same as a row of the other.

use baton_core::{Claim, RunStatus, Seq};

use crate::Error;

/// A count, seq or id as the databases' signed 64-bit integer. Past that range it came from
/// a caller (nothing stored can be), so it is invalid input, not a corrupt store.
pub fn to_i64(value: u64) -> Result<i64, Error> {
    i64::try_from(value).map_err(|_| {
        Error::InvalidId(baton_core::Error::OutOfRange {
            what: "number",
            value,
        })
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

/// A run's stored cleared-results setting: both columns set, or neither.
pub fn cleared(
    through: Option<i64>,
    min_tokens: Option<i64>,
) -> Result<Option<baton_core::Cleared>, Error> {
    match (through, min_tokens) {
        (None, None) => Ok(None),
        (Some(through), Some(min)) => Ok(Some(baton_core::Cleared {
            through: Seq(to_u64(through, "cleared_through")?),
            min_tokens: u32::try_from(min).map_err(|_| Error::Corrupt {
                what: format!("cleared_min_tokens {min}"),
            })?,
        })),
        _ => Err(Error::Corrupt {
            what: "a run's cleared_through and cleared_min_tokens are not both set".into(),
        }),
    }
}

/// A summary's meta as stored: JSON text, or `NULL`.
pub fn meta_json(meta: Option<&serde_json::Value>) -> Result<Option<String>, Error> {
    meta.map(|m| {
        serde_json::to_string(m).map_err(|e| Error::Corrupt {
            what: format!("summary meta does not serialize: {e}"),
        })
    })
    .transpose()
}

/// Reads what [`meta_json`] wrote for summary `id`.
pub fn parse_meta(
    json: Option<String>,
    id: baton_core::SummaryId,
) -> Result<Option<serde_json::Value>, Error> {
    json.map(|text| {
        serde_json::from_str(&text).map_err(|e| Error::Corrupt {
            what: format!("meta of summary {id}: {e}"),
        })
    })
    .transpose()
}

/// Why a cleared-results setting cannot move from `current` to `new` on a run whose last seq
/// is `last`, if it cannot: the rules both backends apply inside their transaction.
pub fn check_cleared(
    current: Option<baton_core::Cleared>,
    new: baton_core::Cleared,
    last: Seq,
) -> Option<String> {
    if new.through.0 == 0 || new.through > last {
        return Some(format!(
            "through seq {} is not a message of the run (its messages are 1..={last})",
            new.through
        ));
    }
    match current {
        Some(c) if new.through < c.through => Some(format!(
            "through seq {} is before the run's current {}: clearing only moves forward",
            new.through, c.through
        )),
        Some(c) if new.min_tokens > c.min_tokens => Some(format!(
            "min_tokens {} is above the run's current {}: results it stubs would come back",
            new.min_tokens, c.min_tokens
        )),
        Some(c) if c == new => Some("the run clears exactly this already".to_owned()),
        _ => None,
    }
}
