//! The `local/` provider as the CLI wires it: model files found by name, one worker
//! process per file (this same binary, `weft model-worker`), shared by every run.

use std::path::PathBuf;
use std::sync::Arc;

/// The model for blocks that name none, when neither `--model` nor `$WEFT_MODEL` does.
pub(crate) const DEFAULT_LOCAL_MODEL: &str = "local/smollm2";

/// The `local/` provider: `local/<name>` is `<models>/<name>.gguf` (`$WEFT_MODELS`, by
/// default `~/.cache/weft/models`), or a path when the name ends in `.gguf`; a flow's
/// alias may set `path` and `timeout_ms`. One worker process per model file, shared by
/// every run of this process.
pub(crate) fn local_models(program: PathBuf, dir: Option<PathBuf>) -> weft_llm::ProviderFactory {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use weft_core::{BlockError, ErrorKind};
    let loaded: Mutex<HashMap<PathBuf, Arc<weft_local::LocalModel>>> = Mutex::default();
    Arc::new(move |name, def| {
        let option = |key: &str| def.and_then(|d| d.options.get(key));
        if let Some(def) = def
            && let Some(unknown) = def
                .options
                .keys()
                .find(|k| !["path", "timeout_ms"].contains(&k.as_str()))
        {
            return Err(BlockError::new(
                ErrorKind::Config,
                format!("a local model has no option `{unknown}` (it has path, timeout_ms)"),
            ));
        }
        let path = match option("path").and_then(|v| v.as_str()) {
            Some(p) => PathBuf::from(p),
            None => weft_local::model_path(name, dir.as_deref()),
        };
        let timeout = option("timeout_ms").and_then(|v| v.as_u64()).map_or(
            std::time::Duration::from_secs(300),
            std::time::Duration::from_millis,
        );
        let mut loaded = loaded.lock().expect("local models lock");
        if let Some(m) = loaded.get(&path) {
            return Ok(m.clone() as Arc<dyn weft_core::ports::Model>);
        }
        let command = weft_local::ModelCommand {
            program: program.clone(),
            args: vec!["model-worker".into()],
        };
        let model = Arc::new(weft_local::LocalModel::new(command, path.clone(), timeout)?);
        // The weights are Weft's: no flow's file actions may overwrite them.
        weft_files::protect(&path);
        loaded.insert(path, model.clone());
        Ok(model as Arc<dyn weft_core::ports::Model>)
    })
}
