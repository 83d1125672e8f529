//! `weft schedules` and `weft hooks`: managing what starts runs by itself, on the
//! database (`--db`/`WEFT_DB`); every `weft serve` and `weft worker` on it fires them.

use crate::cli::{DbArgs, EffectArgs, HooksCommand, SchedulesCommand};
use crate::commands::{Failure, serving_engine};
use crate::exit;
use crate::run_settings::RunSettings;
use crate::settings::Settings;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use weft_core::event::now_ms;
use weft_core::ports::Store;
use weft_engine::Engine;
use weft_service::Service;
use weft_triggers::manage::{self, ManageError, NewHook, NewSchedule};
use weft_triggers::{CronTimes, Launcher};

impl From<ManageError> for Failure {
    fn from(e: ManageError) -> Failure {
        Failure::invalid(format!("error: {e}"))
    }
}

fn now() -> i64 {
    now_ms() as i64
}

/// One that only manages: its engine's runs are left to the workers, so that it
/// starts nothing itself.
fn managing(store: Arc<dyn Store>) -> Launcher {
    let engine = Engine::builder(store).continue_on_workers().build();
    Launcher::new(Service::new(engine, None))
}

fn print(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// `weft schedules ...`.
pub(crate) async fn schedules(
    command: SchedulesCommand,
    db: &DbArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let opened = crate::database::open(db, settings, weft_store::DEFAULT_LEASE).await?;
    let store = opened.store.clone();
    let l = managing(store.clone());
    match command {
        SchedulesCommand::Add {
            flow,
            cron,
            tz,
            input,
            overlap,
            catch_up,
            jitter,
            id,
        } => {
            let (flow, version) = stored_flow(&l, &flow).await?;
            let new = NewSchedule {
                id,
                flow,
                version,
                cron,
                tz: Some(tz),
                input: input.as_deref().map(parse_json).transpose()?,
                overlap: Some(word(&overlap)?),
                catch_up: Some(word(&catch_up)?),
                jitter,
            };
            let s = manage::add_schedule(&l, new, now()).await?;
            print(&manage::describe(&s, &[], now()));
        }
        SchedulesCommand::List { json } => list(&l, json).await?,
        SchedulesCommand::Show { id } => {
            let s = manage::schedule(&l, &id).await?;
            let firings = triggers(&store)?.firings(&s.id, 50).await?;
            print(&manage::describe(&s, &firings, now()));
        }
        SchedulesCommand::Pause { id } => {
            manage::set_paused(&l, &id, true, now()).await?;
            eprintln!("schedule {id} paused");
        }
        SchedulesCommand::Resume { id } => {
            manage::set_paused(&l, &id, false, now()).await?;
            eprintln!("schedule {id} resumed: it fires from now on");
        }
        SchedulesCommand::Delete { id } => {
            manage::delete_schedule(&l, &id).await?;
            eprintln!("schedule {id} deleted (its runs stay)");
        }
        SchedulesCommand::TriggerNow { id, effects } => {
            return trigger_now(&id, store, opened.queue.is_some(), effects, settings).await;
        }
    }
    Ok(exit::OK)
}

fn triggers(store: &Arc<dyn Store>) -> Result<&dyn weft_core::ports::TriggerStore, Failure> {
    store
        .triggers()
        .ok_or_else(|| Failure::invalid("error: this database keeps no schedules"))
}

fn parse_json(text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text)
        .map_err(|e| Failure::invalid(format!("error: --input is not JSON: {e}")))
}

/// A policy word (`cancel-previous`, `last`) as its enum.
fn word<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, Failure> {
    serde_json::from_value(json!(text))
        .map_err(|e| Failure::invalid(format!("error: `{text}`: {e}")))
}

/// The stored flow `spec` names: `NAME`, `NAME@VERSION`, or a file, stored first as
/// the next version of its flow's name.
async fn stored_flow(l: &Launcher, spec: &str) -> Result<(String, Option<u32>), Failure> {
    let path = Path::new(spec);
    if path.is_file() {
        return store_file(l, path).await.map(|name| (name, None));
    }
    let (name, version) = match spec.rsplit_once('@') {
        Some((name, v)) => {
            let v = v.parse::<u32>().map_err(|_| {
                Failure::invalid(format!("error: `{spec}`: write NAME@VERSION with a number"))
            })?;
            (name, Some(v))
        }
        None => (spec, None),
    };
    let found = l.store().flow_version(name, version).await?;
    if found.is_none() {
        return Err(Failure::invalid(format!(
            "error: no stored flow `{spec}` and no such file; give a flow file to store it, or the name of a flow saved with the save_flow tool"
        )));
    }
    Ok((name.to_owned(), version))
}

