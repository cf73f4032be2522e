//! Server-sent events, as both vendors stream replies: [`Decoder`] splits a byte stream into
//! [`Event`]s, and [`render`] writes one.
//!
//! The decoder follows the WHATWG event-stream rules for what it reads (lines end in `\n`,
//! `\r\n` or `\r`; `data` lines join with `\n`; a blank line dispatches; `:` starts a comment;
//! one space after the colon is dropped), and is strict about what it does not: a line whose
//! field is not `data`, `event`, `id` or `retry` is an [`Error::Malformed`], because a body
//! like that is not an event stream at all (an HTML error page, a JSON body).
//! Bytes may arrive split anywhere, even inside a UTF-8 character or between `\r` and `\n`.
//!
//! ```
//! use baton_wire::sse::Decoder;
//!
//! let mut decoder = Decoder::default();
//! assert!(decoder.push(b"event: ping\ndata: {\"type\"").unwrap().is_empty());
//! let events = decoder.push(b": \"ping\"}\n\n").unwrap();
//! assert_eq!(events[0].event.as_deref(), Some("ping"));
//! assert_eq!(events[0].data, r#"{"type": "ping"}"#);
//! ```

use crate::Error;

#[cfg(test)]
mod tests;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The `event:` name, when the event had one.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Splits a byte stream into events.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Bytes of the line not yet ended.
    pending: Vec<u8>,
    /// The last byte seen was `\r`, so a `\n` that comes next ends nothing.
    after_cr: bool,
    event: Option<String>,
    data: Option<String>,
    /// Lines read so far, for error messages.
    lines: usize,
}

impl Decoder {
    /// Reads more bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Event>, Error> {
        let mut out = Vec::new();
        for &byte in bytes {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.pending);
                    if let Some(event) = self.line(&line)? {
                        out.push(event);
                    }
                }
                _ => self.pending.push(byte),
            }
        }
        Ok(out)
    }

    /// Ends the stream: returns the last event when its lines were complete but the blank line
    /// that dispatches it never came (a partial last line is dropped, as the standard says).
    pub fn finish(&mut self) -> Option<Event> {
        self.pending.clear();
        self.event.take();
        self.data.take().map(|data| Event { event: None, data })
    }

    fn line(&mut self, line: &[u8]) -> Result<Option<Event>, Error> {
        self.lines += 1;
        let at = || format!("stream line {}", self.lines);
        let line = std::str::from_utf8(line).map_err(|_| Error::Malformed {
            at: at(),
            detail: "not UTF-8".to_owned(),
        })?;
        if line.is_empty() {
            let event = self.event.take();
            return Ok(self.data.take().map(|data| Event { event, data }));
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            "event" => self.event = Some(value.to_owned()),
            "id" | "retry" => {}
            _ => {
                let shown: String = line.chars().take(80).collect();
                return Err(Error::Malformed {
                    at: at(),
                    detail: format!("not a server-sent event field: {shown:?}"),
                });
            }
        }
        Ok(None)
    }
}

/// Writes one event: an `event:` line when `event` is given, one `data:` line per line of
/// `data`, and the blank line that dispatches it.
pub fn render(event: Option<&str>, data: &str) -> String {
    let mut out = String::new();
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}
