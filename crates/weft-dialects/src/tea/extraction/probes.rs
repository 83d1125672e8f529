//! `validate.extraction`'s semantic probes: for each item a probe selects, a model is
//! asked the probe's question (a template over the item's fields, `state` and `text`)
//! and its answer read as yes or no, TEA's way.

use super::{FACT_CHECKER, PROBE_SCOPE, YES, literal, python};
use crate::tea::{Compiler, template, transform};
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, MapSpec, OnError, Rescue, ValueTemplate};

/// At most this many questions of one probe are asked at once.
const AT_ONCE: u32 = 4;

/// One probe of `semantic_probes`.
pub(super) struct Probe {
    /// `entity` or `relationship`.
    pub for_each: String,
    /// TEA's `where`: `field == 'value'` or `field != 'value'`.
    pub filter: Option<String>,
    /// The question, a template.
    pub text: String,
    /// `reject` (the first `no` ends the probing) or `warn`.
    pub on_fail: String,
}

impl Compiler<'_> {
    /// The probes of `semantic_probes`, each checked as TEA reads it.
    pub(super) fn probes(&mut self, v: Option<&Value>, wptr: &str) -> Option<Vec<Probe>> {
        let list = match v {
            None | Some(Value::Null) => return Some(Vec::new()),
            Some(Value::Array(list)) => list,
            Some(_) => {
                self.diags.push(Diagnostic::error(
                    format!("{wptr}/probes"),
                    "semantic_probes is a list of probes: {for_each, where, probe, on_fail}",
                ));
                return None;
            }
        };
        let mut out = Vec::new();
        for (i, p) in list.iter().enumerate() {
            let ptr = format!("{wptr}/probes/{i}");
            let field = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
            let for_each = field("for_each").unwrap_or_default();
            if !["entity", "relationship"].contains(&for_each.as_str()) {
                let d = Diagnostic::error(
                    format!("{ptr}/for_each"),
                    format!("a probe's for_each is entity or relationship, not `{for_each}`"),
                );
                self.diags.push(d.hint_closest(
                    &for_each,
                    ["entity", "relationship"],
                    "for_each: relationship",
                ));
                return None;
            }
            let filter = field("where");
            if let Some(w) = &filter
                && !simple_filter(w)
            {
                self.diags.push(
                    Diagnostic::error(format!("{ptr}/where"), format!("Weft reads a probe's `where` as TEA's comparison of a field with a text, not `{w}`"))
                        .hint("where: \"type == 'mother'\"   or   where: \"type != 'sibling'\""),
                );
                return None;
            }
            let on_fail = field("on_fail").unwrap_or_else(|| "reject".into());
            if !["reject", "warn"].contains(&on_fail.as_str()) {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/on_fail"),
                        format!("on_fail is reject or warn, not `{on_fail}`"),
                    )
                    .hint("on_fail: warn"),
                );
                return None;
            }
            out.push(Probe {
                for_each,
                filter,
                text: field("probe").unwrap_or_default(),
                on_fail,
            });
        }
        Some(out)
    }

    /// Probe `index`: its questions, at once, then their answers in the items' order.
    pub(super) fn probe(
        &mut self,
        index: usize,
        probe: &Probe,
        source_text: &Value,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let mut call = Map::new();
        for key in ["model", "provider", "api_base"] {
            if let Some(v) = self.llm_settings.get(key) {
                call.insert(key.into(), v.clone());
            }
        }
        call.insert("system".into(), Value::from(FACT_CHECKER));
        call.insert("prompt".into(), Value::from("{{ question }}"));
        call.insert("max_tokens".into(), Value::from(10));
        let mut ask =
            self.llm_call("validate.extraction", Some(&Value::Object(call)), ptr, node)?;
        ask.policy.rescue.push(Rescue {
            when: Vec::new(),
            then: transform(Value::from(
                "{{ {'content': '', 'error': input.error.message} }}",
            )),
        });
        let mut judge = transform(Value::from(format!(
            "{{{{ {{'item': item, 'question': question, 'response': input.content | string, 'yes': {}, 'error': input.error or none}} }}}}",
            YES
        )));
        judge.data.bind = IndexMap::from([(
            "r".to_owned(),
            template("{{ input.content | string | lower | trim }}"),
        )]);
        let mut asked = Block::new(BlockKind::Sequence(vec![ask, judge]));
        asked.data.bind = IndexMap::from([("question".to_owned(), template(&probe.text))]);
        let mut item_scope = Block::new(BlockKind::Sequence(vec![asked]));
        item_scope.data.bind = field_names(&probe.text)
            .into_iter()
            .map(|n| {
                let value = template(&format!("{{{{ item.get({}) }}}}", Value::from(n.as_str())));
                (n, value)
            })
            .chain([("text".to_owned(), ValueTemplate(source_text.clone()))])
            .collect();
        let questions = Block::new(BlockKind::Map(MapSpec {
            items: template(&format!("{{{{ record.probe_items[{index}] }}}}")),
            item_var: "item".into(),
            index_var: "item_index".into(),
            item_input: None,
            body: Box::new(item_scope),
            max_concurrency: Some(AT_ONCE),
            fail_fast: false,
            on_error: OnError::Fail,
            isolate: true,
        }));
        let fold = python(
            "after_probe(record, answers, probe)",
            json!({
                "record": "{{ record }}",
                "answers": "{{ input }}",
                "probe": {"probe": literal(&probe.text), "on_fail": probe.on_fail},
            }),
        );
        let mut b = Block::new(BlockKind::Sequence(vec![questions, fold]));
        b.data.bind = IndexMap::from([("record".to_owned(), template("{{ input }}"))]);
        Some(b)
    }
}

