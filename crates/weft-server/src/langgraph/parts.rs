//! What each of a run's events sends in a stream's modes: the translation of Weft's
//! events into LangGraph's stream parts, keeping what later parts depend on (which
//! model steps streamed tokens, which steps started).

use super::messages;
use super::modes::{Mode, Modes};
use super::stream::{error_of, final_values, settled};
use super::{interrupts_of, time};
use crate::App;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use weft_core::event::{EventKind, SharedEvent};
use weft_core::ports::RunStatus;
use weft_core::value::Shared;

/// One part of a stream: its SSE event name and data, and whether it is live only
/// (a token delta: no id, never replayed).
pub(crate) struct Part {
    pub(crate) name: &'static str,
    pub(crate) data: Value,
    pub(crate) live: bool,
}

impl Part {
    fn stored(name: &'static str, data: Value) -> Part {
        Part {
            name,
            data,
            live: false,
        }
    }
}

/// Who a stream is for: the run and its thread and flow, as message metadata names them.
pub(crate) struct Streamed {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    pub(crate) flow: String,
}

/// One stream's translation state.
pub(crate) struct Translation {
    who: Streamed,
    modes: Modes,
    /// Model steps whose text went out as deltas, with the text so far (their whole
    /// message is not sent again; `messages` mode sends the text so far each time).
    streamed: HashMap<String, String>,
    /// Steps whose start this stream has seen.
    started: HashSet<String>,
    /// Deltas that arrived before their step's start (stored events are delivered once
    /// durable, deltas at once): sent after it. `None` on a rejoin, which may begin in
    /// the middle of a step and sends deltas as they come.
    held: Option<Vec<Arc<SharedEvent>>>,
}

impl Translation {
    /// A stream from the run's start holds early deltas back; a rejoin does not.
    pub(crate) fn new(who: Streamed, modes: Modes, from_start: bool) -> Translation {
        Translation {
            who,
            modes,
            streamed: HashMap::new(),
            started: HashSet::new(),
            held: from_start.then(Vec::new),
        }
    }

    /// What event `e` sends, in order.
    pub(crate) async fn parts(&mut self, app: &App, e: &Arc<SharedEvent>) -> Vec<Part> {
        let mut parts = Vec::new();
        match &e.kind {
            EventKind::RunStarted { input, flow, .. } => {
                self.who.flow.clone_from(flow);
                if self.modes.has(Mode::Values) {
                    parts.push(Part::stored("values", input.to_value()));
                }
                self.debug(&mut parts, e, "checkpoint", json!({"values": input}));
                if self.modes.has(Mode::Events) {
                    let data = json!({"input": input});
                    parts.push(Part::stored(
                        "events",
                        self.chain_event("on_chain_start", "", flow, data),
                    ));
                }
            }
            EventKind::StepStarted { path, input, .. } => {
                self.started.insert(path.to_string());
                let input = input.as_ref().map(Shared::json);
                self.step_started(&mut parts, e, path, input.as_deref());
                for delta in self.release(path) {
                    parts.extend(self.delta(&delta));
                }
            }
            EventKind::StepCompleted {
                path,
                kind,
                output: Some(output),
                replayed: false,
                ..
            } => {
                self.step_completed(&mut parts, e, path, kind, &output.json());
            }
            EventKind::LlmDelta { path, .. } => {
                if let Some(held) = self
                    .held
                    .as_mut()
                    .filter(|_| !self.started.contains(&**path))
                {
                    held.push(e.clone());
                } else {
                    parts.extend(self.delta(e));
                }
            }
            EventKind::Message { message, .. } if self.modes.has(Mode::Custom) => {
                parts.push(Part::stored("custom", message.clone()));
            }
            EventKind::RunCompleted { .. }
            | EventKind::RunPaused { .. }
            | EventKind::RunCancelled
            | EventKind::RunFailed { .. } => self.ending(&mut parts, app).await,
            _ => {}
        }
        parts
    }

