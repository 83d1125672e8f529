//! The standard modules monty lacks but spec 001 allows by default — `hashlib`, `time`
//! and `urllib.parse` — and `random`, `os.path`, `glob`, `tempfile` and `yaml` (PyYAML's
//! safe subset), which The Edge Agent's examples use, provided by Weft.
//!
//! Each is a small Python class (in `python_modules/*.py`) whose methods call one host
//! function, `_weft_host(op, ...)`, which the worker answers here: digests with the
//! RustCrypto hashes, the clock, a sleep bounded by the block's deadline, percent
//! encoding and URL splitting with CPython's rules, splitmix64 draws for `random`
//! (unseeded, from fresh entropy: a run's recorded step outputs, not a replayed draw,
//! are what a resumed run sees). `os`, `glob` and `tempfile` are written over monty's
//! own `os` and `pathlib`, whose file operations the engine performs (see
//! [`crate::files`]). An `import` of such a module is
//! rewritten, in place and on the same line, into an assignment from that class's
//! instance, and the class is prepended; errors are reported at the block's own lines.
//! Code that imports none of them runs unchanged and pays nothing.

use monty_types::{ExcType, MontyException, MontyObject};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt, StmtImport, StmtImportFrom};
use ruff_text_size::Ranged;
use std::time::{Duration, Instant};

/// The host function every shim calls.
pub(crate) const HOST_FUNCTION: &str = "_weft_host";

/// A provided module: its import name, the object that stands for it, its shim, and
/// the provided modules its shim uses (which come before it).
struct Shim {
    module: &'static str,
    object: &'static str,
    source: &'static str,
    needs: &'static [&'static str],
}

const SHIMS: &[Shim] = &[
    Shim {
        module: "hashlib",
        object: "_weft_hashlib",
        source: include_str!("python_modules/hashlib.py"),
        needs: &[],
    },
    Shim {
        module: "time",
        object: "_weft_time",
        source: include_str!("python_modules/time.py"),
        needs: &[],
    },
    Shim {
        module: "random",
        object: "_weft_random",
        source: include_str!("python_modules/random.py"),
        needs: &[],
    },
    Shim {
        module: "urllib",
        object: "_weft_urllib",
        source: include_str!("python_modules/urllib_parse.py"),
        needs: &[],
    },
    Shim {
        module: "os",
        object: "_weft_os",
        source: include_str!("python_modules/os.py"),
        needs: &[],
    },
    Shim {
        module: "yaml",
        object: "_weft_yaml",
        source: include_str!("python_modules/yaml.py"),
        needs: &[],
    },
    Shim {
        module: "glob",
        object: "_weft_glob",
        source: include_str!("python_modules/glob.py"),
        needs: &["os"],
    },
    Shim {
        module: "tempfile",
        object: "_weft_tempfile",
        source: include_str!("python_modules/tempfile.py"),
        needs: &["os"],
    },
];

/// The shim serving `module` (`urllib.parse` is served by `urllib`'s), if Weft provides it.
fn shim_of(module: &str) -> Option<(usize, &'static Shim)> {
    let top = module.split('.').next().unwrap_or(module);
    if module.contains('.') && module != "urllib.parse" && module != "os.path" {
        return None;
    }
    SHIMS.iter().enumerate().find(|(_, s)| s.module == top)
}

/// The expression that stands for `module` once imported.
fn object_of(module: &str, shim: &Shim) -> String {
    match module.split_once('.') {
        Some((_, rest)) => format!("{}.{rest}", shim.object),
        None => shim.object.to_owned(),
    }
}

/// A block's source with its imports of provided modules bound to their shims.
pub(crate) struct Prepared {
    /// What monty compiles.
    pub source: String,
    /// How many lines of shims precede the block's first line.
    pub offset: u32,
}

#[derive(Default)]
struct Imports {
    /// Byte range of an import statement and the text that replaces it.
    edits: Vec<crate::python_edits::Edit>,
    /// Which shims are needed.
    used: [bool; SHIMS.len()],
    /// Modules `__import__('name')` asks for that monty has: imported under a name of
    /// their own before the block.
    hoisted: Vec<String>,
}

