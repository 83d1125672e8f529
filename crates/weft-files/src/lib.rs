//! # weft-files
//!
//! Owns the confinement of file access to one directory (`--files`): a path that is
//! absolute, climbs out with `..`, or leads out through a symbolic link is refused.
//! The file actions (`weft-actions`) and sandboxed code (`weft-code`) both resolve
//! their paths here, so the two cannot drift apart.
//!
//! It must not depend on anything of Weft's: it is a leaf both of them use.

use std::path::{Component, Path, PathBuf};

/// Why a path cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path leads outside the directory, or is not a path at all.
    #[error("the path `{path}` is refused: {why}")]
    Refused {
        /// The path as given.
        path: String,
        /// Why, for a person.
        why: &'static str,
    },
    /// The directory itself cannot be used.
    #[error("the files directory {dir} is unusable: {source}")]
    Unusable {
        /// The directory.
        dir: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
}

/// The directory file access is confined to.
#[derive(Debug, Clone)]
pub struct FileRoot {
    dir: PathBuf,
}

impl FileRoot {
    /// Confines file access to `dir`.
    pub fn new(dir: PathBuf) -> FileRoot {
        FileRoot { dir }
    }

    /// The directory, as given.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Resolves `rel` inside the root, refusing every way out of it (`.` is the root).
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, PathError> {
        self.resolve_in(rel, false)
    }

    /// Like [`FileRoot::resolve`], but an empty path names the root itself.
    pub fn resolve_or_root(&self, rel: &str) -> Result<PathBuf, PathError> {
        self.resolve_in(rel, true)
    }

    fn resolve_in(&self, rel: &str, allow_root: bool) -> Result<PathBuf, PathError> {
        let refused = |why| PathError::Refused {
            path: rel.to_owned(),
            why,
        };
        if rel.is_empty() && !allow_root {
            return Err(refused("it is empty"));
        }
        if rel.contains('\0') {
            return Err(refused("it contains a NUL character"));
        }
        let p = Path::new(rel);
        for c in p.components() {
            match c {
                Component::Normal(_) | Component::CurDir => {}
                Component::ParentDir => return Err(refused("`..` leaves the files directory")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(refused("paths are relative to the files directory"));
                }
            }
        }
        let root = self
            .dir
            .canonicalize()
            .map_err(|source| PathError::Unusable {
                dir: self.dir.clone(),
                source,
            })?;
        let full = root.join(p);
        // The deepest existing ancestor, with links resolved, must still be inside.
        let mut probe = full.as_path();
        loop {
            if let Ok(real) = probe.canonicalize() {
                if !real.starts_with(&root) {
                    return Err(refused("a symbolic link leads out of the files directory"));
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
        assert!(root.resolve("a\0b").is_err());
        std::os::unix::fs::symlink("/etc", dir.path().join("out")).unwrap();
        let e = root.resolve("out/passwd").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }

    #[test]
    fn the_root_itself_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let root = FileRoot::new(dir.path().to_path_buf());
        assert!(root.resolve("").is_err());
        let itself = root.resolve_or_root("").unwrap();
        assert_eq!(itself, dir.path().canonicalize().unwrap());
        assert!(root.resolve_or_root(".").is_ok());
    }

    #[test]
    fn an_unusable_root_says_so() {
        let root = FileRoot::new(PathBuf::from("/no/such/dir/for/weft"));
        let e = root.resolve("a").unwrap_err();
        assert!(matches!(e, PathError::Unusable { .. }), "{e}");
    }
}
