//! `uses:` actions: model actions go to [`super::llm`]; the others are Weft's built-in
//! actions by name, and TEA's actions Weft does not have load as nodes that fail when
//! they run ([`super::foreign`]).

use super::{Compiler, transform};
use serde_json::{Map, Value};
use weft_core::Diagnostic;
use weft_core::ir::{ActionSpec, Block, BlockKind, SourceLines, ValueTemplate};

use super::browser::BROWSER;
use super::code_execute::CODE_EXECUTE;
use super::embed::EMBED;
use super::llm::MODEL;
/// A model call whose answer Weft checked against a schema, giving its `content` as the
/// JSON text TEA's `llm.call` returns (tea-notes: `{"content": TEXT, "usage": ...}`), so
/// `json.loads(result["content"])` works as in TEA.
fn as_text(call: Block) -> Block {
    let text = transform(Value::from(
        "{{ input | merge({'content': input.content | text}) }}",
    ));
    Block::new(BlockKind::Sequence(vec![call, text]))
}

/// Actions Weft runs itself, by their names in tea files.
pub(super) use crate::BUILTIN_ACTIONS as BUILTIN;

impl Compiler<'_> {
    /// The block for `uses: NAME` with `with:`, at `ptr` (the node's pointer).
    pub(super) fn action(
        &mut self,
        uses: &str,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        if MODEL.contains(&uses) {
            if with.is_none() {
                // TEA loads such a node and fails when it runs (or, in its Python
                // runtime, passes over an `action:` node); its options are often under
                // a key neither reads, such as `config:`.
                let message = format!(
                    "`{uses}` has no options (TEA reads them from `with:` or `params:`), so it has no model or messages to send"
                );
                let hint = "give the node `with: {model: ..., messages: [...]}`";
                return Some(self.unavailable(message, hint, ptr, node));
            }
            let call = self.llm_call(uses, with, ptr, node)?;
            let structured = with.is_some_and(|w| w.get("response_format").is_some());
            return Some(if structured { as_text(call) } else { call });
        }
        // Keep in step with `PATTERNS`.
        match uses {
            "reflection.loop" => return self.reflection_loop(with, ptr, node),
            "reason.cot" => return self.reason_cot(with, ptr, node),
            "reason.self_correct" => return self.reason_self_correct(with, ptr, node),
            "reason.react" => return self.reason_react(with, ptr, node),
            "retry.loop" => return self.retry_loop(with, ptr, node),
            "validate.extraction" => return self.validate_extraction(with, ptr, node),
            "agent.dispatch" => return self.agent_dispatch(with, ptr, node),
            "agent.parallel" => return self.agent_parallel(with, ptr, node),
            "agent.sequential" => return self.agent_sequential(with, ptr, node),
            "agent.coordinate" => return self.agent_coordinate(with, ptr, node),
            "return" => return Some(returned(with)),
            u if EMBED.contains(&u) => return self.llm_embed(u, with, ptr, node),
            "plan.decompose" => return self.plan_decompose(with, ptr, node),
            "plan.execute" => return self.plan_execute(with, ptr, node),
            "plan.replan" => return self.plan_replan(with, ptr, node),
            "plan.status" => return self.plan_status(with, ptr),
            u if CODE_EXECUTE.contains(&u) => return self.code_execute(u, with, ptr, node),
            u if BROWSER.contains(&u) => return self.browser_code(u, with, ptr, node),
            _ => {}
        }
        if BUILTIN.contains(&uses) {
            return Some(Block::new(BlockKind::Action(ActionSpec {
                uses: uses.to_owned(),
                params: with.cloned().map(ValueTemplate),
            })));
        }
        let known = || {
            BUILTIN
                .iter()
                .chain(MODEL)
                .chain(PATTERNS)
                .chain(EMBED)
                .chain(CODE_EXECUTE)
                .chain(BROWSER)
                .copied()
        };
        if let Some(need) = super::foreign::needs(uses) {
            let hint = "docs/dialects/tea.md lists TEA's actions and what Weft offers instead";
            return Some(self.unavailable(super::foreign::message(uses, need), hint, ptr, node));
        }
        if !resembles_a_known_action(uses, known()) {
            // TEA also runs actions from Python modules (`imports:`, `--actions-module`)
            // and looks every action up only when its node runs; a name unlike any Weft
            // or TEA knows is such an action, or a mistake the run will name.
            let message = format!(
                "`{uses}` is neither an action of Weft nor of The Edge Agent (TEA loads further actions from Python modules, which Weft does not run)"
            );
            let hint = format!(
                "Weft runs these actions: {}",
                known().collect::<Vec<_>>().join(", ")
            );
            return Some(self.unavailable(message, &hint, ptr, node));
        }
        let d = Diagnostic::error(format!("{ptr}/uses"), format!("unknown action `{uses}`"))
            .hint_closest(
                uses,
                known(),
                format!(
                    "Weft runs these actions: {}",
                    known().collect::<Vec<_>>().join(", ")
                ),
            );
        self.diags.push(d);
        None
    }

    /// The `with:` of action `uses` as a mapping; when it is none, an error says the
    /// action `needs` `with:` and what else, with an `example`.
    pub(super) fn with_mapping<'w>(
        &mut self,
        uses: &str,
        with: Option<&'w Value>,
        wptr: &str,
        needs: &str,
        example: &str,
    ) -> Option<&'w Map<String, Value>> {
        let mapping = with.and_then(Value::as_object);
        if mapping.is_none() {
            self.diags.push(
                Diagnostic::error(wptr, format!("{uses} needs `with:` and {needs}")).hint(example),
            );
        }
        mapping
    }

    /// Option `key` of action `uses`, a string; without one, an error at `wptr` says the
    /// action needs it and `what` it is, with `hint` (an example) when given.
    pub(super) fn required_text<'w>(
        &mut self,
        uses: &str,
        with: &'w Map<String, Value>,
        (key, what, hint): (&str, &str, Option<&str>),
        wptr: &str,
    ) -> Option<&'w str> {
        let text = with.get(key).and_then(Value::as_str);
        if text.is_none() {
            let d = Diagnostic::error(wptr, format!("{uses} needs `{key}`, {what}"));
            self.diags.push(match hint {
                Some(h) => d.hint(h),
                None => d,
            });
        }
        text
    }

    /// The `with:` of an action whose options are all optional: none is no options; a
    /// mapping's keys must be among `options` (when given: some actions hand the
    /// others on, see `passed_on_options`).
    pub(super) fn optional_with<'w>(
        &mut self,
        uses: &str,
        with: Option<&'w Value>,
        wptr: &str,
        options: Option<&[&str]>,
    ) -> Option<&'w Map<String, Value>> {
        static NONE: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
        let mapping = match with {
            None | Some(Value::Null) => return Some(&NONE),
            Some(Value::Object(m)) => m,
            Some(_) => {
                self.diags.push(Diagnostic::error(
                    wptr,
                    format!("the `with:` of {uses} is a mapping of its options"),
                ));
                return None;
            }
        };
        if let Some(options) = options {
            self.only_options(uses, mapping, wptr, options);
        }
        Some(mapping)
    }

    /// [`Self::with_mapping`], each key of which must be one of `options`.
    pub(super) fn with_options<'w>(
        &mut self,
        uses: &str,
        with: Option<&'w Value>,
        wptr: &str,
        (needs, example): (&str, &str),
        options: &[&str],
    ) -> Option<&'w Map<String, Value>> {
        let with = self.with_mapping(uses, with, wptr, needs, example)?;
        self.only_options(uses, with, wptr, options);
        Some(with)
    }

    /// An error for each key of `with` that is not one of `options`.
    fn only_options(
        &mut self,
        uses: &str,
        with: &Map<String, Value>,
        wptr: &str,
        options: &[&str],
    ) {
        for key in with.keys().filter(|k| !options.contains(&k.as_str())) {
            let hint = format!("its options: {}", options.join(", "));
            self.unknown_option(uses, key, wptr, options, hint);
        }
    }

    /// The error for option `key` of action `uses`, which has only `options`.
    pub(super) fn unknown_option(
        &mut self,
        uses: &str,
        key: &str,
        wptr: &str,
        options: &[&str],
        hint: String,
    ) {
        let d = Diagnostic::error(
            weft_core::validate::child_pointer(wptr, key),
            format!("{uses} has no option `{key}`"),
        );
        self.diags
            .push(d.hint_closest(key, options.iter().copied(), hint));
    }

    /// For an action whose `code` holds a template, which TEA renders into the code
    /// before running it, a node that fails saying that Weft runs `what` as written.
    pub(super) fn templated_code(
        &mut self,
        uses: &str,
        code: &str,
        what: &str,
        hint: &str,
        (ptr, node): (&str, &str),
    ) -> Option<Block> {
        if !super::holds_template(code) {
            return None;
        }
        let message = format!(
            "{uses}'s code holds a template, which TEA renders into the code before running it; Weft runs {what} as written"
        );
        Some(self.unavailable(message, hint, ptr, node))
    }

    /// Where the `code` option under `wptr` sits in the file, for a script whose line
    /// `source_line` is the code's first.
    pub(super) fn code_origin(&self, wptr: &str, source_line: u32) -> Option<SourceLines> {
        self.map
            .text_line(&format!("{wptr}/code"))
            .map(|file_line| SourceLines {
                source_line,
                file_line,
            })
    }

    /// A node whose action Weft cannot run: a warning now, and a block that fails with
    /// `message` when a run reaches it.
    pub(super) fn unavailable(
        &mut self,
        message: String,
        hint: &str,
        ptr: &str,
        node: &str,
    ) -> Block {
        self.diags.push(
            Diagnostic::warning(
                format!("{ptr}/uses"),
                format!("{message}: a run that reaches node `{node}` fails there"),
            )
            .hint(hint),
        );
        refusal(message)
    }
}