impl Imports {
    fn import(&mut self, stmt: &StmtImport) {
        let mut parts = Vec::new();
        let mut changed = false;
        for alias in &stmt.names {
            let module = alias.name.id.as_str();
            let asname = alias.asname.as_ref().map(|a| a.id.as_str());
            match shim_of(module) {
                Some((i, shim)) => {
                    self.used[i] = true;
                    changed = true;
                    // `import urllib.parse` binds `urllib`; `import urllib.parse as p`
                    // binds the submodule.
                    parts.push(match asname {
                        Some(name) => format!("{name} = {}", object_of(module, shim)),
                        None => format!("{} = {}", shim.module, shim.object),
                    });
                }
                None => parts.push(match asname {
                    Some(name) => format!("import {module} as {name}"),
                    None => format!("import {module}"),
                }),
            }
        }
        if changed {
            self.edit(stmt.range(), parts.join("; "));
        }
    }

    fn import_from(&mut self, stmt: &StmtImportFrom) {
        if stmt.level != 0 {
            return;
        }
        let Some(module) = stmt.module.as_ref().map(|m| m.id.as_str()) else {
            return;
        };
        let Some((i, shim)) = shim_of(module) else {
            return;
        };
        self.used[i] = true;
        let from = object_of(module, shim);
        let parts: Vec<String> = stmt
            .names
            .iter()
            .map(|alias| {
                let name = alias.name.id.as_str();
                let bound = alias.asname.as_ref().map_or(name, |a| a.id.as_str());
                if name == "*" {
                    format!("raise ImportError('`from {module} import *` is not supported')")
                } else {
                    format!("{bound} = {from}.{name}")
                }
            })
            .collect();
        self.edit(stmt.range(), parts.join("; "));
    }

    fn edit(&mut self, range: ruff_text_size::TextRange, text: String) {
        self.edits
            .push((range.start().to_usize(), range.end().to_usize(), text));
    }
}

impl Imports {
    /// `__import__('name')` with a literal name is an import: the call becomes the
    /// module (the top-level one, as CPython's `__import__` returns). Any other use of
    /// `__import__` is left to fail.
    fn dynamic_import(&mut self, call: &ExprCall) {
        let Some(module) = literal_import(call) else {
            return;
        };
        let top = module.split('.').next().unwrap_or(module);
        let object = match shim_of(top) {
            Some((i, shim)) => {
                self.used[i] = true;
                shim.object.to_owned()
            }
            None => {
                let name = format!("_weft_import_{top}");
                let line = format!("import {top} as {name}");
                if !self.hoisted.contains(&line) {
                    self.hoisted.push(line);
                }
                name
            }
        };
        self.edit(call.range(), object);
    }
}

/// Whether `e` is `datetime` or `something.datetime`.
fn names_datetime(e: &Expr) -> bool {
    match e {
        Expr::Name(n) => n.id.as_str() == "datetime",
        Expr::Attribute(a) => a.attr.id.as_str() == "datetime",
        _ => false,
    }
}

/// The module of `__import__('name')`, when the call is exactly that.
pub(crate) fn literal_import(call: &ExprCall) -> Option<&str> {
    let Expr::Name(func) = call.func.as_ref() else {
        return None;
    };
    if func.id.as_str() != "__import__" || !call.arguments.keywords.is_empty() {
        return None;
    }
    match &call.arguments.args[..] {
        [Expr::StringLiteral(s)] => Some(s.value.to_str()),
        _ => None,
    }
}

impl<'a> Visitor<'a> for Imports {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::Import(i) => self.import(i),
            Stmt::ImportFrom(i) => self.import_from(i),
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(call) = expr
            && literal_import(call).is_some()
        {
            self.dynamic_import(call);
            return;
        }
        // `print(..., file=sys.stderr)`: monty's `print` takes no `file`, and the sandbox
        // discards what code prints wherever it is sent, so the argument goes.
        if let Expr::Call(call) = expr
            && matches!(call.func.as_ref(), Expr::Name(n) if n.id.as_str() == "print")
        {
            for keyword in &call.arguments.keywords {
                if keyword
                    .arg
                    .as_ref()
                    .is_some_and(|a| a.id.as_str() == "file")
                {
                    self.edit(keyword.range(), "**{}".to_owned());
                }
            }
        }
        // monty's `datetime` has no `utcnow`; the sandbox's local time is UTC, so it is
        // `now()` (naive, as `utcnow()` is).
        if let Expr::Attribute(a) = expr
            && a.attr.id.as_str() == "utcnow"
            && names_datetime(&a.value)
        {
            self.edit(a.attr.range(), "now".to_owned());
        }
        visitor::walk_expr(self, expr);
    }
}

