//! What each command does.

use crate::cli::{Cli, Command, DbArgs, GraphFormat, OutputArgs, RunsCommand, ServerArgs};
use crate::event_file::{DialectLog, EventFile};
use crate::exit;
use crate::progress::Progress;
use crate::run_settings::RunSettings;
use crate::serving::{Serving, Working, mcp, serve, worker};
use crate::settings::Settings;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weft_core::ports::{RunStatus, Store};
use weft_core::{Diagnostic, Severity};
use weft_dialects::{EventView, LoadError, Loaded};
use weft_engine::{Engine, EngineError, Prepared, RunResult};
use weft_service::{How, Service};

/// A command's failure: what to print and the exit code.
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::INVALID,
            message: message.into(),
        }
    }
}

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Failure {
        Failure::invalid(format!("error: {e}"))
    }
}

impl From<weft_core::ports::StoreError> for Failure {
    fn from(e: weft_core::ports::StoreError) -> Failure {
        EngineError::from(e).into()
    }
}

pub async fn dispatch(cli: Cli, settings: &Settings) -> u8 {
    let result = match cli.command {
        Command::Run {
            flow,
            input,
            input_file,
            dialect,
            server: Some(server),
            out,
            ..
        } => run_on_server(&server, &flow, input, input_file, dialect, &out, settings).await,
        Command::Run {
            flow,
            input,
            input_file,
            dialect,
            db,
            out,
            server: None,
        } => run(&flow, input, input_file, dialect, &db, &out, settings).await,
        Command::Validate {
            flows,
            dialect,
            model,
            deny_warnings,
        } => {
            let checks = Checks {
                dialect: dialect.as_deref(),
                has_model: model.is_some(),
                deny_warnings,
            };
            Ok(validate(&flows, &checks, settings))
        }
        Command::Graph {
            flow,
            format,
            dialect,
        } => graph(&flow, format, dialect.as_deref()),
        Command::Convert {
            flow,
            to: _,
            dialect,
            output,
        } => convert(&flow, dialect.as_deref(), output.as_deref()),
        Command::Runs {
            command,
            server: ServerArgs {
                server: Some(server),
            },
            ..
        } => crate::remote_runs::runs(command, &server, settings).await,
        Command::Runs { command, db, .. } => runs(command, &db, settings).await,
        Command::Schedules { command, db } => {
            crate::triggers::schedules(command, &db, settings).await
        }
        Command::Hooks { command, db } => crate::triggers::hooks(command, &db, settings).await,
        Command::Keys { command, db } => crate::keys::keys(command, &db, settings).await,
        Command::Audit {
            limit,
            before,
            tenant,
            json,
            db,
        } => crate::audit::audit(limit, before, tenant, json, &db, settings).await,
        Command::Approve {
            id,
            reject,
            note,
            step,
            db,
            server,
            out,
        } => {
            let mut answer =
                json!({"decision": if reject { "reject" } else { "approve" }, "note": note});
            if let Some(user) = &settings.user {
                answer["by"] = json!(user);
            }
            match server.server {
                Some(server) => {
                    crate::remote_runs::approve(&server, &id, step, answer, &out, settings).await
                }
                None => approve(&id, step.as_deref(), answer, &db, &out, settings).await,
            }
        }
        Command::Serve {
            addr,
            token_file,
            max_runs,
            allow_mcp_approvals,
            open,
            role,
            flows,
            allowed_origins,
            working,
            effects,
            db,
        } => match service_run_settings(effects, &db, token_file.as_deref(), settings) {
            Err(f) => Err(f),
            Ok(run) => {
                let serving = Serving {
                    addr,
                    token_file,
                    max_runs: max_runs.map(|n| n as usize),
                    allow_mcp_approvals,
                    open,
                    role,
                    flows,
                    allowed_origins,
                    working: Working::from(&working),
                };
                serve(serving, &db, &run, settings).await
            }
        },
        Command::Worker {
            working,
            effects,
            db,
        } => match service_run_settings(effects, &db, None, settings) {
            Ok(run) => worker(Working::from(&working), &db, &run, settings).await,
            Err(f) => Err(f),
        },
        Command::Mcp {
            allow_mcp_approvals,
            effects,
            db,
        } => match service_run_settings(effects, &db, None, settings) {
            Ok(run) => mcp(allow_mcp_approvals, &db, &run, settings).await,
            Err(f) => Err(f),
        },
        Command::SandboxWorker { .. } | Command::ModelWorker { .. } => {
            unreachable!("handled before the runtime starts")
        }
        Command::Schema {
            dialect,
            reference,
            list,
        } => schema(&dialect, reference, list),
    };
    match result {
        Ok(code) => code,
        Err(f) => {
            eprintln!("{}", f.message);
            f.code
        }
    }
}

