//! What a store lists and how a client pages through it: flow texts and their named
//! versions, and runs newest first with cursors that stay valid while new items arrive.

use super::store::RunStatus;
use serde::{Deserialize, Serialize};

/// A flow's text as it was written, kept so that runs can be started from it by id and
/// their flow read and drawn later, without the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSource {
    /// The flow's id: the content hash of its dialect and text (see
    /// [`FlowSource::id_of`]).
    pub id: String,
    /// The flow's name.
    pub name: String,
    /// The dialect it is written in.
    pub dialect: String,
    /// The text.
    pub text: String,
    /// When it was first stored, Unix milliseconds.
    pub created_ms: i64,
}

impl FlowSource {
    /// The id of `text` in `dialect`: the same text read as two dialects is two flows.
    pub fn id_of(dialect: &str, text: &str) -> String {
        let mut bytes = Vec::with_capacity(dialect.len() + 1 + text.len());
        bytes.extend_from_slice(dialect.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(text.as_bytes());
        crate::hash::content_hash(&bytes)[..32].to_owned()
    }
}

/// One saved version of a named flow: names are how people and models refer to the
/// flows they edit; each save that changes the text is a new version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowVersion {
    /// The flow's name.
    pub name: String,
    /// 1 for the first save, one more for each save that changed the flow.
    pub version: u32,
    /// The stored text of this version ([`FlowSource::id`]).
    pub flow_id: String,
    /// When it was saved, Unix milliseconds.
    pub created_ms: i64,
}

/// A position in a newest-first list: the creation time and id of the last item a
/// client has seen; the next page starts after it, whatever was added since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The last item's creation time, Unix milliseconds.
    pub created_ms: i64,
    /// The last item's id.
    pub id: String,
}

impl Cursor {
    /// The cursor after the item created at `created_ms` with `id`.
    pub fn after(created_ms: i64, id: &str) -> Cursor {
        Cursor {
            created_ms,
            id: id.to_owned(),
        }
    }

    /// The cursor as one opaque token (`<created_ms>.<id>`).
    pub fn token(&self) -> String {
        format!("{}.{}", self.created_ms, self.id)
    }

    /// Reads a token [`Cursor::token`] made; `None` when it is not one.
    pub fn parse(token: &str) -> Option<Cursor> {
        let (ms, id) = token.split_once('.')?;
        let created_ms = ms.parse().ok()?;
        let valid = !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic());
        valid.then(|| Cursor::after(created_ms, id))
    }

    /// Whether an item created at `created_ms` with `id` comes after the cursor in a
    /// newest-first list.
    pub fn precedes(&self, created_ms: i64, id: &str) -> bool {
        (created_ms, id) < (self.created_ms, self.id.as_str())
    }
}

/// Which runs to list, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunQuery {
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// At most this many.
    pub limit: usize,
    /// Only runs after this position.
    pub after: Option<Cursor>,
}

impl RunQuery {
    /// The newest `limit` runs, in any status.
    pub fn newest(limit: usize) -> RunQuery {
        RunQuery {
            status: None,
            limit,
            after: None,
        }
    }

    /// The newest `limit` runs in `status`.
    pub fn in_status(status: RunStatus, limit: usize) -> RunQuery {
        RunQuery {
            status: Some(status),
            ..RunQuery::newest(limit)
        }
    }

    /// Whether `run` belongs in the list (status and cursor; not the limit).
    pub fn admits(&self, run: &super::store::RunRecord) -> bool {
        self.status.is_none_or(|s| run.status == s)
            && self
                .after
                .as_ref()
                .is_none_or(|c| c.precedes(run.created_ms, &run.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_token_reads_back_and_rejects_what_it_did_not_make() {
        let c = Cursor::after(1_795_567_049_530, "01a2");
        assert_eq!(Cursor::parse(&c.token()), Some(c));
        for bad in ["", "12", "x.01a2", "12.", "12.a b", "-.-"] {
            assert_eq!(Cursor::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_cursor_orders_newest_first_then_by_id() {
        let c = Cursor::after(100, "m");
        assert!(c.precedes(99, "z"));
        assert!(c.precedes(100, "a"));
        assert!(!c.precedes(100, "m"));
        assert!(!c.precedes(101, "a"));
    }

    #[test]
    fn a_flow_id_depends_on_the_dialect_and_the_text() {
        let a = FlowSource::id_of("native", "x: 1");
        assert_eq!(a.len(), 32);
        assert_eq!(a, FlowSource::id_of("native", "x: 1"));
        assert_ne!(a, FlowSource::id_of("graph", "x: 1"));
        assert_ne!(a, FlowSource::id_of("native", "x: 2"));
    }
}
