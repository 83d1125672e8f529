//! File actions confined to one directory: a path that is absolute, climbs out with
//! `..`, leads out through a symbolic link, or reaches one of Weft's own files is
//! refused.

use super::str_param;
use async_trait::async_trait;
use std::io::{Read as _, Write as _};
use std::sync::Arc;
use weft_core::ports::{Native, NativeCall, NativeOutput};
use weft_core::{BlockError, ErrorKind, Value};
use weft_files::{OpenError, Opening, PathError};

/// The directory file actions may touch.
pub use weft_files::FileRoot;

/// Opens `rel` inside `root` as `how` says, off the runtime's threads; a refusal or an
/// I/O failure is the action's error, saying `doing` what.
async fn open(
    root: &Arc<FileRoot>,
    rel: &str,
    how: Opening,
    doing: &str,
) -> Result<std::fs::File, BlockError> {
    let (root, owned) = (root.clone(), rel.to_owned());
    let opened = tokio::task::spawn_blocking(move || {
        if let Opening::Write { create: true, .. } = how
            && let Some(dir) = root.resolve(&owned)?.parent()
        {
            std::fs::create_dir_all(dir).map_err(OpenError::Io)?;
        }
        root.open(&owned, how)
    })
    .await
    .map_err(|e| BlockError::new(ErrorKind::Action, format!("{doing} {rel}: {e}")))?;
    opened.map_err(|e| match e {
        OpenError::Path(e @ PathError::Refused { .. }) => {
            BlockError::new(ErrorKind::Action, e.to_string())
        }
        OpenError::Path(e @ PathError::Unusable { .. }) => {
            BlockError::new(ErrorKind::Config, e.to_string())
        }
        OpenError::Io(e) => BlockError::new(ErrorKind::Action, format!("{doing} {rel}: {e}")),
    })
}

/// `file.read`: the text of `with.path`.
pub(crate) struct Read(pub(crate) Arc<FileRoot>);

#[async_trait]
impl Native for Read {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        let rel = str_param(&call, "path")?;
        let mut file = open(&self.0, rel, Opening::Read, "file.read").await?;
        let text = tokio::task::spawn_blocking(move || {
            let mut text = String::new();
            file.read_to_string(&mut text).map(|_| text)
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|read| read)
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
        let content = match call.config.get("content") {
            Some(v) => crate::as_text(v).into_owned(),
            None => {
                return Err(BlockError::new(
                    ErrorKind::Input,
                    "the action needs `with: {content: ...}`",
                ));
            }
        };
        let how = Opening::Write {
            create: true,
            append: self.append,
            truncate: !self.append,
        };
        let mut file = open(&self.root, rel, how, "writing").await?;
        let bytes = content.len();
        tokio::task::spawn_blocking(move || file.write_all(content.as_bytes()))
            .await
            .map_err(std::io::Error::other)
            .and_then(|wrote| wrote)
            .map_err(|e| BlockError::new(ErrorKind::Action, format!("writing {rel}: {e}")))?;
        Ok(NativeOutput::from(
            serde_json::json!({"path": rel, "bytes": bytes}),
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

    #[tokio::test]
    async fn file_actions_never_touch_weft_s_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("weft.db");
        std::fs::write(&db, "live data").unwrap();
        weft_files::protect_database(&db);
        let root = Arc::new(FileRoot::new(dir.path().to_path_buf()));
        let e = Read(root.clone())
            .call(call(json!({"path": "weft.db"})))
            .await
            .unwrap_err();
        assert!(e.message.contains("Weft's own files"), "{}", e.message);
        let write = Write {
            root: root.clone(),
            append: false,
        };
        for path in ["weft.db", "weft.db-wal", "./weft.db"] {
            let e = write
                .call(call(json!({"path": path, "content": "x"})))
                .await
                .unwrap_err();
            assert_eq!(e.kind, ErrorKind::Action, "{path}");
        }
        assert_eq!(std::fs::read_to_string(&db).unwrap(), "live data");
        assert!(!dir.path().join("weft.db-wal").exists());
    }
}
