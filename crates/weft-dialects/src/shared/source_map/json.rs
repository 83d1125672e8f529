//! A JSON document's source map without the YAML parser: flows that tools and the
//! visual editor write are JSON, and reading them through YAML with spans cost 15 to 20
//! times what `serde_json` takes. The value comes from `serde_json`; one scan of the
//! text then records where each value and key starts, as the YAML path records it.

use super::{Lines, SourceMap, text_start};
use serde_json::Value;
use weft_core::Loc;
use weft_core::validate::child_pointer;

/// The value and source map of `text` when it is a JSON object or array without
/// duplicate keys; `None` sends it to the YAML path, which reports what is wrong.
pub(super) fn parse(text: &str) -> Option<(Value, SourceMap)> {
    if !text.trim_start().starts_with(['{', '[']) {
        return None;
    }
    let value: Value = serde_json::from_str(text).ok()?;
    let lines = Lines::new(text);
    let mut scan = Scan {
        text: text.as_bytes(),
        at: 0,
        line: 1,
        col: 1,
        lines: &lines,
        map: SourceMap::default(),
    };
    scan.value(String::new(), &value)?;
    Some((value, scan.map))
}

/// A walk over the text in step with the parsed value.
struct Scan<'a> {
    text: &'a [u8],
    at: usize,
    /// 1-based line and character column of `at`.
    line: u32,
    col: u32,
    lines: &'a Lines<'a>,
    map: SourceMap,
}

impl Scan<'_> {
    fn loc(&self) -> Loc {
        Loc {
            line: self.line,
            col: self.col,
        }
    }

    fn bump(&mut self) {
        let Some(&b) = self.text.get(self.at) else {
            return;
        };
        self.at += 1;
        if b == b'\n' {
            self.line += 1;
            self.col = 1;
        } else if b & 0xC0 != 0x80 {
            // A character's first byte; continuation bytes add no column.
            self.col += 1;
        }
    }

    fn skip_layout(&mut self) {
        while matches!(self.text.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.bump();
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    /// Steps over a string token and returns its raw text (quotes included).
    fn string(&mut self) -> Option<&str> {
        let start = self.at;
        self.bump();
        loop {
            match self.peek()? {
                b'\\' => {
                    self.bump();
                    self.bump();
                }
                b'"' => {
                    self.bump();
                    return std::str::from_utf8(&self.text[start..self.at]).ok();
                }
                _ => self.bump(),
            }
        }
    }

    /// Records the value at `pointer` (and everything inside it); `None` on a
    /// duplicate key or text out of step with the value.
    fn value(&mut self, pointer: String, v: &Value) -> Option<()> {
        self.skip_layout();
        let loc = self.loc();
        self.map.values.insert(pointer.clone(), loc);
        match v {
            Value::Object(m) => self.object(&pointer, m),
            Value::Array(items) => {
                self.bump();
                for (i, item) in items.iter().enumerate() {
                    self.value(format!("{pointer}/{i}"), item)?;
                    self.skip_layout();
                    if self.peek() == Some(b',') {
                        self.bump();
                    }
                }
                self.skip_layout();
                (self.peek() == Some(b']')).then(|| self.bump())
            }
            Value::String(s) => {
                if let Some(line) = text_start(self.lines, loc, s) {
                    self.map.text_lines.insert(pointer, line);
                }
                self.string().map(|_| ())
            }
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.bump();
                }
                Some(())
            }
        }
    }

    fn object(&mut self, pointer: &str, m: &serde_json::Map<String, Value>) -> Option<()> {
        self.bump();
        let mut seen = 0;
        loop {
            self.skip_layout();
            match self.peek()? {
                b'}' => {
                    self.bump();
                    // Fewer keys in the text than in the value cannot happen; more
                    // means a key was repeated (serde_json keeps the last).
                    return (seen == m.len()).then_some(());
                }
                b',' => self.bump(),
                b'"' => {
                    let at = self.loc();
                    let raw = self.string()?;
                    let key: String = if raw.contains('\\') {
                        serde_json::from_str(raw).ok()?
                    } else {
                        raw[1..raw.len() - 1].to_owned()
                    };
                    self.skip_layout();
                    (self.peek() == Some(b':')).then(|| self.bump())?;
                    let child = child_pointer(pointer, &key);
                    self.map.keys.insert(child.clone(), at);
                    seen += 1;
                    self.value(child, m.get(&key)?)?;
                }
                _ => return None,
            }
        }
    }
}
