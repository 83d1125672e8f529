//! Runs' events folded into spans: one `invoke_workflow {flow}` span per execution of a
//! run, one span per step under it (nested as the steps are), a `chat {model}` span per
//! model call and an `execute_tool {name}` span per tool call. A span is handed on when
//! it ends; what is still open when a run pauses ends there.

use crate::conventions as conv;
use crate::ids;
use opentelemetry::trace::{
    Event as SpanEvent, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId,
    TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use weft_core::BlockError;
use weft_core::event::{Event, EventKind};
use weft_core::usage::Usage;

/// The spans of every run this process drives.
pub(crate) struct Tracer {
    runs: Mutex<HashMap<Arc<str>, RunTrace>>,
    /// Span events of runs between executions: an approval's answer comes before the
    /// run it resumes re-enters, and belongs to that execution's trace.
    waiting: Mutex<HashMap<Arc<str>, Vec<SpanEvent>>>,
    scope: InstrumentationScope,
    /// Tool arguments go on `execute_tool` spans (prompts and answers come in the
    /// events already, when the engine captures them).
    capture_content: bool,
}

/// One execution of one run: its trace, its open spans by step path, and the tool
/// calls whose steps are about to start.
struct RunTrace {
    trace_id: TraceId,
    root: Open,
    open: HashMap<String, Open>,
    /// Tool calls by the path their step will run at: the tool's name and, when
    /// content is captured, its arguments.
    tools: HashMap<String, (String, Option<String>)>,
    usage: Usage,
}

/// A span that has started and not ended.
struct Open {
    id: SpanId,
    parent: SpanId,
    name: String,
    kind: SpanKind,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    events: Vec<SpanEvent>,
    links: Vec<Link>,
    status: Status,
}

impl Open {
    fn new(id: SpanId, parent: SpanId, name: String, start: SystemTime) -> Open {
        Open {
            id,
            parent,
            name,
            kind: SpanKind::Internal,
            start,
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            status: Status::Unset,
        }
    }

    fn failed(&mut self, error: &BlockError) {
        self.attributes
            .push(KeyValue::new(conv::ERROR_TYPE, error.kind.to_string()));
        self.status = Status::error(error.message.clone());
    }

    fn finish(self, trace_id: TraceId, end: SystemTime, scope: &InstrumentationScope) -> SpanData {
        let mut events = SpanEvents::default();
        events.events = self.events;
        let mut links = SpanLinks::default();
        links.links = self.links;
        SpanData {
            span_context: context(trace_id, self.id),
            parent_span_id: self.parent,
            parent_span_is_remote: false,
            span_kind: self.kind,
            name: self.name.into(),
            start_time: self.start,
            end_time: end.max(self.start),
            attributes: self.attributes,
            dropped_attributes_count: 0,
            events,
            links,
            status: self.status,
            instrumentation_scope: scope.clone(),
        }
    }
}

fn context(trace_id: TraceId, span_id: SpanId) -> SpanContext {
    SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    )
}

