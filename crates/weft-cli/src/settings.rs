//! What the environment contributes to a command, read once at start-up (in the manner
//! of ripgrep's `LowArgs -> HiArgs`): clap parses the flags without I/O, then
//! [`Settings::resolve`] reads the environment variables and this binary's path, and
//! the commands build their components from the result. No command reads the
//! environment itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weft_store::Durability;

/// Where runs are kept: a SQLite file, or a PostgreSQL database that many processes
/// share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file (created when missing).
    File(PathBuf),
    /// A `postgres://` or `postgresql://` connection string.
    Postgres(String),
}

impl Database {
    /// What `--db` or `WEFT_DB` names: a connection string by its scheme, else a file.
    pub fn named(name: &Path) -> Database {
        match name.to_str() {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Database::Postgres(url.to_owned())
            }
            _ => Database::File(name.to_path_buf()),
        }
    }
}

/// The environment, as the commands see it.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The run database when `--db` names none: `$WEFT_DB`, else
    /// `$XDG_DATA_HOME/weft/weft.db`, else `~/.local/share/weft/weft.db`.
    pub default_db: PathBuf,
    /// Where Weft keeps its data by default: `$XDG_DATA_HOME/weft`, else
    /// `~/.local/share/weft` (a PostgreSQL service's files directory is made here).
    pub data_dir: PathBuf,
    /// `$WEFT_DURABILITY`: `power` syncs every commit to disk.
    pub durability: Durability,
    /// `secrets` for templates and code: each `WEFT_SECRET_<NAME>` variable as
    /// `secrets.<name>` (lower-cased) and as written. Only variables named so, never the
    /// whole environment.
    pub secrets: serde_json::Value,
    /// `$WEFT_MODELS`: where `local/<name>` model files are found.
    pub models_dir: Option<PathBuf>,
    /// `$WEFT_TOKEN`: the bearer token `weft serve` demands when `--token-file` names
    /// none.
    pub token: Option<String>,
    /// Who answers approvals from this shell: `$USER`, else `$LOGNAME`.
    pub user: Option<String>,
    /// This binary, which also serves as the sandbox and model worker.
    pub program: Option<PathBuf>,
    /// Where traces go, from the `OTEL_*` variables (none: nowhere).
    pub otel: Option<weft_otel::TelemetryConfig>,
    /// The running trace export, once [`Settings::start_telemetry`] started it. Dropping
    /// the last handle sends what is queued.
    pub telemetry: Option<Arc<weft_otel::Telemetry>>,
    /// Where the flows' HTTP requests and model calls may go (`--allow-net`,
    /// `--deny-net`; a service's also refuses metadata addresses).
    pub net: Arc<weft_net::NetPolicy>,
    /// The variables model providers read (API keys, base URLs, `WEFT_PRICES`, ...).
    vars: Arc<HashMap<String, String>>,
}

