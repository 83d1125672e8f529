//! TEA's runtime sections — `settings:`, `config:` and the extraction-validation inputs
//! — configure parts of The Edge Agent's own runtime. Weft reads each: what it does too
//! is applied (`settings.llm`'s model defaults, by `aliases.rs`), and for the rest a
//! warning says what Weft does instead or that it has no such part, so nothing is
//! silently dropped and a file written for TEA still loads.

use super::Compiler;
use super::doc::TeaDoc;
use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::validate::child_pointer;

/// What Weft does instead of each `settings` entry it does not use.
const SETTINGS: &[(&str, &str)] = &[
    (
        "llm",
        "its model, provider and api_base are the defaults of model actions; the rest (backend, model_path, api_key, shell_providers, ...) is TEA's model runtime: Weft routes models by id and reads keys from its own variables",
    ),
    (
        "auto_trace",
        "Weft journals every run (`weft runs show`) and exports OpenTelemetry traces (`--otel`)",
    ),
    (
        "trace_exporter",
        "Weft journals every run and exports OpenTelemetry traces (`--otel`)",
    ),
    (
        "trace_file",
        "Weft journals every run and exports OpenTelemetry traces (`--otel`)",
    ),
    (
        "trace_format",
        "Weft journals every run and exports OpenTelemetry traces (`--otel`)",
    ),
    (
        "opik",
        "Weft exports OpenTelemetry traces (`--otel`); Opik reads OTLP",
    ),
    (
        "progress",
        "`weft run` prints each step's progress on stderr",
    ),
    (
        "shell_providers",
        "Weft does not run model CLIs as shell commands",
    ),
];

/// What Weft does instead of each `config` entry.
const CONFIG: &[(&str, &str)] = &[
    (
        "raise_exceptions",
        "in Weft a node that fails fails the run (its error is the run's, with the node's path)",
    ),
    (
        "checkpoint_dir",
        "Weft journals every step in its database; `weft runs resume` continues a run",
    ),
];

/// What Weft does instead of each `checkpoint` entry.
const CHECKPOINT: &[(&str, &str)] = &[
    (
        "enabled",
        "Weft journals every step in its database; `weft runs resume` continues a run",
    ),
    (
        "dir",
        "Weft journals every step in its database (`--db`), not in checkpoint files",
    ),
];

/// `settings` entries Weft applies, so they get no warning (`agents.rs`).
const SETTINGS_APPLIED: &[&str] = &["agents"];

/// A section without the entries Weft applies.
fn without(section: Option<&Value>, applied: &[&str]) -> Option<Value> {
    section.map(|c| match c {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !applied.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    })
}

/// `config` entries Weft applies, so they get no warning (`interrupts.rs`).
const CONFIG_APPLIED: &[&str] = &["interrupt_before", "interrupt_after"];

impl Compiler<'_> {
    /// Reads `settings:`, `config:` and the extraction-validation sections, warning of
    /// each part Weft does not use.
    pub(super) fn runtime_sections(&mut self, tea: &TeaDoc) {
        let settings = without(tea.settings.as_ref(), SETTINGS_APPLIED);
        self.section("settings", settings.as_ref(), SETTINGS, "TEA's runtime");
        let config = without(tea.config.as_ref(), CONFIG_APPLIED);
        self.section("config", config.as_ref(), CONFIG, "TEA's compiler");
        self.section(
            "checkpoint",
            tea.checkpoint.as_ref(),
            CHECKPOINT,
            "TEA's checkpointer",
        );
        for (i, e) in tea.edges.iter().enumerate() {
            if let Some(strategy) = &e.parallel_strategy {
                self.diags.push(Diagnostic::warning(
                    format!("/edges/{i}/parallel_strategy"),
                    format!("`parallel_strategy: {strategy}` is read, not used: Weft runs parallel branches concurrently, each in its own sandbox, on this machine"),
                ));
            }
        }
        if tea.validation_logging.is_some() {
            self.diags.push(Diagnostic::warning(
                "/validation_logging",
                "`validation_logging` is read, not used: Weft journals each validation's result as its step's output",
            ));
        }
    }

    /// One mapping section: a warning for each entry, saying what Weft does instead.
    fn section(&mut self, name: &str, value: Option<&Value>, known: &[(&str, &str)], owner: &str) {
        let entries = match value {
            None | Some(Value::Null) => return,
            Some(Value::Object(o)) => o,
            Some(_) => {
                self.diags.push(Diagnostic::error(
                    format!("/{name}"),
                    format!("{name} is a mapping"),
                ));
                return;
            }
        };
        for key in entries.keys() {
            let instead = known.iter().find(|(k, _)| k == key).map_or_else(
                || format!("it configures a part of {owner} that Weft does not have"),
                |(_, w)| (*w).to_owned(),
            );
            self.diags.push(Diagnostic::warning(
                child_pointer(&format!("/{name}"), key),
                format!("`{name}.{key}` is read, not used: {instead}"),
            ));
        }
    }
}
