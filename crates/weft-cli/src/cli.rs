//! The command line, as clap parses it.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Weft runs AI-agent workflows: durable, resumable, in one binary.
#[derive(Parser, Debug)]
#[command(name = "weft", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Send traces of the runs this command drives to this OTLP/HTTP collector (e.g.
    /// http://127.0.0.1:4318; default: $OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long, value_name = "URL", global = true)]
    pub otel: Option<String>,
    /// Hosts, `*.domains`, addresses or CIDR ranges the flows' HTTP requests and model
    /// calls may reach (repeat, or separate by commas; default: $WEFT_ALLOW_NET, else
    /// anywhere not denied). Checked after DNS resolution and on every redirect.
    #[arg(
        long = "allow-net",
        value_name = "HOST|CIDR",
        global = true,
        env = "WEFT_ALLOW_NET",
        value_delimiter = ','
    )]
    pub allow_net: Vec<String>,
    /// Hosts, `*.domains`, addresses or CIDR ranges they may never reach; wins over
    /// --allow-net (default: $WEFT_DENY_NET). `weft serve`, `weft worker` and `weft mcp`
    /// also refuse link-local and cloud metadata addresses (169.254.0.0/16,
    /// fd00:ec2::254) unless an --allow-net address or range holds them.
    #[arg(
        long = "deny-net",
        value_name = "HOST|CIDR",
        global = true,
        env = "WEFT_DENY_NET",
        value_delimiter = ','
    )]
    pub deny_net: Vec<String>,
}

/// Which part of the work a `weft serve` on a shared database does.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The HTTP API, the page and MCP; new runs are queued for workers.
    Api,
    /// A worker: drives runs, serves nothing.
    Worker,
    /// Both.
    All,
}

/// How a worker takes runs from a shared database.
#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Runs a worker drives at once.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub concurrency: u32,
    /// How long a worker's hold on a run lasts unrenewed: a run whose worker died is
    /// taken over this long after its last renewal (e.g. 3s, 500ms, 1m).
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_lease)]
    pub lease: std::time::Duration,
}

/// A lease length: a duration from 200 ms to an hour.
fn parse_lease(text: &str) -> Result<std::time::Duration, String> {
    let d =
        humantime::parse_duration(text).map_err(|e| format!("{e} (write it as 3s, 500ms, 1m)"))?;
    if d < std::time::Duration::from_millis(200) || d > std::time::Duration::from_secs(3600) {
        return Err("a lease lasts from 200ms to 1h".into());
    }
    Ok(d)
}

/// Where runs are stored.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// The run database: a SQLite file, or a PostgreSQL database that many Weft
    /// processes share (postgres://USER@HOST/DB). Default: $WEFT_DB, else
    /// ~/.local/share/weft/weft.db.
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub db: Option<PathBuf>,
}

/// Which `weft serve` holds the runs, when not this machine's database.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Act on the runs of this `weft serve` (e.g. http://127.0.0.1:8080) instead of the
    /// database; the token is $WEFT_TOKEN.
    #[arg(long, value_name = "URL", env = "WEFT_SERVER", global = true)]
    pub server: Option<String>,
}

/// Where the runs a long-lived command starts act: their default model and files
/// directory (`weft serve`, `weft mcp`).
#[derive(Args, Debug, Clone)]
pub struct EffectArgs {
    /// The model for llm blocks that name none (default: $WEFT_MODEL).
    #[arg(long, value_name = "ID", env = "WEFT_MODEL")]
    pub model: Option<String>,
    /// The only directory file actions may read and write (default: $WEFT_FILES, else
    /// the current directory).
    #[arg(long, value_name = "DIR", env = "WEFT_FILES")]
    pub files: Option<PathBuf>,
}

