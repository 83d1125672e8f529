//! The file system Python code sees, served by the engine: a worker cannot open a file
//! (its seccomp filter refuses `openat`), so each file operation of the code (`open`,
//! `pathlib.Path`, `os.listdir`, ...) travels to the engine, which performs it here.
//!
//! Relative paths name files in the run's files directory (`--files`, the same
//! directory the file actions use; every way out is refused by [`FileRoot`]). `/tmp`
//! names a private temporary directory, made when first used and removed with the
//! [`FileAccess`]; it is what `tempfile.gettempdir()` returns. Every other absolute path
//! is refused. A run that may not write (a model testing its flow) reads only.

use monty_types::{
    ExcType, FileMode, MkdirCallArgs, MontyException, MontyFileHandle, MontyObject, OsFunctionCall,
    RenameCallArgs,
};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use weft_files::{FileRoot, OpenError, Opening, PathError};

/// The virtual directory that stands for the private temporary directory.
pub const TEMP_DIR: &str = "/tmp";

/// The answer to one file operation: its value, or the exception the code sees.
pub type FileResult = Result<MontyObject, MontyException>;

/// What Python code may do with files in one engine.
#[derive(Debug)]
pub struct FileAccess {
    root: FileRoot,
    writes: bool,
    temp: Mutex<Option<tempfile::TempDir>>,
}

fn exception(kind: ExcType, message: impl Into<String>) -> MontyException {
    MontyException::new(kind, Some(message.into()))
}

/// The exception for a path the code may not use (or a files directory that is gone).
fn refused(e: PathError) -> MontyException {
    let kind = match e {
        PathError::Refused { .. } => ExcType::PermissionError,
        PathError::Unusable { .. } => ExcType::OSError,
    };
    exception(kind, e.to_string())
}

/// CPython's exception for an I/O error on `path`.
fn io_exception(e: &std::io::Error, path: &str) -> MontyException {
    let kind = match e.kind() {
        ErrorKind::NotFound => ExcType::FileNotFoundError,
        ErrorKind::AlreadyExists => ExcType::FileExistsError,
        ErrorKind::IsADirectory => ExcType::IsADirectoryError,
        ErrorKind::NotADirectory => ExcType::NotADirectoryError,
        ErrorKind::PermissionDenied => ExcType::PermissionError,
        _ => ExcType::OSError,
    };
    let errno = e.raw_os_error().unwrap_or(0);
    let what = e.to_string();
    let what = what.split(" (os error").next().unwrap_or(&what);
    exception(kind, format!("[Errno {errno}] {what}: '{path}'"))
}

impl FileAccess {
    /// Code may read, and with `writes` change, the files under `dir`.
    pub fn new(dir: PathBuf, writes: bool) -> FileAccess {
        FileAccess {
            root: FileRoot::new(dir),
            writes,
            temp: Mutex::new(None),
        }
    }