    /// The held deltas of step `path`, now that it started.
    fn release(&mut self, path: &str) -> Vec<Arc<SharedEvent>> {
        let Some(held) = self.held.as_mut() else {
            return Vec::new();
        };
        let (mine, others): (Vec<_>, Vec<_>) = held
            .drain(..)
            .partition(|d| matches!(&d.kind, EventKind::LlmDelta { path: p, .. } if **p == *path));
        *held = others;
        mine
    }

    fn step_started(
        &self,
        parts: &mut Vec<Part>,
        e: &SharedEvent,
        path: &str,
        input: Option<&Value>,
    ) {
        let Some(node) = node_name(path) else { return };
        let input = input.cloned().unwrap_or(Value::Null);
        let task = json!({"id": path, "name": node, "input": input, "triggers": []});
        self.debug(parts, e, "task", task);
        if self.modes.has(Mode::Events) {
            let data = json!({"input": input});
            parts.push(Part::stored(
                "events",
                self.chain_event("on_chain_start", path, node, data),
            ));
        }
    }

    /// The parts of one token delta (live only).
    fn delta(&mut self, e: &SharedEvent) -> Vec<Part> {
        let EventKind::LlmDelta { path, text } = &e.kind else {
            return Vec::new();
        };
        let first = !self.streamed.contains_key(&**path);
        let so_far = self.streamed.entry(path.to_string()).or_default();
        so_far.push_str(text);
        let so_far = so_far.clone();
        let chunk = || messages::made("AIMessageChunk", self.message_id(path), text);
        let mut parts = Vec::new();
        if self.modes.has(Mode::Messages) {
            let partial = messages::made("AIMessageChunk", self.message_id(path), &so_far);
            if first {
                parts.push(self.messages_metadata(path, true));
            }
            let data = json!([partial]);
            parts.push(Part {
                name: "messages/partial",
                data,
                live: true,
            });
        }
        if self.modes.has(Mode::MessagesTuple) {
            let data = json!([chunk(), self.message_metadata(path)]);
            parts.push(Part {
                name: "messages",
                data,
                live: true,
            });
        }
        if self.modes.has(Mode::Events) {
            let node = node_name(path).unwrap_or("model");
            let data = self.chain_event(
                "on_chat_model_stream",
                path,
                node,
                json!({"chunk": chunk()}),
            );
            parts.push(Part {
                name: "events",
                data,
                live: true,
            });
        }
        parts
    }