impl Tracer {
    pub(crate) fn new(capture_content: bool) -> Tracer {
        Tracer {
            runs: Mutex::default(),
            waiting: Mutex::default(),
            capture_content,
            scope: InstrumentationScope::builder("weft")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }

    /// Takes in one event (seen at `now`) and returns the spans it ended.
    pub(crate) fn on_event(&self, e: &Event, now: SystemTime) -> Vec<SpanData> {
        let mut runs = self.runs.lock().expect("tracer lock");
        match &e.kind {
            EventKind::RunStarted {
                flow,
                flow_hash,
                dialect,
                ..
            } => {
                let origin = Origin {
                    flow,
                    hash: flow_hash,
                    dialect: dialect.as_deref(),
                };
                let trace = RunTrace::open(e, "start", origin, now);
                runs.insert(e.run_id.clone(), trace);
                Vec::new()
            }
            EventKind::RunResumed {
                journaled,
                flow,
                flow_hash,
                dialect,
            } => {
                let origin = Origin {
                    flow,
                    hash: flow_hash,
                    dialect: dialect.as_deref(),
                };
                let mut trace = RunTrace::open(e, &e.seq.to_string(), origin, now);
                trace
                    .root
                    .attributes
                    .push(KeyValue::new("weft.run.journaled", *journaled as i64));
                let earlier = self.waiting.lock().expect("tracer lock").remove(&e.run_id);
                trace.root.events.extend(earlier.unwrap_or_default());
                // A run re-entered in this process ended its earlier trace already.
                runs.insert(e.run_id.clone(), trace);
                Vec::new()
            }
            kind if kind.is_final() || matches!(kind, EventKind::RunPaused { .. }) => runs
                .remove(&e.run_id)
                .map(|t| t.end(kind, now, &self.scope))
                .unwrap_or_default(),
            EventKind::ToolCalled {
                tool,
                arguments,
                step: Some(step),
                ..
            } => {
                if let Some(trace) = runs.get_mut(&e.run_id) {
                    let args = self.capture_content.then(|| arguments.to_string());
                    trace.tools.insert(step.clone(), (tool.clone(), args));
                }
                Vec::new()
            }
            EventKind::ApprovalAnswered { key, answer } if !runs.contains_key(&e.run_id) => {
                let event = answered(key, answer, now);
                let mut waiting = self.waiting.lock().expect("tracer lock");
                waiting.entry(e.run_id.clone()).or_default().push(event);
                Vec::new()
            }
            _ => match runs.get_mut(&e.run_id) {
                Some(trace) => trace.on_step_event(e, now, &self.scope),
                None => Vec::new(),
            },
        }
    }
}

/// What a run's root span says of the flow it runs.
struct Origin<'a> {
    flow: &'a str,
    hash: &'a str,
    dialect: Option<&'a str>,
}

impl RunTrace {
    /// A new trace for one execution of a run: its first (`part` = `start`), or a
    /// re-entry (`part` = the seq of its `run_resumed`), which links to the first.
    fn open(e: &Event, part: &str, origin: Origin<'_>, now: SystemTime) -> RunTrace {
        let root_id = ids::span_id(&e.run_id, part);
        let name = format!("invoke_workflow {}", origin.flow);
        let mut root = Open::new(root_id, SpanId::INVALID, name, now);
        root.attributes = vec![
            KeyValue::new(conv::OPERATION, "invoke_workflow"),
            KeyValue::new("weft.run.id", e.run_id.to_string()),
            KeyValue::new("weft.flow.name", origin.flow.to_owned()),
            KeyValue::new("weft.flow.hash", origin.hash.to_owned()),
        ];
        if let Some(d) = origin.dialect {
            root.attributes
                .push(KeyValue::new("weft.dialect", d.to_owned()));
        }
        if part != "start" {
            let first = context(
                ids::trace_id(&e.run_id, "start"),
                ids::span_id(&e.run_id, "start"),
            );
            let why = vec![KeyValue::new("weft.link", "run_started")];
            root.links.push(Link::new(first, why, 0));
            root.attributes
                .push(KeyValue::new("weft.run.resumed", true));
        }
        RunTrace {
            trace_id: ids::trace_id(&e.run_id, part),
            root,
            open: HashMap::new(),
            tools: HashMap::new(),
            usage: Usage::default(),
        }
    }

    /// The open span of the nearest block around `path`, else the run's.
    fn parent_of(&self, path: &str) -> SpanId {
        let mut at = path;
        while let Some((outer, _)) = at.rsplit_once('/') {
            if let Some(o) = self.open.get(outer) {
                return o.id;
            }
            at = outer;
        }
        self.root.id
    }

    /// The open span of `path`, else the run's (for events about a step).
    fn span_at(&mut self, path: &str) -> &mut Open {
        match self.open.get_mut(path) {
            Some(o) => o,
            None => &mut self.root,
        }
    }

