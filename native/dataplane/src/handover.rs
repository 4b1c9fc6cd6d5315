//! Connection hand-over (design §3a): a caller's connection whose first request is Node's goes to Node
//! whole, its descriptor sent over Node's `child_process` IPC channel the way Node sends a `net.Socket`
//! to a child (lib/internal/child_process.js, json serialization): one line
//! `{"cmd":"NODE_HANDLE","type":"net.Socket","msg":…}\n` with the fd attached (SCM_RIGHTS) in the same
//! `sendmsg`. Node answers each with `{"cmd":"NODE_HANDLE_ACK"}\n`, or `NODE_HANDLE_NACK` when no fd
//! came. That is Node's internal format, not a protocol it offers a non-Node child; the native end-to-end
//! test (test/integration/gateway/handover.test.ts) fails if it changes.
//!
//! Never a wait: with `HANDOVER_WINDOW` hand-overs un-ACKed, the channel closed, or `sendmsg` refusing,
//! `hand` gives the connection back and hyper serves it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::net::UnixStream;

/// Node's child_process sets it to the IPC channel's descriptor (`stdio`'s `'ipc'` entry).
pub const NODE_CHANNEL_FD_ENV: &str = "NODE_CHANNEL_FD";
/// Node's child_process sets it to the channel's serialization; only `json` is spoken here.
pub const NODE_CHANNEL_SERIALIZATION_ENV: &str = "NODE_CHANNEL_SERIALIZATION_MODE";

/// Hand-overs sent and not yet ACKed (or NACKed) at most. 64 lines of `HANDOVER_LINE`'s length (~80
/// bytes) are far under a Unix socket's send buffer, so a line is never split by a short write; past the
/// window the connection is hyper's.
pub const HANDOVER_WINDOW: usize = 64;

/// The line sent with each descriptor: Node's `{cmd: 'NODE_HANDLE', type: 'net.Socket', msg}`; `msg` is
/// what Node's `message` event carries beside the socket.
pub const HANDOVER_LINE: &[u8] =
    b"{\"cmd\":\"NODE_HANDLE\",\"type\":\"net.Socket\",\"msg\":{\"apphost\":\"connection\"}}\n";
const ACK: &str = "{\"cmd\":\"NODE_HANDLE_ACK\"}";
const NACK: &str = "{\"cmd\":\"NODE_HANDLE_NACK\"}";

/// How many of a new connection's first bytes are peeked for its request line.
pub const PEEK_BYTES: usize = 4096;

/// Bound on finishing a line `sendmsg` wrote in part (never seen: see `HANDOVER_WINDOW`); past it the
/// channel is given up (Node keeps the fd of a line's first part until the line completes; a line never
/// completed would hold it, and every later line would be read as its rest).
pub const HANDOVER_WRITE_BOUND_MS: i32 = 1_000;

/// The channel to Node, shared by the connections' tasks.
pub struct Handover {
    stream: UnixStream,
    open: AtomicBool,
    in_flight: AtomicUsize,
    sent: AtomicU64,
    nacks: AtomicU64,
    /// One `sendmsg` at a time (several tokio workers).
    write: std::sync::Mutex<()>,
}

impl Handover {
    /// The channel on `fd` (a Unix stream socket), and the task that reads Node's ACKs and NACKs. Must be
    /// called inside the runtime.
    pub fn start(fd: OwnedFd) -> io::Result<Arc<Handover>> {
        let std = std::os::unix::net::UnixStream::from(fd);
        std.set_nonblocking(true)?;
        let h = Arc::new(Handover {
            stream: UnixStream::from_std(std)?,
            open: AtomicBool::new(true),
            in_flight: AtomicUsize::new(0),
            sent: AtomicU64::new(0),
            nacks: AtomicU64::new(0),
            write: std::sync::Mutex::new(()),
        });
        tokio::spawn(read_answers(h.clone()));
        Ok(h)
    }

