//! File actions confined to one directory: a path that is absolute, climbs out with
//! `..`, or leads out through a symbolic link is refused.

use super::str_param;
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use weft_core::ports::{Native, NativeCall, NativeOutput};
use weft_core::{BlockError, ErrorKind, Value};

/// The directory file actions may touch.
pub use weft_files::FileRoot;

/// `path` resolved inside `root`, or the refusal as the action's error.
fn resolve(root: &FileRoot, path: &str) -> Result<PathBuf, BlockError> {
    root.resolve(path).map_err(|e| {
        let kind = match e {
            weft_files::PathError::Refused { .. } => ErrorKind::Action,
            weft_files::PathError::Unusable { .. } => ErrorKind::Config,
        };
        BlockError::new(kind, e.to_string())
    })
}

/// `file.read`: the text of `with.path`.
pub(crate) struct Read(pub(crate) Arc<FileRoot>);

#[async_trait]
impl Native for Read {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        let rel = str_param(&call, "path")?;
        let path = resolve(&self.0, rel)?;
        let text = tokio::fs::read_to_string(&path)
            .await
            .map_err(|e| BlockError::new(ErrorKind::Action, format!("file.read {rel}: {e}")))?;
        Ok(NativeOutput::from(Value::String(text)))
    }
}

/// `file.write` / `file.append`: writes `with.content` (text, or JSON for other values).
pub(crate) struct Write {
    pub(crate) root: Arc<FileRoot>,
    pub(crate) append: bool,
}

#[async_trait]
impl Native for Write {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        let rel = str_param(&call, "path")?;
        let path = resolve(&self.root, rel)?;
        let content = match call.config.get("content") {
            Some(v) => crate::as_text(v).into_owned(),
            None => {
                return Err(BlockError::new(
                    ErrorKind::Input,
                    "the action needs `with: {content: ...}`",
                ));
            }
        };
        let fail =
            |e: std::io::Error| BlockError::new(ErrorKind::Action, format!("writing {rel}: {e}"));
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(fail)?;
        }
        let mut f = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(self.append)
            .truncate(!self.append)
            .open(&path)
            .await
            .map_err(fail)?;
        f.write_all(content.as_bytes()).await.map_err(fail)?;
        f.flush().await.map_err(fail)?;
        Ok(NativeOutput::from(
            serde_json::json!({"path": rel, "bytes": content.len()}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(config: serde_json::Value) -> NativeCall {
        NativeCall {
            input: Value::Null,
            state: weft_core::State::default(),
            config,
            path: "root".into(),
            run_id: Arc::from("run"),
            idempotency_key: String::new(),
            attempt: 1,
            messages: None,
            parent: None,
            scoped: None,
        }
    }

    #[tokio::test]
    async fn file_actions_write_and_read_inside_their_root_and_say_why_not_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(FileRoot::new(dir.path().to_path_buf()));
        let write = Write {
            root: root.clone(),
            append: false,
        };
        let wrote = write
            .call(call(json!({"path": "notes/a.txt", "content": "hi"})))
            .await
            .unwrap();
        assert_eq!(wrote.output, json!({"path": "notes/a.txt", "bytes": 2}));
        let read = Read(root.clone());
        let text = read
            .call(call(json!({"path": "notes/a.txt"})))
            .await
            .unwrap();
        assert_eq!(text.output, json!("hi"));
        let e = read
            .call(call(json!({"path": "../outside"})))
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Action);
        assert!(e.message.contains("refused"), "{}", e.message);
        let gone = Read(Arc::new(FileRoot::new(dir.path().join("no-such-dir"))));
        let e = gone.call(call(json!({"path": "a"}))).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Config, "{}", e.message);
    }
}
