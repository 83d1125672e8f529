//! The `weft` command-line tool: run, validate, draw and convert flows, and manage runs.
//!
//! Its interface is a contract scripts rely on. Exit codes: 0 completed, 1 the run failed
//! (or was cancelled), 2 invalid flow or usage, 3 paused waiting for input.

mod audit;
mod cli;
mod commands;
mod database;
mod engines;
mod event_file;
mod keys;
#[cfg(feature = "local")]
mod local;
mod progress;
mod remote;
mod remote_runs;
mod run_settings;
mod serving;
mod settings;
mod triggers;

use clap::Parser;
use std::process::ExitCode;

/// Exit codes scripts can rely on.
pub mod exit {
    /// The run completed (or the command succeeded).
    pub const OK: u8 = 0;
    /// The run failed or was cancelled.
    pub const FAILED: u8 = 1;
    /// The flow or the command line is invalid, or the database is unusable.
    pub const INVALID: u8 = 2;
    /// The run is paused, waiting for an approval.
    pub const PAUSED: u8 = 3;
    /// Weft itself failed (a bug): the code a panicking Rust program exits with.
    pub const PANICKED: u8 = 101;
}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    if let cli::Command::SandboxWorker { prolog } = args.command {
        // No async runtime and nothing else: the worker only runs sandboxed code.
        let kind = if prolog {
            weft_code::WorkerKind::Prolog
        } else {
            weft_code::WorkerKind::Python
        };
        return ExitCode::from(u8::try_from(weft_code::worker_main(kind)).unwrap_or(1));
    }
    if let cli::Command::ModelWorker { path } = &args.command {
        #[cfg(feature = "local")]
        return ExitCode::from(u8::try_from(weft_local::worker_main(path)).unwrap_or(1));
        #[cfg(not(feature = "local"))]
        {
            eprintln!("error: this weft was built without the `local` feature ({path})");
            return ExitCode::from(exit::INVALID);
        }
    }
    if args.command.only_prints() {
        // `weft runs list | head`: a reader that stops early ends the command quietly,
        // as it would any Unix tool, instead of a failed print panicking. Commands that
        // write to sandboxes' and models' pipes keep ignoring the signal.
        // SAFETY: before any thread starts; SIG_DFL is a valid disposition for SIGPIPE.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::INVALID);
        }
    };
    let mut settings = settings::Settings::from_process();
    let service = matches!(
        args.command,
        cli::Command::Serve { .. } | cli::Command::Worker { .. } | cli::Command::Mcp { .. }
    );
    match weft_net::NetPolicy::new(&args.allow_net, &args.deny_net, service) {
        Ok(net) => settings.net = std::sync::Arc::new(net),
        Err(e) => {
            eprintln!(
                "error: {e}\n  hint: name a host (api.example.com), a domain (*.example.com), an address (127.0.0.1) or a range (10.0.0.0/8)"
            );
            return ExitCode::from(exit::INVALID);
        }
    }
    if let Err(e) = settings.start_telemetry(args.otel.as_deref()) {
        eprintln!(
            "error: {e}\n  hint: --otel and OTEL_EXPORTER_OTLP_ENDPOINT take a URL such as http://127.0.0.1:4318"
        );
        return ExitCode::from(exit::INVALID);
    }
    // The command runs on a runtime thread rather than on this one: a task woken by I/O
    // (a sandbox worker's answer, a model's reply) then runs on the thread that saw the
    // I/O, instead of that thread waking this one as well.
    let settings = std::sync::Arc::new(settings);
    let command = {
        let settings = settings.clone();
        async move { commands::dispatch(args, &settings).await }
    };
    let code = match runtime.block_on(runtime.spawn(command)) {
        Ok(code) => code,
        // A panic was printed by the panic hook; exit as a panicking program does.
        Err(_) => exit::PANICKED,
    };
    // The last handle of the trace export: sends what is queued (two seconds at most).
    drop(settings);
    ExitCode::from(code)
}
