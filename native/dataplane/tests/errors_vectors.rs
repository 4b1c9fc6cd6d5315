//! The errors the data plane writes against the gateway's: tests/vectors/errors.json, written by
//! hack/dataplane-vectors.ts from `gaveUp` (place.ts) and `upstreamError` (upstream.ts), as written.

mod vectors;

use apphost_dataplane::errors::{
    ApiError, HandoffFailure, Refusal, gateway_unavailable, gave_up, shutting_down, upstream_error,
};
use serde_json::{Value, json};

fn wire(e: &ApiError) -> Value {
    json!({ "status": e.status, "retryAfter": e.retry_after, "body": e.body() })
}

#[test]
fn every_vector_gets_the_typescript_bytes() {
    let v = vectors::load("errors.json");
    let all = &v["cases"][0];
    let gave = all["gaveUp"].as_array().expect("gaveUp");
    assert!(gave.len() >= 54);
    for case in gave {
        let last = match case["refused"].as_str().unwrap() {
            "at_capacity" => Refusal::AtCapacity,
            "shutting_down" => Refusal::ShuttingDown,
            "unreachable" => Refusal::Unreachable,
            other => panic!("a refusal this build does not know: {other}"),
        };
        let e = gave_up(
            case["app"].as_str().unwrap(),
            last,
            case["detail"].as_str(),
            case["tries"].as_u64().unwrap() as u32,
            case["retryAfterSeconds"].as_u64().unwrap(),
        );
        let want =
            json!({ "status": case["status"], "retryAfter": case["retryAfter"], "body": case["body"] });
        assert_eq!(wire(&e), want, "gaveUp of {case}");
    }
    for case in all["upstream"].as_array().expect("upstream") {
        // undici's code, or the error's name when it has none (a plain Error).
        let reason = Some(case["code"].as_str().unwrap())
            .filter(|c| !c.is_empty())
            .unwrap_or("Error");
        let want =
            json!({ "status": case["status"], "retryAfter": case["retryAfter"], "body": case["body"] });
        assert_eq!(wire(&upstream_error(reason)), want, "upstreamError of {case}");
    }
    let sd = &all["shuttingDown"];
    let want = json!({ "status": sd["status"], "retryAfter": sd["retryAfter"], "body": sd["body"] });
    assert_eq!(
        wire(&shutting_down(sd["retryAfterSeconds"].as_u64().unwrap())),
        want,
        "shuttingDown"
    );
    let unavailable = all["gatewayUnavailable"].as_array().expect("gatewayUnavailable");
    assert_eq!(unavailable.len(), 3);
    for case in unavailable {
        let reason = match case["reason"].as_str().unwrap() {
            "refused" => HandoffFailure::Refused,
            "timeout" => HandoffFailure::Timeout,
            "closed" => HandoffFailure::Closed,
            other => panic!("a hand-off failure this build does not know: {other}"),
        };
        let e = gateway_unavailable(reason, case["retryAfterSeconds"].as_u64().unwrap());
        let want =
            json!({ "status": case["status"], "retryAfter": case["retryAfter"], "body": case["body"] });
        assert_eq!(wire(&e), want, "gatewayUnavailable of {case}");
    }
}
