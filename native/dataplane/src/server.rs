//! The gateway port (design §1: the data plane owns `APPHOST_GATEWAY_PORT`): hyper's HTTP/1 server on
//! tokio, every call handed to Node in step 4 (handoff.rs), and the two drain phases of design §4:
//!
//! - `handover`: the listener is closed; calls still arriving on kept-alive connections are served and
//!   answered with `Connection: close`, so a proxy retires each connection (Node times this phase:
//!   it sends `drain` after `APPHOST_GATEWAY_CONNECTION_HANDOVER_MS`);
//! - `drain`: idle connections are closed, a call that still arrives is answered 503 `shutting_down`
//!   (the gateway's bytes), and calls in flight (streams included) run to their end, up to the bound
//!   the caller of `drain` gives (`drainTimeoutMs`).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::body::Incoming;
use hyper::header::{CONNECTION, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::core::Core;
use crate::errors::shutting_down;
use crate::fastpath::{FastPath, Settings};
use crate::handoff::{AnswerBody, Handoff, error_response};
use crate::handover::{Handover, PEEK_BYTES, first_request_is_nodes};
use crate::upstream::Upstream;

/// Pause after a failed `accept` (out of descriptors, say) before the next, so the loop does not spin.
pub const ACCEPT_ERROR_BACKOFF_MS: u64 = 50;

/// How long a caller's connection may wait for its next request's head (idle keep-alive included), and
/// so the bound on reading a head: the gateway's `keepAliveTimeout` (src/gateway/serve.ts, 65 s), longer
/// than a load balancer's usual idle timeout (60 s), so a proxy never reuses a connection the data plane
/// has closed. hyper's own default (30 s) closed them under such a proxy.
pub const KEEP_ALIVE_IDLE_MS: u64 = 65_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Serving = 0,
    Handover = 1,
    Draining = 2,
}

struct Shared {
    handoff: Handoff,
    /// Node's IPC channel, when Node gave one: connections whose first request is Node's go there whole
    /// (design §3a).
    handover: Option<Arc<Handover>>,
    fast: FastPath,
    phase: AtomicU8,
    retry_after: u64,
}

impl Shared {
    fn phase(&self) -> u8 {
        self.phase.load(Ordering::Relaxed)
    }
}

/// The listening server.
pub struct Server {
    shared: Arc<Shared>,
    phase: watch::Sender<Phase>,
    accept: JoinHandle<()>,
    port: u16,
}

impl Server {
    /// Binds `config.listen` and starts serving from `core` (the state the channel loop applies); with
    /// `handover`, a connection whose first request is Node's is handed to Node (design §3a).
    pub async fn start(
        config: &Config,
        core: Arc<Mutex<Core>>,
        handover: Option<Arc<Handover>>,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind((config.listen.host.as_str(), config.listen.port)).await?;
        let port = listener.local_addr()?.port();
        let g = &config.gateway;
        // The pools' timers (queue deadlines, blocked replicas' ends), for as long as the process runs.
        tokio::spawn(crate::core::drive(core.clone()));
        let shared = Arc::new(Shared {
            handoff: Handoff::new(
                &config.handoff_socket,
                config.handoff_head_ms(),
                g.stream_idle_timeout_ms,
                g.retry_after_seconds,
            ),
            handover,
            fast: FastPath {
                core,
                upstream: Upstream::new(),
                settings: Settings {
                    max_body_bytes: g.max_body_bytes,
                    sync_timeout: Duration::from_millis(g.sync_timeout_ms),
                    stream_idle: (g.stream_idle_timeout_ms > 0)
                        .then(|| Duration::from_millis(g.stream_idle_timeout_ms)),
                    body_read_timeout: Duration::from_millis(crate::fastpath::BODY_READ_TIMEOUT_MS),
                },
            },
            phase: AtomicU8::new(Phase::Serving as u8),
            retry_after: g.retry_after_seconds,
        });
        let (phase, phase_rx) = watch::channel(Phase::Serving);
        let accept = tokio::spawn(accept_loop(listener, shared.clone(), phase_rx));
        Ok(Server {
            shared,
            phase,
            accept,
            port,
        })
    }

    /// The port bound (the configured one, or the one the system chose for port 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `drain{handover}`: stop accepting; every answer closes its connection.
    pub fn handover(&self) {
        self.set(Phase::Handover);
    }

