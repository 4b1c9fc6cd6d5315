//! Step 5 end to end: the built binary on a socketpair (fd 3) fed real state frames as Node feeds them,
//! real HTTP servers on TCP standing in for app replicas, a real HTTP server on a Unix socket standing in
//! for Node's hand-off server, and real HTTP clients on the gateway port. The usual call is served
//! without touching the hand-off socket; every other call reaches Node with its reason.

mod support;

use support::http::{Caller, Chunks, caller, epoch_ms};

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use apphost_dataplane::channel::FrameReader;
use apphost_dataplane::config::Config;
use apphost_dataplane::frame::encode;
use apphost_dataplane::message::Message;
use apphost_dataplane::records::SyncCall;
use apphost_dataplane::reports::AppLoad;
use apphost_dataplane::tokens::digest;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::HeaderMap;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::{Notify, mpsc};

const WAIT: Duration = Duration::from_secs(10);
const TOKEN: &str = "tok-p";

/// A request as a stand-in (replica or Node) received it.
#[derive(Debug)]
struct Seen {
    uri: String,
    headers: HeaderMap,
    body: Bytes,
}

fn seen_of(parts: &hyper::http::request::Parts, body: Bytes) -> Seen {
    Seen {
        uri: parts.uri.to_string(),
        headers: parts.headers.clone(),
        body,
    }
}

type Out = BoxBody<Bytes, Infallible>;

fn full(b: Bytes) -> Out {
    Full::new(b).boxed()
}

/// Serves `handler` on every connection `accept` yields.
fn serve<S, F>(listener: S, handler: F)
where
    S: Accept + Send + 'static,
    F: Fn(Request<Incoming>) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Out>> + Send>>
        + Send
        + Sync
        + 'static,
{
    let handler = Arc::new(handler);
    tokio::spawn(async move {
        loop {
            let io = listener.next().await;
            let h = handler.clone();
            let service = hyper::service::service_fn(move |req| {
                let h = h.clone();
                async move { Ok::<_, Infallible>(h(req).await) }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
}

trait Accept {
    type Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;
    fn next(&self) -> impl std::future::Future<Output = Self::Io> + Send;
}

impl Accept for TcpListener {
    type Io = TokioIo<TcpStream>;
    async fn next(&self) -> Self::Io {
        let (s, _) = self.accept().await.unwrap();
        s.set_nodelay(true).unwrap();
        TokioIo::new(s)
    }
}

impl Accept for UnixListener {
    type Io = TokioIo<tokio::net::UnixStream>;
    async fn next(&self) -> Self::Io {
        TokioIo::new(self.accept().await.unwrap().0)
    }
}

/// Node's hand-off server: answers 201 `node:<body>`, reports each call.
struct Node {
    dir: PathBuf,
    socket: PathBuf,
    seen: mpsc::UnboundedReceiver<Seen>,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn node() -> Node {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "apphost-dataplane-fast-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("handoff.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let (tx, seen) = mpsc::unbounded_channel();
    serve(listener, move |req| {
        let tx = tx.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            let text = format!("node:{}", String::from_utf8_lossy(&body));
            let _ = tx.send(seen_of(&parts, body));
            Response::builder()
                .status(201)
                .header("x-from-node", "yes")
                .body(full(Bytes::from(text)))
                .unwrap()
        })
    });
    Node { dir, socket, seen }
}

/// A replica: `/echo` answers 200 with the request it got; `/multi` a head with repeated names;
/// `/empty` 204; `/hold` waits for `gate`; `/slow` never answers; with `at_capacity`, every call is
/// refused 429 `X-Apphost-Refused: at_capacity`.
struct Replica {
    url: String,
    seen: mpsc::UnboundedReceiver<Seen>,
    gate: Arc<Notify>,
}

async fn replica(at_capacity: bool) -> Replica {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let (tx, seen) = mpsc::unbounded_channel();
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    serve(listener, move |req| {
        let (tx, gate) = (tx.clone(), g.clone());
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            let path = parts.uri.path().to_owned();
            let _ = tx.send(seen_of(&parts, body.clone()));
            if at_capacity {
                return Response::builder()
                    .status(429)
                    .header("x-apphost-refused", " At_Capacity ")
                    .body(full(Bytes::from_static(b"busy")))
                    .unwrap();
            }
            match path.as_str() {
                "/multi" => Response::builder()
                    .header("x-multi", "a")
                    .header("x-multi", "b")
                    .header("etag", "\"1\"")
                    .header("etag", "\"2\"")
                    .header("x-request-id", "from-app")
                    .header("connection", "x-hop")
                    .header("x-hop", "1")
                    .body(full(Bytes::from_static(b"multi")))
                    .unwrap(),
                "/empty" => Response::builder()
                    .status(204)
                    .header("content-type", "text/plain")
                    .body(full(Bytes::new()))
                    .unwrap(),
                "/hold" => {
                    gate.notified().await;
                    Response::new(full(Bytes::from_static(b"held")))
                }
                "/slow" => std::future::pending().await,
                // An event stream: one event now, the next when `gate` is notified.
                "/sse" => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tx.send(Bytes::from_static(b"data: 1\n\n")).unwrap();
                    tokio::spawn(async move {
                        gate.notified().await;
                        let _ = tx.send(Bytes::from_static(b"data: 2\n\n"));
                    });
                    Response::builder()
                        .header("content-type", "Text/Event-Stream")
                        .header("cache-control", "max-age=60")
                        .body(Chunks(rx).boxed())
                        .unwrap()
                }
                // A streamed answer that goes silent after its first chunk (the sender kept, never used).
                "/stall" => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tx.send(Bytes::from_static(b"first")).unwrap();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        drop(tx);
                    });
                    Response::new(Chunks(rx).boxed())
                }
                _ => Response::builder()
                    .header("content-type", "application/json")
                    .body(full(Bytes::from(format!(
                        "app:{}",
                        String::from_utf8_lossy(&body)
                    ))))
                    .unwrap(),
            }
        })
    });
    Replica { url, seen, gate }
}