    fn on_step_event(
        &mut self,
        e: &Event,
        now: SystemTime,
        scope: &InstrumentationScope,
    ) -> Vec<SpanData> {
        match &e.kind {
            EventKind::StepStarted { path, kind, .. } => {
                self.step_started(e, path, kind, now);
                Vec::new()
            }
            EventKind::StepCompleted {
                path,
                elapsed_us,
                replayed,
                exit,
                ..
            } => {
                let Some(mut o) = self.open.remove(&**path) else {
                    return Vec::new();
                };
                o.start = o.start.min(before(now, *elapsed_us));
                o.attributes.push(KeyValue::new(conv::REPLAYED, *replayed));
                if let Some(x) = exit {
                    o.attributes
                        .push(KeyValue::new("weft.step.exit", x.clone()));
                }
                vec![o.finish(self.trace_id, now, scope)]
            }
            EventKind::StepFailed { path, error } => {
                let Some(mut o) = self.open.remove(&**path) else {
                    return Vec::new();
                };
                o.failed(error);
                vec![o.finish(self.trace_id, now, scope)]
            }
            EventKind::LlmCall { .. } => self.chat(e, now, scope).into_iter().collect(),
            EventKind::ToolCalled { path, tool, .. } => {
                vec![self.unknown_tool(e, path, tool, now, scope)]
            }
            _ => {
                self.note(e, now);
                Vec::new()
            }
        }
    }

    fn step_started(&mut self, e: &Event, path: &str, kind: &str, now: SystemTime) {
        let id = ids::span_id(&e.run_id, &e.seq.to_string());
        let parent = self.parent_of(path);
        let segment = path.rsplit('/').next().unwrap_or(path);
        let mut o = match self.tools.remove(path) {
            Some((tool, arguments)) => {
                let mut o = Open::new(id, parent, format!("execute_tool {tool}"), now);
                o.attributes
                    .push(KeyValue::new(conv::OPERATION, "execute_tool"));
                o.attributes.push(KeyValue::new(conv::TOOL_NAME, tool));
                if let Some(a) = arguments {
                    o.attributes.push(KeyValue::new(conv::TOOL_ARGUMENTS, a));
                }
                o
            }
            None => Open::new(id, parent, format!("{kind} {segment}"), now),
        };
        o.attributes
            .push(KeyValue::new("weft.step.path", path.to_owned()));
        o.attributes
            .push(KeyValue::new("weft.step.kind", kind.to_owned()));
        self.open.insert(path.to_owned(), o);
    }

    /// The `chat` span of one model call: it ended now, after `elapsed_us`.
    fn chat(
        &mut self,
        e: &Event,
        now: SystemTime,
        scope: &InstrumentationScope,
    ) -> Option<SpanData> {
        let EventKind::LlmCall {
            path,
            model,
            usage,
            call,
        } = &e.kind
        else {
            return None;
        };
        let weft_core::event::CallDetail {
            operation,
            provider,
            request_model,
            response_model,
            finish_reason,
            elapsed_us,
            error,
            prompt,
            answer,
        } = &**call;
        self.usage.add(usage);
        let asked = if request_model.is_empty() {
            model
        } else {
            request_model
        };
        let start = before(now, *elapsed_us);
        let id = ids::span_id(&e.run_id, &e.seq.to_string());
        let operation = operation.as_deref().unwrap_or("chat");
        let mut o = Open::new(
            id,
            self.span_at(path).id,
            format!("{operation} {asked}"),
            start,
        );
        o.kind = conv::chat_kind(provider);
        o.attributes =
            conv::call_attributes(operation, provider, asked, response_model.as_deref(), usage);
        if let Some(r) = finish_reason {
            o.attributes.push(conv::finish_reasons(r));
        }
        if let Some(kind) = error {
            o.attributes
                .push(KeyValue::new(conv::ERROR_TYPE, kind.clone()));
            o.status = Status::error(format!("the model call failed ({kind})"));
        }
        if let Some(p) = prompt {
            o.attributes
                .push(KeyValue::new(conv::INPUT_MESSAGES, p.clone()));
        }
        if let Some(a) = answer {
            o.attributes
                .push(KeyValue::new(conv::OUTPUT_MESSAGES, a.clone()));
        }
        o.attributes
            .push(KeyValue::new("weft.step.path", path.clone()));
        Some(o.finish(self.trace_id, now, scope))
    }

    /// A call of a tool the block does not have: a failed span of its own (a tool the
    /// block has gets its span when its step starts).
    fn unknown_tool(
        &mut self,
        e: &Event,
        path: &str,
        tool: &str,
        now: SystemTime,
        scope: &InstrumentationScope,
    ) -> SpanData {
        let id = ids::span_id(&e.run_id, &e.seq.to_string());
        let mut o = Open::new(
            id,
            self.span_at(path).id,
            format!("execute_tool {tool}"),
            now,
        );
        o.attributes
            .push(KeyValue::new(conv::OPERATION, "execute_tool"));
        o.attributes
            .push(KeyValue::new(conv::TOOL_NAME, tool.to_owned()));
        o.attributes
            .push(KeyValue::new(conv::ERROR_TYPE, "unknown_tool"));
        o.status = Status::error(format!("the block has no tool named `{tool}`"));
        o.finish(self.trace_id, now, scope)
    }

