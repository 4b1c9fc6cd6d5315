//! NATIVE_WORK=1: the gateway's own per-call work on a sync call, modelled on src/gateway so its cost
//! in Rust can be measured beside the bare proxy's (docs/benchmarks.md, "A native data plane: what it
//! would buy"). Not a gateway: one app, tokens known in advance (a token not in the cache is refused
//! instead of being verified with Ed25519), no queueing, no webhooks, no async runs, records dropped
//! instead of published. Per call, as the Node gateway does it:
//! - a request id (UUID v4 from a thread-local generator), sent both ways as `X-Request-Id`;
//! - the route `/v4/<project>/<app>/<function>`;
//! - `Authorization: Bearer <token>` against the verified-token cache (the last token compared in
//!   constant time first, then a map), its expiry, and its project against the route's;
//! - the app lookup, the function name against the app's list;
//! - the body read whole (bounded) and checked to be a JSON object (serde_json, nothing built);
//! - the request's end-to-end headers forwarded (hop-by-hop and proxy-authorization dropped), the
//!   response's too;
//! - the balancer: the replica with the fewest calls in flight under its concurrency, its slot held
//!   until the answer's body is over;
//! - at the end of the call: the duration histogram of (project, app, mode, status) (the gateway's
//!   14 buckets), the sync-call record's rate bounds (10 per app and 200 per second; an admitted record
//!   is serialised and handed to another thread), and, with NATIVE_ACCESS_LOG=1, the access log's JSON
//!   line (buffered stdout; the benchmark gateway runs at `warn`, which writes none).
//!
//! Env: NATIVE_WORK_TOKEN (a run token to accept), NATIVE_WORK_PROJECT, NATIVE_WORK_APP,
//! NATIVE_WORK_FUNCTIONS (comma-separated), NATIVE_ACCESS_LOG.

use std::collections::HashMap;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue,
};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

/// Request bodies over this are refused (the gateway's maxBodyBytes default order of magnitude).
const MAX_BODY_BYTES: usize = 6 * 1024 * 1024;
const REPLICA_CONCURRENCY: u32 = 1024;
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];
const RECORDS_PER_APP_PER_SECOND: u32 = 10;
const RECORDS_PER_SECOND: u32 = 200;

// The model's drop lists are a subset of the gateway's (upstream.ts: 15 request, 10 response names), kept
// as measured in the tenth round; the rule itself, held to the gateway's vectors, is
// native/dataplane/src/headers.rs, which step 5 of docs/design/native-data-plane.md measures in place of
// this model.
const DROP_REQUEST: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
];
const DROP_RESPONSE: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "http2-settings",
];

struct Replica {
    authority: hyper::http::uri::Authority,
    inflight: AtomicU32,
}

struct App {
    project: Arc<str>,
    name: Arc<str>,
    functions: Vec<String>,
    replicas: Vec<Arc<Replica>>,
}

struct TokenEntry {
    project: Arc<str>,
    until: Instant,
}

