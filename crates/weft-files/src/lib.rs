//! # weft-files
//!
//! Owns the confinement of file access to one directory (`--files`): a path that is
//! absolute, climbs out with `..`, or leads out through a symbolic link is refused, and
//! so is any path that reaches one of Weft's own files ([`protect`],
//! [`protect_database`]) by whatever name or link. The file actions (`weft-actions`)
//! and sandboxed code (`weft-code`) both resolve and open their paths here, so the two
//! cannot drift apart.
//!
//! It must not depend on anything of Weft's: it is a leaf both of them, and the stores
//! and commands that register their files, use.

mod own_files;

pub use own_files::{own_file_under, protect, protect_database};

use std::fs::File;
use std::path::{Component, Path, PathBuf};

/// Why a path that reaches one of Weft's own files is refused.
const OWN_FILE: &str =
    "it is one of Weft's own files (its database, token, keys or models), which no flow may touch";

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

    /// Like [`FileRoot::resolve_or_root`], for a path about to be moved or removed: a
    /// directory that holds one of Weft's own files is refused too.
    pub fn resolve_to_move(&self, rel: &str) -> Result<PathBuf, PathError> {
        let full = self.resolve_in(rel, true)?;
        if own_files::own_file_under(&full).is_some() {
            return Err(PathError::Refused {
                path: rel.to_owned(),
                why: OWN_FILE,
            });
        }
        Ok(full)
    }

    /// Opens `rel` inside the root as `how` says. The file opened is checked again by
    /// its descriptor, before anything is truncated, so a link swapped in between the
    /// check of the path and the opening cannot reach one of Weft's own files.
    pub fn open(&self, rel: &str, how: Opening) -> Result<File, OpenError> {
        let path = self.resolve(rel)?;
        let mut options = std::fs::OpenOptions::new();
        match how {
            Opening::Read => options.read(true),
            Opening::Write { create, append, .. } => {
                options.write(true).create(create).append(append)
            }
        };
        let file = options.open(&path).map_err(OpenError::Io)?;
        let meta = file.metadata().map_err(OpenError::Io)?;
        if own_files::is_own_open(&meta) {
            return Err(OpenError::Path(PathError::Refused {
                path: rel.to_owned(),
                why: OWN_FILE,
            }));
        }
        if matches!(how, Opening::Write { truncate: true, .. }) {
            file.set_len(0).map_err(OpenError::Io)?;
        }
        Ok(file)
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
        if own_files::is_own(&full) {
            return Err(refused(OWN_FILE));
        }
        Ok(full)
    }
}

/// How [`FileRoot::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// For reading; the file must exist.
    Read,
    /// For writing.
    Write {
        /// Create the file when it is missing.
        create: bool,
        /// Write at its end.
        append: bool,
        /// Empty it first (after it is known not to be one of Weft's own files).
        truncate: bool,
    },
}

/// Why [`FileRoot::open`] could not open a file.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The path is refused, or the directory unusable.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The file system refused (missing file, permissions, a directory, ...).
    #[error(transparent)]
    Io(std::io::Error),
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
    fn weft_s_own_files_are_refused_by_every_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = FileRoot::new(dir.path().to_path_buf());
        std::fs::write(dir.path().join("token"), "secret").unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/weft.db"), "db").unwrap();
        protect(&dir.path().join("token"));
        protect_database(&dir.path().join("data/weft.db"));
        std::fs::hard_link(dir.path().join("token"), dir.path().join("alias")).unwrap();
        for path in [
            "token",
            "./token",
            "alias",
            "data/weft.db",
            "data/weft.db-wal",
        ] {
            let e = root.resolve(path).unwrap_err();
            assert!(e.to_string().contains("Weft's own files"), "{path}: {e}");
        }
        let write = Opening::Write {
            create: true,
            append: false,
            truncate: true,
        };
        assert!(root.open("alias", write).is_err());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("token")).unwrap(),
            "secret"
        );
        // The directory is listed and other files are used as before.
        assert!(root.resolve_or_root("data").is_ok());
        assert!(
            root.resolve_to_move("data").is_err(),
            "moving it moves the database"
        );
        let mut f = root.open("notes.txt", write).unwrap();
        std::io::Write::write_all(&mut f, b"hi").unwrap();
        assert!(root.open("notes.txt", Opening::Read).is_ok());
    }

    #[test]
    fn an_unusable_root_says_so() {
        let root = FileRoot::new(PathBuf::from("/no/such/dir/for/weft"));
        let e = root.resolve("a").unwrap_err();
        assert!(matches!(e, PathError::Unusable { .. }), "{e}");
    }
}
