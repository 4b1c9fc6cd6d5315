//! The hand-off (design §3): a call the data plane does not serve goes whole to Node's hand-off server
//! (src/gateway/dataplane/handoff.ts) on a Unix socket, over a keep-alive pool of HTTP/1.1 connections,
//! with the marker `X-Apphost-Handoff`; Node's answer comes back unchanged. In step 4 every call goes
//! this way (reason `not_served`).
//!
//! Bounds: Node's answer head within `coldStartTimeoutMs + syncTimeoutMs + handoffMarginMs`, and at most
//! `streamIdleTimeoutMs` between its body's chunks (0: none), as Node bounds an app's answer. A socket
//! that refuses the connection, a head that misses its bound, or a connection closed before a head is
//! answered 503 `gateway_unavailable` with `Retry-After`.

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::{Either, Full};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{CONNECTION, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, Uri, Version};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::UnixStream;
use tokio::time::{Instant, Sleep};

use crate::errors::{ApiError, HandoffFailure, gateway_unavailable};

/// The marker header (design §3). A caller's own is removed before anything else.
pub const MARKER: HeaderName = HeaderName::from_static("x-apphost-handoff");

/// How long an idle pooled connection to the hand-off socket is kept: under the 5 s keep-alive timeout of
/// Node's `http.Server`, so the data plane retires a connection before Node closes it under a request.
pub const HANDOFF_POOL_IDLE_MS: u64 = 4_000;

/// Headers of one hop only (RFC 9110 §7.6.1, and the names Node's and hyper's HTTP/1 stacks treat so):
/// never passed on either way. The body is framed again on each hop.
const HOP_BY_HOP: [HeaderName; 8] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("proxy-authenticate"),
    HeaderName::from_static("te"),
    HeaderName::from_static("trailer"),
    HeaderName::from_static("transfer-encoding"),
    HeaderName::from_static("upgrade"),
];

/// Why a call is handed off (design §3: a closed set, a metric label; handoff.ts `HANDOFF_REASONS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// `?async=...`: Node accepts it durably (202).
    Async,
    /// `webhookEndpoint`: the outbox is Node's.
    Webhook,
    /// No bearer token, or one the verified tokens do not hold for this project.
    TokenMiss,
    /// The app has no ready replica (cold start, wake, start failure are Node's), or its replicas went to
    /// zero while the call waited in the queue (it carries its deadline).
    NoReplica,
    /// The body check is not sure (Node's full check decides and writes the 400).
    RefusedCheck,
    /// The body is over `maxBodyBytes` (Node writes the 413).
    BodyOverLimit,
    /// The app is not in the table, or the Cortex function is not known (Node writes the 404).
    UnknownApp,
    /// A custom domain, or a Host the data plane does not parse as Node does.
    Domain,
    /// Anything else the data plane does not serve: a path that is not the run route, a method other
    /// than POST, a path Node refuses (Node writes its 404/405/400).
    NotServed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Async => "async",
            Reason::Webhook => "webhook",
            Reason::TokenMiss => "token_miss",
            Reason::NoReplica => "no_replica",
            Reason::RefusedCheck => "refused_check",
            Reason::BodyOverLimit => "body_over_limit",
            Reason::UnknownApp => "unknown_app",
            Reason::Domain => "domain",
            Reason::NotServed => "not_served",
        }
    }
}

/// The reason every call had in step 4.
pub const REASON_NOT_SERVED: &str = "not_served";

/// The marker's value: `v=1; id=<request id>; start=<epoch ms>; reason=<reason>[; deadline=<epoch ms>]`.
pub fn marker(id: &str, start_ms: u64, reason: &str) -> String {
    format!("v=1; id={id}; start={start_ms}; reason={reason}")
}

/// The marker with a queue deadline (a call refused by a replica and handed over to wait in Node's
/// queue no later than it would have waited here); a deadline before `start` is sent as `start`.
pub fn marker_with_deadline(id: &str, start_ms: u64, reason: &str, deadline_ms: Option<u64>) -> String {
    match deadline_ms {
        Some(d) => format!(
            "v=1; id={id}; start={start_ms}; reason={reason}; deadline={}",
            d.max(start_ms)
        ),
        None => marker(id, start_ms, reason),
    }
}

/// The body handed to Node: what the data plane has read of the caller's body, then the rest of it.
pub struct CallBody {
    read: Option<Bytes>,
    rest: Option<Incoming>,
}