/// TEA's browser runtime's `return`: the node's result is `value`, else its whole `with`.
fn returned(with: Option<&Value>) -> Block {
    let value = with
        .and_then(|w| w.get("value"))
        .or(with)
        .cloned()
        .unwrap_or(Value::Null);
    transform(value)
}

/// TEA's actions that Weft compiles to its own blocks (`reflection.rs`, `reasoning.rs`,
/// `self_correct.rs`, `react.rs`, `retry.rs`, `extraction.rs`, `planning/`,
/// `agents.rs`, `agent_chain.rs`, `coordinate.rs`; `return` here; `llm.embed`, `code.execute` and the browser runtime's
/// `lua.eval` and `prolog.query` are `embed::EMBED`, `code_execute::CODE_EXECUTE` and
/// `browser::BROWSER`).
const PATTERNS: &[&str] = &[
    "reflection.loop",
    "reason.cot",
    "reason.self_correct",
    "reason.react",
    "retry.loop",
    "validate.extraction",
    "plan.decompose",
    "plan.execute",
    "plan.replan",
    "plan.status",
    "agent.dispatch",
    "agent.parallel",
    "agent.sequential",
    "agent.coordinate",
    "return",
];

/// Whether `uses` is within a typo of a name in `known` (the same family, or a few
/// edits away): such a name is refused with a did-you-mean when the file loads.
fn resembles_a_known_action<'a>(uses: &str, known: impl Iterator<Item = &'a str>) -> bool {
    fn family(name: &str) -> &str {
        name.split('.').next().unwrap_or(name)
    }
    let own = family(uses);
    known
        .into_iter()
        .any(|k| family(k) == own || strsim::levenshtein(k, uses) <= 3)
}

/// A block that fails when it runs, with `message`: a node the file may hold, whose
/// feature Weft does not have, so the rest of the flow still loads and runs.
pub(super) fn refusal(message: String) -> Block {
    let mut refuse = Block::new(BlockKind::Passthrough);
    refuse.policy.assert.push(weft_core::ir::Assertion {
        warn: false,
        that: weft_core::ir::Expr("false".into()),
        message: Some(message),
    });
    refuse
}
