//! The upstream hop of a call the data plane serves (design §2, "upstream call"; upstream-dispatch.ts and
//! `upstreamRequest` in src/shared/http/upstream.ts): a hyper-util client over TCP with a keep-alive
//! pool and `TCP_NODELAY`, the request built as the gateway builds it (`<upstream base path>/<path>` and
//! the re-serialised query; the caller's headers through `forwardRequestHeaders`), and the failures named
//! as undici names them (upstream_failure.rs).

use std::error::Error as StdError;
use std::io;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::headers::{forward_request_headers, node_headers};
use crate::upstream_failure::UpstreamFailure;

/// How long an idle connection to a replica is kept: undici's default `keepAliveTimeout` (4 s), the
/// gateway's pool, so a replica sees the same connection reuse from either data plane.
pub const UPSTREAM_POOL_IDLE_MS: u64 = 4_000;

/// The client every replica call goes through.
#[derive(Clone)]
pub struct Upstream {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Upstream {
    fn default() -> Self {
        Self::new()
    }
}

impl Upstream {
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.enforce_http(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_millis(UPSTREAM_POOL_IDLE_MS))
            .pool_max_idle_per_host(usize::MAX)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Upstream { client }
    }

    /// Sends the call; the answer's head, or the failure as undici names it.
    pub async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, UpstreamFailure> {
        self.client.request(req).await.map_err(|e| failure_of(&e))
    }
}

/// A header value's bytes as a JavaScript string of latin1 chars (node reads a head so).
fn latin1(b: &[u8]) -> String {
    b.iter().map(|&c| char::from(c)).collect()
}

/// A latin1 string back to its bytes (every char is below 256: it came from bytes).
fn latin1_bytes(s: &str) -> Vec<u8> {
    s.chars().map(|c| c as u32 as u8).collect()
}

/// The request to the replica at `base` (a replica's URL, or the app's upstream: `http://host:port` with
/// an optional base path) for the forwarded `path` (after `/v4/<project>/<app>/`), the forwarded `query`
/// (forward_query's: without `?`), the caller's `headers` and the whole `body`.
pub fn build_request(
    base: &str,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    request_id: &str,
    body: Bytes,
) -> Option<Request<Full<Bytes>>> {
    let base = base.strip_suffix('/').unwrap_or(base);
    let mut target = String::with_capacity(base.len() + path.len() + query.len() + 2);
    target.push_str(base);
    target.push('/');
    target.push_str(path);
    if !query.is_empty() {
        target.push('?');
        target.push_str(query);
    }
    let uri: Uri = target.parse().ok()?;
    let lines: Vec<(&str, String)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), latin1(v.as_bytes())))
        .collect();
    let node = node_headers(lines.iter().map(|(n, v)| (*n, v.as_str())));
    let mut req = Request::builder().method(Method::POST).uri(uri);
    let h = req.headers_mut()?;
    for (name, value) in forward_request_headers(&node, request_id) {
        let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(&latin1_bytes(&value)).ok()?;
        h.append(name, value);
    }
    // undici sends a Buffer body's length, 0 included; hyper writes none for an empty body, and an app
    // server may refuse a POST without one (411).
    h.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    req.body(Full::new(body)).ok()
}

/// The undici code of a hyper-util client failure.
pub fn failure_of(e: &hyper_util::client::legacy::Error) -> UpstreamFailure {
    let mut source: Option<&(dyn StdError + 'static)> = e.source();
    let mut connect_failure = e.is_connect().then_some(UpstreamFailure::Other);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return UpstreamFailure::from_io(io);
        }
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                return UpstreamFailure::Closed;
            }
            if h.is_parse_too_large() {
                return UpstreamFailure::HeadTooLarge;
            }
            if h.is_parse() || h.is_parse_status() {
                return UpstreamFailure::Malformed;
            }
            if h.is_timeout() {
                return UpstreamFailure::HeadTimeout;
            }
        }
        if connect_failure.is_some() && s.to_string().contains("dns error") {
            connect_failure = Some(UpstreamFailure::NameNotFound);
        }
        source = s.source();
    }
    connect_failure.unwrap_or(UpstreamFailure::Other)
}

/// The undici code of a failure while reading an answer's body.
pub fn body_failure_of(e: &(dyn StdError + 'static)) -> UpstreamFailure {
    let mut source: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<crate::handoff::StreamIdle>() {
            return UpstreamFailure::BodyTimeout;
        }
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return UpstreamFailure::from_io(io);
        }
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                return UpstreamFailure::Closed;
            }
        }
        source = s.source();
    }
    UpstreamFailure::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_the_gateways() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("host", "gw.example"),
            ("authorization", "Bearer t"),
            ("x-a", "1"),
            ("x-a", "2"),
            ("content-type", "application/json"),
            ("content-type", "text/plain"),
            ("x-request-id", "forged"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        h.append("x-latin", HeaderValue::from_bytes(b"caf\xe9").unwrap());
        let req = build_request(
            "http://10.0.0.1:8080/base/",
            "greet",
            "a=%20",
            &h,
            "id-1",
            Bytes::from_static(b"{}"),
        )
        .unwrap();
        assert_eq!(req.uri(), "http://10.0.0.1:8080/base/greet?a=%20");
        let lines: Vec<_> = req
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(
            lines,
            vec![
                ("x-a".to_owned(), b"1, 2".to_vec()),
                ("content-type".to_owned(), b"application/json".to_vec()),
                ("x-latin".to_owned(), b"caf\xe9".to_vec()),
                ("x-request-id".to_owned(), b"id-1".to_vec()),
                ("content-length".to_owned(), b"2".to_vec()),
            ]
        );
    }
}
