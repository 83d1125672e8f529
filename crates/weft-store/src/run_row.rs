//! A run as the SQL stores keep it: one row whose JSON columns are text. Each store
//! reads the columns by name into a [`RunRow`]; turning it into a run is written here
//! once, and a value no Weft writes (an unknown status, JSON that does not read back) is
//! an error naming the run and the column, never a silent default.

use weft_core::ports::{RunRecord, RunStatus, StoreError};
use weft_core::usage::Usage;

/// An optional JSON value of a run as the text its column keeps.
pub(crate) fn json_col<T: serde::Serialize + ?Sized>(v: Option<&T>) -> Option<String> {
    // JSON values (string keys only) always serialize.
    v.and_then(|v| serde_json::to_string(v).ok())
}

/// The columns of a run's row, as read.
pub(crate) struct RunRow {
    pub(crate) id: String,
    pub(crate) flow_hash: String,
    pub(crate) flow_name: String,
    pub(crate) source: Option<String>,
    pub(crate) source_hash: Option<String>,
    pub(crate) dialect: Option<String>,
    pub(crate) input: String,
    pub(crate) status: String,
    pub(crate) output: Option<String>,
    pub(crate) state: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) waiting: Option<String>,
    pub(crate) usage: String,
    pub(crate) owner: Option<String>,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
    pub(crate) scopes: Option<String>,
    pub(crate) view: Option<String>,
    pub(crate) settings: Option<String>,
    pub(crate) retries: i64,
    pub(crate) flow_id: Option<String>,
    pub(crate) wake_ms: Option<i64>,
    /// When the lease of a running run ends, where the store keeps leases.
    pub(crate) lease_until_ms: Option<i64>,
}

impl RunRow {
    /// The run this row holds.
    pub(crate) fn into_run(self) -> Result<RunRecord, StoreError> {
        let id = self.id;
        let corrupt = |column: &str, why: String| {
            StoreError::Corrupt(format!("the {column} of run {id} {why}"))
        };
        let json = |column: &str, text: Option<String>| {
            text.map(|t| serde_json::from_str::<serde_json::Value>(&t))
                .transpose()
                .map_err(|e| corrupt(column, format!("does not read as JSON: {e}")))
        };
        let status = RunStatus::parse(&self.status).ok_or_else(|| {
            corrupt(
                "status",
                format!("is `{}`, not a status Weft writes", self.status),
            )
        })?;
        let usage: Usage = serde_json::from_str(&self.usage)
            .map_err(|e| corrupt("usage", format!("does not read back: {e}")))?;
        let scopes = match self.scopes {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| corrupt("scopes", format!("do not read back: {e}")))?,
            None => Default::default(),
        };
        let retries = u32::try_from(self.retries)
            .map_err(|_| corrupt("retries", format!("count is {}", self.retries)))?;
        let run = RunRecord {
            flow_hash: self.flow_hash,
            flow_name: self.flow_name,
            source: self.source,
            source_hash: self.source_hash,
            dialect: self.dialect,
            input: json("input", Some(self.input))?.unwrap_or(serde_json::Value::Null),
            status,
            output: json("output", self.output)?.map(weft_core::value::Shared::new),
            state: json("state", self.state)?.map(weft_core::value::Shared::new),
            error: json("error", self.error)?,
            waiting: json("waiting", self.waiting)?,
            usage,
            owner: self.owner,
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            scopes,
            view: json("view", self.view)?,
            settings: json("settings", self.settings)?,
            retries,
            lease_until_ms: self.lease_until_ms.filter(|_| status == RunStatus::Running),
            flow_id: self.flow_id,
            wake_ms: self.wake_ms,
            id: String::new(),
        };
        Ok(RunRecord { id, ..run })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> RunRow {
        RunRow {
            id: "r1".into(),
            flow_hash: "h".into(),
            flow_name: "f".into(),
            source: None,
            source_hash: None,
            dialect: None,
            input: r#"{"b": 1, "a": 2}"#.into(),
            status: "paused".into(),
            output: None,
            state: Some("{}".into()),
            error: None,
            waiting: Some("[]".into()),
            usage: r#"{"input_tokens": 3, "output_tokens": 4, "cost_usd": 0.5}"#.into(),
            owner: None,
            created_ms: 1,
            updated_ms: 2,
            scopes: None,
            view: None,
            settings: None,
            retries: 1,
            flow_id: None,
            wake_ms: Some(9),
            lease_until_ms: Some(10),
        }
    }

    #[test]
    fn a_row_reads_back_as_the_run_it_holds() {
        let run = row().into_run().unwrap();
        assert_eq!(run.id, "r1");
        assert_eq!(run.status, RunStatus::Paused);
        assert_eq!(run.input.to_string(), r#"{"b":1,"a":2}"#);
        assert_eq!(run.usage.output_tokens, 4);
        assert_eq!(run.retries, 1);
        // Only a running run holds a lease.
        assert_eq!(run.lease_until_ms, None);
    }

    #[test]
    fn a_value_no_weft_writes_is_an_error_naming_the_run_and_column() {
        for (broken, column) in [
            (
                RunRow {
                    status: "sleeping".into(),
                    ..row()
                },
                "status",
            ),
            (
                RunRow {
                    usage: "{".into(),
                    ..row()
                },
                "usage",
            ),
            (
                RunRow {
                    scopes: Some("[1]".into()),
                    ..row()
                },
                "scopes",
            ),
            (
                RunRow {
                    state: Some("{".into()),
                    ..row()
                },
                "state",
            ),
            (
                RunRow {
                    retries: -1,
                    ..row()
                },
                "retries",
            ),
        ] {
            let e = broken.into_run().unwrap_err();
            assert!(
                matches!(&e, StoreError::Corrupt(m) if m.contains("run r1") && m.contains(column)),
                "{e}"
            );
        }
    }
}
