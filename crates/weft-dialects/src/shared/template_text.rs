//! Literal text inside Weft templates: dialects whose prompts are plain text (with a few
//! placeholders of their own) keep the rest inert, whatever template syntax it holds.

/// `text` as a template that renders to exactly `text`.
pub(crate) fn literal(text: &str) -> String {
    if ["{{", "{%", "{#", "%}", "#}"]
        .iter()
        .any(|m| text.contains(m))
    {
        // `{% raw %}` cannot hold its own end tag; split around it.
        text.split("{% endraw %}")
            .map(|part| format!("{{% raw %}}{part}{{% endraw %}}"))
            .collect::<Vec<_>>()
            .join("{{ \"{% endraw %}\" }}")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::literal;

    #[test]
    fn plain_text_stays_and_template_syntax_is_kept_inert() {
        assert_eq!(literal("Summarize this."), "Summarize this.");
        assert_eq!(literal("a {{ b }} c"), "{% raw %}a {{ b }} c{% endraw %}");
        assert_eq!(
            literal("x{% endraw %}y"),
            "{% raw %}x{% endraw %}{{ \"{% endraw %}\" }}{% raw %}y{% endraw %}"
        );
    }
}
