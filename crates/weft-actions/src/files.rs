//! File actions confined to one directory: a path that is absolute, climbs out with
//! `..`, or leads out through a symbolic link is refused.

use super::str_param;
use async_trait::async_trait;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use weft_core::ports::{Native, NativeCall, NativeOutput};
use weft_core::{BlockError, ErrorKind, Value};

/// The directory file actions may touch.
#[derive(Debug, Clone)]
pub struct FileRoot {
    dir: PathBuf,
}

fn refused(path: &str, why: &str) -> BlockError {
    BlockError::new(
        ErrorKind::Action,
        format!("the path `{path}` is refused: {why}"),
    )
}

impl FileRoot {
    /// Confines file actions to `dir`.
    pub fn new(dir: PathBuf) -> FileRoot {
        FileRoot { dir }
    }

    /// Resolves `rel` inside the root, refusing every way out of it.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, BlockError> {
        let p = Path::new(rel);
        if rel.is_empty() {
            return Err(refused(rel, "it is empty"));
        }
        for c in p.components() {
            match c {
                Component::Normal(_) | Component::CurDir => {}
                Component::ParentDir => {
                    return Err(refused(rel, "`..` leaves the files directory"));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(refused(rel, "paths are relative to the files directory"));
                }
            }
        }
        let root = self.dir.canonicalize().map_err(|e| {
            BlockError::new(
                ErrorKind::Config,
                format!(
                    "the files directory {} is unusable: {e}",
                    self.dir.display()
                ),
            )
        })?;
        let full = root.join(p);
        // The deepest existing ancestor, with links resolved, must still be inside.
        let mut probe = full.as_path();
        loop {
            if let Ok(real) = probe.canonicalize() {
                if !real.starts_with(&root) {
                    return Err(refused(
                        rel,
                        "a symbolic link leads out of the files directory",
                    ));
                }
                break;
            }
            match probe.parent() {
                Some(parent) => probe = parent,
                None => break,
            }
        }
        Ok(full)
    }
}

/// `file.read`: the text of `with.path`.
pub(crate) struct Read(pub(crate) Arc<FileRoot>);

#[async_trait]
impl Native for Read {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        let rel = str_param(&call, "path")?;
        let path = self.0.resolve(rel)?;
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
        let path = self.root.resolve(rel)?;
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

    #[test]
    fn paths_cannot_leave_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = FileRoot::new(dir.path().to_path_buf());
        assert!(root.resolve("notes/a.txt").is_ok());
        assert!(root.resolve("../etc/passwd").is_err());
        assert!(root.resolve("/etc/passwd").is_err());
        assert!(root.resolve("a/../../b").is_err());
        std::os::unix::fs::symlink("/etc", dir.path().join("out")).unwrap();
        let e = root.resolve("out/passwd").unwrap_err();
        assert!(e.message.contains("symbolic link"), "{}", e.message);
    }
}