    /// Performs `call` for the code. Clock and environment calls are not file
    /// operations and are answered by the worker.
    pub fn answer(&self, call: OsFunctionCall) -> FileResult {
        if call.is_write() && !self.writes {
            return Err(exception(
                ExcType::PermissionError,
                "this run may not change files (it leaves no trace)",
            ));
        }
        match call {
            OsFunctionCall::Exists(p) => self.exists(&p, |_| true),
            OsFunctionCall::IsFile(p) => self.exists(&p, std::fs::Metadata::is_file),
            OsFunctionCall::IsDir(p) => self.exists(&p, std::fs::Metadata::is_dir),
            OsFunctionCall::IsSymlink(p) => {
                let host = self.host_path(&p)?;
                Ok(MontyObject::Bool(host.is_symlink()))
            }
            OsFunctionCall::ReadText(p) => {
                let mut text = String::new();
                self.opened(&p, Opening::Read)?
                    .read_to_string(&mut text)
                    .map_err(|e| io_exception(&e, &p))?;
                Ok(MontyObject::String(text))
            }
            OsFunctionCall::ReadBytes(p) => {
                let mut bytes = Vec::new();
                self.opened(&p, Opening::Read)?
                    .read_to_end(&mut bytes)
                    .map_err(|e| io_exception(&e, &p))?;
                Ok(MontyObject::Bytes(bytes))
            }
            OsFunctionCall::Stat(p) => self.stat(&p),
            OsFunctionCall::Iterdir(p) => self.iterdir(&p),
            OsFunctionCall::Resolve(p) | OsFunctionCall::Absolute(p) => {
                self.host_path(&p)?;
                Ok(MontyObject::Path(normalized(&p)))
            }
            OsFunctionCall::WriteText(a) => {
                let chars = a.data.chars().count();
                self.write(&a.path, a.data.as_bytes(), false, chars)
            }
            OsFunctionCall::AppendText(a) => {
                let chars = a.data.chars().count();
                self.write(&a.path, a.data.as_bytes(), true, chars)
            }
            OsFunctionCall::WriteBytes(a) => self.write(&a.path, &a.data, false, a.data.len()),
            OsFunctionCall::AppendBytes(a) => self.write(&a.path, &a.data, true, a.data.len()),
            OsFunctionCall::Open(a) => self.open(&a.path, a.mode),
            OsFunctionCall::Mkdir(a) => self.mkdir(&a),
            OsFunctionCall::Unlink(p) => {
                std::fs::remove_file(self.path_to_move(&p)?).map_err(|e| io_exception(&e, &p))?;
                Ok(MontyObject::None)
            }
            OsFunctionCall::Rmdir(p) => {
                std::fs::remove_dir(self.path_to_move(&p)?).map_err(|e| io_exception(&e, &p))?;
                Ok(MontyObject::None)
            }
            OsFunctionCall::Rename(a) => self.rename(&a),
            other => Err(exception(
                ExcType::PermissionError,
                format!("`{}` is not a file operation", other.name()),
            )),
        }
    }

    /// Where the code's `path` is on this machine, or why it may not be used.
    fn host_path(&self, path: &str) -> Result<PathBuf, MontyException> {
        let (root, rel) = self.root_of(path)?;
        root.resolve_or_root(rel).map_err(refused)
    }

    /// [`FileAccess::host_path`] for a path about to be moved or removed.
    fn path_to_move(&self, path: &str) -> Result<PathBuf, MontyException> {
        let (root, rel) = self.root_of(path)?;
        root.resolve_to_move(rel).map_err(refused)
    }

    /// The code's `path` opened as `how` says (checked again once open, so no link
    /// swapped in meanwhile reaches one of Weft's own files).
    fn opened(&self, path: &str, how: Opening) -> Result<std::fs::File, MontyException> {
        let (root, rel) = self.root_of(path)?;
        root.open(rel, how).map_err(|e| match e {
            OpenError::Path(e) => refused(e),
            OpenError::Io(e) => io_exception(&e, path),
        })
    }