/// Whether `w` is TEA's `field == 'value'` or `field != 'value'`.
fn simple_filter(w: &str) -> bool {
    let Some((field, value)) = w.split_once("==").or_else(|| w.split_once("!=")) else {
        return false;
    };
    let field = field.trim();
    let value = value.trim();
    !field.is_empty()
        && field.chars().all(|c| c.is_alphanumeric() || c == '_')
        && value.len() >= 2
        && (value.starts_with('\'') && value.ends_with('\'')
            || value.starts_with('"') && value.ends_with('"'))
}

/// The names a question's template uses that are not in every template's scope: the
/// item's fields it reads (`{{ subject }}`), each bound to the item's value.
fn field_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = text;
    loop {
        let opens = [
            rest.find("{{").map(|i| (i, "}}")),
            rest.find("{%").map(|i| (i, "%}")),
        ];
        let Some((open, closer)) = opens.into_iter().flatten().min_by_key(|(i, _)| *i) else {
            break;
        };
        let inner = &rest[open + 2..];
        let close = inner.find(closer).unwrap_or(inner.len());
        let (mut quote, mut prev) = (None::<char>, ' ');
        let mut word = String::new();
        for c in inner[..close].chars().chain([' ']) {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '\'' || c == '"' => quote = Some(c),
                None if c.is_alphanumeric() || c == '_' => {
                    word.push(c);
                    continue;
                }
                None => {}
            }
            let starts_ok = word.chars().next().is_some_and(|f| !f.is_ascii_digit());
            if starts_ok
                && prev != '.'
                && prev != '|'
                && !PROBE_SCOPE.contains(&word.as_str())
                && !names.contains(&word)
            {
                names.push(std::mem::take(&mut word));
            }
            word.clear();
            if !c.is_whitespace() {
                prev = c;
            }
        }
        rest = &inner[close.min(inner.len())..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_s_item_fields_are_the_names_it_reads_beyond_the_scope() {
        assert_eq!(
            field_names(
                "Is {{ subject }} the mother of {{ object | upper }} in \"{{ state.input_text }}\"? {% if name %}{{ name }}{% endif %} {{ 'type' }} {{ x.y }}"
            ),
            ["subject", "object", "name", "x"]
        );
    }

    #[test]
    fn where_is_tea_s_comparison_of_a_field_with_a_text() {
        assert!(simple_filter("type == 'mother'"));
        assert!(simple_filter("kind != \"a b\""));
        assert!(!simple_filter("len(name) > 3"));
        assert!(!simple_filter("type == mother"));
    }
}
