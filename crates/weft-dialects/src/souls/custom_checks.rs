//! A project's own assertions, `type: custom:<id>`: `custom/assertions/<id>.yaml` names
//! a Python file beside it whose `get_assert(output, context)` (promptfoo's contract)
//! returns a bool, a score, or `{pass, score, reason}`. It runs in Weft's Python
//! sandbox beside the block's output, with the assertion's `config` as
//! `context["config"]`, checked first against the manifest's `params` schema.

use super::Compiler;
use super::assertions::{AssertionDef, SideCheck};
use super::blocks::DEFAULT_IMPORTS;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, CodeLimits, CodeSpec, ValueTemplate};

/// How long a project's assertion may run.
const CHECK_SECONDS: u64 = 30;

/// `custom/assertions/<id>.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default, rename = "version")]
    _version: Option<Value>,
    id: String,
    #[serde(default, rename = "kind")]
    _kind: Option<String>,
    #[serde(default, rename = "name")]
    _name: Option<String>,
    #[serde(default, rename = "description")]
    _description: Option<String>,
    #[serde(default, rename = "returns")]
    _returns: Option<String>,
    source: String,
    #[serde(default)]
    params: Option<Value>,
}

impl Compiler<'_> {
    /// The check `custom:<id>` of `a` at `ptr`, the `n`-th beside the block's output.
    pub(super) fn custom_check(
        &mut self,
        id: &str,
        a: &AssertionDef,
        ptr: &str,
        n: usize,
    ) -> Option<SideCheck> {
        let (path, manifest) = self.assertion_manifest(id, ptr)?;
        let config = a.config.clone().unwrap_or_else(|| json!({}));
        if let Some(schema) = &manifest.params {
            match jsonschema::validator_for(schema) {
                Ok(v) => {
                    if let Some(e) = v.iter_errors(&config).next() {
                        self.diags.push(Diagnostic::error(
                            format!("{ptr}/config"),
                            format!("the config of `custom:{id}` does not fit its params: {e}"),
                        ));
                        return None;
                    }
                }
                Err(e) => {
                    self.diags.push(Diagnostic::error(
                        ptr,
                        format!("{}: params is not a JSON Schema: {e}", path.display()),
                    ));
                    return None;
                }
            }
        }
        let source = (super::is_file_id(&manifest.source))
            .then(|| path.with_file_name(&manifest.source))
            .and_then(|p| std::fs::read_to_string(p).ok());
        let Some(source) = source.filter(|s| s.contains("def get_assert(")) else {
            self.diags.push(
                Diagnostic::error(
                    ptr,
                    format!(
                        "`custom:{id}`: {} beside {} cannot be read, or defines no get_assert",
                        manifest.source,
                        path.display()
                    ),
                )
                .hint("source names a Python file beside the manifest with def get_assert(output, context)"),
            );
            return None;
        };
        let config_text = Value::from(config.to_string());
        let spec = CodeSpec {
            language: "python".into(),
            source,
            origin: None,
            entry: Some("get_assert".into()),
            args: Some(ValueTemplate(json!({
                "output": "{{ text(input) }}",
                "context": {"config": format!("{{{{ fromjson({config_text}) }}}}"), "vars": {}},
            }))),
            imports: Some(DEFAULT_IMPORTS.iter().map(|m| (*m).to_owned()).collect()),
            builtins: None,
            limits: CodeLimits {
                time_ms: CHECK_SECONDS * 1000,
                ..CodeLimits::default()
            },
        };
        let name = format!("check{n}");
        let r = format!("output.{name}");
        let floor = a.threshold.unwrap_or(0.5);
        Some(SideCheck {
            holds: format!(
                "(({r} is boolean and {r}) or ({r} is number and {r} >= {floor}) or ({r} is mapping and {r}.pass))"
            ),
            message: format!("the assertion `custom:{id}` did not pass the output"),
            name,
            block: Block::new(BlockKind::Code(spec)),
        })
    }

    /// The manifest of the project's assertion `id`, and where it is.
    fn assertion_manifest(
        &mut self,
        id: &str,
        ptr: &str,
    ) -> Option<(std::path::PathBuf, Manifest)> {
        let found = if super::is_file_id(id) {
            self.project_file("assertions", id).1
        } else {
            None
        };
        let Some((path, text)) = found else {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/type"),
                    format!("no assertion `custom:{id}` in the project's custom/assertions/"),
                )
                .hint(
                    "custom/assertions/<id>.yaml: {id, kind: assertion, source: <id>.py, params}",
                ),
            );
            return None;
        };
        let what = format!("the assertion file for `custom:{id}`");
        let m: Manifest = self.read_project_file(&path, &text, &what, ptr)?;
        if m.id != id {
            self.diags.push(Diagnostic::error(
                ptr,
                format!("{} says its id is `{}`", path.display(), m.id),
            ));
            return None;
        }
        Some((path, m))
    }
}