/// A replica that closes every connection without an answer.
async fn hangup() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            drop(s);
        }
    });
    url
}

/// A URL nothing listens on.
fn dead() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}")
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn app(name: &str, runtime: &str, upstream: &str, capacity: u32, functions: Value) -> Value {
    json!({
        "projectId": "p", "appName": name, "runtime": runtime, "upstream": upstream,
        "ready": true, "gracePeriodSeconds": 30, "functions": functions,
        "pool": {"capacity": capacity, "maxQueue": 64, "queueTimeoutMs": 30000, "coldStartTimeoutMs": 60000, "retryAfterSeconds": 1}
    })
}

/// The state of every test: app `a` (custom) on `replicas`, `c` (cortex, exports `greet`) on the first
/// replica, `one` (capacity 1) on the first replica, `z` without a replica; a token of project `p`.
fn snapshot(replicas: &[&str]) -> Value {
    let list: Vec<Value> = replicas
        .iter()
        .enumerate()
        .map(|(i, u)| json!({"id": format!("r{i}"), "url": u}))
        .collect();
    let first = json!([{"id": "r0", "url": replicas[0]}]);
    json!({
        "v": 1, "type": "snapshot", "gen": "g1", "seq": 1,
        "apps": [
            app("a", "custom", replicas[0], 8, Value::Null),
            app("c", "cortex", replicas[0], 8, json!(["greet"])),
            app("one", "custom", replicas[0], 1, Value::Null),
            app("z", "custom", "http://z.p:8080", 8, Value::Null),
        ],
        "replicas": [
            {"key": "p/a", "replicas": list},
            {"key": "p/c", "replicas": first},
            {"key": "p/one", "replicas": first},
        ],
        "failures": [], "domains": [],
        "tokens": [{"sha256": hex(&digest(TOKEN.as_bytes())), "projectId": "p", "until": epoch_ms() + 600_000}],
    })
}

struct Plane {
    child: Child,
    rx: FrameReader<OwnedReadHalf>,
    tx: OwnedWriteHalf,
    port: u16,
}

impl Plane {
    async fn start(socket: &Path, snapshot: Value, tweak: impl FnOnce(&mut Config)) -> Plane {
        let (child, ours) = support::spawn();
        ours.set_nonblocking(true).unwrap();
        let (r, w) = tokio::net::UnixStream::from_std(ours).unwrap().into_split();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut plane = Plane {
            child,
            rx: FrameReader::new(r),
            tx: w,
            port,
        };
        assert!(matches!(plane.next().await, Some(Message::Hello { .. })));
        let mut config = Config::example(plane.port, socket.to_str().unwrap());
        tweak(&mut config);
        plane.send(&Message::Config(Box::new(config))).await;
        plane.send_json(snapshot).await;
        assert!(matches!(plane.next().await, Some(Message::Ready { .. })));
        plane
    }

    async fn next(&mut self) -> Option<Message> {
        tokio::time::timeout(WAIT, self.rx.next()).await.unwrap().unwrap()
    }

    async fn send(&mut self, m: &Message) {
        self.tx.write_all(&m.to_frame().unwrap()).await.unwrap();
    }

    async fn send_json(&mut self, v: Value) {
        let frame = encode(&serde_json::to_vec(&v).unwrap()).unwrap();
        self.tx.write_all(&frame).await.unwrap();
    }

    async fn exit(self) -> Output {
        let Plane { child, rx, tx, .. } = self;
        drop((rx, tx));
        tokio::task::spawn_blocking(move || support::wait(child))
            .await
            .unwrap()
    }
}