/// Binds the block's imports of provided modules; `source` is returned as it is when it
/// imports none (or does not parse: monty then reports the syntax error).
pub(crate) fn prepare(source: &str) -> Prepared {
    let unchanged = || Prepared {
        source: source.to_owned(),
        offset: 0,
    };
    // The cheap test that spares most code the parse: a shim is only ever bound by an
    // import (`import`, `from ... import`, `__import__`), and the other rewrites need
    // their own words. (A module's name alone, `os`, is in most code.)
    if !source.contains("import") && !source.contains(".utcnow") && !source.contains("file=") {
        return unchanged();
    }
    let Ok(parsed) = ruff_python_parser::parse_module(source) else {
        return unchanged();
    };
    let mut imports = Imports::default();
    for stmt in &parsed.syntax().body {
        imports.visit_stmt(stmt);
    }
    if imports.edits.is_empty() {
        return unchanged();
    }
    let mut used = imports.used;
    for (i, shim) in SHIMS.iter().enumerate() {
        if used[i] {
            for need in shim.needs {
                if let Some((j, _)) = shim_of(need) {
                    used[j] = true;
                }
            }
        }
    }
    let mut text = String::new();
    for (shim, _) in SHIMS.iter().zip(used).filter(|(_, used)| *used) {
        text.push_str(shim.source);
        text.push('\n');
    }
    for line in &imports.hoisted {
        text.push_str(line);
        text.push('\n');
    }
    let offset = text.matches('\n').count() as u32;
    // A parenthesised import may span lines; the splice keeps every later line.
    crate::python_edits::splice_into(&mut text, source, &mut imports.edits);
    Prepared {
        source: text,
        offset,
    }
}

/// `yaml.safe_load(text)`: `(True, value)`, or `(False, why)` for the shim to raise as
/// `yaml.YAMLError`.
fn yaml_load(text: &str) -> MontyObject {
    let outcome = match serde_saphyr::from_str::<serde_json::Value>(text) {
        Ok(v) => (true, crate::python::to_monty(&v)),
        Err(e) => (false, MontyObject::String(e.to_string())),
    };
    MontyObject::Tuple(vec![MontyObject::Bool(outcome.0), outcome.1])
}

/// `yaml.safe_dump(data)`: `(True, text)`, or `(False, why)`.
fn yaml_dump(data: &MontyObject) -> MontyObject {
    let outcome = crate::python::from_monty(data.clone())
        .map_err(|f| f.message)
        .and_then(|v| serde_saphyr::to_string(&v).map_err(|e| e.to_string()));
    match outcome {
        Ok(text) => MontyObject::Tuple(vec![MontyObject::Bool(true), MontyObject::String(text)]),
        Err(why) => MontyObject::Tuple(vec![MontyObject::Bool(false), MontyObject::String(why)]),
    }
}

/// `time.strftime(format)` of now, in the sandbox's local time (UTC).
fn strftime(format: &str) -> Result<MontyObject, MontyException> {
    use std::fmt::Write;
    let mut out = String::new();
    write!(out, "{}", chrono::Utc::now().format(format)).map_err(|_| {
        error(
            ExcType::ValueError,
            &format!("strftime: invalid format string {format:?}"),
        )
    })?;
    Ok(MontyObject::String(out))
}