/// The settings of a long-lived service's runs: its database file and token file are
/// registered as Weft's own before its files directory is chosen, which must hold
/// neither ([`RunSettings::for_service`]).
fn service_run_settings(
    effects: crate::cli::EffectArgs,
    db: &DbArgs,
    token_file: Option<&Path>,
    settings: &Settings,
) -> Result<RunSettings, Failure> {
    let database = settings.db(db.db.as_deref());
    if let crate::settings::Database::File(path) = &database {
        weft_files::protect_database(path);
    }
    if let Some(token) = token_file {
        weft_files::protect(token);
    }
    RunSettings::for_service(effects.files, effects.model, &database, &settings.data_dir)
        .map_err(Failure::invalid)
}

/// The store `--db` or `WEFT_DB` names, for a command that drives runs itself.
/// The database `db` names, opened with the default lease.
pub(crate) async fn open_store(
    db: &DbArgs,
    settings: &Settings,
) -> Result<Arc<dyn Store>, Failure> {
    Ok(
        crate::database::open(db, settings, weft_store::DEFAULT_LEASE)
            .await?
            .store,
    )
}

/// A command that drives runs: its engine, the progress it shows, and the dialect log
/// its result may carry.
struct Session {
    engine: Engine,
    progress: Option<Arc<Progress>>,
    log: Option<Arc<DialectLog>>,
    json: bool,
}

impl Session {
    /// Ends the progress display, prints the result as the flags ask, and returns the
    /// exit code.
    fn report(&self, result: &RunResult) -> u8 {
        if let Some(p) = &self.progress {
            p.finish();
        }
        report(result, self.json, self.log.as_deref())
    }
}

/// The session of a command that runs flows over `store`, naming events as `view` does
/// and acting as `run` says.
fn session(
    store: Arc<dyn Store>,
    settings: &Settings,
    out: &OutputArgs,
    view: EventView,
    run: &RunSettings,
) -> Result<Session, Failure> {
    let progress = (!out.quiet).then(|| Arc::new(Progress::new()));
    let (engine, log) = engine(
        store,
        &crate::engines::Adapters::new(settings)?,
        out.events.as_deref(),
        progress.clone(),
        view,
        run,
        !out.no_event_log,
    )?;
    Ok(Session {
        engine,
        progress,
        log,
        json: out.json,
    })
}

/// The engine the CLI drives runs with; `events` names a file for every event, and
/// `event_log` says whether the store keeps runs' events.
fn engine(
    store: Arc<dyn Store>,
    adapters: &crate::engines::Adapters,
    events: Option<&Path>,
    progress: Option<Arc<Progress>>,
    view: EventView,
    run: &RunSettings,
    event_log: bool,
) -> Result<(Engine, Option<Arc<DialectLog>>), Failure> {
    let mut b = adapters.builder(store, run, true);
    if !event_log {
        b = b.without_event_log();
    }
    if let Some(p) = progress {
        b = b.sink(p);
    }
    let log = DialectLog::for_view(&view).map(Arc::new);
    if let Some(l) = &log {
        b = b.sink(l.clone());
    }
    if let Some(path) = events {
        let file = std::fs::File::create(path).map_err(|e| {
            Failure::invalid(format!(
                "error: cannot write events to {}: {e}",
                path.display()
            ))
        })?;
        b = b.sink(Arc::new(EventFile::new(
            Box::new(std::io::BufWriter::new(file)),
            view,
        )));
    }
    Ok((b.build(), log))
}

