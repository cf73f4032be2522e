//! Unit tests of backoff, `retry-after` parsing and key scrubbing.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};

use super::{backoff, retry_after, scrub};
use crate::Secret;

#[test]
fn backoff_doubles_with_a_little_jitter() {
    for (attempt, base) in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0)] {
        let delay = backoff(attempt).as_secs_f64();
        assert!(
            (base..=base * 1.1).contains(&delay),
            "attempt {attempt}: {delay}"
        );
    }
    assert_eq!(backoff(30), Duration::from_secs(60));
}

#[test]
fn retry_after_reads_seconds_and_milliseconds() {
    let mut headers = HeaderMap::new();
    assert_eq!(retry_after(&headers), None);
    headers.insert("retry-after", HeaderValue::from_static("3"));
    assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
    headers.insert("retry-after", HeaderValue::from_static("3600"));
    assert_eq!(retry_after(&headers), Some(Duration::from_secs(60)));
    headers.insert(
        "retry-after",
        HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
    );
    assert_eq!(retry_after(&headers), None);
    headers.insert("retry-after-ms", HeaderValue::from_static("250"));
    assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
}

#[test]
fn scrub_hides_the_key() {
    let key = Secret::new("sk-live-123");
    assert_eq!(
        scrub("Incorrect API key provided: sk-live-123.", Some(&key)),
        "Incorrect API key provided: ***."
    );
    assert_eq!(scrub("no key here", None), "no key here");
    assert_eq!(
        scrub("key 12345678 and 123456789", Some(&Secret::new("12345678"))),
        "key *** and ***9"
    );
}

/// A placeholder key (Ollama's `ollama`, a one-letter `k`) is no secret: scrubbing it would
/// garble every message that happens to contain it.
#[test]
fn scrub_leaves_short_placeholder_keys_alone() {
    let message = "model \"ollama/llama3\" not found; keys: k";
    for key in ["ollama", "k", "1234567"] {
        assert_eq!(scrub(message, Some(&Secret::new(key))), message, "{key}");
    }
}
