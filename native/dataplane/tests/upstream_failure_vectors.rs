//! The upstream hop's failures against the gateway's: tests/vectors/upstream-failures.json, written by
//! hack/dataplane-vectors.ts from `upstreamError` (upstream.ts) and `notConnected` (caller.ts) for each
//! code undici gives — the bytes of the 502/504 and whether the balancer tries another replica.

mod vectors;

use apphost_dataplane::upstream_failure::UpstreamFailure;
use serde_json::json;

#[test]
fn every_failure_gets_the_typescript_answer_for_its_code() {
    let v = vectors::load("upstream-failures.json");
    let cases = v["cases"].as_array().expect("cases");
    for f in UpstreamFailure::ALL {
        // 'error' is undici's fallback for an error without a code: the vectors' '' case.
        let code = if f == UpstreamFailure::Other {
            ""
        } else {
            f.reason()
        };
        let case = cases
            .iter()
            .find(|c| c["code"] == code)
            .unwrap_or_else(|| panic!("{f:?}: no vector for {code:?}: add it to UPSTREAM_CODES"));
        let e = f.error();
        let got = json!({ "status": e.status, "retryAfter": e.retry_after, "body": e.body() });
        let want =
            json!({ "status": case["status"], "retryAfter": case["retryAfter"], "body": case["body"] });
        assert_eq!(got, want, "{f:?}'s answer, as upstreamError answers {code:?}");
        assert_eq!(
            f.not_connected(),
            !case["retried"].is_null(),
            "{f:?}: retried as notConnected says for {code:?}"
        );
    }
    // Every code the gateway retries has a failure here, so a new one in NOT_CONNECTED is not missed.
    for case in cases.iter().filter(|c| !c["retried"].is_null()) {
        assert!(
            UpstreamFailure::ALL
                .iter()
                .any(|f| f.reason() == case["code"] && f.not_connected()),
            "no retried failure for {case}"
        );
    }
}

/// The table itself (design §2): which failure the data plane reports as which of undici's codes. The
/// vectors above hold each code's answer to TypeScript; this holds the choice of code, so a change to
/// it is a decision made here, and the timeouts stay 504s.
#[test]
fn the_table_of_failures_to_codes() {
    use UpstreamFailure::*;
    let table = [
        (Refused, "ECONNREFUSED", 502),
        (HostUnreachable, "EHOSTUNREACH", 502),
        (NetworkUnreachable, "ENETUNREACH", 502),
        (AddrNotAvailable, "EADDRNOTAVAIL", 502),
        (NameNotFound, "ENOTFOUND", 502),
        (NameTryAgain, "EAI_AGAIN", 502),
        (ConnectTimeout, "UND_ERR_CONNECT_TIMEOUT", 502),
        (Reset, "ECONNRESET", 502),
        (Aborted, "ECONNABORTED", 502),
        (BrokenPipe, "EPIPE", 502),
        (TimedOut, "ETIMEDOUT", 502),
        (Closed, "UND_ERR_SOCKET", 502),
        (HeadTimeout, "UND_ERR_HEADERS_TIMEOUT", 504),
        (BodyTimeout, "UND_ERR_BODY_TIMEOUT", 504),
        (HeadTooLarge, "UND_ERR_HEADERS_OVERFLOW", 502),
        (Malformed, "HPE_INVALID_CONSTANT", 502),
        (LengthMismatch, "UND_ERR_RES_CONTENT_LENGTH_MISMATCH", 502),
        (Other, "error", 502),
    ];
    assert_eq!(table.len(), UpstreamFailure::ALL.len());
    for (f, reason, status) in table {
        assert_eq!((f.reason(), f.error().status), (reason, status), "{f:?}");
    }
}