/// The engine of a long-lived command (`serve`, `mcp`, `worker`): no progress and no
/// events file; every run's events are stored, for the streams that follow them. With
/// `on_workers`, the runs it submits or continues are left to the workers of its
/// shared store.
pub(crate) fn serving_engine(
    store: Arc<dyn Store>,
    adapters: &crate::engines::Adapters,
    run: &RunSettings,
    on_workers: bool,
) -> Engine {
    let builder = adapters.builder(store, run, true);
    if on_workers {
        builder.continue_on_workers().build()
    } else {
        builder.build()
    }
}

fn load(flow: &Path, dialect: Option<&str>) -> Result<Loaded, LoadError> {
    weft_dialects::load_file(flow, dialect)
}

fn render_diags(file: &str, loaded: &Loaded, diags: Vec<Diagnostic>) -> String {
    render_located(file, loaded.locate_all(diags))
}

/// Diagnostics located in `file` already, one after another.
fn render_located(file: &str, diags: Vec<Diagnostic>) -> String {
    diags
        .iter()
        .map(|d| d.render(file))
        .collect::<Vec<_>>()
        .join("\n")
}

fn parse_input(text: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| {
        Failure::invalid(format!(
            "error: {what} is not valid JSON: {e}\n  hint: quote it for the shell, e.g. --input '{{\"name\": \"Ada\"}}'"
        ))
    })
}

async fn run(
    flow: &Path,
    input: Option<String>,
    input_file: Option<PathBuf>,
    dialect: Option<String>,
    db: &DbArgs,
    out: &OutputArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let loaded = load(flow, dialect.as_deref()).map_err(|e| Failure::invalid(e.render()))?;
    for w in &loaded.warnings {
        eprintln!("{}", w.render(&flow.display().to_string()));
    }
    let input = read_input(input, input_file)?;
    let store = open_store(db, settings).await?;
    let run_settings = RunSettings::for_new_run(out);
    let session = session(store, settings, out, loaded.events.clone(), &run_settings)?;
    // The engine checks what only it knows: its model providers and its secrets.
    let service = Service::new(session.engine.clone(), Some(run_settings.to_value()));
    let checked = service
        .prepare(loaded)
        .map_err(|diags| Failure::invalid(render_located(&flow.display().to_string(), diags)))?;
    if run_settings.model.is_none()
        && let Some(told) = unnamed_models(flow, checked.loaded())
    {
        eprintln!("{told}");
        if let Some(p) = &session.progress {
            p.no_model_told();
        }
    }
    let how = How {
        file: Some(
            std::fs::canonicalize(flow)
                .unwrap_or_else(|_| flow.to_path_buf())
                .display()
                .to_string(),
        ),
        ..How::default()
    };
    let started = service.start(&checked, input, how).await?;
    let result = started.underway.end().await?;
    let result = wait_for_timers(&session.engine, result).await?;
    Ok(session.report(&result))
}

/// Follows a run that paused only at `wait` steps: sleeps until the first is due,
/// wakes the run and drives it on, as long as it keeps pausing only for time. The run
/// is stored meanwhile: stopped, it goes on in `weft serve` when its time comes.
async fn wait_for_timers(engine: &Engine, mut result: RunResult) -> Result<RunResult, Failure> {
    loop {
        let timers_only = result.status == RunStatus::Paused
            && result
                .waiting
                .iter()
                .all(|w| w["timer_only"] == json!(true));
        let wake = result
            .waiting
            .iter()
            .filter_map(|w| w["wake_ms"].as_i64())
            .min();
        let (true, Some(wake)) = (timers_only, wake) else {
            return Ok(result);
        };
        let until = std::time::UNIX_EPOCH + std::time::Duration::from_millis(wake.max(0) as u64);
        eprintln!(
            "run {} waits until {} (it is stored: stopped now, `weft serve` continues it then)",
            result.run_id,
            humantime::format_rfc3339_seconds(until)
        );
        let left = wake - weft_core::event::now_ms() as i64;
        tokio::time::sleep(std::time::Duration::from_millis(left.max(0) as u64)).await;
        match engine.wake(&result.run_id).await? {
            Some(underway) => result = underway.end().await?,
            // Woken elsewhere (a server on the same database): follow it there.
            None => {
                let handle = engine.follow_elsewhere(result.run_id.clone());
                result = handle
                    .await
                    .map_err(|e| Failure::invalid(format!("error: {e}")))??;
            }
        }
    }
}

