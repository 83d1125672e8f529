//! The settings a run's effects depend on, kept with the run: a run continued from
//! another directory or shell writes its files and calls its models where it started.

use crate::cli::OutputArgs;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// What a run's effects depend on besides the flow and its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The only directory file actions may read and write, absolute.
    pub files: PathBuf,
    /// The model for llm blocks that name none, when one was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl RunSettings {
    /// `files` (default: the current directory) made absolute, and `model`.
    pub fn new(files: Option<PathBuf>, model: Option<String>) -> RunSettings {
        RunSettings {
            files: absolute(files.unwrap_or_else(|| PathBuf::from("."))),
            model,
        }
    }

    /// A new run's: `--files` and `--model`.
    pub fn for_new_run(out: &OutputArgs) -> RunSettings {
        RunSettings::new(out.files.clone(), out.model.clone())
    }

    /// A continued run's: each flag given now wins over what the run stored, which wins
    /// over the defaults (runs stored by older versions kept nothing).
    pub fn for_continued_run(out: &OutputArgs, stored: Option<&Value>) -> RunSettings {
        let stored: Option<RunSettings> =
            stored.and_then(|v| serde_json::from_value(v.clone()).ok());
        let fresh = RunSettings::for_new_run(out);
        match stored {
            None => fresh,
            Some(stored) => RunSettings {
                files: match &out.files {
                    Some(_) => fresh.files,
                    None => stored.files,
                },
                model: out.model.clone().or(stored.model),
            },
        }
    }

    /// The value stored with the run.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// `path` made absolute against the current directory (without resolving links, so a
/// directory that does not exist yet is kept as given).
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn out(files: Option<&str>, model: Option<&str>) -> OutputArgs {
        OutputArgs {
            json: false,
            events: None,
            quiet: true,
            no_event_log: false,
            model: model.map(str::to_owned),
            files: files.map(PathBuf::from),
        }
    }

    #[test]
    fn a_continued_run_keeps_what_it_stored_unless_a_flag_says_otherwise() {
        let stored = json!({"files": "/srv/run", "model": "openai/gpt-4o"});
        let kept = RunSettings::for_continued_run(&out(None, None), Some(&stored));
        assert_eq!(kept.files, PathBuf::from("/srv/run"));
        assert_eq!(kept.model.as_deref(), Some("openai/gpt-4o"));
        let overridden =
            RunSettings::for_continued_run(&out(Some("/tmp/x"), Some("local/m")), Some(&stored));
        assert_eq!(overridden.files, PathBuf::from("/tmp/x"));
        assert_eq!(overridden.model.as_deref(), Some("local/m"));
        let old = RunSettings::for_continued_run(&out(None, None), None);
        assert!(old.files.is_absolute());
        assert_eq!(old.model, None);
    }
}
