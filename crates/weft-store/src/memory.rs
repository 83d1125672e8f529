//! An in-memory store: everything the SQLite store keeps, gone when the process ends.

mod audit;
mod keys;
mod threads;
mod triggers;

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use weft_core::event::Event;
use weft_core::ports::{
    Claim, Claimed, Cursor, EntryKind, FlowSource, FlowVersion, JournalEntry, RunQuery, RunRecord,
    RunStats, ScopedChange, Store, StoreError,
};

/// Keeps flows, runs, journals and event logs in memory.
#[derive(Default)]
pub struct MemoryStore {
    flows: Mutex<HashMap<String, String>>,
    sources: Mutex<HashMap<String, FlowSource>>,
    /// Each named flow's versions, oldest first.
    versions: Mutex<std::collections::BTreeMap<String, Vec<FlowVersion>>>,
    runs: Mutex<HashMap<String, RunRecord>>,
    journals: Mutex<HashMap<String, Vec<JournalEntry>>>,
    /// Each run's events by `seq`.
    events: Mutex<HashMap<String, std::collections::BTreeMap<u64, Event>>>,
    scoped: Mutex<HashMap<String, serde_json::Value>>,
    triggers: Mutex<triggers::Triggers>,
    threads: Mutex<threads::Threads>,
    keys: Mutex<Vec<weft_core::ports::ApiKey>>,
    audit: Mutex<Vec<weft_core::ports::AuditEntry>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

/// The first `limit` of `items`, newest first (then by id, descending).
fn newest_first<'a, T: Clone + 'a>(
    items: impl Iterator<Item = &'a T>,
    limit: usize,
    position: impl Fn(&T) -> (i64, &String),
) -> Vec<T> {
    let mut items: Vec<&T> = items.collect();
    items.sort_by(|a, b| position(b).cmp(&position(a)));
    items.into_iter().take(limit).cloned().collect()
}

fn poisoned() -> StoreError {
    StoreError::Closed("a memory store lock was poisoned".into())
}

#[async_trait]
impl Store for MemoryStore {
    async fn put_flow(&self, hash: &str, ir_json: &str) -> Result<(), StoreError> {
        self.flows
            .lock()
            .map_err(|_| poisoned())?
            .entry(hash.to_owned())
            .or_insert_with(|| ir_json.to_owned());
        Ok(())
    }

