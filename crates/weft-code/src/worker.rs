//! The sandbox worker: a process (the `weft` binary started as `weft sandbox-worker`)
//! that reads requests on stdin and answers on stdout, one JSON line each, until stdin
//! closes. Before each request it lowers its own address-space limit to what it uses
//! now plus the request's memory limit, so a huge allocation fails inside the worker.

use crate::kept_args::KeptArgs;
use crate::lines::{LineBuffer, WORKER_SPIN};
use crate::protocol::{Failure, FailureKind, FileAnswer, FileCall, Request, Response};
use crate::python::Compiled;
use monty_types::{ExcType, ExtFunctionResult, MontyException, OsFunctionCall};
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};

/// `/proc/self/statm`, opened before the worker confines itself (it may open nothing
/// afterwards) and re-read from the start each time.
static STATM: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();

/// The address-space hard limit, read once before the worker confines itself (only the
/// soft limit changes afterwards).
static HARD_LIMIT: std::sync::OnceLock<libc::rlim_t> = std::sync::OnceLock::new();

/// The first bytes of `/proc/self/statm` (one `pread`, no seek: this runs twice a request).
fn read_statm() -> String {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 128];
    match STATM.get() {
        Some(Some(f)) => match f.read_at(&mut buf, 0) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(_) => String::new(),
        },
        _ => String::new(),
    }
}

fn hard_limit() -> libc::rlim_t {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `current` is a valid rlimit to write into.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut current) } != 0 {
        return libc::RLIM_INFINITY;
    }
    current.rlim_max
}

/// Lifts the cap [`limit_memory`] set for the last request (up to the hard limit), so
/// that reading and parsing the next request, whose size no cap was set for, is not
/// held to the last one's: a fan-in's results after a thousand small branch requests
/// could not even be read.
fn lift_memory_limit() {
    set_soft_memory_limit(libc::RLIM_INFINITY);
}

/// Caps the address space at the current size plus `extra` bytes (soft limit only, so
/// the next request may raise it again).
fn limit_memory(extra: u64) {
    let statm = read_statm();
    let pages: u64 = statm
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    set_soft_memory_limit((pages * page).saturating_add(extra));
}

/// Sets the soft address-space limit to `wanted`, or to the hard limit if that is lower.
fn set_soft_memory_limit(wanted: libc::rlim_t) {
    let hard = *HARD_LIMIT.get_or_init(hard_limit);
    let new = libc::rlimit {
        rlim_cur: wanted.min(hard),
        rlim_max: hard,
    };
    // SAFETY: `new` is a valid rlimit; lowering or raising the soft limit up to the hard
    // limit is always permitted.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &new) };
}

/// Keeps the memory a request freed for the next one, up to [`KEPT_FREE_BYTES`], instead
/// of handing it back to the kernel: a request carrying 100,000 items allocates and frees
/// megabytes, and glibc mapped its large blocks afresh and unmapped them on every call, so
/// the kernel zeroed new pages for each (a third of such a worker's time in page faults).
/// Kept memory stays inside the address space the next request's limit is measured from.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes glibc's allocator, under the allocator's own lock.
    unsafe {
        // 32 MiB is the largest mmap threshold glibc accepts on 64-bit targets.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEPT_FREE_BYTES);
    }
}

/// Free memory a worker keeps for its next request at most.
const KEPT_FREE_BYTES: libc::c_int = 64 << 20;

/// The line a worker writes once it is set up and confined.
pub(crate) const READY: &str = r#"{"ready":true}"#;

/// What a worker serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerKind {
    /// Python (monty).
    Python,
    /// Prolog (scryer), whose machine starts before the worker confines itself.
    Prolog,
}

/// The interpreters one worker holds.
struct Interpreters {
    python: Compiled,
    #[cfg(feature = "prolog")]
    prolog: Option<crate::prolog::Prolog>,
    /// Set after a panic inside an interpreter: answer, then exit and be replaced.
    poisoned: bool,
}

/// Room a run gets for its arguments, per byte of the request that carries them: JSON
/// text becomes interpreter objects several times its size (a small integer of four
/// characters is a 28-byte object and an 8-byte slot in its list), so the memory limit
/// bounds what the code allocates, not the data it was given.
const ROOM_PER_REQUEST_BYTE: u64 = 16;

fn answer(
    req: &Request,
    request_bytes: usize,
    it: &mut Interpreters,
    files: &mut dyn FnMut(OsFunctionCall) -> ExtFunctionResult,
) -> Response {
    let for_arguments = (request_bytes as u64).saturating_mul(ROOM_PER_REQUEST_BYTE);
    limit_memory(req.limits.memory_bytes.saturating_add(for_arguments));
    let result = match req.language.as_str() {
        "python" => it.python.run(req, files),
        #[cfg(feature = "prolog")]
        "prolog" if it.prolog.is_some() => {
            let machine = it.prolog.as_mut().expect("checked above");
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| machine.run(req))) {
                Ok(r) => {
                    // A program that failed to load leaves scryer in a state where the
                    // next query panics: answer, then make way for a fresh machine.
                    it.poisoned |= machine.broken();
                    r
                }
                Err(panic) => {
                    it.poisoned = true;
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".into());
                    Err(Failure::new(
                        FailureKind::Crash,
                        format!(
                            "the Prolog engine failed on this code (scryer-prolog: {why}); a builtin probably got an argument of a type it does not expect"
                        ),
                    ))
                }
            }
        }
        other => Err(Failure::new(
            FailureKind::Code,
            format!("this worker does not run `{other}`"),
        )),
    };
    let result = result.and_then(|v| crate::check_output(v, req.limits.output_bytes));
    Response {
        id: req.id,
        result,
        retiring: it.poisoned,
    }
}