/// Loads, checks and stores the flow file at `path` as the next version of its name.
async fn store_file(l: &Launcher, path: &Path) -> Result<String, Failure> {
    store_flow_file(l.engine(), path).await
}

/// Loads, checks and stores the flow file at `path` in `engine`'s store as the next
/// version of its flow's name (its file's stem when it has none); the name.
pub(crate) async fn store_flow_file(engine: &Engine, path: &Path) -> Result<String, Failure> {
    let loaded =
        weft_dialects::load_file(path, None).map_err(|e| Failure::invalid(format!("{e}")))?;
    let checked = Service::new(engine.clone(), None)
        .prepare(loaded)
        .map_err(|d| {
            let shown: Vec<String> = d
                .iter()
                .map(|d| d.render(&path.display().to_string()))
                .collect();
            Failure::invalid(shown.join("\n"))
        })?;
    let mut source = checked.source();
    let name = match checked.flow().name.as_str() {
        "" => path
            .file_stem()
            .map_or("flow".into(), |s| s.to_string_lossy().into_owned()),
        name => name.to_owned(),
    };
    source.name = name.clone();
    let saved = engine.save_flow(&source, &name).await?.ok_or_else(|| {
        Failure::invalid(format!(
            "error: {}: the flow's name is empty",
            path.display()
        ))
    })?;
    eprintln!(
        "stored {} as flow `{name}` version {}",
        path.display(),
        saved.version
    );
    Ok(name)
}

async fn list(l: &Launcher, as_json: bool) -> Result<(), Failure> {
    let store = l.store();
    for s in triggers(store)?.schedules().await? {
        let firings = triggers(store)?.firings(&s.id, 1).await?;
        let shown = manage::describe(&s, &firings, now());
        if as_json {
            println!("{shown}");
            continue;
        }
        let next = match (s.paused, CronTimes::parse(&s.cron, &s.tz)) {
            (true, _) => "paused".to_owned(),
            (false, Ok(c)) => c.next_after(now()).map_or("never".into(), |t| c.show(t)),
            (false, Err(_)) => "invalid".to_owned(),
        };
        println!("{}\t{}\t{} ({})\tnext {}", s.id, s.flow, s.cron, s.tz, next);
    }
    Ok(())
}

/// Starts schedule `id`'s flow now: drives it here and prints its result, or (on a
/// database the workers share) leaves it to them and prints its id.
async fn trigger_now(
    id: &str,
    store: Arc<dyn Store>,
    shared: bool,
    effects: EffectArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let run = RunSettings::new(effects.files, effects.model);
    let adapters = crate::engines::Adapters::new(settings)?;
    // On a database the workers share, the run is left to them; else it runs here.
    let engine = serving_engine(store, &adapters, &run, shared);
    let l = Launcher::new(Service::new(engine.clone(), Some(run.to_value())));
    let firing = manage::trigger_now(&l, id, now()).await?;
    let run_id = firing.run_id.unwrap_or_default();
    if shared {
        println!("{}", json!({"run_id": run_id, "status": "queued"}));
        return Ok(exit::OK);
    }
    let result = engine
        .follow_elsewhere(run_id)
        .await
        .map_err(|e| Failure::invalid(format!("error: the run stopped: {e}")))??;
    println!("{}", result.to_json());
    Ok(if result.status == weft_core::ports::RunStatus::Completed {
        exit::OK
    } else {
        exit::INVALID
    })
}

/// `weft hooks ...`.
pub(crate) async fn hooks(
    command: HooksCommand,
    db: &DbArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let store = crate::commands::open_store(db, settings).await?;
    let l = managing(store.clone());
    match command {
        HooksCommand::Add {
            name,
            flow,
            auth,
            secret,
            dedupe_field,
        } => {
            let (flow, version) = stored_flow(&l, &flow).await?;
            let new = NewHook {
                name,
                flow,
                version,
                auth: Some(manage::parse_auth(&auth)?),
                secret,
                dedupe_field,
            };
            let hook = manage::add_hook(&l, new, now()).await?;
            let mut shown = manage::describe_hook(&hook);
            shown["secret"] = json!(hook.secret);
            print(&shown);
            eprintln!("keep the secret: it is not shown again");
        }
        HooksCommand::List => {
            for h in triggers(&store)?.hooks().await? {
                println!("{}", manage::describe_hook(&h));
            }
        }
        HooksCommand::Delete { name } => {
            manage::delete_hook(&l, &name).await?;
            eprintln!("webhook {name} deleted");
        }
    }
    Ok(exit::OK)
}
