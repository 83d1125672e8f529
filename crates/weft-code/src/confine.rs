//! OS-level confinement of a sandbox worker, applied once it has started: a seccomp
//! filter makes every syscall that opens a file, starts a process, opens a socket,
//! changes the file system or escapes into another namespace fail with `EPERM`. The
//! interpreters already refuse such calls; this is the layer beneath them, so a bug in
//! an interpreter still cannot reach the host. What a worker needs after start-up it
//! opened before (its protocol descriptors, `/proc/self/statm`).

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Syscalls refused whatever their arguments.
const DENIED: &[libc::c_long] = &[
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_open_by_handle_at,
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_unlinkat,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_mkdirat,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_fchmodat,
    libc::SYS_fchownat,
    libc::SYS_truncate,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_chroot,
    libc::SYS_pivot_root,
    libc::SYS_io_uring_setup,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_kexec_load,
    libc::SYS_reboot,
];

/// The older spellings x86-64 still has (other architectures only have the `*at` forms).
#[cfg(target_arch = "x86_64")]
const DENIED_LEGACY: &[libc::c_long] = &[
    libc::SYS_open,
    libc::SYS_creat,
    libc::SYS_fork,
    libc::SYS_vfork,
    libc::SYS_unlink,
    libc::SYS_rename,
    libc::SYS_mkdir,
    libc::SYS_rmdir,
    libc::SYS_link,
    libc::SYS_symlink,
    libc::SYS_chmod,
    libc::SYS_chown,
    libc::SYS_lchown,
];
#[cfg(not(target_arch = "x86_64"))]
const DENIED_LEGACY: &[libc::c_long] = &[];

fn build_error(e: &dyn std::fmt::Display) -> String {
    format!("cannot build the sandbox filter: {e}")
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| build_error(&e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| build_error(&e))?;
    BpfProgram::try_from(filter).map_err(|e| build_error(&e))
}

fn main_filter() -> Result<BpfProgram, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .chain(DENIED_LEGACY)
        .map(|s| (*s, Vec::new()))
        .collect();
    // A new process through clone (threads pass CLONE_THREAD; processes do not).
    let process = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
        0,
    )
    .and_then(|c| SeccompRule::new(vec![c]))
    .map_err(|e| build_error(&e))?;
    rules.insert(libc::SYS_clone, vec![process]);
    compile(rules, libc::EPERM)
}

/// `clone3` passes its flags in memory a filter cannot read, so it is refused as
/// unsupported (`ENOSYS`): the C library then falls back to `clone`, whose flags the
/// main filter checks.
fn clone3_filter() -> Result<BpfProgram, String> {
    compile([(libc::SYS_clone3, Vec::new())].into(), libc::ENOSYS)
}

/// Confines the calling thread and every process or thread it starts from now on.
pub fn confine() -> Result<(), String> {
    for program in [main_filter()?, clone3_filter()?] {
        seccompiler::apply_filter(&program)
            .map_err(|e| format!("cannot apply the sandbox filter: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek};

    #[test]
    fn a_confined_thread_cannot_start_processes_open_sockets_or_files() {
        let target = std::env::temp_dir().join(format!("weft-confine-{}", std::process::id()));
        let probe = target.clone();
        // A descriptor opened before confinement stays usable.
        let mut opened = std::fs::File::open("/proc/self/statm").unwrap();
        // seccomp applies to the thread that installs it (and its children), so the
        // rest of the test process is unaffected.
        let results = std::thread::spawn(move || {
            confine().unwrap();
            let exec = std::process::Command::new("/bin/true").status().is_err();
            let socket = std::net::TcpListener::bind("127.0.0.1:0").is_err();
            let write = std::fs::File::create(&probe).is_err();
            let read = std::fs::File::open("/etc/hostname").is_err();
            let mut text = String::new();
            let kept = opened.rewind().is_ok()
                && opened.read_to_string(&mut text).is_ok()
                && !text.is_empty();
            let thread = std::thread::spawn(|| 7).join().ok();
            (exec, socket, write, read, kept, thread)
        })
        .join()
        .unwrap();
        assert_eq!(results, (true, true, true, true, true, Some(7)));
        assert!(!target.exists());
    }
}