/// Moves the protocol off fds 0 and 1 (which then read and write `/dev/null`), so that
/// nothing an interpreter or library reads or prints can touch it.
fn protocol_channel() -> std::io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain descriptor calls on descriptors this process owns; each new
    // descriptor is wrapped in exactly one `File`, which closes it.
    unsafe {
        let input = libc::dup(0);
        let output = libc::dup(1);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if input < 0 || output < 0 || null < 0 || libc::dup2(null, 0) < 0 || libc::dup2(null, 1) < 0
        {
            return Err(std::io::Error::last_os_error());
        }
        libc::close(null);
        Ok((
            std::fs::File::from_raw_fd(input),
            std::fs::File::from_raw_fd(output),
        ))
    }
}

/// Serves requests until its input closes. Returns the process exit code.
///
/// The worker fails closed: if it cannot confine itself it serves nothing, and the
/// engine reports why (the message goes to stderr, which the pool reads).
///
/// The binary must use the system allocator: the memory limit caps the address space at
/// its size plus the limit, and an allocator that reserves an arena up front (mimalloc,
/// jemalloc) would let code allocate inside the reservation past the limit.
pub fn worker_main(kind: WorkerKind) -> i32 {
    let (input, mut stdout) = match protocol_channel() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("weft sandbox worker: cannot set up its channel: {e}");
            return 1;
        }
    };
    STATM.get_or_init(|| std::fs::File::open("/proc/self/statm").ok());
    HARD_LIMIT.get_or_init(hard_limit);
    keep_freed_memory();
    let mut interpreters = Interpreters {
        python: Compiled::default(),
        #[cfg(feature = "prolog")]
        prolog: (kind == WorkerKind::Prolog).then(crate::prolog::Prolog::start),
        poisoned: false,
    };
    #[cfg(not(feature = "prolog"))]
    let _ = kind;
    // Tell the pool set-up is done, so start-up never counts against a block's deadline.
    if writeln!(stdout, "{READY}")
        .and_then(|_| stdout.flush())
        .is_err()
    {
        return 1;
    }
    let input_fd = input.as_raw_fd();
    if let Err(e) = crate::lines::set_nonblocking(input_fd) {
        eprintln!("weft sandbox worker: cannot set up its channel: {e}");
        return 1;
    }
    if let Err(e) = crate::confine::confine() {
        eprintln!("weft sandbox worker: {e}");
        return 1;
    }
    let mut requests = LineBuffer::default();
    let mut kept = KeptArgs::default();
    loop {
        let line = match next_request(&mut requests, input_fd) {
            Ok(Some(line)) => line,
            Ok(None) => return 0,
            Err(_) => return 1,
        };
        let response = match serde_json::from_str::<Request>(&line) {
            Ok(mut req) => match kept.apply(&mut req) {
                Ok(put_back) => answer(
                    &req,
                    line.len() + put_back,
                    &mut interpreters,
                    &mut |call| ask_engine(call, &mut stdout, &mut requests, input_fd),
                ),
                // The engine's record of what this worker keeps is wrong: it retires, and
                // its replacement starts with nothing kept on either side.
                Err(failure) => {
                    interpreters.poisoned = true;
                    Response {
                        id: req.id,
                        result: Err(failure),
                        retiring: true,
                    }
                }
            },
            Err(e) => Response {
                id: 0,
                result: Err(Failure::new(
                    FailureKind::Crash,
                    format!("unreadable request: {e}"),
                )),
                retiring: false,
            },
        };
        // No code runs until the next request's own cap: writing this answer and
        // reading the next request (a fan-in's results can be 100 MB of JSON) must not
        // fail on this one's.
        lift_memory_limit();
        if send_line(&mut stdout, &response).is_err() {
            return 1;
        }
        if interpreters.poisoned {
            return 2;
        }
    }
}

/// Writes `message` to the engine as one JSON line, in one write: `writeln!` on the
/// unbuffered pipe made two system calls (the text, then the newline), each of which
/// the worker's seccomp filter inspects, for every answer.
fn send_line(out: &mut std::fs::File, message: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)
}

/// Has the engine perform a file operation: a line to it, then its answer's line. A
/// broken channel is an exception in the code (the engine is gone or wedged; the answer
/// to the request will not arrive either).
fn ask_engine(
    call: OsFunctionCall,
    stdout: &mut std::fs::File,
    lines: &mut LineBuffer,
    fd: RawFd,
) -> ExtFunctionResult {
    let broken = |why: String| {
        ExtFunctionResult::from(MontyException::new(
            ExcType::OSError,
            Some(format!("the engine did not answer a file operation: {why}")),
        ))
    };
    if let Err(e) = send_line(stdout, &FileCall { file: call }) {
        return broken(e.to_string());
    }
    match next_request(lines, fd) {
        Ok(Some(line)) => match serde_json::from_str::<FileAnswer>(&line) {
            Ok(FileAnswer { result: Ok(v) }) => v.into(),
            Ok(FileAnswer { result: Err(e) }) => e.into(),
            Err(e) => broken(e.to_string()),
        },
        Ok(None) => broken("the channel closed".into()),
        Err(e) => broken(e.to_string()),
    }
}

/// The next request line, or `None` once the engine closed the channel.
fn next_request(requests: &mut LineBuffer, fd: RawFd) -> std::io::Result<Option<String>> {
    loop {
        if let Some(line) = requests.spin_for_line(fd, WORKER_SPIN)? {
            return Ok(line);
        }
        crate::lines::wait_readable(fd)?;
    }
}
