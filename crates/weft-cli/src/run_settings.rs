//! The settings a run's effects depend on, kept with the run: a run continued from
//! another directory or shell writes its files and calls its models where it started.

use crate::cli::OutputArgs;
use crate::settings::Database;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

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

    /// The settings of the runs a long-lived service starts (`weft serve`, `weft worker`,
    /// `weft mcp`): `files`, else a directory of the service's own beside its database
    /// (`<database dir>/files`, or `<data dir>/files` for PostgreSQL), never the
    /// working directory, which is where operators keep the database and the token.
    /// The directory is made now; one that holds any of Weft's own files registered so
    /// far (the database, its side files, the token) is refused, naming both.
    pub fn for_service(
        files: Option<PathBuf>,
        model: Option<String>,
        db: &Database,
        data_dir: &Path,
    ) -> Result<RunSettings, String> {
        let files = absolute(files.unwrap_or_else(|| {
            match db {
                Database::File(path) => path
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
                    .join("files"),
                Database::Postgres(_) => data_dir.join("files"),
            }
        }));
        std::fs::create_dir_all(&files).map_err(|e| {
            format!(
                "error: cannot make the files directory {}: {e}",
                files.display()
            )
        })?;
        if let Some(held) = weft_files::own_file_under(&files) {
            return Err(format!(
                "error: the files directory {} holds {}, one of Weft's own files: every flow may read and write its files directory\n  hint: give the service a directory of its own with --files DIR, or leave --files out (it then uses files/ beside the database)",
                files.display(),
                held.display(),
            ));
        }
        Ok(RunSettings { files, model })
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
    fn a_service_s_files_directory_is_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("weft.db");
        weft_files::protect_database(&db);
        let file = Database::File(db.clone());
        let run = RunSettings::for_service(None, None, &file, dir.path()).unwrap();
        assert_eq!(run.files, dir.path().join("files"));
        assert!(run.files.is_dir(), "made on start");
        let pg = Database::Postgres("postgres://h/d".into());
        let data = dir.path().join("data");
        let run = RunSettings::for_service(None, None, &pg, &data).unwrap();
        assert_eq!(run.files, data.join("files"));
        let e = RunSettings::for_service(Some(dir.path().into()), None, &file, &data).unwrap_err();
        assert!(e.contains(&dir.path().display().to_string()), "{e}");
        let held = dir.path().canonicalize().unwrap().join("weft.db");
        assert!(e.contains(&held.display().to_string()), "{e}");
        let elsewhere = tempfile::tempdir().unwrap();
        let run =
            RunSettings::for_service(Some(elsewhere.path().into()), None, &file, &data).unwrap();
        assert_eq!(run.files, elsewhere.path());
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
