//! A dialect's view of a run: the names its specification gives a run's events and the
//! shape it gives a run's result, as data.
//!
//! The engine emits one typed stream of events whatever the dialect. A dialect describes
//! how its users expect to see that stream: the nodes of its document, and rules that
//! turn an engine event about one of them into the dialect's own event (spec 004's
//! `LoopStart`, spec 003's `step_start` log entry, ...). Because the view is plain data,
//! it is stored with a run when the run starts, so every later reader (a resume, an
//! approval, a retry, an event stream replayed from the store) names events the same
//! way without the flow's file.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use weft_core::event::Event;

/// How a dialect names a run's events and shapes its result. The default names nothing:
/// the engine's events only, the engine's result shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventView {
    /// The document's nodes, under the step name the compiled flow gives each.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, ViewNode>,
    /// Which steps of a path belong to a node.
    #[serde(default)]
    pub scope: NodeScope,
    /// The dialect's events; for each engine event the first rule that applies names it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// Tools of a node that run another node: node id -> tool name -> the node it runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, BTreeMap<String, String>>,
    /// The run's result in the dialect's shape, field by field; none: the engine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<IndexMap<String, ResultField>>,
}

/// A node of the document as its dialect names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewNode {
    /// The node's id or name in the document.
    pub id: String,
    /// Its type in the document (`while_loop`, `agent`, ...).
    pub kind: String,
    /// The name it shows under, when the document gives it one besides its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Which step paths belong to a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeScope {
    /// A step whose last path segment is the node's step name, at any depth.
    #[default]
    Anywhere,
    /// Only a step of the flow's top level (`root/<node>`), or of one of its concurrent
    /// branches (`root/b<k>/<node>`).
    TopLevel,
}

/// What an engine event is about, for a rule to apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// The node at the event's `path` (or, for an approval, its `key`).
    #[default]
    Node,
    /// The tool an event's `tool` names, offered by the node at its `path`.
    ToolCall,
    /// A step that runs a tool (its path ends in `tool<round>.<index>.<name>`) which
    /// runs another node.
    ToolStep,
}

/// One of the dialect's events: which engine events it renames and what it carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The engine event types it applies to (`loop_started`, `step_failed`, ...).
    pub on: Vec<String>,
    /// What the event must be about.
    #[serde(default)]
    pub subject: Subject,
    /// The node kinds it applies to; empty: any node of the view.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Fields of the engine event (JSON pointers) that must not hold these values.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub unless: IndexMap<String, Value>,
    /// The dialect's event type.
    pub name: Source,
    /// The dialect event's fields, in order.
    #[serde(default)]
    pub fields: IndexMap<String, Source>,
    /// A field of the engine event (JSON pointer) that may hold a list: then the rule
    /// applies once per element, read in the field's place, and an element it does not
    /// name (its name null, say) gives no event. A block's one `emit` can so log several
    /// entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub each: Option<String>,
}

/// Where a value of a dialect's event comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// This value.
    Const(Value),
    /// The id of the node the event is about (for a tool: the node offering it).
    Node,
    /// The kind of the node the event is about.
    NodeKind,
    /// For a tool: the id of the node it runs.
    ToolNode,
    /// For a tool: the name of the node it runs (its id when it has no name).
    ToolNodeName,
    /// The outermost node the event's step is within (for a tool a nested node
    /// offers: the top-level node whose call it is part of); for an event about a node,
    /// that node.
    OuterNode,
    /// How many tool calls deep the step path at this field is (1 for a tool of a
    /// top-level node).
    ToolDepth(String),
    /// The step path of the tool call that encloses the tool call whose path is at this
    /// field; left out at the first level.
    EnclosingCall(String),
    /// A field of the engine event, by JSON pointer; a field the event lacks (or holds
    /// null in) is left out of the dialect's event.
    Field(String),
    /// A field of the engine event, or `or` when the event lacks it (or holds null).
    FieldOr {
        /// The pointer.
        at: String,
        /// The value in its place.
        or: Value,
    },
    /// A field holding a number written as text (a branch's index), as a number.
    Number(String),
    /// A field's value renamed through a table; values not in it stay as they are.
    Rename {
        /// The pointer.
        at: String,
        /// Old value -> new value.
        to: IndexMap<String, Value>,
    },
    /// An object of these fields, written as JSON text.
    JsonText(IndexMap<String, Source>),
}