impl Settings {
    /// Resolves the settings from `vars` (the process environment, or a test's).
    pub fn resolve(
        vars: impl IntoIterator<Item = (String, String)>,
        program: Option<PathBuf>,
    ) -> Settings {
        let vars: HashMap<String, String> = vars.into_iter().collect();
        let get = |k: &str| vars.get(k).filter(|v| !v.is_empty()).map(String::as_str);
        let data_dir = get("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| get("HOME").map(|h| Path::new(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."))
            .join("weft");
        let default_db = match get("WEFT_DB") {
            Some(p) => PathBuf::from(p),
            None => data_dir.join("weft.db"),
        };
        let durability = match get("WEFT_DURABILITY") {
            Some("power") => Durability::Power,
            _ => Durability::Process,
        };
        // Each secret is read by its name in lower case (`secrets.api_token`) or as the
        // variable writes it (`secrets.API_TOKEN`).
        let secrets = serde_json::Value::Object(
            vars.iter()
                .filter_map(|(k, v)| {
                    k.strip_prefix("WEFT_SECRET_")
                        .filter(|n| !n.is_empty())
                        .map(|n| (n, serde_json::Value::String(v.clone())))
                })
                .flat_map(|(n, v)| [(n.to_lowercase(), v.clone()), (n.to_owned(), v)])
                .collect(),
        );
        Settings {
            default_db,
            data_dir,
            durability,
            secrets,
            models_dir: get("WEFT_MODELS").map(PathBuf::from),
            token: get("WEFT_TOKEN").map(|t| t.trim().to_owned()),
            user: get("USER").or_else(|| get("LOGNAME")).map(str::to_owned),
            program,
            otel: weft_otel::TelemetryConfig::resolve(None, |k| get(k).map(str::to_owned)),
            telemetry: None,
            net: Arc::new(weft_net::NetPolicy::open()),
            vars: Arc::new(vars),
        }
    }

    /// Starts exporting traces when `--otel` (`flag`) or the `OTEL_*` variables say
    /// where to; the variables' headers, service name and content setting hold either
    /// way.
    pub fn start_telemetry(&mut self, flag: Option<&str>) -> Result<(), String> {
        let vars = self.vars.clone();
        let get = |k: &str| vars.get(k).filter(|v| !v.is_empty()).cloned();
        let config = match flag {
            Some(url) => weft_otel::TelemetryConfig::resolve(Some(url), get),
            None => self.otel.clone(),
        };
        if let Some(config) = config {
            self.telemetry = Some(Arc::new(weft_otel::Telemetry::start(config)?));
        }
        Ok(())
    }

    /// The settings of this process: its environment and its executable.
    pub fn from_process() -> Settings {
        Settings::resolve(std::env::vars(), std::env::current_exe().ok())
    }

    /// The database a command uses: `--db`, else the default.
    pub fn db(&self, flag: Option<&Path>) -> Database {
        Database::named(flag.unwrap_or(&self.default_db))
    }

    /// The variables, for model providers.
    pub fn model_env(&self) -> weft_llm::Env {
        let vars = self.vars.clone();
        Arc::new(move |k: &str| vars.get(k).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        Settings::resolve(
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
            None,
        )
    }

    #[test]
    fn only_prefixed_variables_become_secrets() {
        let s = settings(&[
            ("WEFT_SECRET_API_KEY", "k"),
            ("HOME", "/root"),
            ("WEFT_SECRET_", "x"),
        ]);
        assert_eq!(s.secrets, json!({"api_key": "k", "API_KEY": "k"}));
    }

    #[test]
    fn the_database_comes_from_the_flag_then_weft_db_then_xdg_then_home() {
        let s = settings(&[("WEFT_DB", "/x/runs.db"), ("HOME", "/home/a")]);
        let file = |p: &str| Database::File(PathBuf::from(p));
        assert_eq!(s.db(Some(Path::new("/flag.db"))), file("/flag.db"));
        assert_eq!(s.db(None), file("/x/runs.db"));
        let s = settings(&[("XDG_DATA_HOME", "/data"), ("HOME", "/home/a")]);
        assert_eq!(s.db(None), file("/data/weft/weft.db"));
        let s = settings(&[("WEFT_DB", ""), ("HOME", "/home/a")]);
        assert_eq!(s.db(None), file("/home/a/.local/share/weft/weft.db"));
    }

    #[test]
    fn a_postgres_url_names_a_shared_database() {
        let url = "postgres://weft@db:5432/runs";
        let s = settings(&[("WEFT_DB", url)]);
        assert_eq!(s.db(None), Database::Postgres(url.into()));
        let other = "postgresql://u:p@h/d";
        assert_eq!(
            s.db(Some(Path::new(other))),
            Database::Postgres(other.into())
        );
        // A file whose name merely mentions postgres is a file.
        assert_eq!(
            s.db(Some(Path::new("postgres.db"))),
            Database::File(PathBuf::from("postgres.db"))
        );
    }

    #[test]
    fn durability_and_model_variables_are_read_once() {
        let s = settings(&[("WEFT_DURABILITY", "power"), ("OPENAI_API_KEY", "sk")]);
        assert_eq!(s.durability, Durability::Power);
        assert_eq!((s.model_env())("OPENAI_API_KEY").as_deref(), Some("sk"));
        assert_eq!((s.model_env())("HOME"), None);
    }
}
