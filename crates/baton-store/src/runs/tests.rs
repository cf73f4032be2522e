//! The listing's pure parts: `since` texts and cursors.

use super::*;

const NOW: Timestamp = Timestamp(1_800_000_000_000);

#[test]
fn since_takes_a_day_a_time_or_an_age() {
    let day = Timestamp::from_day("2026-02-01").unwrap();
    assert_eq!(parse_since("2026-02-01", NOW), Ok(day));
    assert_eq!(
        parse_since("2026-02-01T10:00:00Z", NOW),
        Ok(Timestamp(day.0 + 10 * 3_600_000))
    );
    for (age, ms) in [
        ("90m", 90 * 60_000),
        ("12h", 12 * 3_600_000),
        ("7d", 7 * 86_400_000),
        ("2w", 14 * 86_400_000),
        ("0d", 0),
    ] {
        assert_eq!(parse_since(age, NOW), Ok(Timestamp(NOW.0 - ms)), "{age}");
    }
    for bad in [
        "",
        "yesterday",
        "7",
        "d",
        "-3d",
        "3y",
        "7é",
        "99999999999999999999d",
    ] {
        let err = parse_since(bad, NOW).unwrap_err();
        assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
    }
}

#[test]
fn a_cursor_reads_back_and_anything_else_is_refused() {
    for key in [
        Key {
            value: -1.5e12,
            pk: -42,
        },
        Key {
            value: f64::NEG_INFINITY,
            pk: 7,
        },
        Key { value: 0.0, pk: 1 },
    ] {
        let cursor = key.encode(RunSort::Last);
        assert_eq!(Cursor::decode(&cursor, RunSort::Last).unwrap(), key);
        let err = Cursor::decode(&cursor, RunSort::Cost).unwrap_err();
        assert!(
            err.to_string().contains("sorted by last, not by cost"),
            "{err}"
        );
    }
    for bad in [
        "",
        "r1",
        "r1z",
        "r1zz",
        "x1616263",
        "r1é0",
        "r1616263",
        &"r1".repeat(300),
    ] {
        let err = Cursor::decode(bad, RunSort::Last).unwrap_err();
        assert!(matches!(err, Error::InvalidQuery { .. }), "{bad}: {err}");
    }
}
