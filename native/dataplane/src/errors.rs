//! The errors the data plane writes itself (design §2: only those after dispatch; every earlier
//! refusal is Node's): the 502/503/504 of the gateway's `gaveUp` (src/gateway/balancer/place.ts) and
//! `upstreamError` (src/shared/http/upstream.ts), as `writeError` (src/shared/http/errors.ts) writes
//! them — the status, `Retry-After`, and `JSON.stringify(err.toBody())` byte for byte.
//! tests/errors_vectors.rs holds them to tests/vectors/errors.json.

/// An error the data plane answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// The body's fields after `code` and `message`, in order.
    pub details: Vec<(&'static str, Detail)>,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
}

/// A field of an error's `details`: a string, or a count (`queue_full`'s `queued`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    Text(String),
    Count(u64),
}

/// A JSON string as `JSON.stringify` writes it: `"`, `\` and control characters escaped (the short
/// forms where JSON has them, `\u00xx` otherwise), everything else as it is.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

impl ApiError {
    /// `JSON.stringify(err.toBody())`: `{"error":{"code":…,"message":…,…details}}`.
    pub fn body(&self) -> String {
        let mut out = String::from("{\"error\":{\"code\":");
        push_json_string(&mut out, self.code);
        out.push_str(",\"message\":");
        push_json_string(&mut out, &self.message);
        for (name, value) in &self.details {
            out.push(',');
            push_json_string(&mut out, name);
            out.push(':');
            match value {
                Detail::Text(t) => push_json_string(&mut out, t),
                Detail::Count(n) => out.push_str(&n.to_string()),
            }
        }
        out.push_str("}}");
        out
    }
}

/// Why a replica did not take a call (place.ts `Refusal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The runtime's own concurrency limit: 429.
    AtCapacity,
    /// The replica is draining: 503.
    ShuttingDown,
    /// No connection could be made (nothing was sent).
    Unreachable,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::AtCapacity => "at_capacity",
            Refusal::ShuttingDown => "shutting_down",
            Refusal::Unreachable => "unreachable",
        }
    }
}

/// `gaveUp`: the error of a call no replica took, after `tries` tries; `last` is the last refusal and
/// its detail (an io error's code).
pub fn gave_up(app: &str, last: Refusal, detail: Option<&str>, tries: u32, retry_after: u64) -> ApiError {
    let mut details = vec![("reason", Detail::Text(last.as_str().to_owned()))];
    if let Some(d) = detail.filter(|d| !d.is_empty()) {
        details.push(("detail", Detail::Text(d.to_owned())));
    }
    let (status, code, message, retry_after) = match last {
        Refusal::Unreachable => (
            502,
            "upstream_unreachable",
            format!("app \"{app}\" could not be reached ({tries} tries)"),
            None,
        ),
        Refusal::AtCapacity => (
            503,
            "queue_timeout",
            format!("no replica of app \"{app}\" accepted the call in time; retry later"),
            Some(retry_after),
        ),
        Refusal::ShuttingDown => (
            503,
            "app_not_ready",
            format!("the replicas of app \"{app}\" tried ({tries}) were shutting down; retry"),
            Some(retry_after),
        ),
    };
    ApiError {
        status,
        code,
        message,
        details,
        retry_after,
    }
}

/// `upstreamError`: the upstream hop failed with `reason` (undici's code for it: the head or body
/// timeout is a 504, anything else a 502 naming it).
pub fn upstream_error(reason: &str) -> ApiError {
    if reason == "UND_ERR_HEADERS_TIMEOUT" || reason == "UND_ERR_BODY_TIMEOUT" {
        let message = "the app did not answer in time".to_owned();
        return ApiError {
            status: 504,
            code: "upstream_timeout",
            message,
            details: vec![],
            retry_after: None,
        };
    }
    ApiError {
        status: 502,
        code: "upstream_unreachable",
        message: "the app could not be reached".to_owned(),
        details: vec![("reason", Detail::Text(reason.to_owned()))],
        retry_after: None,
    }
}

/// The drain's answer to a call (gateway.ts `handler`, src/gateway/refusals.ts `shuttingDown`): 503
/// `shutting_down` with `Retry-After`; the caller also sends `Connection: close`.
pub fn shutting_down(retry_after: u64) -> ApiError {
    ApiError {
        status: 503,
        code: "shutting_down",
        message: "the gateway is shutting down; retry".to_owned(),
        details: vec![],
        retry_after: Some(retry_after),
    }
}

/// Why a hand-off to Node failed (refusals.ts `HandoffFailure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoffFailure {
    /// Nothing listens on the hand-off socket: nothing was sent.
    Refused,
    /// No answer head within the hand-off bound.
    Timeout,
    /// Node closed the connection before an answer head.
    Closed,
}

impl HandoffFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            HandoffFailure::Refused => "refused",
            HandoffFailure::Timeout => "timeout",
            HandoffFailure::Closed => "closed",
        }
    }
}

/// 503 `gateway_unavailable` (native mode only, design §3; refusals.ts `gatewayUnavailable`). Only
/// `refused` (nothing was sent) says to retry; after `timeout` or `closed` the call may have run, so
/// there is no `Retry-After`.
pub fn gateway_unavailable(reason: HandoffFailure, retry_after: u64) -> ApiError {
    let (message, retry_after) = match reason {
        HandoffFailure::Refused => ("the gateway cannot take the call now; retry", Some(retry_after)),
        HandoffFailure::Timeout | HandoffFailure::Closed => (
            "the gateway lost the call before its answer; it may have run",
            None,
        ),
    };
    ApiError {
        status: 503,
        code: "gateway_unavailable",
        message: message.to_owned(),
        details: vec![("reason", Detail::Text(reason.as_str().to_owned()))],
        retry_after,
    }
}
