//! Python function bodies, as several dialects have users write them: the file holds
//! only the body, and the runtime wraps it in a function definition.

/// `def <name>(<params>):` around the dedented `body`, after `prelude` (imports the
/// dialect provides). A body with no statements returns `None`, as an empty function
/// would if Python allowed one.
/// The line of `define`'s output on which the body's first line sits.
pub(crate) fn body_line(prelude: &str) -> u32 {
    prelude.lines().count() as u32 + 2
}

pub(crate) fn define(prelude: &str, name: &str, params: &[&str], body: &str) -> String {
    let mut out = String::from(prelude);
    out.push_str(&format!("def {name}({}):\n", params.join(", ")));
    let mut any = false;
    for line in dedent(body).lines() {
        if line.trim().is_empty() {
            out.push('\n');
        } else {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
            any = true;
        }
    }
    if !any {
        out.push_str("    return None\n");
    }
    out
}

/// Removes the indentation every non-blank line shares.
pub(crate) fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim_start()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_dedented_and_indented_under_its_definition() {
        let f = define(
            "import json\n",
            "f",
            &["a", "b"],
            "  x = a\n\n  return x + b\n",
        );
        assert_eq!(
            f,
            "import json\ndef f(a, b):\n    x = a\n\n    return x + b\n"
        );
    }

    #[test]
    fn an_empty_body_returns_none() {
        assert_eq!(
            define("", "f", &[], "\n  \n"),
            "def f():\n\n\n    return None\n"
        );
    }
}