impl CallBody {
    /// The caller's body untouched.
    pub fn stream(rest: Incoming) -> Self {
        CallBody {
            read: None,
            rest: Some(rest),
        }
    }
    /// A body read whole.
    pub fn whole(read: Bytes) -> Self {
        CallBody {
            read: Some(read).filter(|b| !b.is_empty()),
            rest: None,
        }
    }
    /// What was read, then the rest of the stream.
    pub fn prefixed(read: Bytes, rest: Incoming) -> Self {
        CallBody {
            read: Some(read).filter(|b| !b.is_empty()),
            rest: Some(rest),
        }
    }
}

impl Body for CallBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if let Some(b) = this.read.take() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        match &mut this.rest {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_none() && self.rest.as_ref().is_none_or(|r| r.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        let read = self.read.as_ref().map_or(0, |b| b.len() as u64);
        match &self.rest {
            None => SizeHint::with_exact(read),
            Some(r) => {
                let h = r.size_hint();
                let mut out = SizeHint::new();
                out.set_lower(h.lower() + read);
                if let Some(u) = h.upper() {
                    out.set_upper(u + read);
                }
                out
            }
        }
    }
}

/// What runs once an answer's body is done with: `true` when it was sent to its end, `false` when it
/// was cut (the caller gone, the stream idle bound, an upstream error mid-stream). The fast path frees
/// the call's replica slot and writes the access line and metrics here.
pub type OnEnd = Box<dyn FnOnce(bool) + Send>;

/// The body the data plane answers with: Node's or an app's, streamed, or one it holds whole; with what
/// runs when it is done with.
pub struct AnswerBody {
    inner: Either<IdleBody, Full<Bytes>>,
    ended: bool,
    on_end: Option<OnEnd>,
}

impl AnswerBody {
    /// A streamed body.
    pub fn stream(body: IdleBody) -> Self {
        AnswerBody {
            inner: Either::Left(body),
            ended: false,
            on_end: None,
        }
    }
    /// A body held whole.
    pub fn whole(b: Bytes) -> Self {
        AnswerBody {
            inner: Either::Right(Full::new(b)),
            ended: false,
            on_end: None,
        }
    }
    /// `f` runs when the body is done with (sent whole, cut, or never polled).
    pub fn on_end(mut self, f: OnEnd) -> Self {
        self.on_end = Some(f);
        self
    }
}

impl Drop for AnswerBody {
    fn drop(&mut self) {
        if let Some(f) = self.on_end.take() {
            let ended = self.ended || self.is_end_stream();
            f(ended);
        }
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let polled = match &mut this.inner {
            Either::Left(b) => Pin::new(b).poll_frame(cx),
            Either::Right(b) => Pin::new(b).poll_frame(cx).map_err(|e| match e {}),
        };
        if let Poll::Ready(None) = polled {
            this.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Either::Left(b) => b.is_end_stream(),
            Either::Right(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Either::Left(b) => b.size_hint(),
            Either::Right(b) => b.size_hint(),
        }
    }
}

/// Connects to the hand-off socket: hyper-util's pool takes its connector as a tower service.
#[derive(Clone)]
pub struct UnixConnector {
    path: Arc<PathBuf>,
}

impl tower_service::Service<Uri> for UnixConnector {
    type Response = UnixIo;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<UnixIo>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let path = self.path.clone();
        Box::pin(async move { Ok(UnixIo(TokioIo::new(UnixStream::connect(&*path).await?))) })
    }
}

/// A connection to the hand-off socket, as hyper's client reads and writes it.
pub struct UnixIo(TokioIo<UnixStream>);

impl hyper::rt::Read for UnixIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for UnixIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }
}

impl Connection for UnixIo {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

/// Node's hand-off server, as the data plane calls it.
#[derive(Clone)]
pub struct Handoff {
    client: Client<UnixConnector, CallBody>,
    head_bound: Duration,
    idle_bound: Option<Duration>,
    retry_after: u64,
}

impl Handoff {
    /// `head_ms`: bound on Node's answer head; `idle_ms`: between its body's chunks (0: none);
    /// `retry_after`: seconds, on the 503s.
    pub fn new(socket: &str, head_ms: u64, idle_ms: u64, retry_after: u64) -> Self {
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_millis(HANDOFF_POOL_IDLE_MS))
            .pool_max_idle_per_host(usize::MAX)
            .pool_timer(TokioTimer::new())
            // The caller's Host (a custom domain) goes to Node as it came; none is made up.
            .set_host(false)
            .build(UnixConnector {
                path: Arc::new(PathBuf::from(socket)),
            });
        Handoff {
            client,
            head_bound: Duration::from_millis(head_ms),
            idle_bound: (idle_ms > 0).then(|| Duration::from_millis(idle_ms)),
            retry_after,
        }
    }