async fn call(
    c: &mut Caller,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (Response<()>, String) {
    let mut req = Request::builder().method(method).uri(path);
    if !headers.iter().any(|(k, _)| *k == "host") {
        req = req.header("host", "gw.example:8080");
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
    let res = tokio::time::timeout(WAIT, c.send_request(req))
        .await
        .expect("an answer in time")
        .unwrap();
    let (parts, body) = res.into_parts();
    let body = tokio::time::timeout(WAIT, body.collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    (
        Response::from_parts(parts, ()),
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// method, path, headers, body, the reason expected.
type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, &'a str, &'a str);

const AUTH: (&str, &str) = ("authorization", "Bearer tok-p");

async fn recv(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(WAIT, rx.recv()).await.unwrap().unwrap()
}

fn reason_of(s: &Seen) -> String {
    let m = s.headers["x-apphost-handoff"].to_str().unwrap();
    m.split("; ")
        .find_map(|f| f.strip_prefix("reason="))
        .unwrap()
        .to_owned()
}

fn lines(res: &Response<()>) -> Vec<(String, String)> {
    res.headers()
        .iter()
        .filter(|(n, _)| *n != "date")
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect()
}

#[tokio::test]
async fn the_usual_call_is_served_without_node_with_the_request_id_both_ways_and_an_access_line() {
    let mut node = node().await;
    let mut r = replica(false).await;
    let plane = Plane::start(&node.socket, snapshot(&[&r.url]), |_| {}).await;
    let mut c = caller(plane.port).await;
    let (res, body) = call(
        &mut c,
        "POST",
        "/v4/p/a/echo?b=%20&c=%C3%A4&x",
        &[AUTH, ("x-custom", "1"), ("connection", "x-hop"), ("x-hop", "h")],
        "{\"n\":1}",
    )
    .await;
    assert_eq!(res.status(), 200);
    assert_eq!(body, "app:{\"n\":1}");
    let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(id.len(), 36);
    let got = recv(&mut r.seen).await;
    assert_eq!(
        got.uri, "/echo?b=+&c=%C3%A4&x=",
        "the query as URLSearchParams writes it"
    );
    assert_eq!(got.headers["x-request-id"], id.as_str(), "the same id upstream");
    assert_eq!(got.headers["x-custom"], "1");
    assert_eq!(got.headers["host"], r.url.strip_prefix("http://").unwrap());
    for dropped in ["authorization", "x-hop", "connection"] {
        assert!(got.headers.get(dropped).is_none(), "{dropped} is not forwarded");
    }
    assert_eq!(got.body, "{\"n\":1}");
    assert!(
        node.seen.try_recv().is_err(),
        "Node's hand-off socket was not used"
    );
    // An empty body reaches the app with its length, as undici sends it.
    let (res, _) = call(&mut c, "POST", "/v4/p/a/echo", &[AUTH], "").await;
    assert_eq!(res.status(), 200);
    let got = recv(&mut r.seen).await;
    assert_eq!(got.headers["content-length"], "0");

    let out = plane.exit().await;
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("an access line for {id}: {stdout}"));
    let v: Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        (
            v["status"].clone(),
            v["mode"].clone(),
            v["project"].clone(),
            v["app"].clone(),
            v["aborted"].clone()
        ),
        (json!(200), json!("sync"), json!("p"), json!("a"), json!(false))
    );
}

#[tokio::test]
async fn the_answer_head_is_the_gateways() {
    let node = node().await;
    let r = replica(false).await;
    let plane = Plane::start(&node.socket, snapshot(&[&r.url]), |_| {}).await;
    let mut c = caller(plane.port).await;
    let (res, body) = call(&mut c, "POST", "/v4/p/a/multi", &[AUTH], "").await;
    assert_eq!((res.status().as_u16(), body.as_str()), (200, "multi"));
    let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(
        lines(&res),
        vec![
            ("x-request-id".into(), id),
            ("x-multi".into(), "a".into()),
            ("x-multi".into(), "b".into()),
            ("etag".into(), "\"1\"".into()),
            ("etag".into(), "\"2\"".into()),
            ("content-type".into(), "application/octet-stream".into()),
            ("content-length".into(), "5".into()),
        ],
        "X-Request-Id first and ours, repeated names line by line, Connection-listed dropped, octet-stream"
    );
    let (res, body) = call(&mut c, "POST", "/v4/p/a/empty", &[AUTH], "").await;
    assert_eq!((res.status().as_u16(), body.as_str()), (204, ""));
    assert!(res.headers().get("content-type").is_none(), "204 is sent bare");
    assert!(res.headers().get("content-length").is_none());
}

#[tokio::test]
async fn every_other_call_reaches_node_with_its_reason() {
    let mut node = node().await;
    let r = replica(false).await;
    let mut plane = Plane::start(&node.socket, snapshot(&[&r.url]), |c| {
        c.gateway.max_body_bytes = 16
    })
    .await;
    let mut c = caller(plane.port).await;
    let long = "x".repeat(100);
    let cases: Vec<Case> = vec![
        ("GET", "/v4/p/a/echo", vec![AUTH], "", "not_served"),
        ("POST", "/healthz", vec![AUTH], "", "not_served"),
        ("POST", "/v4/p/a/echo", vec![], "", "token_miss"),
        (
            "POST",
            "/v4/p/a/echo",
            vec![("authorization", "Bearer other")],
            "",
            "token_miss",
        ),
        (
            "POST",
            "/v4/q/a/echo",
            vec![("authorization", "Bearer tok-p")],
            "",
            "token_miss",
        ),
        ("POST", "/v4/p/a/echo?async=false", vec![AUTH], "", "async"),
        (
            "POST",
            "/v4/p/a/echo?webhook%45ndpoint=h",
            vec![AUTH],
            "",
            "webhook",
        ),
        ("POST", "/v4/p/nope/echo", vec![AUTH], "", "unknown_app"),
        ("POST", "/v4/p/c/other", vec![AUTH], "{}", "unknown_app"),
        ("POST", "/v4/p/a/echo", vec![AUTH], &long, "body_over_limit"),
        ("POST", "/v4/p/c/greet", vec![AUTH], "not json", "refused_check"),
        ("POST", "/v4/p/z/echo", vec![AUTH], "", "no_replica"),
        (
            "POST",
            "/v4/p/a/echo",
            vec![AUTH, ("host", "[::1]:8080")],
            "",
            "domain",
        ),
    ];
    for (method, path, headers, body, reason) in cases {
        let (res, answer) = call(&mut c, method, path, &headers, body).await;
        assert_eq!(res.status(), 201, "{path}: Node answered");
        assert_eq!(
            answer,
            format!("node:{body}"),
            "{path}: the whole body reached Node"
        );
        let s = recv(&mut node.seen).await;
        assert_eq!(reason_of(&s), reason, "{method} {path}");
        assert_eq!(s.body, body, "{path}");
        let marker = s.headers["x-apphost-handoff"].to_str().unwrap();
        assert!(marker.starts_with("v=1; id="), "{marker}");
    }
    // A chunked body (no Content-Length) over the bound while read: what was read and the rest reach Node.
    let mut raw = TcpStream::connect(("127.0.0.1", plane.port)).await.unwrap();
    let head = "POST /v4/p/a/echo HTTP/1.1\r\nhost: gw.example\r\nauthorization: Bearer tok-p\r\ntransfer-encoding: chunked\r\n\r\n";
    raw.write_all(head.as_bytes()).await.unwrap();
    for _ in 0..10 {
        raw.write_all(b"a\r\nxxxxxxxxxx\r\n").await.unwrap();
    }
    raw.write_all(b"0\r\n\r\n").await.unwrap();
    let mut got = Vec::new();
    let want = format!("node:{long}");
    while !String::from_utf8_lossy(&got).contains(&want) {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(WAIT, raw.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let s = recv(&mut node.seen).await;
    assert_eq!(reason_of(&s), "body_over_limit");
    assert_eq!(s.body, long);

    // A full app (capacity 1, one call held): the call waits in the data plane's queue (step 6), not
    // Node's, and is served here once the held answer ends.
    let mut held = caller(plane.port).await;
    let hold = tokio::spawn(async move { call(&mut held, "POST", "/v4/p/one/hold", &[AUTH], "").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting = spawn_call(plane.port, "/v4/p/one/echo", "w");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "waiting");
    r.gate.notify_one();
    let (res, body) = hold.await.unwrap();
    assert_eq!((res.status().as_u16(), body.as_str()), (200, "held"));
    let (res, body) = waiting.await.unwrap();
    assert_eq!((res.status().as_u16(), body.as_str()), (200, "app:w"));
    assert!(node.seen.try_recv().is_err());
    // A token pushed later is served from then on (the channel loop applies token frames).
    let late = "tok-late";
    plane
        .send_json(json!({"v": 1, "type": "token", "gen": "g1", "seq": 2,
            "sha256": hex(&digest(late.as_bytes())), "projectId": "p", "until": epoch_ms() + 600_000}))
        .await;
    plane.send(&Message::Ping { id: 9 }).await;
    assert_eq!(plane.next().await, Some(Message::Pong { id: 9 }));
    let (res, _) = call(
        &mut c,
        "POST",
        "/v4/p/a/echo",
        &[("authorization", "Bearer tok-late")],
        "",
    )
    .await;
    assert_eq!(res.status(), 200);
    assert!(node.seen.try_recv().is_err());
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

#[tokio::test]
async fn a_refusing_replica_is_skipped_for_another() {
    let node = node().await;
    let mut busy = replica(true).await;
    let mut ok = replica(false).await;
    let down = dead();
    let plane = Plane::start(&node.socket, snapshot(&[&busy.url, &down, &ok.url]), |_| {}).await;
    let mut c = caller(plane.port).await;
    for _ in 0..3 {
        let (res, body) = call(&mut c, "POST", "/v4/p/a/echo", &[AUTH], "x").await;
        assert_eq!((res.status().as_u16(), body.as_str()), (200, "app:x"));
        let got = recv(&mut ok.seen).await;
        assert_eq!(got.body, "x");
    }
    assert!(
        busy.seen.try_recv().is_ok(),
        "the busy replica was tried and refused"
    );
}

#[tokio::test]
async fn errors_after_dispatch_are_the_gateways() {
    let node = node().await;
    let r = replica(false).await;
    let closer = hangup().await;
    let (d1, d2) = (dead(), dead());
    // a: a replica that hangs up; one: a silent one (sync bound 300 ms); z... set below.
    let mut snap = snapshot(&[&closer]);
    snap["apps"][2] = app("one", "custom", &r.url, 1, Value::Null);
    snap["replicas"][2] = json!({"key": "p/one", "replicas": [{"id": "r0", "url": r.url}]});
    snap["apps"][3] = app("z", "custom", &d1, 8, Value::Null);
    snap["replicas"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "p/z", "replicas": [{"id": "d1", "url": d1}, {"id": "d2", "url": d2}]}));
    let plane = Plane::start(&node.socket, snap, |c| {
        c.gateway.sync_timeout_ms = 300;
        c.balancer.max_retries = 1;
    })
    .await;
    let mut c = caller(plane.port).await;

    let (res, body) = call(&mut c, "POST", "/v4/p/a/echo", &[AUTH], "").await;
    assert_eq!(res.status(), 502);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "upstream_unreachable", "{body}");
    assert_eq!(v["error"]["reason"], "UND_ERR_SOCKET", "{body}");
    assert_eq!(res.headers()["content-type"], "application/json; charset=utf-8");

    let started = std::time::Instant::now();
    let (res, body) = call(&mut c, "POST", "/v4/p/one/slow", &[AUTH], "").await;
    assert_eq!(res.status(), 504, "{body}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "upstream_timeout");
    // The slot of the timed-out call is free again.
    let (res, _) = call(&mut c, "POST", "/v4/p/one/echo", &[AUTH], "").await;
    assert_eq!(res.status(), 200);

    // Both replicas refuse the connection: retried once (max_retries 1), then the gateway's 502.
    let (res, body) = call(&mut c, "POST", "/v4/p/z/echo", &[AUTH], "").await;
    assert_eq!(res.status(), 502, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "upstream_unreachable");
    assert_eq!(v["error"]["reason"], "unreachable", "{body}");
    assert_eq!(v["error"]["detail"], "ECONNREFUSED", "{body}");
    drop(node);
}

#[tokio::test]
async fn a_caller_that_goes_away_frees_its_slot() {
    let mut node = node().await;
    let mut r = replica(false).await;
    let plane = Plane::start(&node.socket, snapshot(&[&r.url]), |c| {
        c.gateway.sync_timeout_ms = 1_000
    })
    .await;
    // App `one` has one slot. A caller takes it with a call the app holds, then hangs up (a client
    // timeout): the upstream call is dropped with it, and so must be the slot.
    let mut gone = TcpStream::connect(("127.0.0.1", plane.port)).await.unwrap();
    gone.write_all(
        format!(
            "POST /v4/p/one/slow HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {TOKEN}\r\ncontent-length: 0\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(recv(&mut r.seen).await.uri, "/slow");
    drop(gone);
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    let mut c = caller(plane.port).await;
    let (res, body) = call(&mut c, "POST", "/v4/p/one/echo", &[AUTH], "hi").await;
    assert_eq!(
        (res.status().as_u16(), body.as_str()),
        (200, "app:hi"),
        "served, not handed off"
    );
    assert!(node.seen.try_recv().is_err(), "nothing went to Node");
}

#[tokio::test]
async fn an_event_stream_is_passed_event_by_event_and_a_silent_stream_is_cut_at_its_idle_bound() {
    let node = node().await;
    let r = replica(false).await;
    let plane = Plane::start(&node.socket, snapshot(&[&r.url]), |c| {
        c.gateway.stream_idle_timeout_ms = 300;
    })
    .await;
    let mut c = caller(plane.port).await;
    let req = Request::post("/v4/p/a/sse")
        .header("host", "gw.example")
        .header(AUTH.0, AUTH.1)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let res = tokio::time::timeout(WAIT, c.send_request(req))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers();
    assert_eq!(h["content-type"], "text/event-stream; charset=utf-8");
    assert_eq!(h["cache-control"], "no-cache");
    assert!(h.get("content-length").is_none());
    let mut body = res.into_body();
    let first = tokio::time::timeout(WAIT, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        first.into_data().unwrap(),
        "data: 1\n\n",
        "the first event before the stream ends"
    );
    r.gate.notify_one();
    let second = tokio::time::timeout(WAIT, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(second.into_data().unwrap(), "data: 2\n\n");

    let mut c = caller(plane.port).await;
    let req = Request::post("/v4/p/a/stall")
        .header("host", "gw.example")
        .header(AUTH.0, AUTH.1)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let started = std::time::Instant::now();
    let res = tokio::time::timeout(WAIT, c.send_request(req))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(res.status(), 200);
    let got = tokio::time::timeout(WAIT, res.into_body().collect())
        .await
        .unwrap();
    assert!(got.is_err(), "the caller's answer is cut, not ended");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cut at the idle bound, not the app's 30 s"
    );
}

#[tokio::test]
async fn a_body_slower_than_its_read_bound_gets_node_https_408_and_the_connection_closed() {
    use apphost_dataplane::core::Core;
    use apphost_dataplane::fastpath::{FastPath, Settings};
    use apphost_dataplane::handoff::Handoff;
    use apphost_dataplane::upstream::Upstream;
    use std::sync::Mutex;

    // In process: the bound is node:http's 300 s in the binary, 200 ms here.
    let r = replica(false).await;
    let config = Config::example(0, "/nonexistent/handoff.sock");
    let mut core = Core::new(&config);
    let payload = serde_json::to_vec(&snapshot(&[&r.url])).unwrap();
    let Message::State(f) = Message::from_payload(&payload).unwrap() else {
        panic!("a state frame")
    };
    core.apply(apphost_dataplane::state::StateFrame::from_message(&f).unwrap(), 0);
    let fast = Arc::new(FastPath {
        core: Arc::new(Mutex::new(core)),
        upstream: Upstream::new(),
        settings: Settings {
            max_body_bytes: 1000,
            sync_timeout: Duration::from_secs(5),
            stream_idle: None,
            body_read_timeout: Duration::from_millis(200),
        },
    });
    let handoff = Arc::new(Handoff::new("/nonexistent/handoff.sock", 1000, 0, 1));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (s, _) = listener.accept().await.unwrap();
            let (fast, handoff) = (fast.clone(), handoff.clone());
            let service = hyper::service::service_fn(move |req| {
                let (fast, handoff) = (fast.clone(), handoff.clone());
                async move {
                    Ok::<_, Infallible>(
                        fast.call(&handoff, req, "0b1c2d3e-0000-4000-8000-000000000000", epoch_ms())
                            .await,
                    )
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(s), service),
            );
        }
    });
    let mut raw = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = "POST /v4/p/a/echo HTTP/1.1\r\nhost: gw.example\r\nauthorization: Bearer tok-p\r\ncontent-length: 10\r\n\r\nab";
    raw.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    loop {
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(WAIT, raw.read(&mut buf))
            .await
            .unwrap()
            .unwrap_or(0);
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).to_lowercase();
    assert!(text.starts_with("http/1.1 408 request timeout\r\n"), "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered at the bound, then closed"
    );
}

#[tokio::test]
async fn ask_metrics_is_answered_with_the_calls_served_and_the_pools_now() {
    let node = node().await;
    let r = replica(false).await;
    let mut plane = Plane::start(&node.socket, snapshot(&[&r.url]), |_| {}).await;
    let mut c = caller(plane.port).await;
    for _ in 0..2 {
        let (res, _) = call(&mut c, "POST", "/v4/p/a/echo", &[AUTH], "{}").await;
        assert_eq!(res.status(), 200);
    }
    plane.send(&Message::AskMetrics { id: 17 }).await;
    // The calls' records (and a load report) may come first.
    let (id, metrics) = loop {
        match plane.next().await {
            Some(Message::Metrics { id, metrics }) => break (id, metrics),
            Some(Message::Records(_) | Message::Load(_)) => {}
            other => panic!("a metrics answer, not {other:?}"),
        }
    };
    assert_eq!(id, 17, "the asked id, echoed");
    let all: Vec<Value> = serde_json::from_str(&metrics).unwrap();
    let values = |name: &str| all.iter().find(|m| m["name"] == name).unwrap()["values"].clone();
    assert_eq!(
        values("apphost_gateway_requests_total"),
        json!([{"labels": {"project": "p", "app": "a", "mode": "sync", "status": "200"}, "value": 2}])
    );
    let count = values("apphost_gateway_request_duration_seconds")
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["metricName"] == "apphost_gateway_request_duration_seconds_count")
        .cloned()
        .unwrap();
    assert_eq!(count["value"], 2);
    assert_eq!(
        values("apphost_gateway_inflight_requests"),
        json!([{"labels": {}, "value": 0}])
    );
    // Every pool, by app key, nothing in flight once the answers ended.
    let inflight = values("apphost_gateway_app_inflight_calls");
    let apps: Vec<&str> = inflight
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["labels"]["app"].as_str().unwrap())
        .collect();
    assert_eq!(apps, ["a", "c", "one", "z"]);
    assert!(inflight.as_array().unwrap().iter().all(|v| v["value"] == 0));
}

/// The state with app `one` (capacity 1) given a queue of `max_queue` calls waiting `queue_ms` at most.
fn queued_snapshot(replica: &str, max_queue: u64, queue_ms: u64) -> Value {
    let mut snap = snapshot(&[replica]);
    snap["apps"][2]["pool"]["maxQueue"] = json!(max_queue);
    snap["apps"][2]["pool"]["queueTimeoutMs"] = json!(queue_ms);
    snap
}

/// A call on its own connection, as a task.
fn spawn_call(
    port: u16,
    path: &'static str,
    body: &'static str,
) -> tokio::task::JoinHandle<(Response<()>, String)> {
    tokio::spawn(async move {
        let mut c = caller(port).await;
        call(&mut c, "POST", path, &[AUTH], body).await
    })
}

fn error_of(body: &str) -> Value {
    serde_json::from_str::<Value>(body).unwrap()["error"].clone()
}

#[tokio::test]
async fn a_full_app_queues_calls_in_order_refuses_over_max_queue_and_times_waiters_out() {
    let mut node = node().await;
    let mut r = replica(false).await;
    let plane = Plane::start(&node.socket, queued_snapshot(&r.url, 1, 400), |_| {}).await;
    // The one slot held, one call waiting: a third is refused at once (queue_full), as AppPool does.
    let held = spawn_call(plane.port, "/v4/p/one/hold", "h");
    assert_eq!(recv(&mut r.seen).await.uri, "/hold");
    let queued = spawn_call(plane.port, "/v4/p/one/echo", "q");
    tokio::time::sleep(Duration::from_millis(100)).await;
    // (Refused, not queued: a queued call would get queue_timeout.)
    let mut c = caller(plane.port).await;
    let (res, body) = call(&mut c, "POST", "/v4/p/one/echo", &[AUTH], "x").await;
    assert_eq!(res.status(), 503, "{body}");
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(
        error_of(&body),
        json!({"code": "queue_full", "message": "app \"p/one\" has 1 calls waiting for a free replica (the limit); retry later", "queued": 1})
    );
    // The slot freed: the waiting call gets it (served by the app, not Node).
    r.gate.notify_one();
    assert_eq!(held.await.unwrap().1, "held");
    let (res, body) = queued.await.unwrap();
    assert_eq!((res.status().as_u16(), body.as_str()), (200, "app:q"));
    // A waiting call whose slot never frees: 503 queue_timeout at queueTimeoutMs, Node's words.
    let held = spawn_call(plane.port, "/v4/p/one/hold", "h");
    while recv(&mut r.seen).await.uri != "/hold" {}
    let started = std::time::Instant::now();
    let (res, body) = call(&mut c, "POST", "/v4/p/one/echo", &[AUTH], "late").await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(390) && waited < Duration::from_millis(1_500),
        "{waited:?}"
    );
    assert_eq!(res.status(), 503, "{body}");
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(
        error_of(&body),
        json!({"code": "queue_timeout", "message": "no replica of app \"p/one\" had a free slot within 0.4 s; retry later"})
    );
    r.gate.notify_one();
    held.await.unwrap();
    assert!(node.seen.try_recv().is_err(), "nothing went to Node");
    let out = plane.exit().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let codes: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| l.get("code").cloned())
        .collect();
    assert_eq!(codes, [json!("queue_full"), json!("queue_timeout")], "{stdout}");
}