    /// `drain{drain}` (or Node gone): refuse new calls, close idle connections, and wait for the calls in
    /// flight, at most `bound`. True when every connection ended within it.
    pub async fn drain(self, bound: Duration) -> bool {
        self.set(Phase::Draining);
        tokio::time::timeout(bound, self.accept).await.is_ok()
    }

    fn set(&self, phase: Phase) {
        self.shared.phase.fetch_max(phase as u8, Ordering::Relaxed);
        self.phase.send_if_modified(|p| {
            let later = (phase as u8) > (*p as u8);
            if later {
                *p = phase;
            }
            later
        });
    }
}

/// Bound on a request head (its line and header lines), as node:http's `maxHeaderSize` (16 KiB, which the
/// gateway leaves at its default): past it the caller gets 431, as from Node, instead of the app getting
/// a head node mode never passes on. hyper's read buffer is the bound (its default is ~400 KiB).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Accepts until the handover; then, at the drain, shuts every connection down gracefully and returns
/// once all have ended.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut phase: watch::Receiver<Phase>) {
    let graceful = GracefulShutdown::new();
    let mut listener = Some(listener);
    loop {
        let accepted = async {
            match &listener {
                Some(l) => l.accept().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = accepted => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let shared = shared.clone();
                    let watcher = graceful.watcher();
                    let phase = phase.clone();
                    tokio::spawn(async move {
                        let stream = match &shared.handover {
                            Some(h) => match node_or_hyper(stream, h, phase).await {
                                Some(s) => s,
                                None => return,
                            },
                            None => stream,
                        };
                        let conn = http1::Builder::new()
                            .timer(TokioTimer::new())
                            .keep_alive(true)
                            .header_read_timeout(Duration::from_millis(KEEP_ALIVE_IDLE_MS))
                            .max_buf_size(MAX_HEAD_BYTES)
                            .serve_connection(
                                TokioIo::new(stream),
                                service_fn(move |req| call(shared.clone(), req)),
                            );
                        let _ = watcher.watch(conn).await;
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_BACKOFF_MS)).await,
            },
            changed = phase.changed() => {
                let now = if changed.is_ok() { *phase.borrow_and_update() } else { Phase::Draining };
                if now != Phase::Serving {
                    // Closing the listener: new connections are refused from here on.
                    listener = None;
                }
                if now == Phase::Draining {
                    break;
                }
            }
        }
    }
    graceful.shutdown().await;
}