/// How a run reports.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Print one JSON object {run_id, status, output, state, error, usage} instead of the output.
    #[arg(long)]
    pub json: bool,
    /// Write every event as JSON lines to this file.
    #[arg(long, value_name = "PATH")]
    pub events: Option<PathBuf>,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Keep this run's events out of the database: each step costs less, but nothing can
    /// follow the run or read its events later (a server's stream, the web page). The
    /// journal, which resume and retry need, is kept as always.
    #[arg(long)]
    pub no_event_log: bool,
    /// The model for llm blocks that name none (default: $WEFT_MODEL).
    #[arg(long, value_name = "ID", env = "WEFT_MODEL")]
    pub model: Option<String>,
    /// The only directory file actions may read and write (default: $WEFT_FILES, else
    /// the current directory).
    #[arg(long, value_name = "DIR", env = "WEFT_FILES")]
    pub files: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a flow and print its output as JSON.
    Run {
        /// The flow file (YAML or JSON).
        flow: PathBuf,
        /// The input, as JSON (default: the flow's own `input`).
        #[arg(long, value_name = "JSON", conflicts_with = "input_file")]
        input: Option<String>,
        /// Read the input from a JSON or YAML file.
        #[arg(long, value_name = "PATH")]
        input_file: Option<PathBuf>,
        /// The flow's dialect (default: detected from the content).
        #[arg(long, value_name = "NAME")]
        dialect: Option<String>,
        /// Run it on this `weft serve` (e.g. http://127.0.0.1:8080) instead of here; the
        /// token is $WEFT_TOKEN.
        #[arg(long, value_name = "URL", env = "WEFT_SERVER")]
        server: Option<String>,
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Check flows and print each problem as file:line:col with a hint.
    Validate {
        /// Flow files.
        #[arg(required = true)]
        flows: Vec<PathBuf>,
        /// The flows' dialect (default: detected).
        #[arg(long, value_name = "NAME")]
        dialect: Option<String>,
        /// The model `weft run` would give llm blocks that name none (default:
        /// $WEFT_MODEL); without one, such blocks are warned of.
        #[arg(long, value_name = "ID", env = "WEFT_MODEL")]
        model: Option<String>,
        /// Treat warnings as errors: a file with one is invalid (exit 2).
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Draw a flow as a Mermaid or Graphviz diagram, or as SVG.
    Graph {
        /// The flow file.
        flow: PathBuf,
        /// The diagram language.
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
        /// The flow's dialect (default: detected).
        #[arg(long, value_name = "NAME")]
        dialect: Option<String>,
    },
    /// Convert a flow to Weft's native YAML.
    Convert {
        /// The flow file.
        flow: PathBuf,
        /// The target format.
        #[arg(long, value_enum, default_value_t = Target::Native)]
        to: Target,
        /// The flow's dialect (default: detected).
        #[arg(long, value_name = "NAME")]
        dialect: Option<String>,
        /// Write here instead of stdout.
        #[arg(long, short, value_name = "PATH")]
        output: Option<PathBuf>,
    },
    /// Inspect and steer runs.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Start stored flows on cron schedules (docs/triggers.md); `weft serve` and `weft
    /// worker` fire them.
    Schedules {
        #[command(subcommand)]
        command: SchedulesCommand,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Webhooks that start runs of stored flows (docs/triggers.md), served by `weft
    /// serve` at /v1/hooks/NAME.
    Hooks {
        #[command(subcommand)]
        command: HooksCommand,
        #[command(flatten)]
        db: DbArgs,
    },
    /// API keys `weft serve` accepts (docs/security.md): each names its tenant and what
    /// it may do; its secret is shown once, when it is made.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
        #[command(flatten)]
        db: DbArgs,
    },
    /// The audit log `weft serve` keeps (docs/security.md): every request that changed
    /// something and every refused one, newest first.
    Audit {
        /// At most this many entries.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Only entries before this one (the `seq` the last page ended with).
        #[arg(long, value_name = "SEQ")]
        before: Option<i64>,
        /// Only this tenant's entries.
        #[arg(long)]
        tenant: Option<String>,
        /// One JSON object a line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Answer a paused run's approval (approve by default) and continue it.
    Approve {
        /// The run id (a unique prefix will do).
        id: String,
        /// Reject instead of approving.
        #[arg(long)]
        reject: bool,
        /// A note for the record.
        #[arg(long, default_value = "")]
        note: String,
        /// Which approval, when the run waits for several.
        #[arg(long, value_name = "KEY")]
        step: Option<String>,
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Print a dialect's JSON Schema (the native format's by default), for editor
    /// completion; or its reference text; or the list of dialects.
    Schema {
        /// The dialect.
        #[arg(long, default_value = "native")]
        dialect: String,
        /// Print the dialect's reference text (Markdown) instead of its schema.
        #[arg(long)]
        reference: bool,
        /// List the dialects, one a line with what each is.
        #[arg(long, conflicts_with_all = ["reference"])]
        list: bool,
    },
    /// Serve the web page and the HTTP API (docs/web.md, docs/server.md): start, read,
    /// answer and follow runs.
    Serve {
        /// Where to listen; any address but a loopback one needs a token.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// A file holding the bearer token every route but /healthz demands (default:
        /// $WEFT_TOKEN).
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// New runs that may run at once; more wait as `queued` (default: no limit).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_runs: Option<u32>,
        /// Let models answer approvals through the MCP tools at /mcp; by default only
        /// people do.
        #[arg(long)]
        allow_mcp_approvals: bool,
        /// Open the page in the default browser once the server listens.
        #[arg(long)]
        open: bool,
        /// On a PostgreSQL database: serve the API only (runs go to workers), be a
        /// worker only, or both.
        #[arg(long, value_enum, default_value = "all")]
        role: Role,
        /// Store this flow file as the next version of its flow's name before serving
        /// (repeatable): LangGraph's clients find it as an assistant of that name
        /// (docs/langgraph-api.md).
        #[arg(long = "flow", value_name = "FILE")]
        flows: Vec<PathBuf>,
        /// Let pages from this browser origin call the API (CORS; repeatable; `*` for
        /// any): https://app.example.com. Another machine's origin needs a token.
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        #[command(flatten)]
        working: WorkerArgs,
        #[command(flatten)]
        effects: EffectArgs,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Drive the runs of a PostgreSQL database shared with other workers and servers
    /// (docs/scaling.md), until Ctrl-C.
    Worker {
        #[command(flatten)]
        working: WorkerArgs,
        #[command(flatten)]
        effects: EffectArgs,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Serve the MCP tools (docs/mcp.md) on stdin/stdout, for a model to write, check,
    /// run and fix flows.
    Mcp {
        /// Let models answer approvals (`answer_approval`); by default only people do.
        #[arg(long)]
        allow_mcp_approvals: bool,
        #[command(flatten)]
        effects: EffectArgs,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Serve sandboxed code on stdin/stdout (started by Weft itself, not by people).
    #[command(hide = true, name = "sandbox-worker")]
    SandboxWorker {
        /// Serve Prolog instead of Python.
        #[arg(long)]
        prolog: bool,
    },
    /// Serve a local GGUF model on stdin/stdout (started by Weft itself).
    #[command(hide = true, name = "model-worker")]
    ModelWorker {
        /// The model file.
        path: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum RunsCommand {
    /// The newest runs.
    List {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// As JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// One run, with its journal.
    Show {
        /// The run id (a unique prefix will do).
        id: String,
    },
    /// Continue a paused run, or one whose process died.
    Resume {
        /// The run id.
        id: String,
        /// The answer for the approval the run waits for (JSON, or a bare decision).
        #[arg(long, value_name = "JSON")]
        input: Option<String>,
        /// Resume even though the recorded owner process seems alive.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Run a failed run again from its failing steps, reusing completed ones.
    Retry {
        /// The run id.
        id: String,
        /// Accept that the flow file changed since the run started, and use the new one.
        #[arg(long)]
        allow_changed: bool,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Cancel a running or paused run.
    Cancel {
        /// The run id.
        id: String,
    },
}

impl Command {
    /// Whether the command only reads and prints (it drives no run, so it writes to
    /// no sandbox's or model's pipe).
    pub fn only_prints(&self) -> bool {
        match self {
            Command::Validate { .. }
            | Command::Graph { .. }
            | Command::Convert { .. }
            | Command::Schema { .. }
            | Command::Hooks { .. }
            | Command::Keys { .. }
            | Command::Audit { .. } => true,
            Command::Runs { command, .. } => {
                matches!(command, RunsCommand::List { .. } | RunsCommand::Show { .. })
            }
            Command::Schedules { command, .. } => {
                !matches!(command, SchedulesCommand::TriggerNow { .. })
            }
            _ => false,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum SchedulesCommand {
    /// Schedule a flow: a stored flow's name (NAME or NAME@VERSION), or a flow file,
    /// which is stored as the next version of its flow's name first.
    Add {
        /// The flow: NAME, NAME@VERSION, or a file.
        flow: String,
        /// The cron expression: `0 9 * * MON-FRI` (minute hour day month weekday), or
        /// six fields with seconds first.
        #[arg(long)]
        cron: String,
        /// The IANA time zone the expression is read in.
        #[arg(long, default_value = "UTC")]
        tz: String,
        /// The input of every run, as JSON.
        #[arg(long, value_name = "JSON")]
        input: Option<String>,
        /// What a firing does while the previous run goes on.
        #[arg(long, default_value = "skip", value_parser = ["skip", "queue", "cancel-previous"])]
        overlap: String,
        /// What the schedule starts for firings it missed while no server ran.
        #[arg(long = "catch-up", default_value = "last", value_parser = ["none", "last", "all"])]
        catch_up: String,
        /// Start each firing up to this long after its time (`30s`).
        #[arg(long, value_name = "DURATION")]
        jitter: Option<String>,
        /// The schedule's id (default: the flow's name).
        #[arg(long)]
        id: Option<String>,
    },
    /// Every schedule, with its next fire time.
    List {
        /// As JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// One schedule: its next five fire times and its latest firings with their runs.
    Show {
        /// The schedule's id.
        id: String,
    },
    /// Stop a schedule firing until it is resumed.
    Pause {
        /// The schedule's id.
        id: String,
    },
    /// Fire a paused schedule again, from now on.
    Resume {
        /// The schedule's id.
        id: String,
    },
    /// Delete a schedule and its firings (their runs stay).
    Delete {
        /// The schedule's id.
        id: String,
    },
    /// Start a schedule's flow now, out of schedule, and print its result (on a shared
    /// database, its run id: the workers drive it).
    TriggerNow {
        /// The schedule's id.
        id: String,
        #[command(flatten)]
        effects: EffectArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum HooksCommand {
    /// Create a webhook starting runs of a stored flow (NAME or NAME@VERSION); prints
    /// its secret, once.
    Add {
        /// Its name: deliveries go to /v1/hooks/NAME.
        name: String,
        /// The flow: NAME or NAME@VERSION of a stored flow.
        flow: String,
        /// How deliveries prove they may start runs.
        #[arg(long, default_value = "hmac", value_parser = ["hmac", "bearer"])]
        auth: String,
        /// The secret (default: a new random one).
        #[arg(long)]
        secret: Option<String>,
        /// A dotted field of the JSON body that tells deliveries apart.
        #[arg(long, value_name = "FIELD")]
        dedupe_field: Option<String>,
    },
    /// Every webhook (without secrets).
    List,
    /// Delete a webhook.
    Delete {
        /// Its name.
        name: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Make a key; prints what it is, then its secret alone on the last line (shown
    /// once: the database keeps only its hash).
    Create {
        /// The tenant whose objects it reaches.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// What it may do: flows:read, flows:write, runs:read, runs:write,
        /// approvals:write, schedules:write, hooks:write, audit:read, admin (repeat it).
        #[arg(long = "scope", value_name = "SCOPE", required = true)]
        scopes: Vec<String>,
        /// What to call it (default: its scopes).
        #[arg(long)]
        name: Option<String>,
        /// How long it lasts (`30d`, `12h`); without it, until revoked.
        #[arg(long, value_name = "DURATION")]
        expires: Option<humantime::Duration>,
    },
    /// Every key: id, name, tenant, scopes, made, last used, expiry (never a secret).
    List {
        /// One JSON object a line.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key: every server refuses it within seconds.
    Revoke {
        /// The key's id (`key_...`).
        id: String,
    },
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphFormat {
    Mermaid,
    Dot,
    /// A standalone SVG picture, laid out by Weft itself.
    Svg,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Native,
}