#[tokio::test]
async fn a_queued_caller_that_goes_away_leaves_the_queue_and_gets_its_access_line() {
    let mut node = node().await;
    let mut r = replica(false).await;
    let mut plane = Plane::start(&node.socket, queued_snapshot(&r.url, 1, 5_000), |_| {}).await;
    let held = spawn_call(plane.port, "/v4/p/one/hold", "h");
    assert_eq!(recv(&mut r.seen).await.uri, "/hold");
    // A caller waits in the queue of one, then hangs up.
    let mut gone = TcpStream::connect(("127.0.0.1", plane.port)).await.unwrap();
    gone.write_all(
        format!(
            "POST /v4/p/one/echo HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {TOKEN}\r\ncontent-length: 4\r\n\r\ngone"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(gone);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Its place is free at once: the next call waits (not queue_full), and gets the slot when it frees.
    let next = spawn_call(plane.port, "/v4/p/one/echo", "next");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!next.is_finished(), "waiting, not refused");
    r.gate.notify_one();
    held.await.unwrap();
    let (res, body) = next.await.unwrap();
    assert_eq!((res.status().as_u16(), body.as_str()), (200, "app:next"));
    // The app saw the held call and the next one only: nothing was granted to the caller that left.
    assert_eq!(recv(&mut r.seen).await.body, "next");
    assert!(r.seen.try_recv().is_err());
    assert!(node.seen.try_recv().is_err(), "nothing went to Node");
    // Its sync-call record too, as the gateway's access.done writes it then.
    let mut records = Vec::new();
    let by = std::time::Instant::now() + WAIT;
    while records.len() < 3 {
        assert!(std::time::Instant::now() < by, "three records: {records:?}");
        if let Some(Message::Records(rs)) = plane.next().await {
            records.extend(rs);
        }
    }
    let gone: Vec<_> = records.iter().filter(|r| r.aborted).collect();
    assert_eq!(gone.len(), 1, "{records:?}");
    assert_eq!(
        (
            gone[0].status,
            gone[0].app_name.as_str(),
            gone[0].path.as_str(),
            gone[0].error_code.as_deref()
        ),
        (404, "one", "echo", None)
    );
    let out = plane.exit().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["msg"] == "request")
        .collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    let aborted: Vec<&Value> = lines.iter().filter(|l| l["aborted"] == true).collect();
    assert_eq!(aborted.len(), 1, "{stdout}");
    let l = aborted[0];
    assert_eq!(
        (
            &l["status"],
            &l["level"],
            &l["mode"],
            &l["project"],
            &l["app"],
            l.get("code")
        ),
        (
            &json!(404),
            &json!(40),
            &json!("sync"),
            &json!("p"),
            &json!("one"),
            None
        ),
        "{l}"
    );
}

