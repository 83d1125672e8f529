//! Python through monty: compiles a code block once, runs it with monty's own time and
//! recursion limits, answers the calls that are safe (the clock, an empty environment,
//! and the modules Weft provides: see [`crate::python_modules`]), hands file operations
//! to the engine (see [`crate::files`]), refuses every other call that would reach the
//! host (other external functions, unknown names), and converts values to and from JSON.
//!
//! This runs inside a sandbox worker process (see [`crate::pool`]): an abort inside the
//! interpreter (stack overflow, allocation failure) ends that worker, never Weft.

use monty::{MontyRun, RunProgress};
use monty_types::{
    CompileOptions, ExtFunctionResult, MontyException, MontyObject, OsFunctionCall, PrintWriter,
    ResourceLimits, ResourceTracker,
};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::protocol::{Failure, FailureKind, Request};
use crate::python_modules::{self, HOST_FUNCTION};

/// The name the arguments travel under into the wrapper call.
const ARGS: &str = "__weft_args";

/// Compiled code blocks, by the text that was compiled.
#[derive(Default)]
pub struct Compiled {
    cache: HashMap<String, Program>,
}

/// A compiled block and how many lines of provided modules precede its own.
#[derive(Clone)]
struct Program {
    run: MontyRun,
    offset: u32,
}

pub(crate) fn to_monty(v: &Value) -> MontyObject {
    match v {
        Value::Null => MontyObject::None,
        Value::Bool(b) => MontyObject::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => MontyObject::Int(i),
            None => MontyObject::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => MontyObject::String(s.clone()),
        Value::Array(a) => MontyObject::List(a.iter().map(to_monty).collect()),
        Value::Object(m) => MontyObject::dict(
            m.iter()
                .map(|(k, v)| (MontyObject::String(k.clone()), to_monty(v)))
                .collect::<Vec<_>>(),
        ),
    }
}

pub(crate) fn from_monty(o: MontyObject) -> Result<Value, Failure> {
    Ok(match o {
        MontyObject::None => Value::Null,
        MontyObject::Bool(b) => Value::Bool(b),
        MontyObject::Int(i) => Value::from(i),
        MontyObject::BigInt(b) => Value::String(b.to_string()),
        MontyObject::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        MontyObject::String(s) => Value::String(s),
        MontyObject::List(items)
        | MontyObject::Tuple(items)
        | MontyObject::Set(items)
        | MontyObject::FrozenSet(items) => Value::Array(
            items
                .into_iter()
                .map(from_monty)
                .collect::<Result<_, _>>()?,
        ),
        MontyObject::NamedTuple {
            field_names,
            values,
            ..
        } => Value::Object(
            field_names
                .into_iter()
                .zip(values)
                .map(|(k, v)| Ok((k, from_monty(v)?)))
                .collect::<Result<Map<_, _>, Failure>>()?,
        ),
        MontyObject::Dict(pairs) => {
            let mut m = Map::new();
            for (k, v) in pairs {
                let key = match k {
                    MontyObject::String(s) => s,
                    MontyObject::Int(i) => i.to_string(),
                    MontyObject::Bool(b) => {
                        if b {
                            "true".into()
                        } else {
                            "false".into()
                        }
                    }
                    other => {
                        return Err(Failure::new(
                            FailureKind::Code,
                            format!(
                                "a returned dict has a {} key; JSON keys are strings",
                                other.type_name()
                            ),
                        ));
                    }
                };
                m.insert(key, from_monty(v)?);
            }
            Value::Object(m)
        }
        other => Value::String(other.py_repr()),
    })
}

/// `e` as a failure, at the innermost line of the block's own code (`offset` lines of
/// provided modules precede it).
fn failure_of(e: &MontyException, offset: u32) -> Failure {
    let name = e.exc_type().to_string();
    let line = e
        .traceback()
        .iter()
        .rev()
        .map(|f| f.start.line)
        .find(|&l| l > offset)
        .map(|l| l - offset);
    let text = e.message().unwrap_or_default();
    let kind = if text.contains("time limit exceeded") {
        FailureKind::Timeout
    } else if name == "MemoryError" || text.contains("memory limit") {
        FailureKind::Memory
    } else if name == "RecursionError" {
        FailureKind::Recursion
    } else {
        FailureKind::Code
    };
    let mut message = if text.is_empty() {
        name.clone()
    } else {
        format!("{name}: {text}")
    };
    if let Some(l) = line {
        message = format!("{message} (line {l})");
    }
    Failure {
        kind,
        message,
        line,
    }
}

/// The code that runs: the block's source (its imports of provided modules bound), then
/// a call of its entry with the arguments.
fn program(req: &Request) -> (String, u32) {
    let source = crate::python_methods::rewrite(&req.source);
    let prepared = python_modules::prepare(source.as_deref().unwrap_or(&req.source));
    let code = match &req.entry {
        Some(entry) => format!("{}\n{entry}(**{ARGS})\n", prepared.source),
        None => prepared.source,
    };
    (code, prepared.offset)
}

fn input_names(req: &Request) -> Vec<String> {
    match (&req.entry, &*req.args.json()) {
        (Some(_), _) => vec![ARGS.to_owned()],
        (None, Value::Object(m)) => m.keys().cloned().collect(),
        (None, _) => Vec::new(),
    }
}

fn inputs(req: &Request) -> Vec<MontyObject> {
    match (&req.entry, &*req.args.json()) {
        (Some(_), args) => vec![to_monty(args)],
        (None, Value::Object(m)) => m.values().map(to_monty).collect(),
        (None, _) => Vec::new(),
    }
}