/// Answers one `_weft_host(op, ...)` call. `deadline` bounds a sleep.
pub(crate) fn call(args: &[MontyObject], deadline: Instant) -> Result<MontyObject, MontyException> {
    let (op, args) = match args.split_first() {
        Some((MontyObject::String(op), rest)) => (op.as_str(), rest),
        _ => return Err(error(ExcType::TypeError, "_weft_host needs an operation")),
    };
    match op {
        "hashlib.digest" => {
            let name = text(args, 0)?;
            let data = bytes(args, 1)?;
            digest(name, data).map(MontyObject::Bytes)
        }
        "hashlib.digest_size" | "hashlib.block_size" => {
            let (digest_size, block_size) = sizes(text(args, 0)?)?;
            Ok(MontyObject::Int(if op.ends_with("digest_size") {
                digest_size
            } else {
                block_size
            }))
        }
        "time.time" => Ok(MontyObject::Float(unix_now().as_secs_f64())),
        "time.time_ns" => Ok(MontyObject::Int(
            i64::try_from(unix_now().as_nanos()).unwrap_or(i64::MAX),
        )),
        "time.monotonic" => Ok(MontyObject::Float(monotonic().as_secs_f64())),
        "time.monotonic_ns" => Ok(MontyObject::Int(
            i64::try_from(monotonic().as_nanos()).unwrap_or(i64::MAX),
        )),
        "time.sleep" => sleep(args, deadline),
        "time.strftime" => strftime(text(args, 0)?),
        "yaml.load" => Ok(yaml_load(text(args, 0)?)),
        "yaml.dump" => Ok(yaml_dump(args.first().unwrap_or(&MontyObject::None))),
        "random.entropy" => Ok(MontyObject::Int(entropy())),
        "random.seed" => Ok(MontyObject::Int(seed_of(text(args, 0)?))),
        "random.below" => below(args),
        "urllib.parse.quote" => {
            let plus = matches!(args.get(2), Some(MontyObject::Bool(true)));
            Ok(MontyObject::String(crate::url::quote(
                &bytes_or_text(args, 0)?,
                text(args, 1)?,
                plus,
            )))
        }
        "urllib.parse.unquote" => {
            let plus = matches!(args.get(1), Some(MontyObject::Bool(true)));
            Ok(MontyObject::String(crate::url::unquote(
                text(args, 0)?,
                plus,
            )))
        }
        "urllib.parse.urlsplit" | "urllib.parse.urlparse" => {
            let url = text(args, 0)?;
            let scheme = text(args, 1)?;
            let fragments = !matches!(args.get(2), Some(MontyObject::Bool(false)));
            let split = crate::url::urlsplit(url, scheme, fragments)
                .map_err(|e| error(ExcType::ValueError, e))?;
            Ok(if op.ends_with("urlsplit") {
                named(
                    "SplitResult",
                    &["scheme", "netloc", "path", "query", "fragment"],
                    split.into_parts(),
                )
            } else {
                named(
                    "ParseResult",
                    &["scheme", "netloc", "path", "params", "query", "fragment"],
                    crate::url::with_params(split),
                )
            })
        }
        other => Err(error(
            ExcType::AttributeError,
            &format!("the sandbox provides no `{other}`"),
        )),
    }
}

fn named(type_name: &str, fields: &[&str], values: Vec<String>) -> MontyObject {
    MontyObject::NamedTuple {
        type_name: type_name.to_owned(),
        field_names: fields.iter().map(|f| (*f).to_owned()).collect(),
        values: values.into_iter().map(MontyObject::String).collect(),
    }
}

fn error(kind: ExcType, message: &str) -> MontyException {
    MontyException::new(kind, Some(message.to_owned()))
}

fn text(args: &[MontyObject], i: usize) -> Result<&str, MontyException> {
    match args.get(i) {
        Some(MontyObject::String(s)) => Ok(s),
        Some(other) => Err(error(
            ExcType::TypeError,
            &format!("expected a str, got {}", other.type_name()),
        )),
        None => Err(error(ExcType::TypeError, "missing argument")),
    }
}

fn bytes(args: &[MontyObject], i: usize) -> Result<&[u8], MontyException> {
    match args.get(i) {
        Some(MontyObject::Bytes(b)) => Ok(b),
        Some(other) => Err(error(
            ExcType::TypeError,
            &format!(
                "a bytes-like object is required, not '{}'",
                other.type_name()
            ),
        )),
        None => Err(error(ExcType::TypeError, "missing argument")),
    }
}

fn bytes_or_text(args: &[MontyObject], i: usize) -> Result<Vec<u8>, MontyException> {
    match args.get(i) {
        Some(MontyObject::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(MontyObject::Bytes(b)) => Ok(b.clone()),
        Some(other) => Err(error(
            ExcType::TypeError,
            &format!("quote() doesn't support '{}' objects", other.type_name()),
        )),
        None => Err(error(ExcType::TypeError, "missing argument")),
    }
}

fn unsupported_hash(name: &str) -> MontyException {
    error(
        ExcType::ValueError,
        &format!("unsupported hash type {name}"),
    )
}

/// Digest and block sizes in bytes, as hashlib reports them.
fn sizes(name: &str) -> Result<(i64, i64), MontyException> {
    Ok(match name {
        "md5" => (16, 64),
        "sha1" => (20, 64),
        "sha224" => (28, 64),
        "sha256" => (32, 64),
        "sha384" => (48, 128),
        "sha512" => (64, 128),
        "blake2b" => (64, 128),
        "blake2s" => (32, 64),
        _ => return Err(unsupported_hash(name)),
    })
}

fn digest(name: &str, data: &[u8]) -> Result<Vec<u8>, MontyException> {
    use sha2::Digest;
    Ok(match name {
        "md5" => md5::Md5::digest(data).to_vec(),
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "sha224" => sha2::Sha224::digest(data).to_vec(),
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "sha384" => sha2::Sha384::digest(data).to_vec(),
        "sha512" => sha2::Sha512::digest(data).to_vec(),
        "blake2b" => blake2::Blake2b512::digest(data).to_vec(),
        "blake2s" => blake2::Blake2s256::digest(data).to_vec(),
        _ => return Err(unsupported_hash(name)),
    })
}

fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Time since the worker's first clock read: monotonic, and meaningful only as a
/// difference, as Python's is.
fn monotonic() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// A fresh 64-bit seed: std's per-process random hash keys mixed with the clock.
fn entropy() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(unix_now().as_nanos());
    h.finish() as i64
}

