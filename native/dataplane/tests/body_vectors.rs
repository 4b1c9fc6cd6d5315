//! The body check against the gateway's own rules: tests/vectors/body.json, written by
//! hack/dataplane-vectors.ts from `isPlainJsonObject` and `checkCortexBody` (src/gateway/body.ts).

mod vectors;

use apphost_dataplane::body::{MAX_JSON_DEPTH, accepts, is_plain_json_object};

#[test]
fn the_depth_bound_is_the_gateways() {
    let v = vectors::load("body.json");
    assert_eq!(v["maxJsonDepth"].as_u64(), Some(MAX_JSON_DEPTH as u64));
}

#[test]
fn every_vector_gets_the_typescript_answer() {
    let v = vectors::load("body.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 1000, "the corpus is there: {}", cases.len());
    let (mut passed, mut handed_off) = (0, 0);
    for case in cases {
        let body = vectors::bytes(case);
        let plain = case["plain"].as_bool().expect("plain");
        let node_accepts = case["check"] == "ok";
        let shown = String::from_utf8_lossy(&body);
        // The byte scan says what isPlainJsonObject says, body for body.
        assert_eq!(
            is_plain_json_object(&body),
            plain,
            "isPlainJsonObject of {shown:?}"
        );
        // What the data plane takes, Node takes (one-sided, design §7); with UTF-8 checked it is exactly
        // the blank bodies and those the TS scan passes and the full check accepts.
        let taken = accepts(&body);
        assert!(!taken || node_accepts, "taken but refused by Node: {shown:?}");
        let blank = body.iter().all(|c| b" \t\n\r".contains(c));
        assert_eq!(taken, (plain || blank) && node_accepts, "accepts of {shown:?}");
        if taken {
            passed += 1;
        } else {
            handed_off += 1;
        }
    }
    // Both kinds occur, so the comparison means something.
    assert!(
        passed > 100 && handed_off > 100,
        "passed {passed}, handed off {handed_off}"
    );
}