impl Compiled {
    fn get(&mut self, req: &Request) -> Result<&Program, Failure> {
        let names = input_names(req);
        let key = format!(
            "{}\u{0}{:?}\u{0}{}\u{0}{:?}\u{0}{:?}",
            req.source,
            req.entry,
            names.join(","),
            req.imports,
            req.builtins
        );
        if !self.cache.contains_key(&key) {
            crate::policy::check(
                &req.source,
                &names,
                req.imports.as_deref(),
                req.builtins.as_deref(),
            )?;
            let (code, offset) = program(req);
            let run = MontyRun::new(code, "block.py", names, CompileOptions::default())
                .map_err(|e| failure_of(&e, offset))?;
            // A long-lived worker must not grow without bound.
            if self.cache.len() >= 512 {
                self.cache.clear();
            }
            self.cache.insert(key.clone(), Program { run, offset });
        }
        Ok(&self.cache[&key])
    }

    /// Runs the request to completion; `files` performs its file operations.
    pub fn run(
        &mut self,
        req: &Request,
        files: &mut dyn FnMut(OsFunctionCall) -> ExtFunctionResult,
    ) -> Result<Value, Failure> {
        let limits = ResourceLimits {
            max_duration: Some(Duration::from_millis(req.limits.time_ms)),
            max_recursion_depth: req.limits.max_depth as usize,
            ..ResourceLimits::default()
        };
        let deadline = Instant::now() + Duration::from_millis(req.limits.time_ms);
        let Program {
            run: runner,
            offset,
        } = self.get(req)?.clone();
        let mut progress = runner
            .start(
                inputs(req),
                ResourceTracker::new(limits),
                PrintWriter::Disabled,
            )
            .map_err(|e| failure_of(&e, offset))?;
        loop {
            let refused = |what: String| {
                MontyException::new(
                    monty_types::ExcType::PermissionError,
                    Some(format!("{what} is not available in the sandbox")),
                )
            };
            progress = match progress {
                RunProgress::Complete(value) => return from_monty(value),
                // The clock and the (empty) environment are answered here; file
                // operations by the engine.
                RunProgress::OsCall(call) => call.resume_with(PrintWriter::Disabled, |c| {
                    clock(&c)
                        .or_else(|| environment(&c))
                        .map_or_else(|| files(c), ExtFunctionResult::from)
                }),
                RunProgress::FunctionCall(call)
                    if call.function_name == HOST_FUNCTION && call.object_id.is_none() =>
                {
                    let answer = python_modules::call(&call.args, deadline);
                    match answer {
                        Ok(value) => call.resume(value, PrintWriter::Disabled),
                        Err(exc) => call.resume(exc, PrintWriter::Disabled),
                    }
                }
                RunProgress::FunctionCall(call) => {
                    let name = call.function_name.clone();
                    call.abort(refused(format!("`{name}`")), PrintWriter::Disabled)
                }
                RunProgress::NameLookup(lookup)
                    if lookup.name == HOST_FUNCTION && lookup.object_id().is_none() =>
                {
                    lookup.resume(
                        monty_types::NameLookupResult::Value(MontyObject::Function {
                            name: HOST_FUNCTION.to_owned(),
                            docstring: None,
                        }),
                        PrintWriter::Disabled,
                    )
                }
                RunProgress::NameLookup(lookup) => {
                    let name = lookup.name.clone();
                    lookup.abort(
                        MontyException::new(
                            monty_types::ExcType::NameError,
                            Some(format!("name '{name}' is not defined")),
                        ),
                        PrintWriter::Disabled,
                    )
                }
                RunProgress::ResolveFutures(f) => f.abort(
                    refused("awaiting host futures".into()),
                    PrintWriter::Disabled,
                ),
            }
            .map_err(|e| failure_of(&e, offset))?;
        }
    }
}

/// The answer to an environment call: the sandbox's environment is empty, so
/// `os.getenv` gives its default and `os.environ` nothing. `None` for other calls.
fn environment(call: &OsFunctionCall) -> Option<MontyObject> {
    match call {
        OsFunctionCall::Getenv(args) => Some(args.default.clone()),
        OsFunctionCall::GetEnviron => Some(MontyObject::dict(Vec::new())),
        _ => None,
    }
}

/// The answer to a clock call (`datetime.now`, `date.today`): the sandbox's local time
/// is UTC. `None` for every other operating-system call.
fn clock(call: &monty_types::OsFunctionCall) -> Option<MontyObject> {
    use chrono::{Datelike, Timelike};
    use monty_types::OsFunctionCall;
    let utc = chrono::Utc::now().naive_utc();
    match call {
        OsFunctionCall::DateToday => Some(MontyObject::Date(monty_types::MontyDate {
            year: utc.year(),
            month: utc.month() as u8,
            day: utc.day() as u8,
        })),
        OsFunctionCall::DateTimeNow(zone) => {
            let offset = zone.as_ref().map(|z| z.offset_seconds);
            let local = utc + chrono::Duration::seconds(i64::from(offset.unwrap_or(0)));
            Some(MontyObject::DateTime(monty_types::MontyDateTime {
                year: local.year(),
                month: local.month() as u8,
                day: local.day() as u8,
                hour: local.hour() as u8,
                minute: local.minute() as u8,
                second: local.second() as u8,
                microsecond: local.nanosecond() / 1000 % 1_000_000,
                offset_seconds: offset,
                timezone_name: zone.as_ref().and_then(|z| z.name.clone()),
            }))
        }
        _ => None,
    }
}
