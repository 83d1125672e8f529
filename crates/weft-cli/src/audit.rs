//! `weft audit`: the audit log `weft serve` keeps, newest first.

use crate::cli::DbArgs;
use crate::commands::Failure;
use crate::exit;
use crate::settings::Settings;
use weft_core::ports::AuditQuery;

/// `weft audit`.
pub(crate) async fn audit(
    limit: usize,
    before: Option<i64>,
    tenant: Option<String>,
    json: bool,
    db: &DbArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let store = crate::commands::open_store(db, settings).await?;
    let log = store
        .audit()
        .ok_or_else(|| Failure::invalid("error: this database keeps no audit log"))?;
    let query = AuditQuery {
        limit: limit.clamp(1, 100_000),
        before,
        tenant,
    };
    let entries = log.audit(&query).await?;
    for e in &entries {
        if json {
            println!("{}", serde_json::to_string(e).unwrap_or_default());
        } else {
            let at = humantime::format_rfc3339_millis(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.at_ms.max(0) as u64),
            );
            let who = if e.principal_name.is_empty() {
                e.principal.clone()
            } else {
                format!("{} ({})", e.principal_name, e.principal)
            };
            println!(
                "{:>6}  {at}  {}  {who}  {}  {}  -> {}  [{}]",
                e.seq, e.tenant, e.action, e.object, e.outcome, e.request_id
            );
        }
    }
    if entries.len() == query.limit
        && let Some(last) = entries.last()
    {
        eprintln!("more: weft audit --before {}", last.seq);
    }
    Ok(exit::OK)
}
