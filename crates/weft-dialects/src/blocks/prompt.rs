//! `llm` prompts: `{{fieldName}}` reads the block's input, `{{initial.fieldName}}` the
//! flow's input (spec 000). Everything else in the prompt is literal text, so it is
//! rewritten into a Weft template in which only those references are live.

use serde_json::Value;

/// A prompt rewritten as a Weft template, with the input fields it reads.
#[derive(Debug, PartialEq)]
pub(super) struct Prompt {
    pub template: String,
    /// The first segment of each `{{field...}}` reference (not `initial`), in order.
    pub fields: Vec<String>,
    /// Every reference: as written, and as an expression over `root` (`input` for
    /// fields, `initial`) once `{root}` is replaced.
    pub refs: Vec<Reference>,
}

/// One `{{...}}` reference of a prompt.
#[derive(Debug, PartialEq)]
pub(super) struct Reference {
    /// As written, trimmed: `doc.title`, `initial.lang`.
    pub shown: String,
    /// `true` for `initial.…`, `false` for the block's input.
    pub initial: bool,
    /// The subscripts after the root: `["doc"]["title"]`.
    pub subscripts: String,
}

/// Rewrites `prompt`; the error says which reference is not a field path.
pub(super) fn translate(prompt: &str) -> Result<Prompt, String> {
    let mut template = String::new();
    let mut fields = Vec::new();
    let mut refs = Vec::new();
    let mut rest = prompt;
    while let Some(open) = rest.find("{{") {
        literal(&mut template, &rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(format!(
                "`{{{{` at `{}` is never closed with `}}}}`",
                excerpt(&rest[open..])
            ));
        };
        let inner = after[..close].trim();
        let path = field_path(inner).ok_or_else(|| {
            format!(
                "`{{{{{inner}}}}}` is not a field reference: prompts read `{{{{fieldName}}}}` or `{{{{initial.fieldName}}}}`"
            )
        })?;
        let (root, segments) = match path.split_first() {
            Some((first, more)) if *first == "initial" => ("initial", more),
            _ => {
                fields.push(path[0].to_owned());
                ("input", &path[..])
            }
        };
        let subscripts: String = segments
            .iter()
            .map(|s| format!("[{}]", Value::from(*s)))
            .collect();
        template.push_str(&format!("{{{{ {root}{subscripts} }}}}"));
        refs.push(Reference {
            shown: inner.to_owned(),
            initial: root == "initial",
            subscripts,
        });
        rest = &after[close + 2..];
    }
    literal(&mut template, rest);
    Ok(Prompt {
        template,
        fields,
        refs,
    })
}

/// Literal text; syntax of the template language is kept inert.
fn literal(out: &mut String, text: &str) {
    out.push_str(&crate::template_text::literal(text));
}

/// `a.b.c` where each segment is a name (letters, digits, `_`, `-`).
fn field_path(inner: &str) -> Option<Vec<&str>> {
    let segments: Vec<&str> = inner.split('.').collect();
    let ok = |s: &&str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    };
    segments.iter().all(ok).then_some(segments)
}

fn excerpt(s: &str) -> String {
    s.chars().take(24).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_the_input_and_initial_reads_the_flow_input() {
        let p = translate("Hi {{name}}, in {{ initial.lang }} about {{doc.title}}.").unwrap();
        assert_eq!(
            p.template,
            r#"Hi {{ input["name"] }}, in {{ initial["lang"] }} about {{ input["doc"]["title"] }}."#
        );
        assert_eq!(p.fields, vec!["name", "doc"]);
        assert_eq!(p.refs[1].shown, "initial.lang");
        assert!(p.refs[1].initial);
        assert_eq!(p.refs[2].subscripts, r#"["doc"]["title"]"#);
    }

    #[test]
    fn template_syntax_in_the_text_stays_literal() {
        let p = translate("Use {% if %} and {# x #} as text: {{a}}").unwrap();
        assert_eq!(
            p.template,
            r#"{% raw %}Use {% if %} and {# x #} as text: {% endraw %}{{ input["a"] }}"#
        );
    }

    #[test]
    fn expressions_and_unclosed_braces_are_refused() {
        assert!(
            translate("{{ a + b }}")
                .unwrap_err()
                .contains("not a field reference")
        );
        assert!(translate("{{ a | upper }}").is_err());
        assert!(translate("{{}}").is_err());
        assert!(
            translate("hello {{name")
                .unwrap_err()
                .contains("never closed")
        );
    }
}