#[tokio::test]
async fn waiting_calls_go_to_node_with_their_deadline_when_the_replicas_go() {
    let mut node = node().await;
    let mut r = replica(false).await;
    let mut plane = Plane::start(&node.socket, queued_snapshot(&r.url, 4, 2_000), |_| {}).await;
    let held = spawn_call(plane.port, "/v4/p/one/hold", "h");
    assert_eq!(recv(&mut r.seen).await.uri, "/hold");
    let queued_at = epoch_ms();
    let waiting = spawn_call(plane.port, "/v4/p/one/echo", "w");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(node.seen.try_recv().is_err(), "still waiting here");
    // The app's replicas drop to zero: the waiting call goes to Node at once, its deadline with it.
    plane
        .send_json(json!({"v": 1, "type": "replicas", "gen": "g1", "seq": 2, "key": "p/one", "replicas": []}))
        .await;
    let (res, body) = tokio::time::timeout(Duration::from_millis(1_000), waiting)
        .await
        .expect("handed over at once")
        .unwrap();
    assert_eq!((res.status().as_u16(), body.as_str()), (201, "node:w"));
    let seen = recv(&mut node.seen).await;
    assert_eq!(reason_of(&seen), "no_replica");
    let marker = seen.headers["x-apphost-handoff"].to_str().unwrap().to_owned();
    let deadline: u64 = marker
        .split("; ")
        .find_map(|f| f.strip_prefix("deadline="))
        .unwrap_or_else(|| panic!("a deadline: {marker}"))
        .parse()
        .unwrap();
    assert!(
        (queued_at + 2_000..queued_at + 2_200).contains(&deadline),
        "queueTimeoutMs after it started waiting: {deadline} vs {queued_at}"
    );
    // The call in flight finishes on its replica.
    r.gate.notify_one();
    assert_eq!(held.await.unwrap().1, "held");
    assert_eq!(plane.exit().await.status.code(), Some(0));
}