/// `--input` (JSON) or `--input-file` (JSON or YAML), if either is given.
fn read_input(
    input: Option<String>,
    input_file: Option<PathBuf>,
) -> Result<Option<Value>, Failure> {
    match (input, input_file) {
        (Some(text), _) => Ok(Some(parse_input(&text, "--input")?)),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                Failure::invalid(format!("error: cannot read {}: {e}", path.display()))
            })?;
            let (v, _) = weft_dialects::source_map::parse(&text)
                .map_err(|d| Failure::invalid(d.render(&path.display().to_string())))?;
            Ok(Some(v))
        }
        (None, None) => Ok(None),
    }
}

/// `weft run --server URL`: the flow runs on that server; progress and the result show
/// here as for a local run, with the same exit codes.
async fn run_on_server(
    server: &str,
    flow: &Path,
    input: Option<String>,
    input_file: Option<PathBuf>,
    dialect: Option<String>,
    out: &OutputArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let input = read_input(input, input_file)?;
    crate::remote_runs::run(server, flow, input, dialect, out, settings).await
}

/// One run as `weft runs list` shows it.
pub(crate) struct RunLine<'a> {
    pub(crate) id: &'a str,
    pub(crate) flow: &'a str,
    pub(crate) status: &'a str,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
}

impl RunLine<'_> {
    /// Prints the run as a JSON line, or as a line of text.
    pub(crate) fn print(&self, json: bool) {
        if json {
            println!(
                "{}",
                json!({"run_id": self.id, "flow": self.flow, "status": self.status, "created_ms": self.created_ms, "updated_ms": self.updated_ms})
            );
        } else {
            println!(
                "{}  {:<9}  {}  {}",
                self.id,
                self.status,
                format_ms(self.created_ms),
                self.flow
            );
        }
    }
}

/// Writes `value` to standard output as indented JSON and a newline, as it serializes:
/// a run's output can be hundreds of megabytes, and needs no second copy as text.
fn print_json(value: &impl serde::Serialize) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // A closed pipe (`weft run ... | head`) is not an error of the run.
    let _ = serde_json::to_writer_pretty(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush());
}

/// Prints a run's result and returns its exit code.
pub(crate) fn report(r: &RunResult, as_json: bool, log: Option<&DialectLog>) -> u8 {
    if let Some(shaped) = log.filter(|_| as_json).and_then(|l| l.result(r)) {
        print_json(&shaped);
    } else if as_json {
        print_json(&r.json_view());
    } else {
        match r.status {
            RunStatus::Completed => match &r.output {
                Some(output) => print_json(output),
                None => print_json(&Value::Null),
            },
            RunStatus::Failed | RunStatus::Cancelled => {
                if let Some(e) = &r.error {
                    eprintln!("error: run {} {}: {e}", r.run_id, r.status.as_str());
                } else {
                    eprintln!("run {} {}", r.run_id, r.status.as_str());
                }
                eprintln!(
                    "  hint: inspect it with `weft runs show {}`; retry it from the failing step with `weft runs retry {}`",
                    r.run_id, r.run_id
                );
            }
            RunStatus::Paused => {
                for w in &r.waiting {
                    eprintln!(
                        "run {} paused at {}: {}",
                        r.run_id,
                        w["key"].as_str().unwrap_or(""),
                        w["prompt"].as_str().unwrap_or("")
                    );
                    if let Some(wake) = w["wake_ms"].as_i64() {
                        eprintln!(
                            "  unanswered, it goes on by itself at {} in `weft serve` on this database",
                            format_ms(wake)
                        );
                    }
                }
                eprintln!(
                    "  answer with `weft approve {}` (or `--reject --note TEXT`)",
                    r.run_id
                );
            }
            RunStatus::Queued | RunStatus::Running => {}
        }
    }
    match r.status {
        RunStatus::Completed => exit::OK,
        RunStatus::Paused => exit::PAUSED,
        RunStatus::Failed | RunStatus::Cancelled | RunStatus::Queued | RunStatus::Running => {
            exit::FAILED
        }
    }
}

