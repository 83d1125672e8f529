//! Weft's own files — its database and the database's side files, the server's token,
//! keys, certificates, model weights — registered by whoever opens them, and refused to
//! every flow by identity.
//!
//! The registry is per process, not per [`crate::FileRoot`]: a file is Weft's own
//! because this process opened it, whichever run or door later asks for it, so no code
//! path that builds a `FileRoot` can forget to carry the list. A candidate path is
//! refused when its resolved path is a registered one, or when the file it reaches has
//! the device and inode of one as it is now (a hard link, or a symbolic link planted
//! where the path check cannot see it). An identity is never remembered: once a file is
//! gone its inode number is free for an unrelated file, which must not be refused.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

/// A file's identity on this machine: its device and inode.
type Identity = (u64, u64);

/// The registered files, by resolved path (a file that does not exist yet, such as a
/// SQLite journal, is known by its path alone until it does).
static OWN_FILES: RwLock<Vec<PathBuf>> = RwLock::new(Vec::new());

/// Registers `path` as one of Weft's own files: from now on no file action or sandbox
/// of this process reads, writes, lists the metadata of, moves or removes it.
pub fn protect(path: &Path) {
    let path = resolved(path);
    let mut files = OWN_FILES.write().unwrap_or_else(PoisonError::into_inner);
    if !files.contains(&path) {
        files.push(path);
    }
}

/// Registers a SQLite database at `path` and the files SQLite keeps beside it (its
/// write-ahead log, shared-memory index and rollback journal), which come and go.
pub fn protect_database(path: &Path) {
    protect(path);
    for side in ["-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(side);
        protect(Path::new(&name));
    }
}

/// Whether `path` (resolved) is one of Weft's own files, by path or by identity.
pub(crate) fn is_own(path: &Path) -> bool {
    let files = OWN_FILES.read().unwrap_or_else(PoisonError::into_inner);
    if files.is_empty() {
        return false;
    }
    let candidate = resolved(path);
    let identities = [identity_of(&candidate), link_identity_of(path)];
    files.iter().any(|own| {
        *own == candidate || identity_of(own).is_some_and(|now| identities.contains(&Some(now)))
    })
}

/// Whether the file open as `meta` is one of Weft's own files.
pub(crate) fn is_own_open(meta: &std::fs::Metadata) -> bool {
    let id = (meta.dev(), meta.ino());
    let files = OWN_FILES.read().unwrap_or_else(PoisonError::into_inner);
    files.iter().any(|own| identity_of(own) == Some(id))
}

/// The first of Weft's own files that lies under the directory `path` (with links
/// resolved), if any: moving or removing the directory would carry it along, and a
/// files directory holding it would hand it to every flow.
pub fn own_file_under(path: &Path) -> Option<PathBuf> {
    let dir = resolved(path);
    let files = OWN_FILES.read().unwrap_or_else(PoisonError::into_inner);
    files.iter().find(|own| own.starts_with(&dir)).cloned()
}

/// `path` with every link resolved; a file that does not exist yet is its resolved
/// directory joined with its name.
pub(crate) fn resolved(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => match parent.canonicalize() {
            Ok(dir) => dir.join(name),
            Err(_) => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        },
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// The identity of the file `path` leads to, following links.
fn identity_of(path: &Path) -> Option<Identity> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The identity of `path` itself, when it is a link.
fn link_identity_of(path: &Path) -> Option<Identity> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_file_is_known_by_path_link_and_inode() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("weft.db");
        std::fs::write(&db, "data").unwrap();
        protect_database(&db);
        assert!(is_own(&db));
        // A side file that does not exist yet is known by its path.
        assert!(is_own(&dir.path().join("weft.db-wal")));
        let other = tempfile::tempdir().unwrap();
        let hard = other.path().join("copy");
        std::fs::hard_link(&db, &hard).unwrap();
        assert!(is_own(&hard), "a hard link is the same file");
        let soft = other.path().join("link");
        std::os::unix::fs::symlink(&db, &soft).unwrap();
        assert!(is_own(&soft), "a symbolic link leads to it");
        let plain = other.path().join("plain");
        std::fs::write(&plain, "data").unwrap();
        assert!(!is_own(&plain), "an equal copy is another file");
        assert_eq!(own_file_under(dir.path()), Some(resolved(&db)));
        assert_eq!(own_file_under(other.path()), None);
        let opened = std::fs::File::open(&hard).unwrap().metadata().unwrap();
        assert!(is_own_open(&opened));
    }
}