    /// Sends `conn` to Node, or gives it back (window full, channel closed, `sendmsg` refused). Once sent,
    /// the data plane's descriptor is closed: the connection is Node's.
    pub fn hand(&self, conn: std::net::TcpStream) -> Result<(), std::net::TcpStream> {
        if !self.open.load(Ordering::Relaxed) {
            return Err(conn);
        }
        if self.in_flight.fetch_add(1, Ordering::AcqRel) >= HANDOVER_WINDOW {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(conn);
        }
        let _one = self.write.lock().expect("handover write");
        match send_with_fd(self.stream.as_raw_fd(), HANDOVER_LINE, conn.as_raw_fd()) {
            Ok(n) if n == HANDOVER_LINE.len() => {
                self.sent.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Ok(n) => {
                // The fd went with the first bytes: the connection is Node's whatever happens next.
                self.sent.fetch_add(1, Ordering::Relaxed);
                if finish(self.stream.as_raw_fd(), &HANDOVER_LINE[n..]).is_err() {
                    eprintln!(
                        "apphost-dataplane: connection hand-over: a line split and not finished; hand-over stopped"
                    );
                    self.open.store(false, Ordering::Relaxed);
                }
                Ok(())
            }
            Err(e) => {
                self.in_flight.fetch_sub(1, Ordering::AcqRel);
                if e.kind() != io::ErrorKind::WouldBlock {
                    eprintln!("apphost-dataplane: connection hand-over: {e}; hand-over stopped");
                    self.open.store(false, Ordering::Relaxed);
                }
                Err(conn)
            }
        }
    }

    /// An ACK or NACK: one place free in the window (never below 0, whatever Node sends).
    fn answered(&self) {
        let _ = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Connections sent to Node.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Hand-overs Node answered with NACK (its side got no descriptor: the connection is lost).
    pub fn nacks(&self) -> u64 {
        self.nacks.load(Ordering::Relaxed)
    }

    /// Hand-overs not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Whether connections are still handed over (the channel has not ended or failed).
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }
}

/// Reads Node's lines until the channel ends: each ACK or NACK frees a place in the window. Other
/// lines (none are sent today) are skipped.
async fn read_answers(h: Arc<Handover>) {
    let mut buf = vec![0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    loop {
        if h.stream.readable().await.is_err() {
            break;
        }
        let n = match h.stream.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => break,
        };
        for &b in &buf[..n] {
            if b != b'\n' {
                // A line longer than any Node sends here is not kept whole (it is not an answer).
                if line.len() < 256 {
                    line.push(b);
                }
                continue;
            }
            match std::str::from_utf8(&line).map(str::trim) {
                Ok(ACK) => h.answered(),
                Ok(NACK) => {
                    h.answered();
                    let n = h.nacks.fetch_add(1, Ordering::Relaxed) + 1;
                    eprintln!(
                        "apphost-dataplane: connection hand-over: Node got no descriptor (NACK {n}); that caller's connection is lost"
                    );
                }
                _ => {}
            }
            line.clear();
        }
    }
    h.open.store(false, Ordering::Relaxed);
}

/// One `sendmsg` of `data` with `fd` attached (SCM_RIGHTS), not blocking, no SIGPIPE: the bytes written.
pub fn send_with_fd(sock: RawFd, data: &[u8], fd: RawFd) -> io::Result<usize> {
    // SAFETY: the msghdr points at `data` and at a control buffer sized by CMSG_SPACE for one fd, both
    // alive for the call; CMSG_FIRSTHDR of that msghdr is non-null and inside the buffer.
    unsafe {
        let space = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd);
        loop {
            let n = libc::sendmsg(sock, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL);
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Writes the rest of a split line, waiting for room at most `HANDOVER_WRITE_BOUND_MS` each time.
fn finish(sock: RawFd, mut rest: &[u8]) -> io::Result<()> {
    while !rest.is_empty() {
        let mut pfd = libc::pollfd {
            fd: sock,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, HANDOVER_WRITE_BOUND_MS) };
        if ready <= 0 {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no room on the channel"));
        }
        // SAFETY: `rest` is valid for its length.
        let n = unsafe {
            libc::send(
                sock,
                rest.as_ptr() as *const libc::c_void,
                rest.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                continue;
            }
            return Err(e);
        }
        rest = &rest[n as usize..];
    }
    Ok(())
}

/// Request headers a forwarding proxy adds (RFC 9110 §7.6.3 `Via`, RFC 7239 `Forwarded`, and the de facto
/// `X-Forwarded-For` ingress-nginx and Envoy set): a first request carrying one came through a proxy.
const FORWARDED_BY: [&[u8]; 3] = [b"x-forwarded-for", b"forwarded", b"via"];

/// Whether `head` (a connection's first bytes, peeked) holds a whole request head whose target's query
/// has the gateway's own `async` or `webhookEndpoint` parameter (`gateway_params`: the fast path's rule)
/// and which no proxy forwarded (`FORWARDED_BY`). A proxy pools its upstream connections and sends many
/// callers' calls on each (design §3a.5): such a connection stays the data plane's, whose fast path
/// decides per call. A head not complete within `head` is not Node's here either (hyper serves it).
pub fn first_request_is_nodes(head: &[u8]) -> bool {
    let Some(end) = head_end(head) else {
        return false;
    };
    let mut lines = head[..end]
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let Some(line) = lines.next() else {
        return false;
    };
    let mut parts = line.split(|&b| b == b' ');
    let (Some(_method), Some(target)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Some(q) = target.iter().position(|&b| b == b'?') else {
        return false;
    };
    let Ok(query) = std::str::from_utf8(&target[q + 1..]) else {
        return false;
    };
    let (is_async, webhook) = crate::query::gateway_params(query);
    if !(is_async || webhook) {
        return false;
    }
    !lines.any(|h| {
        let name = h.split(|&b| b == b':').next().unwrap_or(h).trim_ascii();
        FORWARDED_BY.iter().any(|f| name.eq_ignore_ascii_case(f))
    })
}

/// Where a request head ends in `bytes` (the index of the blank line's start), if it ends there.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let mut start = 0;
    while let Some(n) = bytes[start..].iter().position(|&b| b == b'\n') {
        let line = &bytes[start..start + n];
        if start > 0 && (line.is_empty() || line == b"\r") {
            return Some(start);
        }
        start += n + 1;
    }
    None
}

/// The IPC channel Node's `spawn` gave this process (`NODE_CHANNEL_FD`, json serialization), from the
/// values of the two variables. None when absent (an older gateway, or a test's spawn); an error for a
/// value that is not a descriptor number or a serialization other than json.
pub fn channel_fd(fd: Option<&str>, serialization: Option<&str>) -> Result<Option<RawFd>, String> {
    let Some(fd) = fd else { return Ok(None) };
    if let Some(s) = serialization
        && s != "json"
    {
        return Err(format!(
            "{NODE_CHANNEL_SERIALIZATION_ENV}={s:?}: only json is spoken on the hand-over channel"
        ));
    }
    match fd.parse::<RawFd>() {
        Ok(n) if n > 2 => Ok(Some(n)),
        _ => Err(format!(
            "{NODE_CHANNEL_FD_ENV}={fd:?}: expected a descriptor number over 2"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_nodes_when_its_first_request_head_has_the_gateways_own_parameters() {
        assert!(first_request_is_nodes(
            b"POST /p/a/run?async=true HTTP/1.1\r\nHost: x\r\n\r\n"
        ));
        assert!(first_request_is_nodes(
            b"POST /p/a/run?x=1&webhookEndpoint=http%3A%2F%2Fh HTTP/1.1\r\n\r\n{\"a\":1}"
        ));
        assert!(first_request_is_nodes(
            b"POST /p/a/run?%61sync HTTP/1.1\nHost: x\n\n"
        ));
        // A sync call, a head not complete in the peeked bytes, a parameter only in a header: hyper's.
        assert!(!first_request_is_nodes(b"POST /p/a/run?x=async HTTP/1.1\r\n\r\n"));
        assert!(!first_request_is_nodes(
            b"POST /p/a/run HTTP/1.1\r\nX: ?async=true\r\n\r\n"
        ));
        assert!(!first_request_is_nodes(b"POST /p/a/run?async=true HTTP/1."));
        assert!(!first_request_is_nodes(
            b"POST /p/a/run?async=true HTTP/1.1\r\nHost: x\r\n"
        ));
        assert!(!first_request_is_nodes(b""));
    }

    #[test]
    fn a_connection_a_proxy_forwards_stays_the_data_planes() {
        for h in [
            "X-Forwarded-For: 10.0.0.1",
            "x-forwarded-for:10.0.0.1",
            "Forwarded: for=10.0.0.1",
            "VIA: 1.1 nginx",
        ] {
            let head = format!("POST /p/a/run?async=true HTTP/1.1\r\nHost: x\r\n{h}\r\n\r\n");
            assert!(!first_request_is_nodes(head.as_bytes()), "{h}");
        }
        // Names that only start like one are not a proxy's.
        assert!(first_request_is_nodes(
            b"POST /p/a/run?async=true HTTP/1.1\r\nX-Forwarded-Proto: https\r\nViaduct: 1\r\n\r\n"
        ));
    }

    #[test]
    fn the_line_is_nodes_handle_message() {
        let v: serde_json::Value = serde_json::from_slice(HANDOVER_LINE).unwrap();
        assert_eq!(v["cmd"], "NODE_HANDLE");
        assert_eq!(v["type"], "net.Socket");
        assert!(
            v["msg"].is_object() && v["msg"].get("cmd").is_none(),
            "a user message: Node emits it"
        );
        assert_eq!(HANDOVER_LINE.last(), Some(&b'\n'));
        assert_eq!(HANDOVER_LINE.iter().filter(|&&b| b == b'\n').count(), 1);
    }

    #[test]
    fn the_channel_is_taken_only_as_node_names_it() {
        assert_eq!(channel_fd(None, None), Ok(None));
        assert_eq!(channel_fd(Some("4"), Some("json")), Ok(Some(4)));
        assert_eq!(channel_fd(Some("4"), None), Ok(Some(4)));
        assert!(channel_fd(Some("4"), Some("advanced")).is_err());
        assert!(channel_fd(Some("x"), None).is_err());
        assert!(channel_fd(Some("1"), None).is_err());
    }
}