/// What `weft validate` checks besides the flows themselves.
struct Checks<'a> {
    /// The flows' dialect, when not detected.
    dialect: Option<&'a str>,
    /// A default model is configured: llm blocks that name none are not warned of.
    has_model: bool,
    /// A warning makes a file invalid.
    deny_warnings: bool,
}

fn validate(flows: &[PathBuf], checks: &Checks<'_>, settings: &Settings) -> u8 {
    // Checking syntax runs no code: Lua is parsed in process, Python in its worker
    // when it first runs, so no worker process starts here.
    let sandboxes = weft_code::Sandboxes::new(
        weft_code::WorkerCommand {
            program: settings.program.clone().unwrap_or_else(|| "weft".into()),
            args: vec!["sandbox-worker".into()],
        },
        1,
    );
    let mut code = exit::OK;
    for flow in flows {
        if !validate_one(flow, checks, &sandboxes) {
            code = exit::INVALID;
        }
    }
    code
}

/// Validates one file, printing its problems; true when it has no error (and no
/// warning, with `deny_warnings`). Without a default model, blocks that name none are
/// warned of.
fn validate_one(flow: &Path, checks: &Checks<'_>, sandboxes: &weft_code::Sandboxes) -> bool {
    let file = flow.display().to_string();
    let loaded = match load(flow, checks.dialect) {
        Ok(l) => l,
        Err(e) => {
            println!("{}", e.render());
            return false;
        }
    };
    let mut code_errors = weft_core::validate::check_code(&loaded.flow, sandboxes);
    code_errors.extend(crate::engines::unknown_providers(&loaded.flow));
    match Prepared::new(loaded.flow.clone()) {
        Err(mut diags) => {
            diags.extend(code_errors);
            println!("{}", render_diags(&file, &loaded, diags));
            false
        }
        Ok(_) if !code_errors.is_empty() => {
            println!("{}", render_diags(&file, &loaded, code_errors));
            false
        }
        Ok(p) => {
            let mut unmodelled = if checks.has_model {
                Vec::new()
            } else {
                loaded.locate_all(blocks_without_model(&loaded.flow))
            };
            // Several calls one node of the file compiles to are one line to fix.
            unmodelled.dedup_by(|a, b| a.loc.is_some() && a.loc == b.loc);
            let warnings = loaded
                .warnings
                .iter()
                .chain(p.warnings())
                .chain(&unmodelled);
            let mut warned = false;
            for w in warnings.filter(|d| d.severity == Severity::Warning) {
                println!("{}", w.render(&file));
                warned = true;
            }
            if warned && checks.deny_warnings {
                eprintln!(
                    "{file}: invalid: it has warnings, and --deny-warnings makes them errors"
                );
                return false;
            }
            eprintln!(
                "{file}: ok ({} flow `{}`)",
                loaded.dialect, loaded.flow.name
            );
            true
        }
    }
}

/// What `weft run` says once, before a run whose model calls name no model (and no
/// `--model` or `$WEFT_MODEL` gives one): how many, what they will use, and where the
/// file could name one, at the first such call.
fn unnamed_models(file: &Path, loaded: &Loaded) -> Option<String> {
    let unnamed = blocks_without_model(&loaded.flow);
    let first = unnamed.first()?.clone();
    let place = match loaded.dialect {
        "tea" => "in `settings.llm` (`model`, `provider`), or on the call",
        "souls" => "on the soul, or in the workflow's `config`",
        "graph" => "on the agent node",
        _ => "on the block, or as the flow's default in `models`",
    };
    let calls = if unnamed.len() == 1 {
        "1 model call names".to_owned()
    } else {
        format!("{} model calls name", unnamed.len())
    };
    let mut d = first.hint(format!(
        "name a model {place}, or pass --model / set WEFT_MODEL"
    ));
    let fallback = crate::engines::no_model_warning();
    d.message = format!(
        "{calls} no model: {}",
        fallback.trim_start_matches("no model: ")
    );
    Some(loaded.locate(d).render(&file.display().to_string()))
}

