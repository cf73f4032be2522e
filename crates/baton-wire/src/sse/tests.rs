//! Unit tests of the event-stream decoder: split points, line endings, comments, strictness.

use super::{Decoder, Event, render};

fn event(name: Option<&str>, data: &str) -> Event {
    Event {
        event: name.map(str::to_owned),
        data: data.to_owned(),
    }
}

#[test]
fn every_split_point_gives_the_same_events() {
    let body = "event: a\r\ndata: x\r\ndata: y\r\n\r\n: comment\rdata:no-space\r\rdata: é\n\n";
    let expect = vec![
        event(Some("a"), "x\ny"),
        event(None, "no-space"),
        event(None, "é"),
    ];
    let bytes = body.as_bytes();
    for split in 0..=bytes.len() {
        let mut decoder = Decoder::default();
        let mut events = decoder.push(&bytes[..split]).unwrap();
        events.extend(decoder.push(&bytes[split..]).unwrap());
        assert_eq!(events, expect, "split at {split}");
    }
}

#[test]
fn finish_keeps_complete_lines_and_drops_a_partial_one() {
    let mut decoder = Decoder::default();
    assert!(decoder.push(b"data: [DONE]\n").unwrap().is_empty());
    assert_eq!(decoder.finish(), Some(event(None, "[DONE]")));
    let mut decoder = Decoder::default();
    assert!(decoder.push(b"data: {\"type\":\"mess").unwrap().is_empty());
    assert_eq!(decoder.finish(), None);
}

#[test]
fn a_body_that_is_not_an_event_stream_is_malformed() {
    let mut decoder = Decoder::default();
    let err = decoder.push(b"data: ok\n\nthis is not json\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"stream line 3: not a server-sent event field: "this is not json""#
    );
}

#[test]
fn render_round_trips() {
    let text = render(Some("message_stop"), "{\"a\":1}\nsecond");
    assert_eq!(
        text,
        "event: message_stop\ndata: {\"a\":1}\ndata: second\n\n"
    );
    let mut decoder = Decoder::default();
    assert_eq!(
        decoder.push(text.as_bytes()).unwrap(),
        [event(Some("message_stop"), "{\"a\":1}\nsecond")]
    );
}
