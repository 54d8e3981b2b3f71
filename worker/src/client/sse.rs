//! Server-Sent Events, read incrementally from a response body (the `text/event-stream`
//! format of the HTML standard, §9.2): lines of `field: value`, a blank line ends a message.

/// One dispatched message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseMessage {
    /// The `id:` field of this message, if it had one (the resume cursor).
    pub id: Option<String>,
    /// The `event:` field; `None` is the default type, `message`.
    pub event: Option<String>,
    /// Every `data:` line of the message, joined with `\n`.
    pub data: String,
}

/// Turns body chunks, split anywhere (inside a line, a `\r\n` or a UTF-8 character),
/// into whole messages.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line being received: decoded only once whole, so a character split
    /// across two reads is not mangled.
    pending: Vec<u8>,
    started: bool,
    id: Option<String>,
    event: Option<String>,
    data: Vec<String>,
    retry_ms: Option<u64>,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// The last `retry:` the server asked for, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// Feeds one chunk and returns the messages it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseMessage> {
        self.pending.extend_from_slice(chunk);
        let mut messages = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < self.pending.len() {
            let end_len = match self.pending[i] {
                b'\n' => 1,
                b'\r' => match self.pending.get(i + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A lone `\r` at the end may be the first half of `\r\n`: wait for more.
                    None => break,
                },
                _ => {
                    i += 1;
                    continue;
                }
            };
            let line = String::from_utf8_lossy(&self.pending[start..i]).into_owned();
            if let Some(message) = self.line(&line) {
                messages.push(message);
            }
            i += end_len;
            start = i;
        }
        self.pending.drain(..start);
        messages
    }

    fn line(&mut self, line: &str) -> Option<SseMessage> {
        let line = if self.started {
            line
        } else {
            self.started = true;
            line.strip_prefix('\u{feff}').unwrap_or(line)
        };
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => self.data.push(value.to_string()),
            "event" => self.event = Some(value.to_string()),
            // The standard ignores ids holding NUL: they could not be sent back in a header.
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseMessage> {
        let id = self.id.take();
        let event = self.event.take();
        if self.data.is_empty() {
            return None;
        }
        let data = std::mem::take(&mut self.data).join("\n");
        Some(SseMessage { id, event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: Option<&str>, event: Option<&str>, data: &str) -> SseMessage {
        SseMessage {
            id: id.map(String::from),
            event: event.map(String::from),
            data: data.to_string(),
        }
    }

    #[test]
    fn id_event_and_data_fields_make_one_message_at_the_blank_line() {
        let mut parser = SseParser::new();
        let got = parser.push(b"id: 7\nevent: task.step.started\ndata: {\"id\":7}\n\n");
        assert_eq!(
            got,
            [message(Some("7"), Some("task.step.started"), "{\"id\":7}")]
        );
    }

    #[test]
    fn several_data_lines_join_with_newlines() {
        let mut parser = SseParser::new();
        let got = parser.push(b"data: first\ndata:second\ndata\ndata:  indented\n\n");
        assert_eq!(got, [message(None, None, "first\nsecond\n\n indented")]);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored_and_keep_alives_dispatch_nothing() {
        let mut parser = SseParser::new();
        let got = parser.push(b": keep-alive\n\n:\n\nfoo: bar\ndata: x\n: between\n\n");
        assert_eq!(got, [message(None, None, "x")]);
    }

    #[test]
    fn a_message_without_data_dispatches_nothing_and_does_not_leak_its_fields() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"id: 3\nevent: ping\n\n").is_empty());
        assert_eq!(parser.push(b"data: y\n\n"), [message(None, None, "y")]);
    }

    #[test]
    fn a_message_split_across_reads_at_every_byte_comes_out_whole() {
        let stream = "id: 12\r\nevent: job.claimed\r\ndata: {\"message\":\"héllo ✓\"}\r\n\r\nid: 13\ndata: two\n\n";
        let expected = [
            message(Some("12"), Some("job.claimed"), "{\"message\":\"héllo ✓\"}"),
            message(Some("13"), None, "two"),
        ];
        for size in 1..=stream.len() {
            let mut parser = SseParser::new();
            let mut got = Vec::new();
            for chunk in stream.as_bytes().chunks(size) {
                got.extend(parser.push(chunk));
            }
            assert_eq!(got, expected, "chunks of {size} bytes");
        }
    }

    #[test]
    fn a_carriage_return_alone_ends_a_line_once_the_next_byte_shows_it_is_not_crlf() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"data: a\r").is_empty());
        assert_eq!(parser.push(b"\rdata: b\r\r"), [message(None, None, "a")]);
        assert!(
            parser.push(b"").is_empty(),
            "the trailing \\r may still be half of \\r\\n"
        );
        assert_eq!(parser.push(b"x"), [message(None, None, "b")]);
    }

    #[test]
    fn an_incomplete_message_waits_for_its_blank_line() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"id: 1\ndata: half").is_empty());
        assert!(parser.push(b"\n").is_empty());
        assert_eq!(parser.push(b"\n"), [message(Some("1"), None, "half")]);
    }

    #[test]
    fn retry_is_remembered_and_a_leading_byte_order_mark_is_skipped() {
        let mut parser = SseParser::new();
        let got = parser.push("\u{feff}retry: 1500\ndata: z\n\n".as_bytes());
        assert_eq!(got, [message(None, None, "z")]);
        assert_eq!(parser.retry_ms(), Some(1500));
        parser.push(b"retry: soon\n");
        assert_eq!(parser.retry_ms(), Some(1500), "a non-number is ignored");
    }
}