    /// The directory the code's `path` lies in (the files directory, or the private
    /// temporary one for `/tmp/...`) and the path relative to it.
    fn root_of<'p>(&self, path: &'p str) -> Result<(FileRoot, &'p str), MontyException> {
        if let Some(rest) = path.strip_prefix(TEMP_DIR)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Ok((
                FileRoot::new(self.temp_dir()?),
                rest.trim_start_matches('/'),
            ));
        }
        if path.starts_with('/') {
            return Err(exception(
                ExcType::PermissionError,
                format!(
                    "the path `{path}` is refused: sandboxed code reads and writes files by paths relative to the files directory (`--files`), or under {TEMP_DIR}"
                ),
            ));
        }
        Ok((self.root.clone(), path))
    }

    fn temp_dir(&self) -> Result<PathBuf, MontyException> {
        let mut temp = self.temp.lock().unwrap_or_else(|e| e.into_inner());
        if temp.is_none() {
            let made = tempfile::Builder::new()
                .prefix("weft-code-")
                .tempdir()
                .map_err(|e| io_exception(&e, TEMP_DIR))?;
            *temp = Some(made);
        }
        Ok(temp.as_ref().expect("made above").path().to_path_buf())
    }

    fn exists(&self, path: &str, test: fn(&std::fs::Metadata) -> bool) -> FileResult {
        let host = self.host_path(path)?;
        Ok(MontyObject::Bool(
            std::fs::metadata(host).is_ok_and(|m| test(&m)),
        ))
    }

    fn stat(&self, path: &str) -> FileResult {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(self.host_path(path)?).map_err(|e| io_exception(&e, path))?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64());
        let mode = i64::from(meta.permissions().mode());
        Ok(if meta.is_dir() {
            monty_types::dir_stat(mode, mtime)
        } else {
            let size = i64::try_from(meta.len()).unwrap_or(i64::MAX);
            monty_types::file_stat(mode, size, mtime)
        })
    }

    fn iterdir(&self, path: &str) -> FileResult {
        let entries =
            std::fs::read_dir(self.host_path(path)?).map_err(|e| io_exception(&e, path))?;
        let base = normalized(path);
        let mut children = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_exception(&e, path))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            children.push(if base == "." {
                name
            } else {
                format!("{}/{name}", base.trim_end_matches('/'))
            });
        }
        children.sort();
        Ok(MontyObject::List(
            children.into_iter().map(MontyObject::Path).collect(),
        ))
    }

    fn write(&self, path: &str, data: &[u8], append: bool, written: usize) -> FileResult {
        let how = Opening::Write {
            create: true,
            append,
            truncate: !append,
        };
        let mut file = self.opened(path, how)?;
        file.write_all(data).map_err(|e| io_exception(&e, path))?;
        Ok(MontyObject::Int(i64::try_from(written).unwrap_or(i64::MAX)))
    }

    /// `open()`'s effect when it is called (create, truncate, or check the file is
    /// there); reads and writes through the handle come as their own operations.
    fn open(&self, path: &str, mode: FileMode) -> FileResult {
        let how = if mode.create() {
            Opening::Write {
                create: true,
                append: mode.is_append(),
                truncate: mode.truncate(),
            }
        } else {
            Opening::Read
        };
        let file = self.opened(path, how)?;
        if !mode.create() && file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(io_exception(
                &std::io::Error::from(ErrorKind::IsADirectory),
                path,
            ));
        }
        Ok(MontyObject::FileHandle(MontyFileHandle {
            path: path.to_owned(),
            mode,
            position: 0,
        }))
    }

    fn mkdir(&self, a: &MkdirCallArgs) -> FileResult {
        let host = self.host_path(&a.path)?;
        let made = if a.parents {
            std::fs::create_dir_all(&host)
        } else {
            std::fs::create_dir(&host)
        };
        match made {
            Ok(()) => Ok(MontyObject::None),
            Err(e) if e.kind() == ErrorKind::AlreadyExists && a.exist_ok && host.is_dir() => {
                Ok(MontyObject::None)
            }
            Err(e) => Err(io_exception(&e, &a.path)),
        }
    }

    fn rename(&self, a: &RenameCallArgs) -> FileResult {
        let (from, to) = (self.path_to_move(&a.src)?, self.host_path(&a.dst)?);
        std::fs::rename(from, to).map_err(|e| io_exception(&e, &a.src))?;
        Ok(MontyObject::Path(normalized(&a.dst)))
    }
}