#[derive(Default)]
struct Histogram {
    buckets: [AtomicU64; 14],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

struct RateWindow {
    second: u64,
    total: u32,
    per_app: HashMap<Arc<str>, u32>,
}

pub struct Gateway {
    apps: HashMap<(String, String), Arc<App>>,
    tokens: HashMap<String, TokenEntry>,
    last_token: Mutex<Option<String>>,
    metrics: Mutex<HashMap<(Arc<str>, Arc<str>, &'static str, u16), Arc<Histogram>>>,
    records: Mutex<RateWindow>,
    record_tx: Mutex<mpsc::Sender<Vec<u8>>>,
    log: Option<Mutex<std::io::BufWriter<std::io::Stdout>>>,
    client: Client<HttpConnector, Full<Bytes>>,
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

impl Gateway {
    pub fn from_env(upstream: &Uri, client: Client<HttpConnector, Full<Bytes>>) -> Arc<Gateway> {
        let project: Arc<str> = env("NATIVE_WORK_PROJECT").into();
        let app = Arc::new(App {
            project: project.clone(),
            name: env("NATIVE_WORK_APP").into(),
            functions: env("NATIVE_WORK_FUNCTIONS")
                .split(',')
                .map(str::to_string)
                .collect(),
            replicas: vec![Arc::new(Replica {
                authority: upstream.authority().expect("upstream host:port").clone(),
                inflight: AtomicU32::new(0),
            })],
        });
        let mut tokens = HashMap::new();
        tokens.insert(
            env("NATIVE_WORK_TOKEN"),
            TokenEntry {
                project,
                until: Instant::now() + Duration::from_secs(3600),
            },
        );
        let (record_tx, record_rx) = mpsc::channel::<Vec<u8>>();
        // Stands in for the NATS publish of an admitted record: takes it off the call's thread.
        std::thread::spawn(move || while record_rx.recv().is_ok() {});
        Arc::new(Gateway {
            apps: HashMap::from([((app.project.to_string(), app.name.to_string()), app)]),
            tokens,
            last_token: Mutex::new(None),
            metrics: Mutex::new(HashMap::new()),
            records: Mutex::new(RateWindow {
                second: 0,
                total: 0,
                per_app: HashMap::new(),
            }),
            record_tx: Mutex::new(record_tx),
            log: (env("NATIVE_ACCESS_LOG") == "1").then(|| {
                Mutex::new(std::io::BufWriter::with_capacity(
                    64 * 1024,
                    std::io::stdout(),
                ))
            }),
            client,
        })
    }

    fn verify(&self, token: &str) -> Option<Arc<str>> {
        let now = Instant::now();
        let mut last = self.last_token.lock().unwrap();
        let entry = match last.as_deref() {
            Some(l) if constant_time_eq(l.as_bytes(), token.as_bytes()) => self.tokens.get(l),
            _ => {
                let e = self.tokens.get(token);
                if e.is_some() {
                    *last = Some(token.to_string());
                }
                e
            }
        }?;
        (entry.until > now).then(|| entry.project.clone())
    }

    fn admit_record(&self, app: &Arc<str>, unix_second: u64) -> bool {
        let mut w = self.records.lock().unwrap();
        if w.second != unix_second {
            w.second = unix_second;
            w.total = 0;
            w.per_app.clear();
        }
        if w.total >= RECORDS_PER_SECOND {
            return false;
        }
        let n = w.per_app.entry(app.clone()).or_insert(0);
        if *n >= RECORDS_PER_APP_PER_SECOND {
            return false;
        }
        *n += 1;
        w.total += 1;
        true
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn request_id() -> String {
    let v = fastrand::u128(..);
    let v = (v & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let h = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// What ends with the answer's body: the replica's slot, the metrics, the record and the log line.
struct CallEnd {
    gw: Arc<Gateway>,
    app: Arc<App>,
    replica: Arc<Replica>,
    request_id: String,
    function: String,
    status: u16,
    streamed: bool,
    started: Instant,
}

impl Drop for CallEnd {
    fn drop(&mut self) {
        self.replica.inflight.fetch_sub(1, Ordering::Relaxed);
        let seconds = self.started.elapsed().as_secs_f64();
        let mode = if self.streamed { "stream" } else { "sync" };
        let h = self
            .gw
            .metrics
            .lock()
            .unwrap()
            .entry((
                self.app.project.clone(),
                self.app.name.clone(),
                mode,
                self.status,
            ))
            .or_default()
            .clone();
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                h.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        h.count.fetch_add(1, Ordering::Relaxed);
        h.sum_micros
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        if self.gw.admit_record(&self.app.name, now.as_secs()) {
            let record = format!(
                r#"{{"requestId":"{}","projectId":"{}","appName":"{}","path":"{}","status":{},"finishedAtMs":{},"streamed":{}}}"#,
                self.request_id,
                self.app.project,
                self.app.name,
                self.function,
                self.status,
                now.as_millis(),
                self.streamed
            );
            let _ = self.gw.record_tx.lock().unwrap().send(record.into_bytes());
        }
        if let Some(log) = &self.gw.log {
            let mut out = log.lock().unwrap();
            let _ = writeln!(
                out,
                r#"{{"level":30,"time":{},"pid":{},"requestId":"{}","method":"POST","status":{},"durationMs":{},"aborted":false,"mode":"{}","project":"{}","app":"{}","msg":"request"}}"#,
                now.as_millis(),
                std::process::id(),
                self.request_id,
                self.status,
                (seconds * 1000.0).round() as u64,
                mode,
                self.app.project,
                self.app.name
            );
        }
    }
}

/// The app's answer body, holding the call's end until it is over (or dropped: the caller went away).
pub struct Tracked {
    inner: Incoming,
    _end: CallEnd,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = hyper::Error;
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

pub type WorkBody = http_body_util::Either<Tracked, Full<Bytes>>;

fn error(status: StatusCode, code: &str, message: &str, id: &str) -> Response<WorkBody> {
    let body = format!(r#"{{"error":{{"code":"{code}","message":"{message}"}}}}"#);
    let mut res = Response::new(http_body_util::Either::Right(Full::new(Bytes::from(body))));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(id) {
        res.headers_mut()
            .insert(HeaderName::from_static("x-request-id"), v);
    }
    res
}

pub async fn call(gw: Arc<Gateway>, req: Request<Incoming>) -> Response<WorkBody> {
    let started = Instant::now();
    let id = request_id();
    let (parts, body) = req.into_parts();
    // Route: /v4/<project>/<app>/<function>
    let path = parts.uri.path();
    let mut seg = path.strip_prefix("/v4/").unwrap_or("").splitn(3, '/');
    let (Some(project), Some(app_name), Some(function)) = (seg.next(), seg.next(), seg.next())
    else {
        return error(StatusCode::NOT_FOUND, "not_found", "no such path", &id);
    };
    // Auth
    let token = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.get(..7)
                .filter(|p| p.eq_ignore_ascii_case("bearer "))
                .map(|_| v[7..].trim())
        });
    let Some(token) = token else {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "missing bearer token",
            &id,
        );
    };
    let Some(token_project) = gw.verify(token) else {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "invalid or expired run token",
            &id,
        );
    };
    let app = match gw.apps.get(&(project.to_string(), app_name.to_string())) {
        Some(a) if *token_project == *project => a.clone(),
        _ => return error(StatusCode::NOT_FOUND, "not_found", "no such app", &id),
    };
    if function.is_empty() || function.contains('/') || !app.functions.iter().any(|f| f == function)
    {
        return error(StatusCode::NOT_FOUND, "not_found", "no such function", &id);
    }
    // Body: whole, bounded, a JSON object.
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "body too large",
                &id,
            );
        }
    };
    let first = body.iter().find(|c| !c.is_ascii_whitespace());
    if first.is_some()
        && (first != Some(&b'{') || serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err())
    {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "body must be a JSON object",
            &id,
        );
    }
    // Headers
    let mut headers = HeaderMap::with_capacity(parts.headers.len() + 1);
    for (name, value) in parts.headers.iter() {
        if !DROP_REQUEST.contains(&name.as_str()) {
            headers.append(name.clone(), value.clone());
        }
    }
    let id_value = HeaderValue::from_str(&id).expect("uuid is a header value");
    headers.insert(HeaderName::from_static("x-request-id"), id_value.clone());
    // Balancer: fewest in flight under the replica's concurrency.
    let Some(replica) = app
        .replicas
        .iter()
        .filter(|r| r.inflight.load(Ordering::Relaxed) < REPLICA_CONCURRENCY)
        .min_by_key(|r| r.inflight.load(Ordering::Relaxed))
        .cloned()
    else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "no replica free",
            &id,
        );
    };
    replica.inflight.fetch_add(1, Ordering::Relaxed);
    let mut end = CallEnd {
        gw: gw.clone(),
        app: app.clone(),
        replica: replica.clone(),
        request_id: id.clone(),
        function: function.to_string(),
        status: 502,
        streamed: false,
        started,
    };
    let mut pq = String::with_capacity(function.len() + 1);
    pq.push('/');
    pq.push_str(function);
    if let Some(q) = parts.uri.query() {
        pq.push('?');
        pq.push_str(q);
    }
    let uri = Uri::builder()
        .scheme("http")
        .authority(replica.authority.clone())
        .path_and_query(pq)
        .build();
    let mut out = Request::new(Full::new(body));
    *out.method_mut() = parts.method;
    *out.uri_mut() = uri.expect("upstream URI");
    *out.headers_mut() = headers;
    match gw.client.request(out).await {
        Ok(res) => {
            let (mut rparts, rbody) = res.into_parts();
            for h in DROP_RESPONSE {
                rparts.headers.remove(h);
            }
            end.status = rparts.status.as_u16();
            end.streamed = rparts
                .headers
                .get(CONTENT_TYPE)
                .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
            if end.streamed {
                rparts.headers.insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("text/event-stream; charset=utf-8"),
                );
                rparts
                    .headers
                    .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            }
            rparts
                .headers
                .insert(HeaderName::from_static("x-request-id"), id_value);
            Response::from_parts(
                rparts,
                http_body_util::Either::Left(Tracked {
                    inner: rbody,
                    _end: end,
                }),
            )
        }
        Err(_) => error(
            StatusCode::BAD_GATEWAY,
            "upstream_unavailable",
            "the app did not answer",
            &id,
        ),
    }
}
