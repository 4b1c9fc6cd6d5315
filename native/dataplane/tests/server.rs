//! Step 4 end to end: the built binary on a socketpair (fd 3) driven by the test as Node drives it, a real
//! HTTP server on a Unix socket standing in for Node's hand-off server (src/gateway/dataplane/handoff.ts),
//! and real HTTP clients on the gateway port.

mod support;

use support::http::{Caller, Chunks, caller, epoch_ms};

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apphost_dataplane::channel::FrameReader;
use apphost_dataplane::config::Config;
use apphost_dataplane::errors::{HandoffFailure, gateway_unavailable, shutting_down};
use apphost_dataplane::frame::encode;
use apphost_dataplane::message::{Message, PROTOCOL_VERSION};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::HeaderMap;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, UnixListener};
use tokio::sync::{Notify, mpsc};

/// Bound on anything the test waits for; a hang fails the test.
const WAIT: Duration = Duration::from_secs(10);

// --- Node's hand-off server, stood in for ------------------------------------------------------------

/// A request as Node's hand-off server received it.
#[derive(Debug)]
struct Seen {
    method: String,
    uri: String,
    headers: HeaderMap,
    body: Bytes,
}

type NodeBody = BoxBody<Bytes, Infallible>;

fn text(s: &str) -> NodeBody {
    Full::new(Bytes::from(s.to_owned())).boxed()
}

