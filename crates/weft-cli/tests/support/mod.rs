//! What the binary's integration tests share: a scratch directory with its own database,
//! and readers for a finished process.

#![allow(dead_code)] // each test file uses its own part

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A scratch directory: the database (`runs.db`) and the files directory of every
/// command run through it.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
        c.env("WEFT_DB", self.path("runs.db"))
            .env("WEFT_FILES", self.dir.path())
            .env_remove("WEFT_MODEL")
            .stdin(Stdio::null());
        c
    }

    pub fn weft(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("weft was killed by a signal")
}

pub fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn example(name: &str) -> String {
    // Read at run time: a build cache shared by two clones keeps the other path in `env!`.
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo"))
        .join("../../examples")
        .join(name)
        .display()
        .to_string()
}