/// A field of a run's result in the dialect's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultField {
    /// The run's id.
    RunId,
    /// Its status (`completed`, `paused`, ...).
    Status,
    /// The dialect's events so far.
    Events,
    /// The run state.
    State,
    /// Whether it waits for an answer.
    Waiting,
    /// The id of the node it waits at, if any.
    WaitingNode,
    /// The output, when completed.
    Output,
    /// The error, when failed.
    Error,
}

/// A run as a dialect's result shape needs it.
#[derive(Debug, Clone, Copy)]
pub struct RunSummary<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// Its status.
    pub status: &'a str,
    /// Its state.
    pub state: &'a Value,
    /// The approvals it waits for (`[{key, prompt, options}]`).
    pub waiting: &'a [Value],
    /// Its output.
    pub output: Option<&'a Value>,
    /// Its error, as JSON.
    pub error: &'a Value,
}

/// What an event is about, once its subject is resolved.
struct Resolved<'v> {
    node: &'v ViewNode,
    tool_node: Option<&'v ViewNode>,
    outer: Option<&'v ViewNode>,
}

impl EventView {
    /// Whether the view names any event (or shapes the result).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.result.is_none()
    }

    /// Whether runs get a result in the dialect's own shape.
    pub fn shapes_result(&self) -> bool {
        self.result.is_some()
    }

    /// The view as stored with a run: none for the engine's names.
    pub fn to_stored(&self) -> Option<Value> {
        (!self.is_empty()).then(|| serde_json::to_value(self).unwrap_or(Value::Null))
    }

    /// The view stored with a run, or the engine's names when none is (or it does not
    /// read, as a view written by a newer Weft may not).
    pub fn from_stored(stored: Option<&Value>) -> EventView {
        stored
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// The dialect's events for `e`: none when it names none, one per element when the
    /// rule that applies expands a list (see [`Rule::each`]). Each is `run_id`, `seq`,
    /// `at_ms`, the dialect's `type`, then the rule's fields.
    pub fn translate(&self, e: &Event) -> Vec<Value> {
        if self.rules.is_empty() {
            return Vec::new();
        }
        let Ok(event) = serde_json::to_value(&e.kind) else {
            return Vec::new();
        };
        let Some(kind) = event.get("type").and_then(Value::as_str) else {
            return Vec::new();
        };
        for rule in self.rules.iter().filter(|r| r.on.iter().any(|o| o == kind)) {
            let list = rule
                .each
                .as_deref()
                .and_then(|at| Some((at, event.pointer(at)?.as_array()?)));
            let out: Vec<Value> = match list {
                Some((at, items)) => items
                    .iter()
                    .filter_map(|item| {
                        let mut one = event.clone();
                        *one.pointer_mut(at)? = item.clone();
                        self.apply(rule, e, &one)
                    })
                    .collect(),
                None => self.apply(rule, e, &event).into_iter().collect(),
            };
            if !out.is_empty() || list.is_some() {
                return out;
            }
        }
        Vec::new()
    }

    fn apply(&self, rule: &Rule, e: &Event, event: &Value) -> Option<Value> {
        if rule
            .unless
            .iter()
            .any(|(at, v)| event.pointer(at) == Some(v))
        {
            return None;
        }
        let subject = self.resolve(rule.subject, event)?;
        if !rule.kinds.is_empty() && !rule.kinds.contains(&subject.node.kind) {
            return None;
        }
        let name = value_of(&rule.name, &subject, event)?;
        let mut out = Map::new();
        out.insert("run_id".into(), Value::from(&*e.run_id));
        out.insert("seq".into(), Value::from(e.seq));
        out.insert("at_ms".into(), Value::from(e.at_ms));
        out.insert("type".into(), Value::String(name.as_str()?.to_owned()));
        fill(&mut out, &rule.fields, &subject, event);
        Some(Value::Object(out))
    }

    fn resolve<'v>(&'v self, subject: Subject, event: &Value) -> Option<Resolved<'v>> {
        let path = event
            .get("path")
            .or_else(|| event.get("key"))
            .and_then(Value::as_str)?;
        // Only a tool's events can be nested below the node they belong to.
        let outer = match subject {
            Subject::Node => None,
            _ => self.outer_node(path),
        };
        match subject {
            Subject::Node => Some(Resolved {
                node: self.node(path)?,
                tool_node: None,
                outer,
            }),
            Subject::ToolCall => {
                let node = self.agent_at(path)?;
                let tool = event.get("tool")?.as_str()?;
                let runs = self.tools.get(&node.id)?.get(tool)?;
                Some(Resolved {
                    node,
                    tool_node: Some(self.by_id(runs)?),
                    outer,
                })
            }
            Subject::ToolStep => {
                let (parent_path, _) = tool_step(path)?;
                let node = self.agent_at(parent_path)?;
                let runs = self.agent_at(path)?;
                Some(Resolved {
                    node,
                    tool_node: Some(runs),
                    outer,
                })
            }
        }
    }

    /// The node of the shortest prefix of `path` that is a node of the view.
    fn outer_node(&self, path: &str) -> Option<&ViewNode> {
        path.match_indices('/')
            .map(|(i, _)| &path[..i])
            .chain([path])
            .find_map(|prefix| self.node(prefix))
    }

    /// The node whose document id is `id` (its own step, not a helper step of it).
    fn by_id(&self, id: &str) -> Option<&ViewNode> {
        self.nodes
            .get(id)
            .filter(|n| n.id == id)
            .or_else(|| self.nodes.values().find(|n| n.id == id))
    }

    /// The node a step path belongs to, as the view's scope says.
    pub fn node(&self, path: &str) -> Option<&ViewNode> {
        let last = match self.scope {
            NodeScope::Anywhere => path.rsplit('/').next()?,
            NodeScope::TopLevel => {
                let mut rest = path.split('/').skip(1);
                match (rest.next(), rest.next(), rest.next()) {
                    (Some(node), None, _) => node,
                    (Some(branch), Some(node), None) if branch.starts_with('b') => node,
                    _ => return None,
                }
            }
        };
        let name = last.split_once('@').map_or(last, |(n, _)| n);
        self.nodes.get(name)
    }

    /// The node whose work runs at `path`: a node of the view, or the node a tool step
    /// at the end of `path` runs.
    fn agent_at(&self, path: &str) -> Option<&ViewNode> {
        if let Some(n) = self.node(path) {
            return Some(n);
        }
        let (parent_path, tool) = tool_step(path)?;
        let parent = self.agent_at(parent_path)?;
        let runs = self.tools.get(&parent.id)?.get(tool)?;
        self.by_id(runs)
    }

    /// A run's result in the dialect's shape, with the dialect's `events` so far; none
    /// when the dialect keeps the engine's shape.
    pub fn result(&self, run: &RunSummary<'_>, events: &[Value]) -> Option<Value> {
        let shape = self.result.as_ref()?;
        let waiting_node = || {
            run.waiting
                .first()
                .and_then(|w| w["key"].as_str())
                .and_then(|k| self.node(k))
                .map_or(Value::Null, |n| Value::from(n.id.as_str()))
        };
        let out = shape
            .iter()
            .map(|(name, field)| {
                let v = match field {
                    ResultField::RunId => Value::from(run.run_id),
                    ResultField::Status => Value::from(run.status),
                    ResultField::Events => Value::Array(events.to_vec()),
                    ResultField::State => run.state.clone(),
                    ResultField::Waiting => Value::Bool(!run.waiting.is_empty()),
                    ResultField::WaitingNode => waiting_node(),
                    ResultField::Output => run.output.cloned().unwrap_or(Value::Null),
                    ResultField::Error => run.error.clone(),
                };
                (name.clone(), v)
            })
            .collect();
        Some(Value::Object(out))
    }
}

