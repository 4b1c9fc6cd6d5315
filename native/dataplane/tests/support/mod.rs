//! The built binary, started as Node's supervisor starts it: the control channel is one end of a Unix
//! stream socketpair on its fd 3 (what `spawn`'s `'pipe'` gives a child).
#![allow(dead_code)] // each test file uses its part

pub mod http;

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_apphost-dataplane");
/// Bound on the child's exit after the test is done with it; a hang fails the test instead of the run.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The binary with `ours`' peer on fd 3.
pub fn spawn() -> (Child, UnixStream) {
    spawn_with_env(&[])
}

/// `spawn`, with `env` added to the child's environment.
pub fn spawn_with_env(env: &[(&str, &str)]) -> (Child, UnixStream) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let fd = theirs.as_raw_fd();
    let mut cmd = Command::new(BIN);
    cmd.envs(env.iter().copied());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: dup2 and fcntl are async-signal-safe; this runs in the forked child before exec. The
    // socketpair's fds are close-on-exec: dup2 makes a copy without the flag, and when the peer already
    // is fd 3 (dup2 then does nothing) the flag is cleared instead, so fd 3 survives exec either way.
    unsafe {
        cmd.pre_exec(move || {
            let r = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if r == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    drop(theirs);
    (child, ours)
}

/// The child's exit and output, within `EXIT_TIMEOUT` (killed and failed past it).
pub fn wait(mut child: Child) -> Output {
    let deadline = Instant::now() + EXIT_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("apphost-dataplane did not exit within {EXIT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}
