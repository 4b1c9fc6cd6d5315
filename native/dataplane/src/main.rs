//! `apphost-dataplane`: started by the gateway's Node process with the control channel on fd 3
//! (design §1). `--version` prints the version, protocol and build (the cluster suite runs it in the pod).

use std::os::fd::FromRawFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use apphost_dataplane::channel::{self, ChannelError};
use apphost_dataplane::message::PROTOCOL_VERSION;

/// The control channel's descriptor: Node spawns the child with `stdio: ['ignore', 'inherit', 'inherit', 'pipe']`.
const CHANNEL_FD: i32 = 3;

/// Exit codes Node's supervisor tells apart (design §4, "When something breaks").
const EXIT_CHANNEL_IO: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_PROTOCOL: u8 = 3;

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
    let stream = match open_channel() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("apphost-dataplane: {why}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match channel::serve(stream) {
        // Node closed the channel: it is gone, and so is the reason to serve (nothing is in flight in step 1).
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("apphost-dataplane: control channel: {e}");
            ExitCode::from(match e {
                ChannelError::Protocol(_) => EXIT_PROTOCOL,
                ChannelError::Io(_) => EXIT_CHANNEL_IO,
            })
        }
    }
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
