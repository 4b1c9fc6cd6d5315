//! The runtime's refusal header against the gateway's reading of it: tests/vectors/refused.json, written
//! by hack/dataplane-vectors.ts from `refusalOf` (caller.ts) over answers as undici parses them.

mod vectors;

use apphost_dataplane::refused::{REFUSED_HEADER, refusal_of};
use serde_json::json;

/// A JSON string of latin1 chars back to the bytes it stands for.
fn latin1(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("a latin1 char"))
        .collect()
}

#[test]
fn every_answer_is_read_as_the_gateway_reads_it() {
    let v = vectors::load("refused.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 70);
    for case in cases {
        let status = case["status"].as_u64().unwrap() as u16;
        // The first value of the header, as hyper's HeaderMap::get gives it.
        let first = case["in"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l[0].as_str().unwrap().eq_ignore_ascii_case(REFUSED_HEADER))
            .map(|l| latin1(l[1].as_str().unwrap()));
        let got = refusal_of(status, first.as_deref()).map(|r| r.as_str());
        assert_eq!(json!(got), case["refused"], "refusalOf of {case}");
    }
}