/// A warning for each llm block that names no model: `weft run` would give it the
/// fallback model, which is rarely what the author meant.
fn blocks_without_model(flow: &weft_core::ir::Flow) -> Vec<weft_core::Diagnostic> {
    let mut out = Vec::new();
    weft_core::validate::walk_blocks(flow, &mut |ptr, b| {
        if let weft_core::ir::BlockKind::Llm(l) = &b.kind
            && l.model.is_none()
        {
            out.push(
                weft_core::Diagnostic::warning(ptr, crate::engines::no_model_warning())
                    .hint("name a model on the block (or its soul / config), or pass --model / set WEFT_MODEL"),
            );
        }
    });
    out
}

fn schema(dialect: &str, reference: bool, list: bool) -> Result<u8, Failure> {
    if list {
        for d in weft_dialects::dialects() {
            println!("{:<8} {}", d.name(), d.summary());
        }
        return Ok(exit::OK);
    }
    let d = weft_dialects::dialect(dialect).map_err(|d| Failure::invalid(d.render("--dialect")))?;
    if reference {
        print!("{}", d.reference());
    } else {
        println!(
            "{}",
            serde_json::to_string_pretty(&d.schema()).unwrap_or_default()
        );
    }
    Ok(exit::OK)
}

fn graph(flow: &Path, format: GraphFormat, dialect: Option<&str>) -> Result<u8, Failure> {
    let loaded = load(flow, dialect).map_err(|e| Failure::invalid(e.render()))?;
    let diagram = weft_core::diagram::Diagram::of(&loaded.flow);
    print!(
        "{}",
        match format {
            GraphFormat::Mermaid => diagram.mermaid(),
            GraphFormat::Dot => diagram.dot(),
            GraphFormat::Svg => diagram.svg(),
        }
    );
    Ok(exit::OK)
}

fn convert(flow: &Path, dialect: Option<&str>, output: Option<&Path>) -> Result<u8, Failure> {
    let loaded = load(flow, dialect).map_err(|e| Failure::invalid(e.render()))?;
    let yaml = weft_dialects::native::to_yaml(&loaded.flow);
    match output {
        Some(path) => std::fs::write(path, yaml).map_err(|e| {
            Failure::invalid(format!("error: cannot write {}: {e}", path.display()))
        })?,
        None => print!("{yaml}"),
    }
    Ok(exit::OK)
}

/// A resume answer: JSON as given, or a bare word as the decision.
pub(crate) fn normalize_answer(text: &str) -> Value {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()));
    match v {
        Value::String(d) => json!({"decision": d, "note": ""}),
        Value::Object(mut o) => {
            o.entry("note").or_insert(Value::String(String::new()));
            Value::Object(o)
        }
        other => json!({"decision": other.to_string(), "note": ""}),
    }
}

/// How run `id`, which continues, names its events and where it acts: as stored with
/// the run, with the flags given now winning over its settings. A run that cannot be
/// read gets the defaults, and the engine reports why.
async fn continued_run(store: &dyn Store, id: &str, out: &OutputArgs) -> (EventView, RunSettings) {
    match store.get_run(id).await {
        Ok(Some(rec)) => (
            weft_dialects::view_of_run(&rec),
            RunSettings::for_continued_run(out, rec.settings.as_ref()),
        ),
        _ => (EventView::default(), RunSettings::for_new_run(out)),
    }
}

async fn approve(
    id: &str,
    step: Option<&str>,
    answer: Value,
    db: &DbArgs,
    out: &OutputArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let store = open_store(db, settings).await?;
    let (view, run) = continued_run(&*store, id, out).await;
    let session = session(store, settings, out, view, &run)?;
    let result = session.engine.answer(id, step, answer).await?.end().await?;
    Ok(session.report(&result))
}