    /// Hands the whole call to Node and answers with what Node answered (or 503 `gateway_unavailable`,
    /// with `id` as its `X-Request-Id`). `start_ms`: when the call came, epoch ms.
    pub async fn forward(&self, req: Request<Incoming>, id: &str, start_ms: u64) -> Response<AnswerBody> {
        let (parts, body) = req.into_parts();
        self.hand_off(
            parts,
            CallBody::stream(body),
            id,
            start_ms,
            Reason::NotServed,
            None,
        )
        .await
    }

    /// Hands a call to Node with `reason` (and the queue deadline it had, if any): its head `parts`,
    /// and `body` (what the data plane read of it, then the rest).
    pub async fn hand_off(
        &self,
        mut parts: hyper::http::request::Parts,
        body: CallBody,
        id: &str,
        start_ms: u64,
        reason: Reason,
        deadline_ms: Option<u64>,
    ) -> Response<AnswerBody> {
        strip_request_headers(&mut parts.headers);
        let marker = HeaderValue::from_str(&marker_with_deadline(id, start_ms, reason.as_str(), deadline_ms))
            .expect("a marker is ASCII without control characters");
        parts.headers.insert(MARKER, marker);
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        parts.uri = Uri::builder()
            .scheme("http")
            .authority("handoff")
            .path_and_query(path)
            .build()
            .unwrap_or_else(|_| Uri::from_static("http://handoff/"));
        parts.version = Version::HTTP_11;
        let failure = match tokio::time::timeout(
            self.head_bound,
            self.client.request(Request::from_parts(parts, body)),
        )
        .await
        {
            Ok(Ok(res)) => return self.answer(res),
            Ok(Err(e)) if e.is_connect() => HandoffFailure::Refused,
            Ok(Err(_)) => HandoffFailure::Closed,
            Err(_) => HandoffFailure::Timeout,
        };
        error_response(&gateway_unavailable(failure, self.retry_after), id, false)
    }

