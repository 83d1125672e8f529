//! Parses YAML (and JSON, which YAML reads too) into a JSON value plus a map from
//! document pointers (`/root/sequence/2/llm`) to the line and column they start at, so
//! that any later stage can locate what it complains about.

use rustc_hash::FxHashMap as HashMap;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_saphyr::Spanned;
use std::fmt;
use weft_core::validate::child_pointer;
use weft_core::{Diagnostic, Loc};

mod json;

/// Pointer -> position, for values and for the keys that name them. (Fx hashing: a
/// document of many blocks holds a pointer for each of their values, and SipHash of them
/// was a tenth of loading one.)
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SourceMap {
    values: HashMap<String, Loc>,
    keys: HashMap<String, Loc>,
    /// For each string value whose lines are the file's lines (a literal block scalar,
    /// or a one-line scalar), the file line its text starts on.
    text_lines: HashMap<String, u32>,
}

impl SourceMap {
    /// Where the value at `pointer` starts (for a mapping entry, where its key starts),
    /// falling back to the nearest enclosing value.
    pub fn loc(&self, pointer: &str) -> Option<Loc> {
        let mut p = pointer;
        loop {
            if let Some(l) = self.keys.get(p).or_else(|| self.values.get(p)) {
                return Some(*l);
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return self.values.get("").copied(),
            }
        }
    }

    /// The file line on which the text of the string at `pointer` starts, so that line
    /// `n` of the text is file line `text_line + n - 1`; `None` when the text's lines
    /// are not the file's (a folded or quoted multi-line string).
    pub fn text_line(&self, pointer: &str) -> Option<u32> {
        self.text_lines.get(pointer).copied()
    }

    /// Fills in the diagnostic's location from its pointer, unless it has one.
    pub fn locate(&self, mut d: Diagnostic) -> Diagnostic {
        if d.loc.is_none() {
            d.loc = self.loc(&d.pointer);
        }
        d
    }
}

enum Node {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Key>, Spanned<Node>)>),
}

struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a scalar mapping key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key, E> {
                Ok(Key(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
                Ok(Key("null".into()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Node, D2::Error> {
                Node::deserialize(d)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
                Ok(Node::I64(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
                Ok(Node::U64(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
                Ok(Node::F64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
                Ok(Node::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = a.next_element::<Spanned<Node>>()? {
                    out.push(x);
                }
                Ok(Node::Seq(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut out: Vec<(Spanned<Key>, Spanned<Node>)> = Vec::new();
                // A set, not a scan of `out`: a graph's `nodes` may have 10^5 keys.
                let mut seen = std::collections::HashSet::new();
                while let Some(k) = a.next_key::<Spanned<Key>>()? {
                    let v = a.next_value::<Spanned<Node>>()?;
                    if !seen.insert(k.value.0.clone()) {
                        return Err(de::Error::custom(format!(
                            "duplicate key `{}` at line {}",
                            k.value.0,
                            k.referenced.line()
                        )));
                    }
                    out.push((k, v));
                }
                Ok(Node::Map(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// The line a scalar's text starts on, when its lines are the file's: a literal block
/// scalar (`|`) starts below its header; a one-line scalar on its own line.
fn text_start(text: &Lines<'_>, at: Loc, value: &str) -> Option<u32> {
    let line_at = |n: u32| text.line(n);
    // The parser places a block scalar at its header or at its first line of text.
    match text.char_at(at) {
        Some('|') => return Some(at.line + 1),
        Some('>') => return None,
        _ => {}
    }
    let leading_blank = value.chars().take_while(|c| *c == '\n').count() as u32;
    let header = (1..at.line)
        .rev()
        .map(|n| line_at(n).unwrap_or(""))
        .find(|l| !l.trim().is_empty())
        .map(block_header);
    match header {
        Some(Some('|')) => Some(at.line - leading_blank),
        Some(Some(_)) => None,
        _ if value.trim_end_matches('\n').contains('\n') => None,
        _ => Some(at.line),
    }
}

/// The indicator (`|` or `>`) when `line` ends with a block scalar header (`key: |-`).
fn block_header(line: &str) -> Option<char> {
    let code = line.split(" #").next().unwrap_or(line).trim_end();
    let header = code.split_whitespace().next_back()?;
    let mut chars = header.chars();
    let indicator = chars.next().filter(|c| matches!(c, '|' | '>'))?;
    chars
        .all(|c| matches!(c, '+' | '-' | '1'..='9'))
        .then_some(indicator)
}

fn loc_of<T>(s: &Spanned<T>) -> Loc {
    Loc {
        line: s.referenced.line() as u32,
        col: s.referenced.column() as u32,
    }
}

/// The file's lines, with the character at a line and column found without counting
/// from the line's start each time: minified JSON is one long line, and counting its
/// characters for every value made reading it quadratic.
struct Lines<'a> {
    lines: Vec<&'a str>,
    /// Per line: the byte offset of each character, for lines that are not ASCII
    /// (built when first asked for).
    offsets: Vec<std::cell::OnceCell<Option<Vec<usize>>>>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let lines: Vec<&str> = text.lines().collect();
        let offsets = lines.iter().map(|_| std::cell::OnceCell::new()).collect();
        Lines { lines, offsets }
    }

    /// Line `n` (1-based).
    fn line(&self, n: u32) -> Option<&'a str> {
        self.lines.get((n as usize).wrapping_sub(1)).copied()
    }

    /// The character at `at` (1-based line and character column).
    fn char_at(&self, at: Loc) -> Option<char> {
        let i = (at.line as usize).wrapping_sub(1);
        let line = *self.lines.get(i)?;
        let col = (at.col as usize).saturating_sub(1);
        let offsets = self.offsets[i].get_or_init(|| {
            (!line.is_ascii()).then(|| line.char_indices().map(|(o, _)| o).collect())
        });
        let start = match offsets {
            None => col,
            Some(o) => *o.get(col)?,
        };
        line.get(start..)?.chars().next()
    }
}

fn build(node: Spanned<Node>, pointer: String, map: &mut SourceMap, text: &Lines<'_>) -> Value {
    let loc = loc_of(&node);
    map.values.insert(pointer.clone(), loc);
    if let Node::Str(s) = &node.value
        && let Some(line) = text_start(text, loc, s)
    {
        map.text_lines.insert(pointer.clone(), line);
    }
    match node.value {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(b),
        Node::I64(i) => Value::from(i),
        Node::U64(u) => Value::from(u),
        Node::F64(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        Node::Str(s) => Value::String(s),
        Node::Seq(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, x)| build(x, format!("{pointer}/{i}"), map, text))
                .collect(),
        ),
        Node::Map(entries) => {
            let mut obj = serde_json::Map::with_capacity(entries.len());
            for (k, v) in entries {
                let child = child_pointer(&pointer, &k.value.0);
                map.keys.insert(child.clone(), loc_of(&k));
                let value = build(v, child, map, text);
                obj.insert(k.value.0, value);
            }
            Value::Object(obj)
        }
    }
}

/// The parser's message without the position (diagnostics carry it) or API advice.
fn clean_yaml_message(msg: &str) -> String {
    let mut m = msg.trim_start_matches("error: ");
    if let Some(rest) = m.strip_prefix("line ")
        && let Some(i) = rest.find(": ")
    {
        m = &rest[i + 2..];
    }
    let m = m.split(", set DuplicateKeyPolicy").next().unwrap_or(m);
    m.to_owned()
}

/// Values (mappings, keys, lists and scalars) one document may hold, YAML or JSON alike:
/// room for a 100,000-node graph in every dialect (spec 003's editor JSON spends 28
/// values per node), and a bound on the memory a hostile file can make Weft spend.
pub const MAX_NODES: usize = 4_000_000;

fn count_nodes(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(|x| 1 + count_nodes(x)).sum::<usize>(),
        _ => 1,
    }
}

fn too_many_nodes(max_nodes: usize) -> Diagnostic {
    Diagnostic::error(
        "",
        format!("the document holds more than {max_nodes} values"),
    )
    .hint("split it into sub-flows or several files")
}

/// Parses `text` into a value and its source map, or a located syntax error.
pub fn parse(text: &str) -> Result<(Value, SourceMap), Diagnostic> {
    parse_within(text, MAX_NODES)
}

/// [`parse`] with a budget of `max_nodes` values, for YAML and JSON alike.
fn parse_within(text: &str, max_nodes: usize) -> Result<(Value, SourceMap), Diagnostic> {
    if text.trim().is_empty() {
        return Err(Diagnostic::error("", "the file is empty")
            .hint("a flow starts with `weft: 1` and `name:`"));
    }
    if let Some((value, map)) = json::parse(text) {
        if count_nodes(&value) > max_nodes {
            return Err(too_many_nodes(max_nodes));
        }
        return Ok((value, map));
    }
    // YAML 1.2 booleans only: under YAML 1.1 a key such as `n`, `y`, `on` or `no` would
    // silently become a boolean (the "Norway problem").
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = max_nodes;
    budget.max_events = 2 * max_nodes;
    options.budget = Some(budget);
    match serde_saphyr::from_str_with_options::<Spanned<Node>>(text, options) {
        Ok(root) => {
            let mut map = SourceMap::default();
            let value = build(root, String::new(), &mut map, &Lines::new(text));
            Ok((value, map))
        }
        Err(e) => {
            // JSON that YAML rejects (a key longer than its 1024-character lookahead, for
            // one) still deserves JSON's own verdict; but not a repeated key, which
            // serde_json would let the last value win silently.
            let repeated_key = e.to_string().contains("duplicate mapping key");
            if text.trim_start().starts_with(['{', '[']) && !repeated_key {
                match serde_json::from_str::<Value>(text) {
                    Ok(v) if count_nodes(&v) > max_nodes => {
                        return Err(too_many_nodes(max_nodes));
                    }
                    Ok(v) => return Ok((v, SourceMap::default())),
                    Err(je) => {
                        return Err(Diagnostic {
                            loc: Some(Loc {
                                line: je.line() as u32,
                                col: je.column() as u32,
                            }),
                            ..Diagnostic::error("", format!("invalid JSON: {je}"))
                        });
                    }
                }
            }
            let loc = e.location().map(|l| Loc {
                line: l.line() as u32,
                col: l.column() as u32,
            });
            let msg = e.to_string();
            let first_line = clean_yaml_message(msg.lines().next().unwrap_or("invalid YAML"));
            Err(Diagnostic {
                loc,
                ..Diagnostic::error("", format!("invalid YAML: {first_line}"))
                    .hint("check indentation and quoting around this position")
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The YAML path's value and map of `text`, which the JSON path must equal.
    fn through_yaml(text: &str) -> (Value, SourceMap) {
        let mut options = serde_saphyr::Options::default();
        options.strict_booleans = true;
        let root = serde_saphyr::from_str_with_options::<Spanned<Node>>(text, options).unwrap();
        let mut map = SourceMap::default();
        let value = build(root, String::new(), &mut map, &Lines::new(text));
        (value, map)
    }

    #[test]
    fn json_is_located_as_the_yaml_path_locates_it() {
        let docs = [
            "{\"weft\": 1, \"name\": \"x\", \"root\": {\"sequence\": [{\"id\": \"a\", \"transform\": {\"output\": 1.5}}, {\"passthrough\": {}}]}}",
            "{\n  \"é/ñ~k\": \"día ☃ \\\"q\\\" x\",  \"n\": [1, -2, 3e5, true, false, null, [], {}],\n  \"s\": \"a\\nb\",\n\t\"k\\u00e9y\": {\"deep\": [[\"x\"], {\"y\": \"z\"}]}\n}\n",
            "[\n {\"run\": \"return 1\"},\n \"☃☃\", {\"a\": {\"b\": [ 1 , 2 ] } }\n]",
        ];
        for doc in docs {
            let (value, map) = json::parse(doc).expect("JSON");
            let (yaml_value, yaml_map) = through_yaml(doc);
            assert_eq!(value, yaml_value, "{doc}");
            assert_eq!(map, yaml_map, "{doc}");
        }
    }

    #[test]
    fn json_that_is_cut_or_garbled_anywhere_never_panics_and_matches_the_yaml_path() {
        let doc = "{\"a\": [1, {\"é\": \"x\\\"y\"}, \"☃\"], \"a2\": {\"a\": null}, \"b\": \"t\"}";
        let chars: Vec<char> = doc.chars().collect();
        for i in 0..chars.len() {
            for with in [
                None,
                Some('{'),
                Some('}'),
                Some('['),
                Some('"'),
                Some(','),
                Some(':'),
                Some('\\'),
                Some('é'),
                Some('a'),
            ] {
                let mut c = chars.clone();
                match with {
                    None => {
                        c.remove(i);
                    }
                    Some(w) => c[i] = w,
                }
                let text: String = c.into_iter().collect();
                if let Some((value, map)) = json::parse(&text) {
                    let (yaml_value, yaml_map) = through_yaml(&text);
                    assert_eq!((&value, &map), (&yaml_value, &yaml_map), "{text}");
                }
                let _ = parse(&text);
            }
        }
    }

    #[test]
    fn json_with_a_repeated_key_goes_to_the_yaml_path_and_its_error() {
        let doc = "{\"a\": {\"b\": 1}, \"a\": 2}";
        assert!(json::parse(doc).is_none());
        let e = parse(doc).unwrap_err();
        assert!(
            e.message.contains("duplicate mapping key: a"),
            "{}",
            e.message
        );
        assert_eq!(e.loc.map(|l| l.line), Some(1));
    }

    #[test]
    fn block_scalars_start_their_text_on_the_next_line() {
        let text = "a: |\n  x = 1\n  y = 2\nb: \"one line\"\nc:\n  - >-\n    folded\n  - \"two\\nlines\"\n";
        let (_, map) = parse(text).unwrap();
        assert_eq!(map.text_line("/a"), Some(2));
        assert_eq!(map.text_line("/b"), Some(4));
        assert_eq!(
            map.text_line("/c/0"),
            None,
            "folded lines are not the file's"
        );
        assert_eq!(
            map.text_line("/c/1"),
            None,
            "an escaped newline is not the file's"
        );
        assert_eq!(map.text_line("/c"), None, "not a string");
        let nested = "nodes:\n  - name: a\n    run: |-\n\n      y = 2\n      z\n  - run: \"x\"\n";
        let (_, map) = parse(nested).unwrap();
        assert_eq!(map.text_line("/nodes/0/run"), Some(4));
        assert_eq!(map.text_line("/nodes/1/run"), Some(7));
    }

    #[test]
    fn pointers_map_to_lines_and_columns() {
        let text = "name: x\nroot:\n  sequence:\n    - passthrough: {}\n    - id: b\n      llm: {prompt: hi}\n";
        let (v, map) = parse(text).unwrap();
        assert_eq!(v["root"]["sequence"][1]["id"], "b");
        assert_eq!(
            map.loc("/root/sequence/1/llm"),
            Some(Loc { line: 6, col: 7 })
        );
        assert_eq!(map.loc("/root/sequence/0"), Some(Loc { line: 4, col: 7 }));
        // An unknown deeper pointer falls back to the nearest known one.
        assert_eq!(
            map.loc("/root/sequence/1/llm/nope/3"),
            Some(Loc { line: 6, col: 7 })
        );
    }

    #[test]
    fn syntax_errors_are_located() {
        let d = parse("name: x\nroot:\n  - a\n b: [\n").unwrap_err();
        assert!(d.loc.is_some(), "{d:?}");
        assert!(d.message.starts_with("invalid YAML"));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let d = parse("name: x\nname: y\n").unwrap_err();
        assert_eq!(d.message, "invalid YAML: duplicate mapping key: name");
        assert_eq!(d.loc.map(|l| l.line), Some(2));
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let (v, _) = parse("n: 0\ny: yes\non: off\nt: true\n").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"n": 0, "y": "yes", "on": "off", "t": true})
        );
    }

    #[test]
    fn json_is_read_too() {
        let (v, map) =
            parse("{\n  \"name\": \"x\",\n  \"root\": {\"passthrough\": {}}\n}").unwrap();
        assert_eq!(v["name"], "x");
        assert!(map.loc("/root").is_some());
    }

    #[test]
    fn yaml_and_json_share_one_node_budget() {
        let items = |n: usize| vec!["1"; n].join(", ");
        let yaml = format!("items: [{}]\n", items(50));
        // A key longer than YAML's 1024-character lookahead is JSON but not YAML: it
        // takes serde_json's path, under the same budget.
        let json = format!("{{\"{}\": [{}]}}", "k".repeat(2000), items(50));
        assert!(serde_saphyr::from_str::<Value>(&json).is_err());
        for text in [&yaml, &json] {
            assert!(parse_within(text, 100).is_ok(), "{text}");
            let e = parse_within(text, 40).unwrap_err();
            assert!(
                e.message.contains("more than 40 values") || e.message.contains("budget"),
                "{}",
                e.message
            );
        }
    }
}
