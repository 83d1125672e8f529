//! Whether the process that drives a running run is still there: its lease, where the
//! store keeps leases, and, for an owner on this machine, whether its process runs.

use crate::events::now_ms;
use weft_core::ports::RunRecord;

/// Whether the process that drives running run `rec` is alive: its lease has not
/// lapsed, where the store keeps leases (and, when its owner is on this machine, that
/// process still runs), else its owner on this machine runs.
pub(crate) fn driver_alive(rec: &RunRecord) -> bool {
    let local = rec.owner.as_deref().and_then(owner_alive);
    match rec.lease_until_ms {
        Some(until) => until > now_ms() as i64 && local != Some(false),
        None => local.unwrap_or(false),
    }
}

/// Whether owner `pid:N@host` (or `pid:N`, as older versions wrote) runs: `None` when
/// it is on another machine, which this one cannot tell.
fn owner_alive(owner: &str) -> Option<bool> {
    let rest = owner.strip_prefix("pid:")?;
    let (pid, host) = match rest.split_once('@') {
        Some((pid, host)) => (pid, Some(host)),
        None => (rest, None),
    };
    if host.is_some_and(|h| h != crate::host_name()) {
        return None;
    }
    let pid: u32 = pid.parse().ok()?;
    Some(pid != std::process::id() && process_running(pid))
}

/// Whether process `pid` exists and has not exited. A process killed a moment ago
/// stays in `/proc` as a zombie until its parent reaps it (a server restarted right
/// after `kill -9` saw its dead predecessor as alive and left its runs alone).
fn process_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`: the command name may itself hold spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

#[cfg(test)]
mod owner_tests {
    use super::{owner_alive, process_running};

    #[test]
    fn an_owner_on_another_machine_cannot_be_told_dead() {
        let host = crate::host_name();
        // PID 1 runs on every Linux machine; this process drives nothing for itself.
        assert_eq!(owner_alive(&format!("pid:1@{host}")), Some(true));
        assert_eq!(owner_alive("pid:1"), Some(true));
        let me = std::process::id();
        assert_eq!(owner_alive(&format!("pid:{me}@{host}")), Some(false));
        assert_eq!(owner_alive("pid:1@another-machine"), None);
        assert_eq!(owner_alive("someone"), None);
    }

    #[test]
    fn an_exited_but_unreaped_process_is_not_running() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        // Not reaped yet: a zombie, still listed in /proc.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
            .is_ok_and(|s| !s.contains(") Z"))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never exited"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(std::path::Path::new(&format!("/proc/{}", child.id())).exists());
        assert!(!process_running(child.id()));
        child.wait().unwrap();
        assert!(!process_running(child.id()));
        assert!(process_running(std::process::id()));
    }
}