    fn answer(&self, res: Response<Incoming>) -> Response<AnswerBody> {
        let (mut parts, body) = res.into_parts();
        let close = says_close(&parts.headers);
        for name in &HOP_BY_HOP {
            parts.headers.remove(name);
        }
        if close {
            parts
                .headers
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        Response::from_parts(parts, AnswerBody::stream(IdleBody::new(body, self.idle_bound)))
    }
}

/// Whether a head's `Connection` names `close`.
pub fn says_close(headers: &HeaderMap) -> bool {
    headers.get_all(CONNECTION).iter().any(|v| {
        v.to_str()
            .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    })
}

/// The caller's headers as Node gets them: the hop-by-hop ones removed, and any caller-sent marker (only
/// the data plane sets it). The names the caller's `Connection` lists are kept, and listed again in a
/// `Connection` of the hop's own, so that Node reads them as in node mode (a listed `Authorization` still
/// authorizes the call) and drops them before the app (`forwardRequestHeaders`). `close` and
/// `keep-alive` are left out of it: they are about the caller's connection, which the data plane keeps.
pub fn strip_request_headers(headers: &mut HeaderMap) {
    let mut listed = String::new();
    for v in headers.get_all(CONNECTION).iter() {
        let Ok(s) = v.to_str() else { continue };
        for t in s.split(',').map(str::trim) {
            let Ok(name) = HeaderName::from_bytes(t.as_bytes()) else {
                continue;
            };
            if name == "close" || name == "keep-alive" || HOP_BY_HOP.contains(&name) {
                continue;
            }
            if !listed.is_empty() {
                listed.push_str(", ");
            }
            listed.push_str(name.as_str());
        }
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(MARKER);
    if let Ok(v) = HeaderValue::from_str(&listed)
        && !listed.is_empty()
    {
        headers.insert(CONNECTION, v);
    }
}

/// An error the data plane writes itself, as the gateway's `writeError` writes it: the JSON body, its
/// `Content-Type`, `Retry-After`, the call's `X-Request-Id`, and `Connection: close` when asked.
pub fn error_response(e: &ApiError, id: &str, close: bool) -> Response<AnswerBody> {
    let mut res = Response::new(AnswerBody::whole(Bytes::from(e.body())));
    *res.status_mut() = hyper::StatusCode::from_u16(e.status).expect("an ApiError's status is valid");
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(id) {
        h.insert(HeaderName::from_static("x-request-id"), v);
    }
    if close {
        h.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    h.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    if let Some(s) = e.retry_after {
        h.insert(hyper::header::RETRY_AFTER, HeaderValue::from(s));
    }
    res
}

type BoxError = Box<dyn StdError + Send + Sync>;

/// Node's answer body, ended with an error (the client's connection cut, as Node cuts it) when no chunk
/// comes for the idle bound.
pub struct IdleBody {
    inner: Incoming,
    idle: Option<(Duration, Pin<Box<Sleep>>)>,
}

impl IdleBody {
    pub fn new(inner: Incoming, idle: Option<Duration>) -> Self {
        IdleBody {
            inner,
            idle: idle.map(|d| (d, Box::pin(tokio::time::sleep(d)))),
        }
    }
}

/// The error that ends a body silent for the idle bound.
#[derive(Debug)]
pub struct StreamIdle;

impl std::fmt::Display for StreamIdle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the gateway's answer was silent for the stream idle bound")
    }
}

impl StdError for StreamIdle {}

impl Body for IdleBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some((d, sleep)) = &mut this.idle {
                    sleep.as_mut().reset(Instant::now() + *d);
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                // Not a let chain: the crate's rust-version (1.85) predates them.
                let silent_too_long = match &mut this.idle {
                    Some((_, sleep)) => sleep.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if silent_too_long {
                    return Poll::Ready(Some(Err(StreamIdle.into())));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_names_version_id_start_and_reason() {
        assert_eq!(
            marker("0b1c", 1_700_000_000_123, REASON_NOT_SERVED),
            "v=1; id=0b1c; start=1700000000123; reason=not_served"
        );
    }

    #[test]
    fn request_headers_lose_hop_by_hop_and_the_callers_marker_and_keep_the_listed_for_node() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("host", "example.com"),
            ("authorization", "Bearer t"),
            ("connection", "keep-alive, X-Secret-Hop"),
            ("x-secret-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("upgrade", "h2c"),
            ("x-apphost-handoff", "v=1; id=forged; start=0; reason=async"),
            ("x-webhook-secret", "s"),
            ("content-length", "3"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        strip_request_headers(&mut h);
        let mut names: Vec<_> = h.keys().map(|k| k.as_str().to_owned()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "authorization",
                "connection",
                "content-length",
                "host",
                "x-secret-hop",
                "x-webhook-secret"
            ]
        );
        assert_eq!(h["connection"], "x-secret-hop");
    }

    #[test]
    fn a_listed_authorization_reaches_node_with_the_list() {
        let mut h = HeaderMap::new();
        h.append(CONNECTION, HeaderValue::from_static("close, Authorization"));
        h.append(CONNECTION, HeaderValue::from_static("TE, x-b"));
        h.append(
            HeaderName::from_static("authorization"),
            HeaderValue::from_static("Bearer t"),
        );
        strip_request_headers(&mut h);
        assert_eq!(h["authorization"], "Bearer t");
        assert_eq!(h["connection"], "authorization, x-b");
        let mut bare = HeaderMap::new();
        bare.append(CONNECTION, HeaderValue::from_static("keep-alive"));
        strip_request_headers(&mut bare);
        assert!(bare.is_empty());
    }

    #[test]
    fn close_is_read_from_any_token_of_any_connection_header() {
        let mut h = HeaderMap::new();
        assert!(!says_close(&h));
        h.append(CONNECTION, HeaderValue::from_static("keep-alive"));
        assert!(!says_close(&h));
        h.append(CONNECTION, HeaderValue::from_static("Upgrade, CLOSE"));
        assert!(says_close(&h));
    }

    #[test]
    fn an_error_is_written_as_the_gateway_writes_it() {
        let e = crate::errors::shutting_down(5);
        let res = error_response(&e, "id-1", true);
        assert_eq!(res.status(), 503);
        let h = res.headers();
        assert_eq!(h["content-type"], "application/json; charset=utf-8");
        assert_eq!(h["retry-after"], "5");
        assert_eq!(h["x-request-id"], "id-1");
        assert_eq!(h["connection"], "close");
    }
}
