//! The head the gateway sends for an app's answer (`runSync`, src/gateway/handlers/run-sync.ts, then
//! `CallContext`'s body setter and `respond`, src/gateway/call-context.ts), and for a call that
//! arrives while it drains (`handler` in gateway.ts). The app's head comes as undici parses it (names
//! lower-cased, latin1 values, a repeated name kept as each of its values, in the order first seen):
//! - `X-Request-Id` first, then the app's headers less `DROP_RESPONSE` and the names `Connection` lists;
//! - an event stream (`Content-Type` starting `text/event-stream`, any case) gets
//!   `text/event-stream; charset=utf-8` and `Cache-Control: no-cache` in place, and no length;
//! - an answer without a `Content-Type` (or an empty one) gets `application/octet-stream`;
//! - an answer with a `Content-Length` (`^\d+$`) up to `SMALL_RESPONSE_BYTES` that is no event stream is
//!   read whole and sent with its length; a longer one is streamed with its length; any other streamed;
//! - 204, 205 and 304 are sent without `Content-Type`, `Content-Length` and a body.
//!
//! tests/answer_vectors.rs holds it to tests/vectors/answers.json: the heads and bodies the gateway's
//! real handler wrote (node's `ServerResponse`) for a set of app answers, and for the drain.

use crate::errors::shutting_down;
use crate::headers::DROP_RESPONSE;

/// Answers up to this many bytes (by their `Content-Length`) are read whole (`SMALL_RESPONSE_BYTES`).
pub const SMALL_RESPONSE_BYTES: u64 = 64 * 1024;

const SSE_CONTENT_TYPE: &str = "text/event-stream; charset=utf-8";
const OCTET_STREAM: &str = "application/octet-stream";

/// An answer's head as undici parses it: lower-cased names in the order first seen, each with its
/// values (latin1: one char a byte).
pub type Head = Vec<(String, Vec<String>)>;

/// undici's `parseHeaders` of a head's lines (name, value bytes), as hyper hands them over.
pub fn undici_head<'a>(lines: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Head {
    let mut head: Head = Vec::new();
    for (name, value) in lines {
        let name = name.to_ascii_lowercase();
        let value: String = value.iter().map(|&b| char::from(b)).collect();
        match head.iter_mut().find(|(n, _)| *n == name) {
            Some((_, values)) => values.push(value),
            None => head.push((name, vec![value])),
        }
    }
    head
}

fn first<'a>(head: &'a Head, name: &str) -> Option<&'a str> {
    head.iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.first())
        .map(String::as_str)
}

fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type
        .is_some_and(|t| t.len() >= 17 && t.as_bytes()[..17].eq_ignore_ascii_case(b"text/event-stream"))
}

/// A `Content-Length` as the gateway takes it (`^\d+$`), or None.
fn declared_length(head: &Head) -> Option<u64> {
    let v = first(head, "content-length")?;
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// `readsWhole`: whether the answer is read whole before it is passed on.
pub fn reads_whole(head: &Head, whole_up_to: u64) -> bool {
    declared_length(head).is_some_and(|n| n <= whole_up_to) && !is_event_stream(first(head, "content-type"))
}

/// How the answer's body goes to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// None (204, 205, 304).
    Empty,
    /// Read whole, sent in one write with its length.
    Whole,
    /// Streamed with this `Content-Length`.
    Length(u64),
    /// Streamed without a length (chunked).
    Chunked,
}

/// What the gateway sends: status, headers in order (names lower-cased), and the body's framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// An event stream (the access line's mode `stream`).
    pub stream: bool,
}

/// Headers as node's `ServerResponse` keeps them: a name set again keeps its place.
struct Out(Vec<(String, Vec<String>)>);

impl Out {
    fn set(&mut self, name: &str, values: Vec<String>) {
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v = values,
            None => self.0.push((name.to_owned(), values)),
        }
    }
    fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }
    fn remove(&mut self, name: &str) {
        self.0.retain(|(n, _)| n != name);
    }
    fn lines(self) -> Vec<(String, String)> {
        self.0
            .into_iter()
            .flat_map(|(n, vs)| vs.into_iter().map(move |v| (n.clone(), v)))
            .collect()
    }
}

/// The gateway's answer for the app's `status` and `head`; `whole` is the body's length when it was
/// read whole (`reads_whole`).
pub fn answer(status: u16, head: &Head, whole: Option<usize>, request_id: &str) -> Answer {
    let mut out = Out(vec![("x-request-id".to_owned(), vec![request_id.to_owned()])]);
    let listed: Vec<String> = head
        .iter()
        .find(|(n, _)| n == "connection")
        .map(|(_, v)| v.join(","))
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    for (name, values) in head {
        if !DROP_RESPONSE.contains(&name.as_str()) && !listed.contains(name) {
            out.set(name, values.clone());
        }
    }
    let content_type = first(head, "content-type");
    let stream = is_event_stream(content_type);
    if stream {
        out.set("content-type", vec![SSE_CONTENT_TYPE.to_owned()]);
        out.set("cache-control", vec!["no-cache".to_owned()]);
    } else if content_type.is_none_or(str::is_empty) {
        out.remove("content-type");
    }
    // The body setter: a body without a Content-Type is a byte stream.
    if !out.has("content-type") {
        out.set("content-type", vec![OCTET_STREAM.to_owned()]);
    }
    let mut body = match whole {
        Some(n) => {
            out.set("content-length", vec![n.to_string()]);
            Body::Whole
        }
        None => match declared_length(head).filter(|_| !stream) {
            Some(n) => {
                out.set("content-length", vec![n.to_string()]);
                Body::Length(n)
            }
            None => Body::Chunked,
        },
    };
    if matches!(status, 204 | 205 | 304) {
        out.remove("content-type");
        out.remove("content-length");
        out.remove("transfer-encoding");
        body = Body::Empty;
    }
    Answer {
        status,
        headers: out.lines(),
        body,
        stream,
    }
}

/// The answer to a call that arrives while the gateway drains: 503 `shutting_down`, with `Retry-After`
/// and `Connection: close`; its body is `body`.
pub fn draining(request_id: &str, retry_after: u64) -> (Answer, String) {
    let body = shutting_down(retry_after).body();
    let headers = vec![
        ("x-request-id".to_owned(), request_id.to_owned()),
        ("connection".to_owned(), "close".to_owned()),
        (
            "content-type".to_owned(),
            "application/json; charset=utf-8".to_owned(),
        ),
        ("retry-after".to_owned(), retry_after.to_string()),
        ("content-length".to_owned(), body.len().to_string()),
    ];
    let answer = Answer {
        status: 503,
        headers,
        body: Body::Whole,
        stream: false,
    };
    (answer, body)
}