/// Design §3a: a new connection's first bytes, peeked (nothing consumed), decide whose it is. Its first
/// request head holds `async` or `webhookEndpoint` and no proxy's header: handed to Node, whole (None). Anything else, or a
/// hand-over refused (window full, channel closed): hyper's (Some). Silent for KEEP_ALIVE_IDLE_MS (the
/// bound hyper's `header_read_timeout` puts on it), or still silent at the drain: closed without an
/// answer (None), as hyper closes it.
async fn node_or_hyper(
    stream: TcpStream,
    handover: &Handover,
    mut phase: watch::Receiver<Phase>,
) -> Option<TcpStream> {
    let mut head = [0u8; PEEK_BYTES];
    let peeked = tokio::select! {
        p = tokio::time::timeout(Duration::from_millis(KEEP_ALIVE_IDLE_MS), stream.peek(&mut head)) => p,
        _ = phase.wait_for(|p| *p == Phase::Draining) => return None,
    };
    match peeked {
        Err(_) => None,
        Ok(Ok(n)) if n > 0 && first_request_is_nodes(&head[..n]) => {
            // Out of tokio's reactor first: the descriptor is sent, then closed here.
            let conn = stream.into_std().ok()?;
            match handover.hand(conn) {
                Ok(()) => None,
                Err(conn) => TcpStream::from_std(conn).ok(),
            }
        }
        Ok(_) => Some(stream),
    }
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One call: its request id, then the drain's 503, or the fast path (which hands off what it does not
/// serve).
async fn call(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<AnswerBody>, Infallible> {
    let start_ms = epoch_ms();
    let mut buf = uuid::Uuid::encode_buffer();
    let id = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf);
    if shared.phase() == Phase::Draining as u8 {
        return Ok(error_response(&shutting_down(shared.retry_after), id, true));
    }
    let mut res = shared.fast.call(&shared.handoff, req, id, start_ms).await;
    if shared.phase() != Phase::Serving as u8 {
        res.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Empty;
    use hyper::body::Bytes;
    use tokio::net::TcpStream;

    async fn get(
        sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    ) -> hyper::Result<Response<Incoming>> {
        let req = Request::get("/p/a/run")
            .header("host", "gw")
            .body(Empty::new())
            .unwrap();
        sender.send_request(req).await
    }

    /// A proxy in front keeps an idle connection up to its own timeout (60 s is usual) and then reuses
    /// it: the data plane must not have closed it before (as Node's gateway keeps it 65 s), and must
    /// close it once KEEP_ALIVE_IDLE_MS has passed.
    #[tokio::test(start_paused = true)]
    async fn an_idle_keep_alive_connection_is_kept_as_long_as_the_gateway_keeps_it() {
        // No hand-off socket: every call is a 503 gateway_unavailable, on a connection kept alive.
        let config = Config::example(0, "/nonexistent/apphost-handoff.sock");
        let core = Arc::new(Mutex::new(Core::new(&config)));
        let server = Server::start(&config, core, None).await.unwrap();
        let stream = TcpStream::connect(("127.0.0.1", server.port())).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let conn = tokio::spawn(conn);
        assert_eq!(get(&mut sender).await.unwrap().status(), 503);

        tokio::time::sleep(Duration::from_millis(KEEP_ALIVE_IDLE_MS - 5_000)).await;
        let again = get(&mut sender).await;
        assert_eq!(
            again.map(|r| r.status().as_u16()).ok(),
            Some(503),
            "a connection idle for 60 s is still served"
        );

        tokio::time::sleep(Duration::from_millis(KEEP_ALIVE_IDLE_MS + 1_000)).await;
        assert!(conn.is_finished(), "closed once idle past KEEP_ALIVE_IDLE_MS");
        assert!(get(&mut sender).await.is_err());
    }

    mod handover {
        use super::*;
        use crate::handover::{HANDOVER_LINE, HANDOVER_WINDOW};
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::net::UnixStream as StdUnix;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        const ASYNC: &[u8] = b"POST /p/a/run?async=true HTTP/1.1\r\nhost: gw\r\ncontent-length: 0\r\n\r\n";
        const SYNC: &[u8] = b"POST /p/a/run HTTP/1.1\r\nhost: gw\r\ncontent-length: 0\r\n\r\n";

        /// A server whose hand-off socket does not exist (hyper's answers are 503s), and Node's end of
        /// the hand-over channel.
        async fn server() -> (Server, StdUnix) {
            let config = Config::example(0, "/nonexistent/apphost-handoff.sock");
            let core = Arc::new(Mutex::new(Core::new(&config)));
            let (ours, node) = StdUnix::pair().unwrap();
            node.set_nonblocking(true).unwrap();
            let h = Handover::start(OwnedFd::from(ours)).unwrap();
            (Server::start(&config, core, Some(h)).await.unwrap(), node)
        }

        /// Node's side: one line and the descriptor sent with it, if one comes within `wait_ms`.
        async fn receive(node: &StdUnix, wait_ms: u64) -> Option<(Vec<u8>, OwnedFd)> {
            for _ in 0..wait_ms / 10 {
                let mut data = [0u8; 256];
                let mut control = [0u8; 64];
                let mut iov = libc::iovec {
                    iov_base: data.as_mut_ptr() as *mut libc::c_void,
                    iov_len: data.len(),
                };
                // SAFETY: the buffers live through the call; CMSG_* read the msghdr recvmsg filled in.
                let got = unsafe {
                    let mut msg: libc::msghdr = std::mem::zeroed();
                    msg.msg_iov = &mut iov;
                    msg.msg_iovlen = 1;
                    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
                    msg.msg_controllen = control.len() as _;
                    let n = libc::recvmsg(node.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT);
                    if n > 0 {
                        let cmsg = libc::CMSG_FIRSTHDR(&msg);
                        assert!(!cmsg.is_null(), "a descriptor comes with the line");
                        assert_eq!((*cmsg).cmsg_type, libc::SCM_RIGHTS);
                        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const i32);
                        Some((data[..n as usize].to_vec(), OwnedFd::from_raw_fd(fd)))
                    } else {
                        None
                    }
                };
                if got.is_some() {
                    return got;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            None
        }

        async fn status_of(c: &mut TcpStream) -> String {
            let mut buf = [0u8; 512];
            let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
                .await
                .expect("an answer within 5 s")
                .unwrap();
            String::from_utf8_lossy(&buf[..n])
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        }

        async fn caller(server: &Server, first: &[u8]) -> TcpStream {
            let mut c = TcpStream::connect(("127.0.0.1", server.port())).await.unwrap();
            c.write_all(first).await.unwrap();
            c
        }

        #[tokio::test]
        async fn a_connection_whose_first_call_is_async_is_handed_to_node_whole() {
            let (server, node) = server().await;
            let mut c = caller(&server, ASYNC).await;
            let (line, fd) = receive(&node, 2_000).await.expect("handed over");
            assert_eq!(line, HANDOVER_LINE);
            // Nothing was consumed: Node reads the request itself, and answers on the caller's connection.
            let mut conn = std::net::TcpStream::from(fd);
            let mut head = [0u8; 512];
            let n = std::io::Read::read(&mut conn, &mut head).unwrap();
            assert!(head[..n].starts_with(b"POST /p/a/run?async=true HTTP/1.1\r\n"));
            std::io::Write::write_all(&mut conn, b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                .unwrap();
            assert_eq!(status_of(&mut c).await, "HTTP/1.1 202 Accepted");

            // A connection whose first call is sync is hyper's (here its 503: no hand-off socket).
            let mut s = caller(&server, SYNC).await;
            assert_eq!(status_of(&mut s).await, "HTTP/1.1 503 Service Unavailable");
            assert!(receive(&node, 200).await.is_none());
        }

        #[tokio::test]
        async fn with_the_window_full_or_the_channel_closed_hyper_serves_the_connection() {
            let (server, node) = server().await;
            let (mut callers, mut fds) = (Vec::new(), Vec::new());
            for _ in 0..HANDOVER_WINDOW {
                callers.push(caller(&server, ASYNC).await);
                fds.push(receive(&node, 2_000).await.expect("handed over").1);
            }
            // HANDOVER_WINDOW un-ACKed: the next async-first connection is served by hyper, at once.
            let mut over = caller(&server, ASYNC).await;
            assert_eq!(status_of(&mut over).await, "HTTP/1.1 503 Service Unavailable");
            assert!(receive(&node, 200).await.is_none());

            // One ACK frees one place.
            (&node).write_all_ack();
            let _next = caller(&server, ASYNC).await;
            assert!(receive(&node, 2_000).await.is_some(), "handed over after an ACK");

            // Node's end gone: hyper serves.
            for _ in 0..HANDOVER_WINDOW {
                (&node).write_all_ack();
            }
            drop(node);
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut after = caller(&server, ASYNC).await;
            assert_eq!(status_of(&mut after).await, "HTTP/1.1 503 Service Unavailable");
        }

        /// A connection that sends nothing is closed after KEEP_ALIVE_IDLE_MS, as hyper's header read
        /// bound closes it, and not before: the peek waits no longer than hyper would.
        #[tokio::test(start_paused = true)]
        async fn a_silent_connection_is_closed_at_the_head_bound_as_hyper_closes_it() {
            let (server, _node) = server().await;
            let mut c = TcpStream::connect(("127.0.0.1", server.port())).await.unwrap();
            let mut buf = [0u8; 16];
            let early = tokio::time::timeout(
                Duration::from_millis(KEEP_ALIVE_IDLE_MS - 1_000),
                c.read(&mut buf),
            )
            .await;
            assert!(early.is_err(), "still open 1 s before the bound");
            let closed = tokio::time::timeout(Duration::from_millis(2_000), c.read(&mut buf)).await;
            assert!(
                matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
                "closed without an answer once the bound passed"
            );
        }

        /// At the drain, a connection still silent in the peek is closed at once, as hyper's graceful
        /// shutdown closes an idle connection: the drain does not wait for it up to its bound.
        #[tokio::test]
        async fn the_drain_closes_a_connection_still_silent_in_the_peek_at_once() {
            let (server, _node) = server().await;
            let mut c = TcpStream::connect(("127.0.0.1", server.port())).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            let t0 = std::time::Instant::now();
            assert!(
                server.drain(Duration::from_secs(3)).await,
                "every connection ended within the drain bound"
            );
            assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
            let mut buf = [0u8; 16];
            let closed = tokio::time::timeout(Duration::from_secs(1), c.read(&mut buf)).await;
            assert!(
                matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
                "closed without an answer"
            );
        }

        trait Ack {
            fn write_all_ack(self);
        }
        impl Ack for &StdUnix {
            fn write_all_ack(self) {
                let mut s = self;
                std::io::Write::write_all(&mut s, b"{\"cmd\":\"NODE_HANDLE_ACK\"}\n").unwrap();
            }
        }
    }
}
