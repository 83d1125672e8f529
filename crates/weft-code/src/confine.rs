//! OS-level confinement of a sandbox worker, applied once it has started: a seccomp
//! filter makes every syscall that starts a process, opens a socket, writes to the file
//! system or escapes into another namespace fail with `EPERM`. The interpreters already
//! refuse such calls; this is the layer beneath them, so a bug in an interpreter still
//! cannot reach the host. Reading files stays possible (the worker reads its own
//! `/proc/self/statm`), and the worker's environment is empty.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Syscalls refused whatever their arguments.
const DENIED: &[libc::c_long] = &[
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_fork,
    libc::SYS_vfork,
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
    libc::SYS_creat,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_rmdir,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_chmod,
    libc::SYS_fchmodat,
    libc::SYS_chown,
    libc::SYS_fchownat,
    libc::SYS_lchown,
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

fn masked(arg: u8, bit: u64) -> Result<SeccompRule, seccompiler::BackendError> {
    SeccompRule::new(vec![SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(bit),
        bit,
    )?])
}

fn filter() -> Result<BpfProgram, String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot build the sandbox filter: {e}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|s| (*s, Vec::new())).collect();
    // Opening for writing, creating or truncating (any one of the flag bits).
    let write_bits = [libc::O_WRONLY, libc::O_RDWR, libc::O_CREAT, libc::O_TRUNC].map(|b| b as u64);
    let open_rules = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        write_bits
            .iter()
            .map(|b| masked(arg, *b).map_err(|e| err(&e)))
            .collect()
    };
    rules.insert(libc::SYS_open, open_rules(1)?);
    rules.insert(libc::SYS_openat, open_rules(2)?);
    // A new process through clone (threads pass CLONE_THREAD; processes do not).
    rules.insert(
        libc::SYS_clone,
        vec![
            SeccompRule::new(vec![
                SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
                    0,
                )
                .map_err(|e| err(&e))?,
            ])
            .map_err(|e| err(&e))?,
        ],
    );
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| err(&e))?;
    let f = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    BpfProgram::try_from(f).map_err(|e| err(&e))
}

/// `clone3` passes its flags in memory a filter cannot read, so it is refused as
/// unsupported (`ENOSYS`): the C library then falls back to `clone`, whose flags the
/// main filter checks.
fn clone3_filter() -> Result<BpfProgram, String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot build the sandbox filter: {e}");
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [(libc::SYS_clone3, Vec::new())].into();
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| err(&e))?;
    let f = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    BpfProgram::try_from(f).map_err(|e| err(&e))
}

/// Confines the calling thread and every process or thread it starts from now on.
pub fn confine() -> Result<(), String> {
    for program in [filter()?, clone3_filter()?] {
        seccompiler::apply_filter(&program)
            .map_err(|e| format!("cannot apply the sandbox filter: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_confined_thread_cannot_start_processes_open_sockets_or_write_files() {
        let dir = std::env::temp_dir();
        let target = dir.join(format!("weft-confine-{}", std::process::id()));
        let probe = target.clone();
        // seccomp applies to the thread that installs it (and its children), so the
        // rest of the test process is unaffected.
        let results = std::thread::spawn(move || {
            confine().unwrap();
            let exec = std::process::Command::new("/bin/true").status().is_err();
            let socket = std::net::TcpListener::bind("127.0.0.1:0").is_err();
            let write = std::fs::File::create(&probe).is_err();
            let mut statm = String::new();
            let read = std::fs::File::open("/proc/self/statm")
                .and_then(|mut f| f.read_to_string(&mut statm))
                .is_ok();
            let thread = std::thread::spawn(|| 7).join().ok();
            (exec, socket, write, read, thread)
        })
        .join()
        .unwrap();
        assert_eq!(results, (true, true, true, true, Some(7)));
        assert!(!target.exists());
    }
}