fn fill(
    out: &mut Map<String, Value>,
    fields: &IndexMap<String, Source>,
    s: &Resolved<'_>,
    event: &Value,
) {
    for (name, source) in fields {
        if let Some(v) = value_of(source, s, event) {
            out.insert(name.clone(), v);
        }
    }
}

fn value_of(source: &Source, s: &Resolved<'_>, event: &Value) -> Option<Value> {
    match source {
        Source::Const(v) => Some(v.clone()),
        Source::Node => Some(Value::from(s.node.id.as_str())),
        Source::NodeKind => Some(Value::from(s.node.kind.as_str())),
        Source::ToolNode => s.tool_node.map(|n| Value::from(n.id.as_str())),
        Source::ToolNodeName => s
            .tool_node
            .map(|n| Value::from(n.name.as_deref().unwrap_or(&n.id))),
        Source::OuterNode => Some(Value::from(s.outer.unwrap_or(s.node).id.as_str())),
        Source::ToolDepth(at) => {
            let path = event.pointer(at)?.as_str()?;
            Some(Value::from(tool_calls(path).count()))
        }
        Source::EnclosingCall(at) => {
            let path = event.pointer(at)?.as_str()?;
            let mut calls: Vec<usize> = tool_calls(path).collect();
            calls.pop();
            calls.last().map(|end| Value::from(&path[..*end]))
        }
        Source::Field(at) => present(event, at).cloned(),
        Source::FieldOr { at, or } => Some(present(event, at).unwrap_or(or).clone()),
        Source::Number(at) => {
            let v = event.pointer(at)?;
            Some(
                v.as_str()
                    .and_then(|t| t.parse::<u64>().ok())
                    .map_or_else(|| v.clone(), Value::from),
            )
        }
        Source::Rename { at, to } => {
            let v = event.pointer(at)?;
            Some(v.as_str().and_then(|t| to.get(t)).unwrap_or(v).clone())
        }
        Source::JsonText(fields) => {
            let mut obj = Map::new();
            fill(&mut obj, fields, s, event);
            Some(Value::from(Value::Object(obj).to_string()))
        }
    }
}