/// The next `load` frame with app `a`'s load matching `want`, other loads skipped, records kept.
async fn load_of_a(
    plane: &mut Plane,
    records: &mut Vec<SyncCall>,
    want: impl Fn(Option<&AppLoad>) -> bool,
) -> Option<AppLoad> {
    loop {
        match plane.next().await {
            Some(Message::Load(apps)) => {
                let a = apps.into_iter().find(|l| l.app_name == "a");
                if want(a.as_ref()) {
                    return a;
                }
            }
            Some(Message::Records(rs)) => records.extend(rs),
            _ => {}
        }
    }
}

#[tokio::test]
async fn the_calls_it_serves_reach_node_as_records_and_load() {
    let mut node = node().await;
    let r = replica(false).await;
    let closer = hangup().await;
    let mut snap = snapshot(&[&r.url]);
    snap["apps"][3] = app("z", "custom", &closer, 8, Value::Null);
    snap["replicas"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "p/z", "replicas": [{"id": "z0", "url": closer}]}));
    let mut plane = Plane::start(&node.socket, snap, |c| {
        c.load_report_interval_ms = 100;
        c.gateway.sync_records_per_app_per_second = 1_000.0;
        c.gateway.sync_records_per_second = 1_000.0;
    })
    .await;
    let mut c = caller(plane.port).await;
    let (res, _) = call(&mut c, "POST", "/v4/p/a/echo", &[AUTH], "{}").await;
    assert_eq!(res.status(), 200);
    let ok = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let (res, _) = call(&mut c, "POST", "/v4/p/z/echo", &[AUTH], "").await;
    assert_eq!(res.status(), 502);
    let failed = res.headers()["x-request-id"].to_str().unwrap().to_owned();

    // A call held by the app: the load report counts it, on its replica.
    let port = plane.port;
    let held = tokio::spawn(async move {
        let mut c = caller(port).await;
        call(&mut c, "POST", "/v4/p/a/hold", &[AUTH], "").await
    });
    let mut records = Vec::new();
    let busy = load_of_a(&mut plane, &mut records, |a| a.is_some_and(|a| a.inflight == 1))
        .await
        .unwrap();
    assert!(busy.concurrency > 0.0, "{busy:?}");
    assert_eq!((busy.project_id.as_str(), busy.queued, busy.runs), ("p", 0, 0));
    assert_eq!(busy.replicas, Some(vec![("r0".to_owned(), 1)]));
    r.gate.notify_one();
    let (res, _) = held.await.unwrap();
    assert_eq!(res.status(), 200);
    let hold = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    // Idle again: left out of the reports.
    load_of_a(&mut plane, &mut records, |a| a.is_none()).await;

    // Every call it answered has its record (they came in the frames read so far or come now).
    let deadline = tokio::time::Instant::now() + WAIT;
    while records.len() < 3 && tokio::time::Instant::now() < deadline {
        match plane.next().await {
            Some(Message::Records(rs)) => records.extend(rs),
            Some(_) => {}
            None => break,
        }
    }
    let of = |id: &str| records.iter().find(|r| r.request_id == id).cloned();
    let rec = of(&ok).unwrap_or_else(|| panic!("a record of {ok}: {records:?}"));
    assert_eq!(
        (
            rec.project_id.as_str(),
            rec.app_name.as_str(),
            rec.path.as_str(),
            rec.status
        ),
        ("p", "a", "echo", 200)
    );
    assert_eq!((rec.error_code, rec.aborted, rec.streamed), (None, false, false));
    assert!(rec.started_at_ms <= rec.finished_at_ms && rec.finished_at_ms <= epoch_ms());
    let rec = of(&failed).unwrap_or_else(|| panic!("a record of {failed}: {records:?}"));
    assert_eq!((rec.app_name.as_str(), rec.status), ("z", 502));
    assert_eq!(rec.error_code.as_deref(), Some("upstream_unreachable"));
    assert!(rec.error_message.is_some_and(|m| !m.is_empty()));
    assert!(of(&hold).is_some(), "a record of {hold}: {records:?}");
    assert!(node.seen.try_recv().is_err(), "nothing went to Node");
}