async fn runs(command: RunsCommand, db: &DbArgs, settings: &Settings) -> Result<u8, Failure> {
    let store = open_store(db, settings).await?;
    match command {
        RunsCommand::List { limit, json } => {
            let list = store
                .list_runs(&weft_core::ports::RunQuery::newest(limit))
                .await
                .map_err(|e| Failure::invalid(format!("error: {e}")))?;
            for r in list {
                RunLine {
                    id: &r.id,
                    flow: &r.flow_name,
                    status: r.status.as_str(),
                    created_ms: r.created_ms,
                    updated_ms: r.updated_ms,
                }
                .print(json);
            }
            Ok(exit::OK)
        }
        RunsCommand::Show { id } => {
            let shown = weft_engine::inspect::run_detail(store.as_ref(), &id)
                .await
                .map_err(|e| Failure::invalid(format!("error: {e}")))?
                .ok_or_else(|| Failure::invalid(format!("error: no run with id `{id}`")))?;
            println!(
                "{}",
                serde_json::to_string_pretty(&shown).unwrap_or_default()
            );
            Ok(exit::OK)
        }
        RunsCommand::Resume {
            id,
            input,
            force,
            out,
        } => {
            let (view, run) = continued_run(&*store, &id, &out).await;
            let session = session(store, settings, &out, view, &run)?;
            let result = match input {
                Some(text) => {
                    session
                        .engine
                        .answer(&id, None, normalize_answer(&text))
                        .await?
                }
                None => session.engine.resume(&id, force).await?,
            };
            let result = result.end().await?;
            Ok(session.report(&result))
        }
        RunsCommand::Retry {
            id,
            allow_changed,
            out,
        } => {
            let rec = store
                .get_run(&id)
                .await
                .map_err(|e| Failure::invalid(format!("error: {e}")))?
                .ok_or_else(|| Failure::invalid(format!("error: no run with id `{id}`")))?;
            let mut changed = None;
            let mut view = weft_dialects::view_of_run(&rec);
            if let Some(src) = rec.source.as_deref().map(Path::new).filter(|p| p.exists()) {
                let now = std::fs::read(src)
                    .map(|b| weft_core::hash::content_hash(&b))
                    .ok();
                if now.is_some() && now != rec.source_hash {
                    if !allow_changed {
                        return Err(Failure::invalid(format!(
                            "error: {} changed since run {} started\n  hint: pass --allow-changed to retry with the new version (journaled steps whose keys still exist are reused)",
                            src.display(),
                            rec.id
                        )));
                    }
                    let loaded = load(src, rec.dialect.as_deref())
                        .map_err(|e| Failure::invalid(e.render()))?;
                    view = loaded.events.clone();
                    changed = Some((src, loaded));
                }
            }
            let run = RunSettings::for_continued_run(&out, rec.settings.as_ref());
            let session = session(store, settings, &out, view, &run)?;
            // Checked by the engine that runs it: its models and secrets too.
            let changed_flow = match changed {
                Some((src, loaded)) => {
                    let service = Service::new(session.engine.clone(), None);
                    let checked = service.prepare(loaded).map_err(|diags| {
                        Failure::invalid(render_located(&src.display().to_string(), diags))
                    })?;
                    Some(checked.revision())
                }
                None => None,
            };
            let result = session
                .engine
                .retry(&rec.id, changed_flow)
                .await?
                .end()
                .await?;
            Ok(session.report(&result))
        }
        RunsCommand::Cancel { id } => {
            let engine = Engine::builder(store).build();
            let r = engine.cancel(&id).await?;
            eprintln!("run {} cancelled", r.id);
            Ok(exit::OK)
        }
    }
}

/// Unix milliseconds as an RFC 3339 time, to the second.
pub(crate) fn format_ms(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_format_in_utc() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_ms(1_795_305_600_000), "2026-11-22T00:00:00Z");
    }

    #[test]
    fn bare_words_become_decisions() {
        assert_eq!(
            normalize_answer("approve"),
            json!({"decision": "approve", "note": ""})
        );
        assert_eq!(
            normalize_answer(r#"{"decision": "reject", "note": "no"}"#),
            json!({"decision": "reject", "note": "no"})
        );
    }
}