/// The seed `random.seed(x)` gives, from `repr(x)`.
fn seed_of(text: &str) -> i64 {
    use sha2::Digest;
    let d = sha2::Sha256::digest(text.as_bytes());
    i64::from_le_bytes(d[..8].try_into().expect("a sha256 digest has 32 bytes"))
}

/// splitmix64's next state and output.
fn splitmix64(state: u64) -> (u64, u64) {
    let next = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = next;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (next, z ^ (z >> 31))
}

/// `random.below(state, n)`: `[next state, a uniform int in [0, n)]`, without modulo
/// bias (draws that fall in the uneven tail are redrawn).
fn below(args: &[MontyObject]) -> Result<MontyObject, MontyException> {
    let (Some(MontyObject::Int(state)), Some(MontyObject::Int(n))) = (args.first(), args.get(1))
    else {
        return Err(error(
            ExcType::TypeError,
            "random.below needs a state and a bound",
        ));
    };
    let n = u64::try_from(*n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| error(ExcType::ValueError, "the bound must be positive"))?;
    let zone = u64::MAX - u64::MAX % n;
    let mut state = *state as u64;
    loop {
        let (next, drawn) = splitmix64(state);
        state = next;
        if drawn < zone {
            return Ok(MontyObject::List(vec![
                MontyObject::Int(state as i64),
                MontyObject::Int((drawn % n) as i64),
            ]));
        }
    }
}

/// Sleeps as asked, but never past the block's deadline: a sleep that would end after
/// it sleeps until it and fails as the time limit.
fn sleep(args: &[MontyObject], deadline: Instant) -> Result<MontyObject, MontyException> {
    let secs = match args.first() {
        Some(MontyObject::Int(i)) => *i as f64,
        Some(MontyObject::Float(f)) => *f,
        _ => {
            return Err(error(
                ExcType::TypeError,
                "sleep() needs a number of seconds",
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(error(
            ExcType::ValueError,
            "sleep length must be a finite non-negative number",
        ));
    }
    let wanted = Duration::from_secs_f64(secs);
    let left = deadline.saturating_duration_since(Instant::now());
    std::thread::sleep(wanted.min(left));
    if wanted > left {
        return Err(error(
            ExcType::TimeoutError,
            "time limit exceeded while sleeping",
        ));
    }
    Ok(MontyObject::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_bound_in_place_and_lines_kept() {
        let p = prepare(
            "import json, hashlib as h\nfrom urllib.parse import (quote,\n  unquote)\nx = 1",
        );
        let lines: Vec<&str> = p.source.lines().collect();
        let at = p.offset as usize;
        assert_eq!(lines[at], "import json; h = _weft_hashlib");
        assert_eq!(
            lines[at + 1],
            "quote = _weft_urllib.parse.quote; unquote = _weft_urllib.parse.unquote"
        );
        assert_eq!(lines[at + 3], "x = 1");
        assert!(p.source.contains("class _WeftHashlib"));
        assert!(p.source.contains("class _WeftUrllibParse"));
        assert!(!p.source.contains("class _WeftTime"));
    }

    #[test]
    fn code_without_provided_modules_is_unchanged() {
        let p = prepare("import json\ntimeout = 3");
        assert_eq!(
            (p.source.as_str(), p.offset),
            ("import json\ntimeout = 3", 0)
        );
        let p = prepare("import urllib.request");
        assert_eq!(p.offset, 0);
    }

    #[test]
    fn digests_match_the_published_vectors() {
        let hex = |v: Vec<u8>| v.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(
            hex(digest("sha256", b"abc").unwrap()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(digest("md5", b"").unwrap()),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        assert_eq!(
            hex(digest("sha1", b"abc").unwrap()),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert!(digest("sha3_256", b"").is_err());
    }
}
