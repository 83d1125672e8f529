//! Large parts of a code block's arguments that a worker keeps between requests.
//!
//! A TEA node's arguments hold what it reads of the state: a list of 100,000 items
//! crossed the process boundary with every call, serialized by the engine and parsed by
//! the worker each time, where an in-process interpreter passes the state by reference.
//! Now a part the engine sends a worker a second time (the same value: the same
//! allocation, see [`WeakShared`]) is named for the worker to keep, and while it stays
//! the same value later requests leave it out (`null`) and name it; the worker puts back
//! the copy it kept. A part sent only once is never kept. The engine decides what each
//! worker keeps ([`SentParts`], one per worker process) and tells it, so both sides
//! always agree; a worker that dies takes its parts with it, and its replacement starts
//! with none.

use crate::protocol::{Failure, FailureKind, Request};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use weft_core::value::{Kind, Shared, SharedMap, WeakShared};

/// Parts a worker keeps at most; the least recently used goes first.
const KEPT_PARTS: usize = 4;

/// A list or object with this many items or more may be kept: a smaller one costs less
/// to send again than to track.
const KEEP_FROM_ITEMS: usize = 1_000;

/// Large parts sent once that the engine remembers, to keep them if they come again.
const SEEN_PARTS: usize = 16;

/// The JSON bytes of the parts a worker keeps at most, so that an idle worker holds a
/// bounded copy of what it was sent (a larger part is sent with every request).
const KEPT_BYTES: usize = 64 << 20;

/// One step of a part's place in the arguments: a key, or a list index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArgStep {
    /// An object's key.
    Key(String),
    /// A list's index.
    Index(usize),
}

/// What a request tells its worker about the parts it keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptParts {
    /// Parts left out of the arguments (`null` in their place): the worker puts back what
    /// it keeps under each id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reuse: Vec<(Vec<ArgStep>, u64)>,
    /// Parts the worker is to keep under these ids, for later requests, with the
    /// length of their JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<(Vec<ArgStep>, u64, usize)>,
    /// Kept parts the worker lets go (after putting back this request's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forget: Vec<u64>,
}

impl KeptParts {
    /// Whether the request says nothing about kept parts.
    pub fn is_empty(&self) -> bool {
        self.reuse.is_empty() && self.keep.is_empty() && self.forget.is_empty()
    }
}

/// The parts one worker keeps, as the engine knows them.
pub(crate) struct SentParts {
    /// Oldest use first.
    kept: VecDeque<Sent>,
    /// The JSON bytes of `kept`.
    bytes: usize,
    /// The most `bytes` may reach.
    budget: usize,
    /// Large parts sent but not kept, oldest first: each is kept if it comes again,
    /// unless it was found too large for the budget (`true`).
    seen: VecDeque<(WeakShared, bool)>,
    next_id: u64,
}

impl Default for SentParts {
    fn default() -> SentParts {
        SentParts::within(KEPT_BYTES)
    }
}

/// A part the worker keeps.
struct Sent {
    value: WeakShared,
    id: u64,
    bytes: usize,
}

impl SentParts {
    /// Parts of at most `budget` JSON bytes in all.
    fn within(budget: usize) -> SentParts {
        SentParts {
            kept: VecDeque::new(),
            bytes: 0,
            budget,
            seen: VecDeque::new(),
            next_id: 0,
        }
    }

    /// `args` to send to the worker: the parts it keeps left out, and a large one sent a
    /// second time named for it to keep.
    pub(crate) fn prepare(&mut self, args: &Shared) -> (Shared, KeptParts) {
        let mut told = KeptParts::default();
        let sent = self
            .walk(args, &mut Vec::new(), &mut told)
            .unwrap_or_else(|| args.clone());
        (sent, told)
    }

