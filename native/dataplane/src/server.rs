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
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::core::Core;
use crate::errors::shutting_down;
use crate::fastpath::{FastPath, Settings};
use crate::handoff::{AnswerBody, Handoff, error_response};
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
    /// Binds `config.listen` and starts serving from `core` (the state the channel loop applies).
    pub async fn start(config: &Config, core: Arc<Mutex<Core>>) -> std::io::Result<Server> {
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
                    let conn = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .keep_alive(true)
                        .header_read_timeout(Duration::from_millis(KEEP_ALIVE_IDLE_MS))
                        .max_buf_size(MAX_HEAD_BYTES)
                        .serve_connection(
                            TokioIo::new(stream),
                            service_fn(move |req| call(shared.clone(), req)),
                        );
                    let conn = graceful.watch(conn);
                    tokio::spawn(async move {
                        let _ = conn.await;
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
        let server = Server::start(&config, core).await.unwrap();
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
}
