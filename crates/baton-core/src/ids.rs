//! Identifiers: tenants, runs, summaries and history positions, each a newtype.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::Error;

/// The longest tenant or run id accepted, in bytes.
pub const MAX_ID_LEN: usize = 128;

fn check_id(what: &'static str, value: &str) -> Result<(), Error> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    // `.` and `..` are path segments to every URL and file-path client: no ordinary client
    // can address a run or tenant named so.
    let dots = matches!(value, "." | "..");
    if value.is_empty() || value.len() > MAX_ID_LEN || dots || !value.chars().all(valid_char) {
        return Err(Error::InvalidId {
            what,
            value: value.chars().take(MAX_ID_LEN + 8).collect(),
        });
    }
    Ok(())
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates `value`: 1 to 128 bytes of ASCII letters, digits, `-`, `_`, `.` or `:`,
            /// other than `.` and `..`.
            pub fn new(value: impl Into<String>) -> Result<Self, Error> {
                let value = value.into();
                check_id($what, &value)?;
                Ok(Self(value))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                Self::new(s)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

string_id!(
    /// A tenant: the unit of isolation. Nothing of one tenant is visible to another.
    TenantId,
    "tenant id"
);
string_id!(
    /// A run: one agent conversation, with its own history, summaries and working state.
    RunId,
    "run id"
);

impl TenantId {
    /// The tenant used when none is named.
    pub fn default_tenant() -> Self {
        Self("default".to_owned())
    }
}

/// A position in a run's history. The store assigns 1, 2, 3… per run and never reuses one.
///
/// `Seq(0)` is never a message; it stands for "before the first message" (a cut at 0 drops nothing).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Seq(pub u64);

impl Seq {
    /// The position before the first message.
    pub const ZERO: Seq = Seq(0);

    /// The next position.
    pub fn next(self) -> Seq {
        Seq(self.0 + 1)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A summary version. Assigned by the store, unique across runs and tenants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SummaryId(pub u64);

impl fmt::Display for SummaryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A point in time, in milliseconds since the Unix epoch; serialized as RFC 3339.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Now, by the system clock.
    pub fn now() -> Self {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    }

    /// The UTC midnight that starts the day `YYYY-MM-DD` (four, two and two digits; proleptic
    /// Gregorian), or `None` for anything else, including a month or day that does not exist.
    pub fn from_day(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.split('-').collect();
        let [y, m, d] = parts.as_slice() else {
            return None;
        };
        let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(y, 4) || !digits(m, 2) || !digits(d, 2) {
            return None;
        }
        let (y, m, d): (i64, i64, i64) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
        let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let february = if leap { 29 } else { 28 };
        let days_in_month = [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let month_days = *days_in_month.get(usize::try_from(m - 1).ok()?)?;
        if !(1..=month_days).contains(&d) {
            return None;
        }
        // Days from civil (H. Hinnant's algorithm), proleptic Gregorian, UTC.
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        Some(Timestamp(days * 86_400_000))
    }

    /// Parses an RFC 3339 UTC timestamp (`2026-02-11T21:46:25.781Z`, with or without a fraction);
    /// `None` for anything else or a time before 1970.
    pub fn parse(text: &str) -> Option<Self> {
        let t = humantime::parse_rfc3339_weak(text.trim()).ok()?;
        let millis = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
        i64::try_from(millis).ok().map(Timestamp)
    }

    fn to_system_time(self) -> std::time::SystemTime {
        let millis = u64::try_from(self.0).unwrap_or(0);
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}",
            humantime::format_rfc3339_millis(self.to_system_time())
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let t = humantime::parse_rfc3339_weak(&s).map_err(serde::de::Error::custom)?;
        let millis = t
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(serde::de::Error::custom)?
            .as_millis();
        Ok(Timestamp(
            i64::try_from(millis).map_err(serde::de::Error::custom)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_their_utc_midnights_and_only_real_days_parse() {
        assert_eq!(Timestamp::from_day("1970-01-01"), Some(Timestamp(0)));
        assert_eq!(
            Timestamp::from_day("2026-12-03").map(|t| t.to_string()),
            Some("2026-12-03T00:00:00.000Z".to_owned())
        );
        assert!(Timestamp::from_day("2024-02-29").is_some());
        assert_eq!(
            Timestamp::from_day("1969-12-31"),
            Some(Timestamp(-86_400_000))
        );
        for bad in [
            "",
            "2023-02-29",
            "2026-13-01",
            "2026-00-10",
            "2026-04-31",
            "2026-1-01",
            "+202-01-01",
            "2026-01-01T00",
            "20260101",
        ] {
            assert_eq!(Timestamp::from_day(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ids_reject_empty_long_and_odd_characters() {
        assert!(RunId::new("r-1").is_ok());
        assert!(RunId::new("").is_err());
        assert!(RunId::new("a b").is_err());
        assert!(RunId::new("x".repeat(129)).is_err());
        // Issue 20 item 7: path segments no client can address.
        for dots in [".", ".."] {
            let err = RunId::new(dots).unwrap_err().to_string();
            assert!(err.contains("other than '.' and '..'"), "{err}");
            assert!(TenantId::new(dots).is_err());
        }
        assert!(RunId::new("...").is_ok());
        assert!(RunId::new(".hidden").is_ok());
        let err = TenantId::new("no/slash").unwrap_err().to_string();
        assert!(
            err.contains("tenant id") && err.contains("no/slash"),
            "{err}"
        );
    }

    #[test]
    fn timestamps_round_trip_through_rfc3339() {
        assert_eq!(
            Timestamp::parse("2023-11-14T22:13:20.123Z"),
            Some(Timestamp(1_700_000_000_123))
        );
        assert_eq!(
            Timestamp::parse("2023-11-14T22:13:20Z"),
            Some(Timestamp(1_700_000_000_000))
        );
        assert_eq!(Timestamp::parse("yesterday"), None);
        assert_eq!(Timestamp::parse("1969-12-31T00:00:00Z"), None);
        let t = Timestamp(1_700_000_000_123);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2023-11-14T22:13:20.123Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
    }
}