/// The stand-in: `/sse` sends one event, then the next when `gate` is notified; `/slow` answers when
/// `gate` is notified; `/close` answers with `Connection: close`; `/silent` never answers; anything else
/// answers 201 `node:<body>`. Every request is reported on `seen`.
struct Node {
    dir: PathBuf,
    socket: PathBuf,
    seen: mpsc::UnboundedReceiver<Seen>,
    gate: Arc<Notify>,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "apphost-dataplane-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn node() -> Node {
    let dir = temp_dir();
    let socket = dir.join("handoff.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let (tx, seen) = mpsc::unbounded_channel();
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (tx, gate) = (tx.clone(), g.clone());
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (tx, gate) = (tx.clone(), gate.clone());
                async move { Ok::<_, Infallible>(answer(req, tx, gate).await) }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Node {
        dir,
        socket,
        seen,
        gate,
    }
}

async fn answer(
    req: Request<Incoming>,
    seen: mpsc::UnboundedSender<Seen>,
    gate: Arc<Notify>,
) -> Response<NodeBody> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    let path = parts.uri.path().to_owned();
    let _ = seen.send(Seen {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        headers: parts.headers,
        body: body.clone(),
    });
    match path.as_str() {
        "/sse" => {
            let (tx, rx) = mpsc::unbounded_channel();
            tx.send(Bytes::from_static(b"data: 1\n\n")).unwrap();
            tokio::spawn(async move {
                gate.notified().await;
                let _ = tx.send(Bytes::from_static(b"data: 2\n\n"));
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(Chunks(rx).boxed())
                .unwrap()
        }
        "/slow" => {
            gate.notified().await;
            Response::new(text("slow done"))
        }
        "/close" => Response::builder()
            .header("connection", "close")
            .body(text("bye"))
            .unwrap(),
        "/silent" => std::future::pending().await,
        _ => Response::builder()
            .status(201)
            .header("x-from-node", "yes")
            .header("content-type", "text/plain")
            .body(text(&format!("node:{}", String::from_utf8_lossy(&body))))
            .unwrap(),
    }
}

// --- the data plane, driven as Node drives it --------------------------------------------------------

struct Plane {
    child: Child,
    rx: FrameReader<OwnedReadHalf>,
    tx: OwnedWriteHalf,
    port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A snapshot as Node sends it (state.rs reads its fields; step 4 uses gen and seq).
fn snapshot(generation: &str, seq: u64) -> Value {
    json!({ "v": 1, "type": "snapshot", "gen": generation, "seq": seq,
            "apps": [], "replicas": [], "failures": [], "domains": [], "tokens": [] })
}

impl Plane {
    /// The binary, through hello, config, the first snapshot and ready.
    async fn start(socket: &Path, tweak: impl FnOnce(&mut Config)) -> Plane {
        Plane::start_with_env(socket, &[], tweak).await
    }

    /// The binary, through its hello: nothing sent to it yet.
    async fn hello(env: &[(&str, &str)]) -> Plane {
        let (child, ours) = support::spawn_with_env(env);
        ours.set_nonblocking(true).unwrap();
        let (r, w) = tokio::net::UnixStream::from_std(ours).unwrap().into_split();
        let mut plane = Plane {
            child,
            rx: FrameReader::new(r),
            tx: w,
            port: free_port(),
        };
        assert!(matches!(
            plane.next().await,
            Some(Message::Hello {
                protocol: PROTOCOL_VERSION,
                ..
            })
        ));
        plane
    }

    async fn start_with_env(socket: &Path, env: &[(&str, &str)], tweak: impl FnOnce(&mut Config)) -> Plane {
        let mut plane = Plane::hello(env).await;
        let mut config = Config::example(plane.port, socket.to_str().unwrap());
        tweak(&mut config);
        plane.send(&Message::Config(Box::new(config))).await;
        plane.send_json(snapshot("g1", 3)).await;
        assert_eq!(
            plane.next().await,
            Some(Message::Ready {
                generation: "g1".to_owned(),
                seq: 3
            })
        );
        plane
    }

    async fn next(&mut self) -> Option<Message> {
        tokio::time::timeout(WAIT, self.rx.next())
            .await
            .expect("a frame from the data plane in time")
            .expect("a well-formed frame")
    }

    async fn send(&mut self, m: &Message) {
        self.send_raw(&m.to_frame().unwrap()).await;
    }

    async fn send_json(&mut self, v: Value) {
        let frame = encode(&serde_json::to_vec(&v).unwrap()).unwrap();
        self.send_raw(&frame).await;
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.tx.write_all(bytes).await.unwrap();
    }

    /// A ping answered: every frame sent before it has been taken.
    async fn sync(&mut self, id: u64) {
        self.send(&Message::Ping { id }).await;
        assert_eq!(self.next().await, Some(Message::Pong { id }));
    }

    /// The exit, once the test has done with the channel.
    async fn exit(self) -> Output {
        let Plane { child, rx, tx, .. } = self;
        drop((rx, tx));
        tokio::task::spawn_blocking(move || support::wait(child))
            .await
            .unwrap()
    }
}

// --- callers ------------------------------------------------------------------------------------------

async fn call(
    c: &mut Caller,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response<Incoming> {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "gw.example");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
    tokio::time::timeout(WAIT, c.send_request(req))
        .await
        .expect("an answer in time")
        .unwrap()
}

async fn body_of(res: Response<Incoming>) -> String {
    let b = tokio::time::timeout(WAIT, res.into_body().collect())
        .await
        .unwrap()
        .unwrap();
    String::from_utf8(b.to_bytes().to_vec()).unwrap()
}

/// A UUID v4 as `randomUUID` writes it.
fn is_uuid_v4(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && b.iter()
            .enumerate()
            .all(|(i, c)| [8, 13, 18, 23].contains(&i) || matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        && b[14] == b'4'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b')
}

/// Waits until the port refuses connections (the listener closed), failing after `WAIT`.
async fn refused_within_wait(port: u16, after: &str) {
    let by = Instant::now() + WAIT;
    while TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
        assert!(Instant::now() < by, "still accepting {WAIT:?} after {after}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn seen(node: &mut Node) -> Seen {
    tokio::time::timeout(WAIT, node.seen.recv())
        .await
        .expect("Node saw the call")
        .unwrap()
}

// --- the tests -------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_call_goes_to_node_whole_with_the_marker_and_comes_back_unchanged() {
    let mut node = node().await;
    let mut plane = Plane::start(&node.socket, |_| {}).await;
    plane.sync(1).await;
    let threads = std::fs::read_dir(format!("/proc/{}/task", plane.child.id()))
        .unwrap()
        .count();
    assert_eq!(
        threads, 1,
        "the default runtime is current_thread, on the main thread"
    );
    let mut c = caller(plane.port).await;
    let mut ids = Vec::new();
    for round in 0..2 {
        let before = epoch_ms();
        let res = call(
            &mut c,
            "POST",
            "/v4/p/hello/f?x=1&y=%20&async=true",
            &[
                ("authorization", "Bearer tok"),
                ("x-webhook-secret", "s3cret"),
                ("x-custom", "a"),
                ("x-apphost-handoff", "v=1; id=forged; start=0; reason=async"),
                ("connection", "keep-alive, x-hop"),
                ("x-hop", "1"),
            ],
            &format!("{{\"n\":{round}}}"),
        )
        .await;
        let after = epoch_ms();
        assert_eq!(res.status(), 201);
        assert_eq!(res.headers()["x-from-node"], "yes");
        assert_eq!(res.headers()["content-type"], "text/plain");
        assert_eq!(body_of(res).await, format!("node:{{\"n\":{round}}}"));

        let s = seen(&mut node).await;
        assert_eq!(
            (s.method.as_str(), s.uri.as_str()),
            ("POST", "/v4/p/hello/f?x=1&y=%20&async=true")
        );
        assert_eq!(s.body, format!("{{\"n\":{round}}}"));
        for (k, v) in [
            ("host", "gw.example"),
            ("authorization", "Bearer tok"),
            ("x-webhook-secret", "s3cret"),
            ("x-custom", "a"),
        ] {
            assert_eq!(s.headers[k], v, "{k}");
        }
        assert_eq!(
            (
                s.headers["x-hop"].to_str().unwrap(),
                s.headers["connection"].to_str().unwrap()
            ),
            ("1", "x-hop"),
            "a Connection-listed header reaches Node listed in the hop's own Connection"
        );
        let markers: Vec<_> = s.headers.get_all("x-apphost-handoff").iter().collect();
        assert_eq!(
            markers.len(),
            1,
            "the caller's marker is gone, ours alone: {markers:?}"
        );
        let marker = markers[0].to_str().unwrap();
        let fields: Vec<_> = marker.split("; ").collect();
        assert_eq!(fields.len(), 4, "{marker}");
        assert_eq!(fields[0], "v=1");
        let id = fields[1].strip_prefix("id=").unwrap();
        assert!(is_uuid_v4(id), "{marker}");
        let start: u64 = fields[2].strip_prefix("start=").unwrap().parse().unwrap();
        assert!(
            (before..=after).contains(&start),
            "{start} not in {before}..={after}"
        );
        // Step 5: a token Node has not verified (none was pushed) is handed off as token_miss.
        assert_eq!(fields[3], "reason=token_miss");
        ids.push(id.to_owned());
    }
    assert_ne!(ids[0], ids[1], "a request id per call");
    let out = plane.exit().await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn an_event_stream_reaches_the_caller_event_by_event() {
    let node = node().await;
    let plane = Plane::start(&node.socket, |_| {}).await;
    let mut c = caller(plane.port).await;
    let res = call(&mut c, "GET", "/sse", &[], "").await;
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut body = res.into_body();
    let first = tokio::time::timeout(WAIT, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // Node holds the second event until now: the first came through on its own.
    assert_eq!(first.into_data().unwrap(), "data: 1\n\n");
    node.gate.notify_one();
    let second = tokio::time::timeout(WAIT, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(second.into_data().unwrap(), "data: 2\n\n");
    assert!(
        tokio::time::timeout(WAIT, body.frame()).await.unwrap().is_none(),
        "the stream ends"
    );
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn connection_close_from_node_closes_the_callers_connection() {
    let node = node().await;
    let plane = Plane::start(&node.socket, |_| {}).await;
    let mut s = TcpStream::connect(("127.0.0.1", plane.port)).await.unwrap();
    s.write_all(b"POST /close HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        .await
        .unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut all))
        .await
        .expect("the data plane closes the connection after the answer")
        .unwrap();
    let all = String::from_utf8(all).unwrap().to_ascii_lowercase();
    assert!(all.starts_with("http/1.1 200"), "{all}");
    assert!(all.contains("\r\nconnection: close\r\n"), "{all}");
    assert!(all.ends_with("\r\n\r\nbye"), "{all}");
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn a_dead_handoff_socket_is_503_gateway_unavailable() {
    let dir = temp_dir();
    let plane = Plane::start(&dir.join("nobody.sock"), |c| c.gateway.retry_after_seconds = 7).await;
    let mut c = caller(plane.port).await;
    let res = call(&mut c, "POST", "/v4/p/a", &[], "{}").await;
    assert_eq!(res.status(), 503);
    let h = res.headers().clone();
    assert_eq!(h["retry-after"], "7");
    assert_eq!(h["content-type"], "application/json; charset=utf-8");
    assert!(is_uuid_v4(h["x-request-id"].to_str().unwrap()));
    // The bytes of refusals.ts' gatewayUnavailable (errors.rs is held to them by tests/errors_vectors.rs).
    assert_eq!(
        body_of(res).await,
        gateway_unavailable(HandoffFailure::Refused, 7).body()
    );
    assert_eq!(plane.exit().await.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn an_answer_head_over_its_bound_is_503_gateway_unavailable() {
    let node = node().await;
    // coldStartTimeoutMs + syncTimeoutMs + handoffMarginMs = 300 ms.
    let plane = Plane::start(&node.socket, |c| {
        c.gateway.cold_start_timeout_ms = 0;
        c.gateway.sync_timeout_ms = 100;
        c.gateway.handoff_margin_ms = 200;
    })
    .await;
    let mut c = caller(plane.port).await;
    let t = Instant::now();
    let res = call(&mut c, "POST", "/silent", &[], "").await;
    let took = t.elapsed();
    assert_eq!(res.status(), 503);
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(
        res.headers().get("retry-after").is_none(),
        "after a timeout the call may have run: no invitation to retry"
    );
    assert_eq!(
        body_of(res).await,
        gateway_unavailable(HandoffFailure::Timeout, 5).body()
    );
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn the_sigterm_sequence_hands_over_then_drains_in_flight_calls_then_says_drained() {
    let mut node = node().await;
    let mut plane = Plane::start(&node.socket, |_| {}).await;
    let port = plane.port;
    let mut kept = caller(port).await;
    assert_eq!(call(&mut kept, "POST", "/a", &[], "").await.status(), 201);
    seen(&mut node).await;
    let mut busy = caller(port).await;
    let in_flight = tokio::spawn(async move {
        let res = call(&mut busy, "POST", "/slow", &[], "").await;
        (res.headers().get("connection").cloned(), body_of(res).await)
    });
    assert_eq!(seen(&mut node).await.uri, "/slow");

    // handover: the listener closes; a kept-alive connection is served once more, told to close.
    plane
        .send_json(json!({"v": 1, "type": "drain", "phase": "handover"}))
        .await;
    plane.sync(2).await;
    refused_within_wait(port, "drain{handover}").await;
    let res = call(&mut kept, "POST", "/b", &[], "").await;
    assert_eq!(res.status(), 201);
    assert_eq!(res.headers()["connection"], "close");
    body_of(res).await;
    tokio::time::timeout(WAIT, std::future::poll_fn(|cx| kept.poll_ready(cx)))
        .await
        .expect("the kept-alive connection is closed after that answer")
        .unwrap_err();

    // drain: nothing is said while a call is in flight; pings are still answered.
    plane
        .send_json(json!({"v": 1, "type": "drain", "phase": "drain"}))
        .await;
    plane.sync(3).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), plane.rx.next())
            .await
            .is_err(),
        "drained came while a call was in flight"
    );
    node.gate.notify_one();
    let (connection, body) = tokio::time::timeout(WAIT, in_flight).await.unwrap().unwrap();
    assert_eq!(body, "slow done");
    assert_eq!(connection.unwrap(), "close");
    assert_eq!(plane.next().await, Some(Message::Drained));
    let out = plane.exit().await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_call_whose_head_completes_during_the_drain_is_503_shutting_down() {
    let node = node().await;
    let mut plane = Plane::start(&node.socket, |c| c.gateway.retry_after_seconds = 9).await;
    let mut s = TcpStream::connect(("127.0.0.1", plane.port)).await.unwrap();
    s.write_all(b"POST /v4/p/a HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    plane.sync(1).await;
    plane
        .send_json(json!({"v": 1, "type": "drain", "phase": "drain"}))
        .await;
    plane.sync(2).await;
    s.write_all(b"Content-Length: 0\r\n\r\n").await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut all))
        .await
        .unwrap()
        .unwrap();
    let all = String::from_utf8(all).unwrap();
    let lower = all.to_ascii_lowercase();
    assert!(lower.starts_with("http/1.1 503"), "{all}");
    for h in [
        "connection: close",
        "retry-after: 9",
        "content-type: application/json; charset=utf-8",
    ] {
        assert!(lower.contains(&format!("\r\n{h}\r\n")), "{h}: {all}");
    }
    // The gateway's own bytes (refusals.ts shuttingDown, held by tests/errors_vectors.rs).
    assert!(
        all.ends_with(&format!("\r\n\r\n{}", shutting_down(9).body())),
        "{all}"
    );
    assert_eq!(plane.next().await, Some(Message::Drained));
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn the_end_of_the_channel_drains_in_flight_calls_then_exits_0() {
    let mut node = node().await;
    let plane = Plane::start(&node.socket, |_| {}).await;
    let mut busy = caller(plane.port).await;
    let in_flight =
        tokio::spawn(async move { body_of(call(&mut busy, "POST", "/slow", &[], "").await).await });
    seen(&mut node).await;
    let Plane {
        mut child,
        rx,
        tx,
        port,
    } = plane;
    drop((rx, tx)); // Node is gone
    refused_within_wait(port, "the channel ended").await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "exited with a call in flight"
    );
    node.gate.notify_one();
    assert_eq!(
        tokio::time::timeout(WAIT, in_flight).await.unwrap().unwrap(),
        "slow done"
    );
    let out = tokio::task::spawn_blocking(move || support::wait(child))
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_seq_gap_asks_for_a_resync_and_a_new_gen_is_ready_again() {
    let node = node().await;
    let mut plane = Plane::start(&node.socket, |_| {}).await;
    plane
        .send_json(json!({"v": 1, "type": "app", "gen": "g1", "seq": 4, "key": "p/a", "app": null}))
        .await;
    plane
        .send_json(json!({"v": 1, "type": "app", "gen": "g1", "seq": 6, "key": "p/a", "app": null}))
        .await;
    assert_eq!(
        plane.next().await,
        Some(Message::Resync {
            generation: "g1".to_owned(),
            seq: 4
        })
    );
    plane.send_json(snapshot("g2", 0)).await;
    assert_eq!(
        plane.next().await,
        Some(Message::Ready {
            generation: "g2".to_owned(),
            seq: 0
        })
    );
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn a_bad_frame_while_serving_closes_the_channel_and_exits_3() {
    let node = node().await;
    let mut plane = Plane::start(&node.socket, |_| {}).await;
    plane.send_json(json!({"v": 1, "type": "launch"})).await;
    assert_eq!(
        plane.next().await,
        None,
        "the channel is closed, nothing answered"
    );
    let out = plane.exit().await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown_type"),
        "{out:?}"
    );
}

#[tokio::test]
async fn ask_metrics_before_the_first_snapshot_is_answered_with_no_series() {
    let mut plane = Plane::hello(&[]).await;
    plane.send(&Message::AskMetrics { id: 2 }).await;
    assert_eq!(
        plane.next().await,
        Some(Message::Metrics {
            id: 2,
            metrics: "[]".to_owned()
        })
    );
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn state_before_config_is_a_protocol_error() {
    let mut plane = Plane::hello(&[]).await;
    plane.send_json(snapshot("g1", 0)).await;
    assert_eq!(plane.next().await, None);
    let out = plane.exit().await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unexpected_message"),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_stream_silent_past_its_idle_bound_is_cut() {
    let node = node().await;
    let plane = Plane::start(&node.socket, |c| c.gateway.stream_idle_timeout_ms = 200).await;
    let mut c = caller(plane.port).await;
    let res = call(&mut c, "GET", "/sse", &[], "").await;
    let mut body = res.into_body();
    let first = tokio::time::timeout(WAIT, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.into_data().unwrap(), "data: 1\n\n");
    let t = Instant::now();
    // Node never sends the second event: the caller's answer ends in an error, not a hang.
    let end = tokio::time::timeout(WAIT, body.frame())
        .await
        .expect("cut within the bound");
    assert!(matches!(end, Some(Err(_))), "{end:?}");
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(150) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn the_drain_waits_no_longer_than_its_bound() {
    let mut node = node().await;
    let mut plane = Plane::start(&node.socket, |c| c.gateway.drain_timeout_ms = 300).await;
    let mut busy = caller(plane.port).await;
    tokio::spawn(async move { call(&mut busy, "POST", "/silent", &[], "").await });
    seen(&mut node).await;
    let t = Instant::now();
    plane
        .send_json(json!({"v": 1, "type": "drain", "phase": "drain"}))
        .await;
    assert_eq!(plane.next().await, Some(Message::Drained));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn with_two_threads_it_serves_the_same() {
    let mut node = node().await;
    let plane = Plane::start_with_env(
        &node.socket,
        &[("APPHOST_GATEWAY_DATA_PLANE_THREADS", "2")],
        |_| {},
    )
    .await;
    let mut c = caller(plane.port).await;
    let res = call(&mut c, "POST", "/x", &[], "two").await;
    assert_eq!(res.status(), 201);
    assert_eq!(body_of(res).await, "node:two");
    assert!(seen(&mut node).await.headers.contains_key("x-apphost-handoff"));
    // The multi-thread runtime: the main thread and two workers (current_thread would be one thread).
    let threads = std::fs::read_dir(format!("/proc/{}/task", plane.child.id()))
        .unwrap()
        .count();
    assert!(threads >= 3, "{threads} threads");
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn a_bad_thread_count_is_refused_with_exit_2() {
    for bad in ["0", "65", "two"] {
        let (child, _ours) = support::spawn_with_env(&[("APPHOST_GATEWAY_DATA_PLANE_THREADS", bad)]);
        let out = tokio::task::spawn_blocking(move || support::wait(child))
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("APPHOST_GATEWAY_DATA_PLANE_THREADS"),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn sigint_is_left_to_node() {
    let node = node().await;
    let mut plane = Plane::start(&node.socket, |_| {}).await;
    // SAFETY: kill with a child's pid and a signal number.
    assert_eq!(unsafe { libc::kill(plane.child.id() as i32, libc::SIGINT) }, 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    plane.sync(1).await;
    let mut c = caller(plane.port).await;
    assert_eq!(call(&mut c, "POST", "/x", &[], "").await.status(), 201);
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn sigterm_drains_like_the_end_of_the_channel() {
    let mut node = node().await;
    let plane = Plane::start(&node.socket, |_| {}).await;
    let mut busy = caller(plane.port).await;
    let in_flight =
        tokio::spawn(async move { body_of(call(&mut busy, "POST", "/slow", &[], "").await).await });
    seen(&mut node).await;
    // SAFETY: kill with a child's pid and a signal number.
    assert_eq!(unsafe { libc::kill(plane.child.id() as i32, libc::SIGTERM) }, 0);
    refused_within_wait(plane.port, "SIGTERM").await;
    node.gate.notify_one();
    assert_eq!(
        tokio::time::timeout(WAIT, in_flight).await.unwrap().unwrap(),
        "slow done"
    );
    let out = plane.exit().await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