    fn step_completed(
        &self,
        parts: &mut Vec<Part>,
        e: &SharedEvent,
        path: &str,
        kind: &str,
        output: &Value,
    ) {
        let Some(node) = node_name(path) else { return };
        if self.modes.has(Mode::Updates) {
            parts.push(Part::stored("updates", json!({ node: output })));
        }
        if kind == "llm" && !self.streamed.contains_key(path) {
            let text = match output {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let message = messages::made("ai", self.message_id(path), &text);
            if self.modes.has(Mode::MessagesTuple) {
                let data = json!([message, self.message_metadata(path)]);
                parts.push(Part::stored("messages", data));
            }
            if self.modes.has(Mode::Messages) {
                parts.push(self.messages_metadata(path, false));
                parts.push(Part::stored("messages/complete", json!([message])));
            }
        }
        let result =
            json!({"id": path, "name": node, "result": output, "error": null, "interrupts": []});
        self.debug(parts, e, "task_result", result);
        if self.modes.has(Mode::Events) {
            let data = json!({"output": output});
            parts.push(Part::stored(
                "events",
                self.chain_event("on_chain_end", path, node, data),
            ));
        }
    }

    /// The parts a run's end or pause sends: its values (with its interrupts), its
    /// interrupts as an update, the flow's chain end, or its error.
    async fn ending(&self, parts: &mut Vec<Part>, app: &App) {
        let Some(run) = settled(app, &self.who.run_id).await else {
            return;
        };
        if run.status == RunStatus::Failed {
            parts.push(Part::stored("error", error_of(run.error.as_ref())));
            return;
        }
        let values = final_values(&run);
        if run.status == RunStatus::Paused && self.modes.has(Mode::Updates) {
            parts.push(Part::stored(
                "updates",
                json!({"__interrupt__": interrupts_of(&run)}),
            ));
        }
        if self.modes.has(Mode::Values) {
            parts.push(Part::stored("values", values.clone()));
        }
        if run.status == RunStatus::Completed && self.modes.has(Mode::Events) {
            let data = json!({"output": values});
            parts.push(Part::stored(
                "events",
                self.chain_event("on_chain_end", "", &self.who.flow, data),
            ));
        }
    }

    fn debug(&self, parts: &mut Vec<Part>, e: &SharedEvent, kind: &str, payload: Value) {
        if self.modes.has(Mode::Debug) {
            let at = i64::try_from(e.at_ms).unwrap_or_default();
            let data =
                json!({"step": e.seq, "timestamp": time(at), "type": kind, "payload": payload});
            parts.push(Part::stored("debug", data));
        }
    }

    /// The id of the message a model step makes: the same for its chunks and whole.
    fn message_id(&self, path: &str) -> String {
        format!("run-{}-{path}", self.who.run_id)
    }

    /// `messages` mode's `messages/metadata` part for the message step `path` makes.
    fn messages_metadata(&self, path: &str, live: bool) -> Part {
        let data = json!({ self.message_id(path): {"metadata": self.message_metadata(path)} });
        Part {
            name: "messages/metadata",
            data,
            live,
        }
    }

    fn message_metadata(&self, path: &str) -> Value {
        json!({
            "run_id": self.who.run_id,
            "thread_id": self.who.thread_id,
            "graph_id": self.who.flow,
            "assistant_id": self.who.flow,
            "langgraph_node": node_name(path),
            "langgraph_path": path,
        })
    }

    /// One of LangChain's `astream_events` (v2) records; `path` empty for the flow's own.
    fn chain_event(&self, event: &str, path: &str, name: &str, data: Value) -> Value {
        let (run_id, parents) = if path.is_empty() {
            (self.who.run_id.clone(), json!([]))
        } else {
            (
                format!("{}:{path}", self.who.run_id),
                json!([self.who.run_id]),
            )
        };
        json!({
            "event": event,
            "data": data,
            "name": name,
            "tags": [],
            "run_id": run_id,
            "metadata": {
                "run_id": self.who.run_id,
                "thread_id": self.who.thread_id,
                "graph_id": self.who.flow,
                "langgraph_node": node_name(path),
                "langgraph_path": path,
            },
            "parent_ids": parents,
        })
    }
}

/// The node a step path names: its last part, unless that is one of a dialect's
/// own steps (`__start__`) or a branch's index.
pub(crate) fn node_name(path: &str) -> Option<&str> {
    let last = path.rsplit('/').next()?;
    let own = last.starts_with("__") || last.parse::<u64>().is_ok() || path == "root";
    (!own && !last.is_empty()).then_some(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::event::Event;

    fn translation(modes: Value, from_start: bool) -> Translation {
        let who = Streamed {
            run_id: "r1".into(),
            thread_id: "t1".into(),
            flow: "chat".into(),
        };
        Translation::new(who, Modes::parse(Some(&modes)).unwrap(), from_start)
    }

    fn event(seq: u64, kind: EventKind) -> Arc<SharedEvent> {
        Arc::new(SharedEvent::new(Event {
            run_id: Arc::from("r1"),
            seq,
            at_ms: 1_000,
            kind,
        }))
    }

    fn delta(text: &str) -> Arc<SharedEvent> {
        event(
            3,
            EventKind::LlmDelta {
                path: Arc::from("root/answer"),
                text: text.into(),
            },
        )
    }

    fn names(parts: &[Part]) -> Vec<&str> {
        parts.iter().map(|p| p.name).collect()
    }

    #[test]
    fn a_node_is_the_last_part_of_a_step_path_but_not_a_dialect_s_own() {
        assert_eq!(node_name("root/graph/answer"), Some("answer"));
        for own in ["root", "root/__start__", "root/map/3", "root/"] {
            assert_eq!(node_name(own), None, "{own}");
        }
    }

    #[test]
    fn token_deltas_go_out_live_as_chunks_of_one_message() {
        let mut t = translation(json!(["messages-tuple", "messages"]), false);
        let first = t.delta(&delta("Hel"));
        assert_eq!(
            names(&first),
            ["messages/metadata", "messages/partial", "messages"]
        );
        assert!(first.iter().all(|p| p.live), "deltas are never replayed");
        let second = t.delta(&delta("lo"));
        // The metadata once; `messages` mode sends the text so far, the tuple the chunk.
        assert_eq!(names(&second), ["messages/partial", "messages"]);
        assert_eq!(second[0].data[0]["content"], "Hello");
        assert_eq!(second[1].data[0]["content"], "lo");
        assert_eq!(second[1].data[1]["langgraph_node"], "answer");
        assert_eq!(second[1].data[0]["id"], first[2].data[0]["id"]);
    }

    #[test]
    fn a_model_step_that_streamed_is_not_sent_again_whole() {
        let done = EventKind::StepCompleted {
            path: Arc::from("root/answer"),
            kind: "llm".into(),
            elapsed_us: 5,
            replayed: false,
            exit: None,
            output: Some(Shared::new(json!("Hello"))),
        };
        let e = event(4, done);
        let mut quiet = translation(json!(["updates", "messages-tuple"]), false);
        let mut parts = Vec::new();
        quiet.step_completed(&mut parts, &e, "root/answer", "llm", &json!("Hello"));
        assert_eq!(names(&parts), ["updates", "messages"]);
        assert_eq!(parts[0].data, json!({"answer": "Hello"}));
        assert_eq!(parts[1].data[0]["type"], "ai");

        quiet.delta(&delta("Hello"));
        let mut again = Vec::new();
        quiet.step_completed(&mut again, &e, "root/answer", "llm", &json!("Hello"));
        assert_eq!(names(&again), ["updates"]);
    }

    #[test]
    fn deltas_before_their_step_s_start_wait_for_it_on_a_stream_from_the_start() {
        let mut t = translation(json!("messages-tuple"), true);
        t.held.as_mut().unwrap().push(delta("early"));
        let other = event(
            3,
            EventKind::LlmDelta {
                path: Arc::from("root/other"),
                text: "x".into(),
            },
        );
        t.held.as_mut().unwrap().push(other);
        let released = t.release("root/answer");
        assert_eq!(released.len(), 1);
        assert_eq!(
            t.held.as_ref().unwrap().len(),
            1,
            "another step's delta waits on"
        );
        // A rejoin holds nothing back.
        assert!(
            translation(json!("values"), false)
                .release("root/answer")
                .is_empty()
        );
    }

    #[test]
    fn a_chain_event_names_the_flow_or_the_node_and_its_parent() {
        let t = translation(json!("events"), false);
        let flow = t.chain_event("on_chain_start", "", "chat", json!({}));
        assert_eq!(
            (flow["run_id"].as_str(), &flow["parent_ids"]),
            (Some("r1"), &json!([]))
        );
        let node = t.chain_event("on_chain_end", "root/answer", "answer", json!({}));
        assert_eq!(node["run_id"], "r1:root/answer");
        assert_eq!(node["parent_ids"], json!(["r1"]));
        assert_eq!(node["metadata"]["langgraph_node"], "answer");
        assert_eq!(node["metadata"]["thread_id"], "t1");
    }
}
