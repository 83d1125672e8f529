//! Paging through newest-first lists: `?limit=` and `?cursor=` in, `next_cursor` out.

use crate::problem::Problem;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::ports::Cursor;

/// Items per page unless `?limit=` says otherwise.
const DEFAULT_LIMIT: usize = 50;
/// The most items one page holds.
const MAX_LIMIT: usize = 1000;

/// `?limit=&cursor=`.
#[derive(Deserialize)]
pub(crate) struct Paging {
    limit: Option<usize>,
    cursor: Option<String>,
}

impl Paging {
    /// `?limit=` and `?cursor=` read by another query's struct.
    pub(crate) fn new(limit: Option<usize>, cursor: Option<String>) -> Paging {
        Paging { limit, cursor }
    }

    /// The page size and where the page starts; `400` for a cursor this server did not
    /// hand out.
    pub(crate) fn resolve(&self) -> Result<(usize, Option<Cursor>), Problem> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let after = match self.cursor.as_deref() {
            None | Some("") => None,
            Some(token) => Some(Cursor::parse(token).ok_or_else(|| {
                Problem::new(StatusCode::BAD_REQUEST, "invalid request").detail(format!(
                    "`{token}` is not a cursor: pass the next_cursor of the previous page"
                ))
            })?),
        };
        Ok((limit, after))
    }
}

/// Where the next page starts: after the last item of a full page; none after a page
/// that came up short.
pub(crate) struct Listed {
    next: Option<Cursor>,
}

impl Listed {
    /// The paging of `items`, a page of at most `limit`, each at position `at`.
    pub(crate) fn new<T>(items: &[T], limit: usize, at: impl Fn(&T) -> Cursor) -> Listed {
        let next = (items.len() >= limit)
            .then(|| items.last().map(at))
            .flatten();
        Listed { next }
    }

    /// `{<name>: items, next_cursor}`.
    pub(crate) fn with(self, name: &str, items: Vec<Value>) -> Value {
        json!({ name: items, "next_cursor": self.next.map(|c| c.token()) })
    }
}
