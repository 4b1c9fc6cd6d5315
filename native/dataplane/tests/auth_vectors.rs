//! The bearer token's parse against the gateway's: tests/vectors/auth.json, written by
//! hack/dataplane-vectors.ts from `authorize` (src/gateway/middleware/auth.ts).

mod vectors;

use apphost_dataplane::auth::{MISSING_TOKEN, bearer_token};
use serde_json::json;

/// A JS string of latin1 chars as the bytes it came from.
fn latin1(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("latin1"))
        .collect()
}

#[test]
fn every_vector_gets_the_typescript_answer() {
    let v = vectors::load("auth.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 20);
    let (status, code, message, challenge) = MISSING_TOKEN;
    for case in cases {
        let header = latin1(case["header"].as_str().unwrap_or(""));
        let token = bearer_token(&header);
        let want = case["token"].as_str().map(latin1);
        assert_eq!(token, want.as_deref(), "token of {:?}", case["header"]);
        let error = token.is_none().then(|| {
            json!({ "status": status, "body": { "error": { "code": code, "message": message } },
                    "headers": { "www-authenticate": challenge } })
        });
        assert_eq!(
            error.as_ref(),
            case.get("error"),
            "refusal of {:?}",
            case["header"]
        );
    }
}
