//! `weft keys`: make, list and revoke the API keys `weft serve` accepts.

use crate::cli::{DbArgs, KeysCommand};
use crate::commands::Failure;
use crate::exit;
use crate::settings::Settings;
use weft_core::ports::KeyStore;
use weft_server::keys::{self, KeyError, NewKey};

/// `weft keys ...`.
pub(crate) async fn keys(
    command: KeysCommand,
    db: &DbArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let store = crate::commands::open_store(db, settings).await?;
    let kept = store
        .keys()
        .ok_or_else(|| Failure::invalid("error: this database keeps no API keys"))?;
    match command {
        KeysCommand::Create {
            tenant,
            scopes,
            name,
            expires,
        } => {
            let scopes = keys::parse_scopes(&scopes).map_err(key_failure)?;
            let name = name.unwrap_or_else(|| {
                scopes
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            let new = NewKey {
                name,
                tenant,
                scopes,
                expires_in: expires.map(Into::into),
            };
            let (key, secret) = keys::create(store.as_ref(), new)
                .await
                .map_err(key_failure)?;
            println!("{}", line(&key));
            eprintln!("keep the secret on the next line: it is not shown again");
            println!("{secret}");
        }
        KeysCommand::List { json } => list(kept, json).await?,
        KeysCommand::Revoke { id } => {
            let now = keys::now_ms();
            if !kept.revoke_key(&id, now).await? {
                return Err(Failure::invalid(format!(
                    "error: no key with id `{id}`\n  hint: `weft keys list` shows them"
                )));
            }
            eprintln!(
                "key {id} revoked: servers refuse it within {} s",
                keys::KEEP.as_secs()
            );
        }
    }
    Ok(exit::OK)
}

async fn list(kept: &dyn KeyStore, json: bool) -> Result<(), Failure> {
    for key in kept.keys().await? {
        if json {
            println!("{}", keys::describe(&key));
        } else {
            println!("{}", line(&key));
        }
    }
    Ok(())
}

/// A key on one line, for people.
fn line(key: &weft_core::ports::ApiKey) -> String {
    let at = crate::commands::format_ms;
    let scopes: Vec<&str> = key.scopes.iter().map(|s| s.as_str()).collect();
    let state = match (key.revoked_ms, key.expires_ms) {
        (Some(t), _) => format!("revoked {}", at(t)),
        (None, Some(t)) if !key.usable_at(keys::now_ms()) => format!("expired {}", at(t)),
        (None, Some(t)) => format!("expires {}", at(t)),
        (None, None) => "until revoked".to_owned(),
    };
    let used = key
        .last_used_ms
        .map_or("never used".to_owned(), |t| format!("last used {}", at(t)));
    format!(
        "{}  {}  tenant {}  [{}]  made {}  {used}  {state}",
        key.id,
        key.name,
        key.tenant,
        scopes.join(", "),
        at(key.created_ms)
    )
}

fn key_failure(e: KeyError) -> Failure {
    match e {
        KeyError::Invalid(m) => Failure::invalid(format!("error: {m}")),
        KeyError::Store(e) => e.into(),
    }
}
