//! Calendar days without a calendar library: a [`Day`] is a proleptic Gregorian date, and a
//! [`Zone`] a fixed offset from UTC that says which day a timestamp falls on.

use std::fmt;

use baton_core::Timestamp;

use crate::Error;

const MS_PER_DAY: i64 = 86_400_000;

/// A calendar date.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day {
    /// Days since 1970-01-01.
    pub days: i64,
}

impl Day {
    /// The day from year, month (1–12) and day of month, `None` when it does not exist.
    pub fn from_ymd(y: i64, m: u32, d: u32) -> Option<Self> {
        let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let month_days = [
            31,
            if leap { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        let max = *month_days.get(usize::try_from(m).ok()?.checked_sub(1)?)?;
        if d == 0 || d > max {
            return None;
        }
        // Days from civil (H. Hinnant's algorithm).
        let (m, d) = (i64::from(m), i64::from(d));
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        Some(Day {
            days: era * 146_097 + doe - 719_468,
        })
    }

    /// Parses `YYYY-MM-DD` or `YYYYMMDD` (the two forms ccusage's `--since`/`--until` take).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let t = text.trim();
        let digits: String = t.chars().filter(|c| *c != '-').collect();
        let dashed = t.len() == 10 && t.as_bytes()[4] == b'-' && t.as_bytes()[7] == b'-';
        let shape_ok = digits.len() == 8
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (dashed || t.len() == 8);
        let invalid = || Error::InvalidDay {
            value: text.to_owned(),
        };
        if !shape_ok {
            return Err(invalid());
        }
        let num = |r: std::ops::Range<usize>| digits[r].parse::<u32>().map_err(|_| invalid());
        let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
        Day::from_ymd(i64::from(y), m, d).ok_or_else(invalid)
    }

    /// Year, month (1–12), day of month.
    pub fn ymd(self) -> (i64, u32, u32) {
        // Civil from days (H. Hinnant's algorithm).
        let z = self.days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + i64::from(m <= 2);
        // `d` is 1..=31 and `m` 1..=12 by construction.
        (
            y,
            u32::try_from(m).unwrap_or(1),
            u32::try_from(d).unwrap_or(1),
        )
    }

    /// The Monday that starts this day's week (ISO weeks, as ccusage's `weekly` groups).
    pub fn week_start(self) -> Day {
        // 1970-01-01 was a Thursday: Monday is 3 days before it.
        Day {
            days: self.days - (self.days + 3).rem_euclid(7),
        }
    }

    /// `YYYY-MM`.
    pub fn month(self) -> String {
        let (y, m, _) = self.ymd();
        format!("{y:04}-{m:02}")
    }
}

impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = self.ymd();
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

/// Which day a timestamp falls on: a fixed offset from UTC.
///
/// Reports group by day in this zone (ccusage groups in the machine's zone, or `--timezone`);
/// a named zone's rules are not baton's to keep, so the caller gives the offset in force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Zone {
    /// Minutes east of UTC.
    pub offset_minutes: i32,
}

impl Zone {
    /// UTC.
    pub const UTC: Zone = Zone { offset_minutes: 0 };

    /// Parses `UTC`, `Z` or `±HH:MM`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("utc") || t == "Z" {
            return Ok(Zone::UTC);
        }
        let invalid = || Error::InvalidZone {
            value: text.to_owned(),
        };
        let (sign, rest) = match t.as_bytes().first() {
            Some(b'+') => (1, &t[1..]),
            Some(b'-') => (-1, &t[1..]),
            _ => return Err(invalid()),
        };
        let (h, m) = rest.split_once(':').ok_or_else(invalid)?;
        let (h, m): (i32, i32) = (
            h.parse().map_err(|_| invalid())?,
            m.parse().map_err(|_| invalid())?,
        );
        if h.to_string().len() > 2 || !(0..=14).contains(&h) || !(0..60).contains(&m) {
            return Err(invalid());
        }
        Ok(Zone {
            offset_minutes: sign * (h * 60 + m),
        })
    }

    /// The day `at` falls on in this zone.
    pub fn day(self, at: Timestamp) -> Day {
        let local = at.0 + i64::from(self.offset_minutes) * 60_000;
        Day {
            days: local.div_euclid(MS_PER_DAY),
        }
    }
}