    async fn get_flow(&self, hash: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .flows
            .lock()
            .map_err(|_| poisoned())?
            .get(hash)
            .cloned())
    }

    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let mut runs = self.runs.lock().map_err(|_| poisoned())?;
        MemoryStore::insert_new_run(&mut runs, run)
    }

    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let mut run = run.clone();
        if run.status != weft_core::ports::RunStatus::Paused {
            run.wake_ms = None;
        }
        self.runs
            .lock()
            .map_err(|_| poisoned())?
            .insert(run.id.clone(), run);
        Ok(())
    }

    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        let runs = self.runs.lock().map_err(|_| poisoned())?;
        if let Some(r) = runs.get(id) {
            return Ok(Some(r.clone()));
        }
        if id.len() < 4 {
            return Ok(None);
        }
        let mut matches = runs.values().filter(|r| r.id.starts_with(id));
        match (matches.next(), matches.next()) {
            (Some(r), None) => Ok(Some(r.clone())),
            (Some(_), Some(_)) => Err(StoreError::Conflict(format!(
                "the id prefix `{id}` matches several runs"
            ))),
            _ => Ok(None),
        }
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, StoreError> {
        let runs = self.runs.lock().map_err(|_| poisoned())?;
        let admitted = runs.values().filter(|r| query.admits(r));
        Ok(newest_first(admitted, query.limit, |r| {
            (r.created_ms, &r.id)
        }))
    }

    async fn put_source(&self, source: &FlowSource) -> Result<(), StoreError> {
        self.sources
            .lock()
            .map_err(|_| poisoned())?
            .entry(source.id.clone())
            .or_insert_with(|| source.clone());
        Ok(())
    }

    async fn get_source(&self, id: &str) -> Result<Option<FlowSource>, StoreError> {
        Ok(self
            .sources
            .lock()
            .map_err(|_| poisoned())?
            .get(id)
            .cloned())
    }

    async fn list_sources(
        &self,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Vec<FlowSource>, StoreError> {
        let sources = self.sources.lock().map_err(|_| poisoned())?;
        let admitted = sources
            .values()
            .filter(|s| after.is_none_or(|c| c.precedes(s.created_ms, &s.id)));
        Ok(newest_first(admitted, limit, |s| (s.created_ms, &s.id)))
    }

    async fn save_version(
        &self,
        name: &str,
        flow_id: &str,
        now_ms: i64,
    ) -> Result<FlowVersion, StoreError> {
        let mut all = self.versions.lock().map_err(|_| poisoned())?;
        let versions = all.entry(name.to_owned()).or_default();
        if let Some(latest) = versions.last().filter(|v| v.flow_id == flow_id) {
            return Ok(latest.clone());
        }
        let saved = FlowVersion {
            name: name.to_owned(),
            version: versions.len() as u32 + 1,
            flow_id: flow_id.to_owned(),
            created_ms: now_ms,
        };
        versions.push(saved.clone());
        Ok(saved)
    }

    async fn flow_version(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<FlowVersion>, StoreError> {
        let all = self.versions.lock().map_err(|_| poisoned())?;
        let Some(versions) = all.get(name) else {
            return Ok(None);
        };
        Ok(match version {
            None => versions.last().cloned(),
            Some(v) => versions.iter().find(|x| x.version == v).cloned(),
        })
    }

    async fn named_flows(&self) -> Result<Vec<FlowVersion>, StoreError> {
        let all = self.versions.lock().map_err(|_| poisoned())?;
        Ok(all.values().filter_map(|v| v.last().cloned()).collect())
    }

    async fn journal(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        Ok(self
            .journals
            .lock()
            .map_err(|_| poisoned())?
            .get(run_id)
            .cloned()
            .unwrap_or_default())
    }

    async fn append(&self, run_id: &str, entry: JournalEntry) -> Result<(), StoreError> {
        self.journals
            .lock()
            .map_err(|_| poisoned())?
            .entry(run_id.to_owned())
            .or_default()
            .push(entry);
        Ok(())
    }

    async fn run_stats(&self) -> Result<RunStats, StoreError> {
        let mut stats = RunStats::default();
        for r in self.runs.lock().map_err(|_| poisoned())?.values() {
            match stats.runs.iter_mut().find(|(s, _)| *s == r.status) {
                Some((_, n)) => *n += 1,
                None => stats.runs.push((r.status, 1)),
            }
            stats.usage.add(&r.usage);
        }
        stats.steps = self
            .journals
            .lock()
            .map_err(|_| poisoned())?
            .values()
            .flatten()
            .filter(|e| e.kind == EntryKind::Result)
            .count() as u64;
        Ok(stats)
    }

    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError> {
        let mut logs = self.events.lock().map_err(|_| poisoned())?;
        for e in events {
            logs.entry(e.run_id.to_string())
                .or_default()
                .entry(e.seq)
                .or_insert_with(|| e.clone());
        }
        Ok(())
    }

    async fn events(
        &self,
        run_id: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let logs = self.events.lock().map_err(|_| poisoned())?;
        let Some(log) = logs.get(run_id) else {
            return Ok(Vec::new());
        };
        let from = after.map_or(0, |a| a.saturating_add(1));
        Ok(log
            .range(from..)
            .take(limit)
            .map(|(_, e)| e.clone())
            .collect())
    }

    async fn next_event_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        let logs = self.events.lock().map_err(|_| poisoned())?;
        Ok(logs
            .get(run_id)
            .and_then(|l| l.keys().next_back())
            .map_or(0, |last| last + 1))
    }

    async fn forget(&self, run_id: &str, keys: &[String]) -> Result<(), StoreError> {
        if let Some(j) = self
            .journals
            .lock()
            .map_err(|_| poisoned())?
            .get_mut(run_id)
        {
            j.retain(|e| !keys.contains(&e.key));
        }
        Ok(())
    }

    async fn claim_run(&self, claim: Claim) -> Result<Claimed, StoreError> {
        // The runs lock is held while the entry is appended, so the status change and the
        // entry are one step; no method takes these two locks in the other order.
        let mut runs = self.runs.lock().map_err(|_| poisoned())?;
        let run = runs.get_mut(&claim.run_id).ok_or_else(|| claim.missing())?;
        if !claim.may_take(run) {
            return Ok(Claimed::Lost(Box::new(run.clone())));
        }
        run.status = weft_core::ports::RunStatus::Running;
        run.owner = Some(claim.owner);
        run.wake_ms = None;
        run.updated_ms = claim.now_ms;
        if let Some(entry) = claim.entry {
            self.journals
                .lock()
                .map_err(|_| poisoned())?
                .entry(claim.run_id)
                .or_default()
                .push(entry);
        }
        Ok(Claimed::Taken)
    }

    async fn scoped_state(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self
            .scoped
            .lock()
            .map_err(|_| poisoned())?
            .get(key)
            .cloned())
    }

    async fn change_scoped_state(
        &self,
        key: &str,
        changes: &[ScopedChange],
    ) -> Result<serde_json::Value, StoreError> {
        let mut docs = self.scoped.lock().map_err(|_| poisoned())?;
        let next = ScopedChange::apply_all(docs.get(key), changes)
            .map_err(|e| StoreError::Conflict(format!("scoped state `{key}`: {e}")))?;
        docs.insert(key.to_owned(), next.clone());
        Ok(next)
    }

    fn triggers(&self) -> Option<&dyn weft_core::ports::TriggerStore> {
        Some(self)
    }
    fn threads(&self) -> Option<&dyn weft_core::ports::ThreadStore> {
        Some(self)
    }
    fn keys(&self) -> Option<&dyn weft_core::ports::KeyStore> {
        Some(self)
    }
    fn audit(&self) -> Option<&dyn weft_core::ports::AuditStore> {
        Some(self)
    }
}
