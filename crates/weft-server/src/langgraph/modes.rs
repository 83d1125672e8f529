//! The stream modes a client asks for, and the ids of the parts a stream sends.

use super::LgError;
use serde_json::Value;

/// One stream mode Weft sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Values,
    Updates,
    MessagesTuple,
    Messages,
    Custom,
    Events,
    Debug,
}

impl Mode {
    const ALL: [(&'static str, Mode); 7] = [
        ("values", Mode::Values),
        ("updates", Mode::Updates),
        ("messages-tuple", Mode::MessagesTuple),
        ("messages", Mode::Messages),
        ("custom", Mode::Custom),
        ("events", Mode::Events),
        ("debug", Mode::Debug),
    ];

    fn name(self) -> &'static str {
        Mode::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("values", |(n, _)| n)
    }
}

/// The modes a stream sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Modes(Vec<Mode>);

impl Default for Modes {
    fn default() -> Modes {
        Modes(vec![Mode::Values])
    }
}

impl Modes {
    /// `stream_mode` as given: one name or a list of them (default `values`).
    pub(crate) fn parse(given: Option<&Value>) -> Result<Modes, LgError> {
        let names: Vec<&str> = match given {
            None | Some(Value::Null) => return Ok(Modes::default()),
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(other) => {
                return Err(LgError::invalid(format!(
                    "`stream_mode` is a mode or a list of modes, not {other}"
                )));
            }
        };
        if names.is_empty() {
            return Ok(Modes::default());
        }
        let mut modes = Vec::new();
        for name in names {
            if UNSENT.contains(&name) {
                continue;
            }
            let mode = Mode::ALL
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, m)| *m)
                .ok_or_else(|| unknown_mode(name))?;
            if !modes.contains(&mode) {
                modes.push(mode);
            }
        }
        Ok(Modes(modes))
    }

    pub(crate) fn to_json(&self) -> Value {
        Value::from(self.0.iter().map(|m| m.name()).collect::<Vec<_>>())
    }

    pub(crate) fn has(&self, mode: Mode) -> bool {
        self.0.contains(&mode)
    }
}

/// LangGraph's modes that Weft's events do not carry: asked for, they send nothing
/// (a client that only listens for them still gets its run), where an unknown name is
/// refused. `tasks`, `checkpoints` and `tools` describe LangGraph's own scheduler and
/// tool runner.
const UNSENT: [&str; 3] = ["tasks", "checkpoints", "tools"];

fn unknown_mode(name: &str) -> LgError {
    LgError::invalid(format!(
        "stream mode `{name}` is not one Weft knows: values, updates, messages-tuple, messages, custom, events and debug are sent; tasks, checkpoints and tools are accepted and send nothing"
    ))
}

/// An SSE id this stream sent: part `part` of stored event `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventId {
    pub(crate) seq: u64,
    pub(crate) part: usize,
}

impl EventId {
    pub(crate) fn parse(s: &str) -> Option<EventId> {
        let (seq, part) = s.trim().split_once('-')?;
        Some(EventId {
            seq: seq.parse().ok()?,
            part: part.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stream_sends_values_unless_it_asks_for_other_modes() {
        assert_eq!(Modes::parse(None).unwrap(), Modes::default());
        assert_eq!(Modes::parse(Some(&json!(null))).unwrap(), Modes::default());
        assert_eq!(Modes::parse(Some(&json!([]))).unwrap(), Modes::default());
        assert_eq!(
            Modes::parse(Some(&json!("updates"))).unwrap().to_json(),
            json!(["updates"])
        );
    }

    #[test]
    fn modes_keep_their_order_once_each_and_unsent_ones_send_nothing() {
        let modes = Modes::parse(Some(&json!([
            "debug",
            "tasks",
            "values",
            "debug",
            "checkpoints"
        ])))
        .unwrap();
        assert_eq!(modes.to_json(), json!(["debug", "values"]));
        assert!(modes.has(Mode::Debug) && !modes.has(Mode::Updates));
        // Only modes Weft does not send: a stream of the run's end alone.
        assert_eq!(
            Modes::parse(Some(&json!(["tools"]))).unwrap().to_json(),
            json!([])
        );
    }

    #[test]
    fn an_unknown_mode_or_shape_is_refused_naming_what_is_known() {
        let unknown = Modes::parse(Some(&json!(["values", "everything"]))).unwrap_err();
        assert_eq!(unknown.status, axum::http::StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            unknown.detail.contains("`everything`"),
            "{}",
            unknown.detail
        );
        assert!(
            unknown.detail.contains("messages-tuple"),
            "{}",
            unknown.detail
        );
        let shape = Modes::parse(Some(&json!({"values": true}))).unwrap_err();
        assert!(
            shape.detail.contains("a mode or a list of modes"),
            "{}",
            shape.detail
        );
    }

    #[test]
    fn an_event_id_is_a_stored_event_and_a_part_of_it() {
        assert_eq!(EventId::parse(" 12-3 "), Some(EventId { seq: 12, part: 3 }));
        for bad in ["12", "12-", "-3", "a-1", "12-x", ""] {
            assert_eq!(EventId::parse(bad), None, "{bad}");
        }
    }
}