/// `path` without `./` segments and doubled slashes (`.` for the directory itself).
fn normalized(path: &str) -> String {
    let absolute = path.starts_with('/');
    let parts: Vec<&str> = Path::new(path)
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => s.to_str(),
            std::path::Component::ParentDir => Some(".."),
            _ => None,
        })
        .collect();
    match (absolute, parts.is_empty()) {
        (true, _) => format!("/{}", parts.join("/")),
        (false, true) => ".".to_owned(),
        (false, false) => parts.join("/"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use monty_types::{MontyPath, OpenCallArgs, PathStringDataArgs};

    fn path(p: &str) -> MontyPath {
        MontyPath::from(p)
    }

    fn error(r: FileResult) -> (ExcType, String) {
        let e = r.expect_err("an exception");
        (e.exc_type(), e.message().unwrap_or_default().to_owned())
    }

    #[test]
    fn code_reads_and_writes_inside_the_files_directory_only() {
        let dir = tempfile::tempdir().unwrap();
        let files = FileAccess::new(dir.path().to_path_buf(), true);
        let written = files.answer(OsFunctionCall::WriteText(PathStringDataArgs {
            path: path("notes/a.txt"),
            data: "héllo".into(),
        }));
        // The directory does not exist yet: CPython says so too.
        assert_eq!(error(written).0, ExcType::FileNotFoundError);
        files
            .answer(OsFunctionCall::Mkdir(MkdirCallArgs {
                path: path("notes"),
                parents: false,
                exist_ok: false,
            }))
            .unwrap();
        let n = files
            .answer(OsFunctionCall::WriteText(PathStringDataArgs {
                path: path("notes/a.txt"),
                data: "héllo".into(),
            }))
            .unwrap();
        assert!(matches!(n, MontyObject::Int(5)), "{n:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes/a.txt")).unwrap(),
            "héllo"
        );
        let listed = files
            .answer(OsFunctionCall::Iterdir(path("./notes")))
            .unwrap();
        assert!(
            matches!(&listed, MontyObject::List(l) if matches!(&l[..], [MontyObject::Path(p)] if p == "notes/a.txt")),
            "{listed:?}"
        );
        for outside in ["/etc/passwd", "../x", "notes/../../x"] {
            let (kind, message) = error(files.answer(OsFunctionCall::ReadText(path(outside))));
            assert_eq!(kind, ExcType::PermissionError, "{outside}: {message}");
            assert!(message.contains("refused"), "{message}");
        }
        let (kind, message) = error(files.answer(OsFunctionCall::ReadText(path("missing.txt"))));
        assert_eq!(kind, ExcType::FileNotFoundError);
        assert!(message.contains("'missing.txt'"), "{message}");
    }

    #[test]
    fn code_never_reaches_weft_s_own_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "s3cret").unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/weft.db"), "db").unwrap();
        weft_files::protect(&dir.path().join("token"));
        weft_files::protect_database(&dir.path().join("data/weft.db"));
        let files = FileAccess::new(dir.path().to_path_buf(), true);
        let refused = |r: FileResult| {
            let (kind, message) = error(r);
            assert_eq!(kind, ExcType::PermissionError, "{message}");
            assert!(message.contains("Weft's own files"), "{message}");
        };
        refused(files.answer(OsFunctionCall::ReadText(path("token"))));
        refused(files.answer(OsFunctionCall::Stat(path("token"))));
        refused(files.answer(OsFunctionCall::Open(OpenCallArgs {
            path: path("data/weft.db"),
            mode: FileMode::Write(false),
        })));
        refused(files.answer(OsFunctionCall::Unlink(path("data/weft.db-shm"))));
        refused(files.answer(OsFunctionCall::Rename(RenameCallArgs {
            src: path("data"),
            dst: path("elsewhere"),
        })));
        refused(files.answer(OsFunctionCall::Rename(RenameCallArgs {
            src: path("token"),
            dst: path("t"),
        })));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("data/weft.db")).unwrap(),
            "db"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("token")).unwrap(),
            "s3cret"
        );
    }

    #[test]
    fn tmp_is_a_private_directory_that_goes_away() {
        let dir = tempfile::tempdir().unwrap();
        let files = FileAccess::new(dir.path().to_path_buf(), true);
        let handle = files
            .answer(OsFunctionCall::Open(OpenCallArgs {
                path: path("/tmp/todo.md"),
                mode: FileMode::Write(false),
            }))
            .unwrap();
        assert!(matches!(handle, MontyObject::FileHandle(_)), "{handle:?}");
        let host = files.temp_dir().unwrap();
        assert!(host.join("todo.md").is_file());
        assert!(!host.starts_with(dir.path()));
        let exists = files
            .answer(OsFunctionCall::Exists(path("/tmp/todo.md")))
            .unwrap();
        assert!(matches!(exists, MontyObject::Bool(true)));
        drop(files);
        assert!(!host.exists(), "the temporary directory is removed");
    }

    #[test]
    fn a_run_that_leaves_no_trace_only_reads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "kept").unwrap();
        let files = FileAccess::new(dir.path().to_path_buf(), false);
        let text = files
            .answer(OsFunctionCall::ReadText(path("a.txt")))
            .unwrap();
        assert!(matches!(text, MontyObject::String(s) if s == "kept"));
        let (kind, _) = error(files.answer(OsFunctionCall::Unlink(path("a.txt"))));
        assert_eq!(kind, ExcType::PermissionError);
        let (kind, _) = error(files.answer(OsFunctionCall::Open(OpenCallArgs {
            path: path("a.txt"),
            mode: FileMode::Write(false),
        })));
        assert_eq!(kind, ExcType::PermissionError);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "kept"
        );
    }
}