/// The field of `event` at `at`, unless it is missing or null.
fn present<'e>(event: &'e Value, at: &str) -> Option<&'e Value> {
    event.pointer(at).filter(|v| !v.is_null())
}

/// Where each tool-call step of `path` ends (the length of its prefix up to and
/// including that step), outermost first.
fn tool_calls(path: &str) -> impl Iterator<Item = usize> + '_ {
    path.match_indices('/')
        .map(|(i, _)| i)
        .chain([path.len()])
        .filter(move |end| tool_step(&path[..*end]).is_some())
}

/// `(<parent path>, <tool name>)` when `path` ends in the engine's tool-call step
/// (`.../tool<round>.<index>.<name>`).
fn tool_step(path: &str) -> Option<(&str, &str)> {
    let (parent, last) = path.rsplit_once('/')?;
    let mut parts = last.strip_prefix("tool")?.splitn(3, '.');
    let (round, index, name) = (parts.next()?, parts.next()?, parts.next()?);
    let numeric = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    (numeric(round) && numeric(index)).then_some((parent, name))
}

impl Rule {
    /// A rule naming the engine events `on` as `name`.
    pub fn on(on: &[&str], name: &str) -> Rule {
        Rule::named_by(on, Source::Const(Value::from(name)))
    }

    /// A rule naming the engine events `on` by `name` (a field of the event, say).
    pub fn named_by(on: &[&str], name: Source) -> Rule {
        Rule {
            on: on.iter().map(|s| (*s).to_owned()).collect(),
            subject: Subject::Node,
            kinds: Vec::new(),
            unless: IndexMap::new(),
            name,
            fields: IndexMap::new(),
            each: None,
        }
    }

    /// Applies once per element when the engine event's field `at` is a list.
    pub fn each(mut self, at: &str) -> Rule {
        self.each = Some(at.to_owned());
        self
    }

