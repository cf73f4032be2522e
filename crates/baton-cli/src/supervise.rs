//! The supervisor of `baton ops run`: a small process between baton and the command, so the
//! command cannot outlive baton.
//!
//! `baton ops run` starts `baton __ops-supervise PARENT_PID -- COMMAND...` (this binary, argv
//! read before clap, no store opened). The supervisor asks Linux for a parent-death signal
//! (`PR_SET_PDEATHSIG`: SIGTERM when baton dies, however it dies, SIGKILL included), checks
//! that baton is still its parent (it may have died before the request took effect), then
//! starts the command in a process group of its own. When baton dies, or the supervisor gets
//! SIGTERM, SIGINT or SIGHUP, it kills the whole group (the command and every process it
//! started) with SIGKILL. When the command ends, it kills what the command left behind in its
//! group too, and exits with the command's code (128 + N after signal N).
//!
//! A command that cannot be started is reported on stderr and the supervisor exits with 127
//! (not found) or 126 (not executable), at once, so `ops run` records the failure at once.

use std::ffi::OsString;
use std::process::ExitCode;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

/// The hidden first argument that makes the binary a supervisor.
pub const ARG: &str = "__ops-supervise";

/// Runs the supervisor if the command line asks for it.
pub fn from_args() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != ARG {
        return None;
    }
    let parent = args
        .next()
        .and_then(|p| p.into_string().ok())
        .and_then(|p| p.parse::<i32>().ok());
    let rest: Vec<OsString> = args.collect();
    let command = match rest.split_first() {
        Some((dash, command)) if dash == "--" && !command.is_empty() => command.to_vec(),
        _ => return Some(fail("usage: __ops-supervise PARENT_PID -- COMMAND...", 2)),
    };
    let Some(parent) = parent else {
        return Some(fail("usage: __ops-supervise PARENT_PID -- COMMAND...", 2));
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return Some(fail(&format!("starting the supervisor: {e}"), 1)),
    };
    Some(runtime.block_on(supervise(parent, command)))
}

#[allow(clippy::print_stderr)] // the supervisor's stderr is the command's, read by `ops run`
fn fail(message: &str, code: u8) -> ExitCode {
    eprintln!("baton: {message}");
    ExitCode::from(code)
}

async fn supervise(parent: i32, command: Vec<OsString>) -> ExitCode {
    // Signals first, so a SIGTERM from baton's death is never the default (which would leave
    // the group running).
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return fail("cannot watch signals", 1);
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
        return fail(&format!("cannot ask for a parent-death signal: {e}"), 1);
    }
    if nix::unistd::getppid().as_raw() != parent {
        return fail("baton ended before the command could start", 1);
    }
    let mut child = match tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            let code = match e.kind() {
                std::io::ErrorKind::PermissionDenied => 126,
                _ => 127,
            };
            return fail(
                &format!("cannot start {:?}: {e}", command[0].to_string_lossy()),
                code,
            );
        }
    };
    let Some(group) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw)
    else {
        return fail("the command has no process id", 1);
    };
    let kill_group = || {
        // ESRCH: nothing of the group is left, which is the point.
        let _ = killpg(group, Signal::SIGKILL);
    };
    let status = tokio::select! {
        status = child.wait() => status,
        _ = term.recv() => {
            kill_group();
            let _ = child.wait().await;
            return ExitCode::from(128 + 15);
        }
        _ = int.recv() => {
            kill_group();
            let _ = child.wait().await;
            return ExitCode::from(128 + 2);
        }
        _ = hup.recv() => {
            kill_group();
            let _ = child.wait().await;
            return ExitCode::from(128 + 1);
        }
    };
    // What the command started and left running would outlive the key's record.
    kill_group();
    match status {
        Ok(status) => ExitCode::from(exit_code(&status)),
        Err(e) => fail(&format!("waiting for the command: {e}"), 1),
    }
}

/// A process's exit status as a shell reports it: its code, or 128 + the signal that ended it.
pub fn exit_code(status: &std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}
