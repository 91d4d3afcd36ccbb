//! A minimal server-sent-events reader over a blocking response: yields `(event, data)` pairs.

use std::io::{BufRead, BufReader, Read};

pub struct Events<R: Read> {
    reader: BufReader<R>,
    line: String,
}

impl<R: Read> Events<R> {
    pub fn new(r: R) -> Events<R> {
        Events { reader: BufReader::new(r), line: String::new() }
    }

    /// The next event, `None` at the end of the stream.
    pub fn next_event(&mut self) -> std::io::Result<Option<(String, String)>> {
        let mut event = String::new();
        let mut data = String::new();
        let mut any = false;
        loop {
            self.line.clear();
            if self.reader.read_line(&mut self.line)? == 0 {
                return Ok(if any { Some((event, data)) } else { None });
            }
            let line = self.line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if any {
                    return Ok(Some((event, data)));
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            match field {
                "event" => event = value.to_string(),
                "data" => {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(value);
                }
                _ => {}
            }
            any = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_events_with_multiline_data_and_comments() {
        let raw = ": keepalive\nevent: a\ndata: 1\ndata: 2\n\ndata: {\"x\":1}\r\n\r\ndata: last";
        let mut ev = Events::new(raw.as_bytes());
        assert_eq!(ev.next_event().unwrap(), Some(("a".into(), "1\n2".into())));
        assert_eq!(ev.next_event().unwrap(), Some(("".into(), "{\"x\":1}".into())));
        assert_eq!(ev.next_event().unwrap(), Some(("".into(), "last".into())));
        assert_eq!(ev.next_event().unwrap(), None);
    }
}