    /// Applies to events about `subject`.
    pub fn about(mut self, subject: Subject) -> Rule {
        self.subject = subject;
        self
    }

    /// Applies only to nodes of these kinds.
    pub fn kinds(mut self, kinds: &[&str]) -> Rule {
        self.kinds = kinds.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Does not apply when the event's field `at` holds `value`.
    pub fn unless(mut self, at: &str, value: Value) -> Rule {
        self.unless.insert(at.to_owned(), value);
        self
    }

    /// Adds the field `name` to the dialect's event.
    pub fn field(mut self, name: &str, source: Source) -> Rule {
        self.fields.insert(name.to_owned(), source);
        self
    }
}

impl Source {
    /// The engine event's field at `at`.
    pub fn at(at: &str) -> Source {
        Source::Field(at.to_owned())
    }

    /// The engine event's field at `at`, or `or`.
    pub fn at_or(at: &str, or: Value) -> Source {
        Source::FieldOr {
            at: at.to_owned(),
            or,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;
    use weft_core::event::EventKind;

    fn event(kind: EventKind) -> Event {
        Event {
            run_id: Arc::from("r"),
            seq: 7,
            at_ms: 1,
            kind,
        }
    }

    fn loop_view() -> EventView {
        let mut v = EventView::default();
        v.nodes.insert(
            "poll".into(),
            ViewNode {
                id: "poll".into(),
                kind: "while_loop".into(),
                name: None,
            },
        );
        v.rules.push(
            Rule::on(&["loop_started"], "LoopStart")
                .kinds(&["while_loop"])
                .field("node_name", Source::Node)
                .field("max_iterations", Source::at("/max_iterations")),
        );
        v
    }

    #[test]
    fn a_stored_view_names_events_as_the_original_does() {
        let view = loop_view();
        let stored = view.to_stored().expect("a view with rules is stored");
        let back = EventView::from_stored(Some(&stored));
        assert_eq!(back, view);
        let e = event(EventKind::LoopStarted {
            path: "root/poll@2".into(),
            max_iterations: 3,
        });
        assert_eq!(
            back.translate(&e),
            vec![
                json!({"run_id": "r", "seq": 7, "at_ms": 1, "type": "LoopStart", "node_name": "poll", "max_iterations": 3})
            ]
        );
    }

    #[test]
    fn a_message_holding_a_list_is_one_event_per_element_it_names() {
        let mut view = loop_view();
        view.rules = vec![
            Rule::named_by(&["message"], Source::at("/message/type"))
                .each("/message")
                .field("content", Source::at("/message/content")),
        ];
        let e = event(EventKind::Message {
            path: "root/poll".into(),
            message: json!([
                {"type": "check", "content": "first"},
                {"type": null, "content": "not logged"},
                {"type": "check", "content": "second"},
            ]),
        });
        let contents: Vec<Value> = view
            .translate(&e)
            .into_iter()
            .map(|v| v["content"].clone())
            .collect();
        assert_eq!(contents, vec![json!("first"), json!("second")]);
        let one = event(EventKind::Message {
            path: "root/poll".into(),
            message: json!({"type": "check", "content": "alone"}),
        });
        assert_eq!(view.translate(&one)[0]["content"], "alone");
        let stored = EventView::from_stored(view.to_stored().as_ref());
        assert_eq!(stored, view, "`each` is kept with the run");
    }

    #[test]
    fn events_about_other_nodes_or_kinds_keep_the_engine_s_names() {
        let view = loop_view();
        let other = event(EventKind::LoopStarted {
            path: "root/other".into(),
            max_iterations: 3,
        });
        assert!(view.translate(&other).is_empty());
        let started = event(EventKind::StepStarted {
            path: "root/poll".into(),
            kind: "loop".into(),
            input: None,
        });
        assert!(view.translate(&started).is_empty());
    }

    #[test]
    fn an_unreadable_stored_view_falls_back_to_the_engine_s_names() {
        let v = EventView::from_stored(Some(&json!({"rules": "not a list"})));
        assert!(v.is_empty());
        assert_eq!(EventView::default().to_stored(), None);
    }
}