    /// Events that become span events: retries, rescues, warnings, approvals.
    fn note(&mut self, e: &Event, now: SystemTime) {
        let (path, name, attributes) = match &e.kind {
            EventKind::StepRetrying {
                path,
                attempt,
                delay_ms,
                error,
            } => (
                &**path,
                "weft.step.retrying",
                vec![
                    KeyValue::new("weft.attempt", i64::from(*attempt)),
                    KeyValue::new("weft.delay_ms", *delay_ms as i64),
                    KeyValue::new(conv::ERROR_TYPE, error.kind.to_string()),
                    KeyValue::new("weft.error.message", error.message.clone()),
                ],
            ),
            EventKind::StepRescued { path, error } => (
                &**path,
                "weft.step.rescued",
                vec![KeyValue::new(conv::ERROR_TYPE, error.kind.to_string())],
            ),
            EventKind::Warning {
                path,
                code,
                message,
            } => (
                &**path,
                "weft.warning",
                vec![
                    KeyValue::new("weft.warning.code", code.clone()),
                    KeyValue::new("weft.warning.message", message.clone()),
                ],
            ),
            EventKind::BudgetWarning { path, budget, .. } => (
                &**path,
                "weft.budget_warning",
                vec![KeyValue::new("weft.budget", budget.clone())],
            ),
            EventKind::ApprovalRequested { key, .. } => (
                "",
                "weft.approval.requested",
                vec![KeyValue::new("weft.approval.key", key.clone())],
            ),
            EventKind::ApprovalAnswered { key, answer } => {
                self.root.events.push(answered(key, answer, now));
                return;
            }
            _ => return,
        };
        self.span_at(path)
            .events
            .push(SpanEvent::new(name, now, attributes, 0));
    }

    /// The run's execution ended (or paused): every open span ends with it.
    fn end(
        mut self,
        kind: &EventKind,
        now: SystemTime,
        scope: &InstrumentationScope,
    ) -> Vec<SpanData> {
        match kind {
            EventKind::RunPaused { waiting } => {
                let n = waiting.as_array().map_or(0, Vec::len);
                self.root.events.push(SpanEvent::new(
                    "weft.run.paused",
                    now,
                    vec![KeyValue::new("weft.approvals.waiting", n as i64)],
                    0,
                ));
            }
            EventKind::RunFailed { error } => self.root.failed(error),
            EventKind::RunCancelled => self.root.status = Status::error("the run was cancelled"),
            _ => {}
        }
        let status = match kind {
            EventKind::RunCompleted { .. } => "completed",
            EventKind::RunFailed { .. } => "failed",
            EventKind::RunPaused { .. } => "paused",
            _ => "cancelled",
        };
        self.root
            .attributes
            .push(KeyValue::new("weft.run.status", status));
        self.root
            .attributes
            .extend(conv::usage_attributes(&self.usage));
        let trace_id = self.trace_id;
        let mut done: Vec<SpanData> = self
            .open
            .into_values()
            .map(|mut o| {
                o.attributes.push(KeyValue::new("weft.run.status", status));
                o.finish(trace_id, now, scope)
            })
            .collect();
        done.push(self.root.finish(trace_id, now, scope));
        done
    }
}

/// The span event of an approval's answer.
fn answered(key: &str, answer: &serde_json::Value, now: SystemTime) -> SpanEvent {
    let decision = answer["decision"].as_str().unwrap_or("").to_owned();
    SpanEvent::new(
        "weft.approval.answered",
        now,
        vec![
            KeyValue::new("weft.approval.key", key.to_owned()),
            KeyValue::new("weft.approval.decision", decision),
        ],
        0,
    )
}

/// `micros` before `now` (`now` itself if that would be before the epoch).
fn before(now: SystemTime, micros: u64) -> SystemTime {
    now.checked_sub(Duration::from_micros(micros))
        .unwrap_or(now)
}
