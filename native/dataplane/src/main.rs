//! `apphost-dataplane`: started by the gateway's Node process with the control channel on fd 3
//! (design §1). `--version` prints the version, protocol and build (the cluster suite runs it in the pod).
//!
//! Every setting comes in the `config` frame, except one: `APPHOST_GATEWAY_DATA_PLANE_THREADS` (from
//! the env Node passes to the child, default 1), because the runtime that reads the channel must exist
//! before any frame is read. 1 is tokio's `current_thread` runtime; N > 1 the multi-thread one with N
//! workers.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use apphost_dataplane::channel::ChannelError;
use apphost_dataplane::message::PROTOCOL_VERSION;
use apphost_dataplane::run::{Fatal, run};

/// The control channel's descriptor: Node spawns the child with `stdio: ['ignore', 'inherit', 'inherit',
/// 'pipe', 'ipc']` (fd 4, Node's IPC channel, is the connection hand-over's: handover.rs).
const CHANNEL_FD: i32 = 3;

/// Exit codes Node's supervisor tells apart (design §4, "When something breaks").
const EXIT_CHANNEL_IO: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_PROTOCOL: u8 = 3;
const EXIT_LISTEN: u8 = 4;

/// The tokio workers (design §6): read here, before the runtime starts, and nowhere else.
const THREADS_ENV: &str = "APPHOST_GATEWAY_DATA_PLANE_THREADS";
/// Upper bound on `APPHOST_GATEWAY_DATA_PLANE_THREADS`.
const MAX_THREADS: usize = 64;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag] if flag == "--version" => {
            println!(
                "apphost-dataplane {} (protocol {PROTOCOL_VERSION}, build {})",
                env!("CARGO_PKG_VERSION"),
                apphost_dataplane::BUILD
            );
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!(
                "usage: apphost-dataplane [--version]   (the gateway starts it with its control channel on fd 3)"
            );
            return ExitCode::from(EXIT_USAGE);
        }
    }
    // When the parent (Node) dies, SIGTERM, handled below as the end of the channel: in-flight calls
    // finish, then exit. Linux ties this to the thread that forked us: Node spawns from its main thread.
    // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number has no memory effects.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
    }
    let threads = match threads() {
        Ok(n) => n,
        Err(why) => {
            eprintln!("apphost-dataplane: {why}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let stream = match open_channel() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("apphost-dataplane: {why}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Node's IPC channel (design §3a), when Node's spawn gave one: absent, nothing is handed over.
    let handover = match handover_channel() {
        Ok(fd) => fd,
        Err(why) => {
            eprintln!("apphost-dataplane: {why}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("apphost-dataplane: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_CHANNEL_IO);
        }
    };
    let result = runtime.block_on(async {
        stream
            .set_nonblocking(true)
            .map_err(|e| Fatal::Channel(e.into()))?;
        let stream = tokio::net::UnixStream::from_std(stream).map_err(|e| Fatal::Channel(e.into()))?;
        let (r, w) = stream.into_split();
        run(r, w, handover).await
    });
    // Calls still running past the drain bound are cut here, with the runtime.
    let code = match result {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Fatal::Channel(ChannelError::Protocol(e))) => {
            eprintln!("apphost-dataplane: control channel: protocol error: {e}");
            EXIT_PROTOCOL
        }
        Err(Fatal::Channel(e)) => {
            eprintln!("apphost-dataplane: control channel: {e}");
            EXIT_CHANNEL_IO
        }
        Err(Fatal::Listen(e)) => {
            eprintln!("apphost-dataplane: cannot listen on the gateway port: {e}");
            EXIT_LISTEN
        }
    };
    std::process::exit(code.into())
}

/// `APPHOST_GATEWAY_DATA_PLANE_THREADS`: 1 (the default) to `MAX_THREADS`.
fn threads() -> Result<usize, String> {
    match std::env::var(THREADS_ENV) {
        Err(_) => Ok(1),
        Ok(v) if v.is_empty() => Ok(1),
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
            _ => Err(format!(
                "{THREADS_ENV}={v:?}: expected a number from 1 to {MAX_THREADS}"
            )),
        },
    }
}

/// `NODE_CHANNEL_FD` (json serialization), checked to be an open socket, as an owned descriptor.
fn handover_channel() -> Result<Option<OwnedFd>, String> {
    use apphost_dataplane::handover::{NODE_CHANNEL_FD_ENV, NODE_CHANNEL_SERIALIZATION_ENV, channel_fd};
    let fd = std::env::var(NODE_CHANNEL_FD_ENV).ok();
    let serialization = std::env::var(NODE_CHANNEL_SERIALIZATION_ENV).ok();
    let Some(fd) = channel_fd(fd.as_deref(), serialization.as_deref())? else {
        return Ok(None);
    };
    match std::fs::metadata(format!("/proc/self/fd/{fd}")) {
        Ok(m) if m.file_type().is_socket() => {}
        _ => return Err(format!("{NODE_CHANNEL_FD_ENV}={fd} is not an open socket")),
    }
    // SAFETY: the descriptor is open (checked above), and nothing else in this process uses or closes it.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Fd 3 as a Unix stream socket, checked first: wrapping a descriptor that is not open would be unsound,
/// and a clear refusal beats a failed write for a person who runs the binary by hand.
fn open_channel() -> Result<UnixStream, String> {
    let path = format!("/proc/self/fd/{CHANNEL_FD}");
    let not_channel = "it runs as the gateway's child, which passes the control channel there";
    match std::fs::metadata(&path) {
        Ok(m) if m.file_type().is_socket() => {}
        Ok(_) => return Err(format!("fd {CHANNEL_FD} is not a socket: {not_channel}")),
        Err(_) => return Err(format!("fd {CHANNEL_FD} is not open: {not_channel}")),
    }
    // SAFETY: fd 3 is open (checked above) and nothing else in this process uses or closes it.
    Ok(unsafe { UnixStream::from_raw_fd(CHANNEL_FD) })
}