    /// `value` with its kept parts left out, when it holds any (`None`: sent as it is).
    fn walk(
        &mut self,
        value: &Shared,
        path: &mut Vec<ArgStep>,
        told: &mut KeptParts,
    ) -> Option<Shared> {
        match value {
            Shared::Object(map) => {
                let mut changed: Option<SharedMap> = None;
                for (i, (key, part)) in map.iter().enumerate() {
                    path.push(ArgStep::Key(key.clone()));
                    let new = self.part(part, path, told);
                    path.pop();
                    if let Some(new) = new {
                        let map = changed.get_or_insert_with(|| (**map).clone());
                        if let Some((_, slot)) = map.get_index_mut(i) {
                            *slot = new;
                        }
                    }
                }
                changed.map(|m| Shared::Object(Arc::new(m)))
            }
            Shared::Array(items) => {
                let mut changed: Option<Vec<Shared>> = None;
                for (i, part) in items.iter().enumerate() {
                    path.push(ArgStep::Index(i));
                    let new = self.part(part, path, told);
                    path.pop();
                    if let Some(new) = new {
                        changed.get_or_insert_with(|| (**items).clone())[i] = new;
                    }
                }
                changed.map(|a| Shared::Array(Arc::new(a)))
            }
            Shared::Json(_) => None,
        }
    }

    /// A part at `path`: left out when the worker keeps it, named to keep when it is
    /// large and sent before, else walked into.
    fn part(
        &mut self,
        part: &Shared,
        path: &mut Vec<ArgStep>,
        told: &mut KeptParts,
    ) -> Option<Shared> {
        let items = match part.node().kind() {
            Kind::Object(n) | Kind::Array(n) => n,
            Kind::Scalar(_) => return None,
        };
        if items < KEEP_FROM_ITEMS {
            return self.walk(part, path, told);
        }
        if let Some(at) = self.kept.iter().position(|sent| sent.value.is(part)) {
            let used = self.kept.remove(at)?;
            told.reuse.push((path.clone(), used.id));
            self.kept.push_back(used);
            return Some(Shared::null());
        }
        // Kept on its second sending: a part sent once (a fan-in's results, a list each
        // node makes anew) would only cost the worker a copy it never uses.
        let seen = match self.seen.iter().position(|(seen, _)| seen.is(part)) {
            Some(at) => self.seen.remove(at),
            None => None,
        };
        let bytes = match seen {
            // Past the budget (or unwritable, which fails the request itself): not kept.
            Some((_, false)) => {
                crate::json_len_within(part, self.budget as u64).map_or(usize::MAX, |n| n as usize)
            }
            // Measured too large before: not counted again.
            Some((_, true)) => usize::MAX,
            None => 0,
        };
        if seen.is_none() || bytes > self.budget {
            if self.seen.len() >= SEEN_PARTS {
                self.seen.pop_front();
            }
            self.seen.push_back((WeakShared::of(part), seen.is_some()));
            return self.walk(part, path, told);
        }
        self.keep(part, path, bytes, told);
        None
    }

    /// Names `part` for the worker to keep, letting the least recently used parts go
    /// until it fits.
    fn keep(&mut self, part: &Shared, path: &[ArgStep], bytes: usize, told: &mut KeptParts) {
        while self.kept.len() >= KEPT_PARTS || self.bytes + bytes > self.budget {
            let Some(gone) = self.kept.pop_front() else {
                break;
            };
            self.bytes -= gone.bytes;
            told.forget.push(gone.id);
        }
        self.next_id += 1;
        told.keep.push((path.to_vec(), self.next_id, bytes));
        self.bytes += bytes;
        self.kept.push_back(Sent {
            value: WeakShared::of(part),
            id: self.next_id,
            bytes,
        });
    }
}

/// The parts a worker keeps, by id.
#[derive(Default)]
pub(crate) struct KeptArgs {
    parts: HashMap<u64, Kept>,
}

struct Kept {
    value: Value,
    /// Its JSON's length: what the request would have carried.
    bytes: usize,
}

impl KeptArgs {
    /// Keeps the parts `req` names to keep, puts back those it left out, then lets go
    /// of those it says to: the JSON bytes of the parts put back (they count toward the
    /// room the call gets, as if the request had carried them).
    pub(crate) fn apply(&mut self, req: &mut Request) -> Result<usize, Failure> {
        let told = std::mem::take(&mut req.kept);
        let args = req.args.make_mut();
        for (path, id, bytes) in &told.keep {
            let value = place(args, path)?.clone();
            self.parts.insert(
                *id,
                Kept {
                    value,
                    bytes: *bytes,
                },
            );
        }
        let mut bytes = 0;
        for (path, id) in &told.reuse {
            let kept = self
                .parts
                .get(id)
                .ok_or_else(|| lost(format!("the worker keeps no argument part {id}")))?;
            *place(args, path)? = kept.value.clone();
            bytes += kept.bytes;
        }
        for id in &told.forget {
            self.parts.remove(id);
        }
        Ok(bytes)
    }
}