#[tokio::test]
async fn a_call_that_ends_as_the_drain_completes_has_its_record_sent_before_drained() {
    let node = node().await;
    let mut r = replica(false).await;
    let mut plane = Plane::start(&node.socket, snapshot(&[&r.url]), |c| {
        c.gateway.sync_records_per_app_per_second = 1_000.0;
        c.gateway.sync_records_per_second = 1_000.0;
        // No load frame in the way: only records and drained matter here.
        c.load_report_interval_ms = 0;
    })
    .await;
    let port = plane.port;
    let held = tokio::spawn(async move {
        let mut c = caller(port).await;
        call(&mut c, "POST", "/v4/p/a/hold", &[AUTH], "").await
    });
    assert_eq!(recv(&mut r.seen).await.uri, "/hold");
    plane
        .send(&Message::Drain {
            phase: apphost_dataplane::message::DrainPhase::Drain,
        })
        .await;
    // The call ends now; the drain completes with it, well within a batch's 10 ms.
    r.gate.notify_one();
    let (res, _) = held.await.unwrap();
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let mut records = Vec::new();
    loop {
        match plane.next().await {
            Some(Message::Records(rs)) => records.extend(rs),
            Some(Message::Drained) => break,
            Some(_) => {}
            None => panic!("the channel ended before drained"),
        }
    }
    assert!(
        records.iter().any(|c| c.request_id == id),
        "the held call's record before drained: {records:?}"
    );
    assert_eq!(plane.exit().await.status.code(), Some(0));
}
