//! The sandbox worker: a process (the `weft` binary started as `weft sandbox-worker`)
//! that reads requests on stdin and answers on stdout, one JSON line each, until stdin
//! closes. Before each request it lowers its own address-space limit to what it uses
//! now plus the request's memory limit, so a huge allocation fails inside the worker.

use crate::protocol::{Failure, FailureKind, Request, Response};
use crate::python::Compiled;
use std::io::{BufRead, Write};

/// Caps the address space at the current size plus `extra` bytes (soft limit only, so
/// the next request may raise it again).
fn limit_memory(extra: u64) {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `current` is a valid rlimit to write into.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut current) } != 0 {
        return;
    }
    let wanted = (pages * page).saturating_add(extra);
    let soft = if current.rlim_max == libc::RLIM_INFINITY {
        wanted
    } else {
        wanted.min(current.rlim_max)
    };
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: current.rlim_max,
    };
    // SAFETY: `new` is a valid rlimit; lowering or raising the soft limit up to the hard
    // limit is always permitted.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &new) };
}

fn answer(req: &Request, compiled: &mut Compiled) -> Response {
    let result = if req.language == "python" {
        limit_memory(req.limits.memory_bytes);
        compiled.run(req)
    } else {
        Err(Failure::new(
            FailureKind::Code,
            format!("this worker does not run `{}`", req.language),
        ))
    };
    let result = result.and_then(|v| crate::check_output(v, req.limits.output_bytes));
    Response { id: req.id, result }
}

/// Serves requests until stdin closes. Returns the process exit code.
pub fn worker_main() -> i32 {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let mut compiled = Compiled::default();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return 1 };
        let response = match serde_json::from_str::<Request>(&line) {
            Ok(req) => answer(&req, &mut compiled),
            Err(e) => Response {
                id: 0,
                result: Err(Failure::new(
                    FailureKind::Crash,
                    format!("unreadable request: {e}"),
                )),
            },
        };
        // Raise the limit again so that writing the answer cannot fail on memory.
        limit_memory(1 << 30);
        let Ok(text) = serde_json::to_string(&response) else {
            return 1;
        };
        if writeln!(stdout, "{text}")
            .and_then(|_| stdout.flush())
            .is_err()
        {
            return 1;
        }
    }
    0
}