/// The value at `path` in `args`.
fn place<'a>(args: &'a mut Value, path: &[ArgStep]) -> Result<&'a mut Value, Failure> {
    path.iter().try_fold(args, |at, step| {
        let next = match step {
            ArgStep::Key(k) => at.as_object_mut().and_then(|m| m.get_mut(k)),
            ArgStep::Index(i) => at.as_array_mut().and_then(|a| a.get_mut(*i)),
        };
        next.ok_or_else(|| lost(format!("no argument at {path:?}")))
    })
}

fn lost(why: String) -> Failure {
    Failure::new(
        FailureKind::Crash,
        format!("the sandbox worker and the engine disagree about kept arguments: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(args: Shared, kept: KeptParts) -> Request {
        Request {
            id: 1,
            language: "python".into(),
            source: String::new(),
            entry: None,
            args,
            kept,
            imports: None,
            builtins: None,
            limits: Default::default(),
        }
    }

    /// What the worker sees: the request as JSON, read back, with its parts put back.
    fn through_the_pipe(
        worker: &mut KeptArgs,
        args: Shared,
        told: KeptParts,
    ) -> (Value, usize, usize) {
        let line = serde_json::to_string(&request(args, told)).unwrap();
        let mut req: Request = serde_json::from_str(&line).unwrap();
        let bytes = worker.apply(&mut req).unwrap();
        (req.args.to_value(), bytes, line.len())
    }

    fn state(items: &Shared, count: i64) -> Shared {
        let state: SharedMap = [
            ("count".to_owned(), Shared::new(json!(count))),
            ("items".to_owned(), items.clone()),
        ]
        .into_iter()
        .collect();
        let args: SharedMap = [("state".to_owned(), Shared::object(state))]
            .into_iter()
            .collect();
        Shared::object(args)
    }

    #[test]
    fn a_large_part_crosses_once_and_is_put_back_after() {
        let items = Shared::new(json!((0..5000).collect::<Vec<_>>()));
        let whole = json!({"state": {"count": 1, "items": (0..5000).collect::<Vec<_>>()}});
        let (mut engine, mut worker) = (SentParts::default(), KeptArgs::default());
        // Sent once: nothing kept, the worker copies nothing.
        let (sent, told) = engine.prepare(&state(&items, 1));
        assert!(told.is_empty(), "{told:?}");
        let (once, _, first_bytes) = through_the_pipe(&mut worker, sent, told);
        assert_eq!(once, whole);
        assert!(worker.parts.is_empty());
        // Sent again: kept.
        let (sent, told) = engine.prepare(&state(&items, 1));
        assert_eq!(told.keep.len(), 1, "{told:?}");
        let (first, _, _) = through_the_pipe(&mut worker, sent, told);
        assert_eq!(first, whole);
        // The same list again, in a new state: left out, and put back whole.
        let (sent, told) = engine.prepare(&state(&items, 1));
        assert_eq!(
            told.reuse,
            vec![(
                vec![ArgStep::Key("state".into()), ArgStep::Key("items".into())],
                1
            )]
        );
        let (second, put_back, second_bytes) = through_the_pipe(&mut worker, sent, told);
        assert_eq!(second, whole);
        assert!(
            second_bytes * 20 < first_bytes,
            "{second_bytes} of {first_bytes}"
        );
        assert_eq!(
            put_back,
            serde_json::to_vec(&whole["state"]["items"]).unwrap().len()
        );
        // An equal list in another allocation is another value: sent whole.
        let copy = Shared::new(items.to_value());
        let (sent, told) = engine.prepare(&state(&copy, 2));
        assert!(told.is_empty(), "{told:?}");
        assert_eq!(
            through_the_pipe(&mut worker, sent, told).0["state"]["count"],
            2
        );
    }

    #[test]
    fn the_least_recently_used_part_is_forgotten_on_both_sides() {
        let lists: Vec<Shared> = (0..=KEPT_PARTS)
            .map(|i| Shared::new(json!(vec![i; KEEP_FROM_ITEMS])))
            .collect();
        let (mut engine, mut worker) = (SentParts::default(), KeptArgs::default());
        for list in &lists {
            for _ in 0..2 {
                let (sent, told) = engine.prepare(&state(list, 0));
                through_the_pipe(&mut worker, sent, told);
            }
        }
        // The first list went when the fifth came: sent whole again, then kept again.
        assert_eq!(worker.parts.len(), KEPT_PARTS);
        let (sent, told) = engine.prepare(&state(&lists[0], 0));
        assert!(told.is_empty(), "{told:?}");
        through_the_pipe(&mut worker, sent, told);
        let (sent, told) = engine.prepare(&state(&lists[0], 0));
        assert!(told.reuse.is_empty(), "{told:?}");
        assert_eq!(told.forget, vec![2], "the oldest left is the second list");
        let (args, _, _) = through_the_pipe(&mut worker, sent, told);
        assert_eq!(args["state"]["items"], lists[0].to_value());
        // A small list is never kept.
        let small = Shared::new(json!([1, 2, 3]));
        assert!(engine.prepare(&state(&small, 0)).1.is_empty());
    }

    #[test]
    fn the_parts_kept_stay_within_their_bytes() {
        let list = |i: usize| Shared::new(json!(vec![i; KEEP_FROM_ITEMS]));
        let one = crate::json_len_within(&list(1), u64::MAX).unwrap() as usize;
        let mut engine = SentParts::within(2 * one + one / 2);
        let lists: Vec<Shared> = (1..=3).map(list).collect();
        let told: Vec<KeptParts> = lists
            .iter()
            .map(|l| {
                engine.prepare(&state(l, 0));
                engine.prepare(&state(l, 0)).1
            })
            .collect();
        assert_eq!(told[1].keep[0].2, one, "the worker is told the part's size");
        // Room for two: the third list pushes out the first, four parts or not.
        assert_eq!(told[2].forget, vec![told[0].keep[0].1]);
        assert_eq!(engine.bytes, 2 * one);
        // A part larger than all the room is sent each time, and pushes nothing out.
        let huge = Shared::new(json!(vec![7; 3 * KEEP_FROM_ITEMS]));
        for _ in 0..3 {
            assert!(engine.prepare(&state(&huge, 0)).1.is_empty());
        }
        assert_eq!(engine.kept.len(), 2);
    }

    #[test]
    fn a_part_held_many_times_in_one_request_crosses_twice() {
        // A steps-mode fan-in: every result's state holds the state's list.
        let items = Shared::new(json!((0..KEEP_FROM_ITEMS).collect::<Vec<_>>()));
        let results = Shared::array((0..50).map(|i| state(&items, i)).collect());
        let whole = results.to_value();
        let (mut engine, mut worker) = (SentParts::default(), KeptArgs::default());
        let (sent, told) = engine.prepare(&results);
        assert_eq!(told.keep.len(), 1, "{told:?}");
        assert_eq!(told.reuse.len(), 48, "{told:?}");
        let (args, _, line) = through_the_pipe(&mut worker, sent, told);
        assert_eq!(args, whole);
        let full = serde_json::to_string(&whole).unwrap().len();
        assert!(line * 10 < full, "{line} of {full}");
    }

    #[test]
    fn a_part_the_worker_does_not_keep_is_an_error_not_a_wrong_value() {
        let mut worker = KeptArgs::default();
        let told = KeptParts {
            reuse: vec![(vec![ArgStep::Key("items".into())], 7)],
            ..KeptParts::default()
        };
        let mut req = request(Shared::new(json!({"items": null})), told);
        let err = worker.apply(&mut req).unwrap_err();
        assert_eq!(err.kind, FailureKind::Crash);
        assert!(err.message.contains("disagree"), "{}", err.message);
    }
}
