//! Which headers cross the data plane: a port of the gateway's `forwardRequestHeaders` and
//! `forwardResponseHeaders` (src/shared/http/upstream.ts), fed with the map node:http builds from a
//! head (`req.headers`, `res.headers`), which [`node_headers`] builds from the head's lines as hyper
//! hands them over. tests/headers_vectors.rs holds all three to tests/vectors/*-headers.json.

/// A header's value in node's map: one string, or (set-cookie only) each line's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    One(String),
    Many(Vec<String>),
}

impl Value {
    /// The value as one string, lines joined with ", " (as `forwardRequestHeaders` sends set-cookie).
    pub fn joined(&self) -> String {
        match self {
            Value::One(v) => v.clone(),
            Value::Many(vs) => vs.join(", "),
        }
    }
}

/// The fields node keeps once, with their first value (node's `matchKnownFields`).
const KEPT_ONCE: [&str; 18] = [
    "age",
    "from",
    "etag",
    "host",
    "server",
    "referer",
    "expires",
    "location",
    "user-agent",
    "retry-after",
    "content-type",
    "authorization",
    "max-forwards",
    "last-modified",
    "content-length",
    "proxy-authorization",
    "if-modified-since",
    "if-unmodified-since",
];

/// Hop-by-hop and proxy-owned request headers never forwarded (upstream.ts `DROP_REQUEST`).
const DROP_REQUEST: [&str; 16] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "http2-settings",
    "host",
    "content-length",
    "expect",
    "authorization",
    "x-webhook-secret",
    "x-request-id",
    "x-apphost-handoff",
];

/// Response headers the gateway sets itself or that describe the upstream hop only (`DROP_RESPONSE` of
/// src/shared/http/upstream.ts): one list for both heads built here and answer.rs's.
pub const DROP_RESPONSE: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "http2-settings",
    "x-request-id",
    "content-length",
];

/// node's header map from a head's lines, in the order each name first came: names lower-cased,
/// set-cookie's lines kept apart, cookie's joined with "; ", [`KEPT_ONCE`]'s first value kept, every
/// other joined with ", ".
pub fn node_headers<'a>(lines: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    for (name, value) in lines {
        let name = name.to_ascii_lowercase();
        match out.iter_mut().find(|(n, _)| *n == name) {
            None if name == "set-cookie" => out.push((name, Value::Many(vec![value.to_owned()]))),
            None => out.push((name, Value::One(value.to_owned()))),
            Some((_, Value::Many(vs))) => vs.push(value.to_owned()),
            Some((n, Value::One(v))) => {
                if n == "cookie" {
                    v.push_str("; ");
                    v.push_str(value);
                } else if !KEPT_ONCE.contains(&n.as_str()) {
                    v.push_str(", ");
                    v.push_str(value);
                }
            }
        }
    }
    out
}

/// The names a `Connection` header lists (they are hop-by-hop too), lower-cased.
fn connection_listed(headers: &[(String, Value)]) -> Vec<String> {
    let Some((_, raw)) = headers.iter().find(|(n, _)| n == "connection") else {
        return Vec::new();
    };
    let list = match raw {
        Value::One(v) => v.clone(),
        Value::Many(vs) => vs.join(","),
    };
    list.split(',')
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `forwardRequestHeaders`: the caller's end-to-end headers plus `x-request-id`.
pub fn forward_request_headers(headers: &[(String, Value)], request_id: &str) -> Vec<(String, String)> {
    let listed = connection_listed(headers);
    let mut out: Vec<(String, String)> = headers
        .iter()
        .filter(|(n, _)| !DROP_REQUEST.contains(&n.as_str()) && !listed.contains(n))
        .map(|(n, v)| (n.clone(), v.joined()))
        .collect();
    out.push(("x-request-id".to_owned(), request_id.to_owned()));
    out
}

/// `forwardResponseHeaders`: the app's headers to pass back to the caller.
pub fn forward_response_headers(headers: &[(String, Value)]) -> Vec<(String, Value)> {
    let listed = connection_listed(headers);
    headers
        .iter()
        .filter(|(n, _)| !DROP_RESPONSE.contains(&n.as_str()) && !listed.contains(n))
        .cloned()
        .collect()
}
