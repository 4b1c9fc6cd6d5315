//! The gateway's answers against the data plane's: tests/vectors/answers.json, written by
//! hack/dataplane-vectors.ts by running the gateway's real handler (createGateway, its I/O seams faked)
//! on app answers parsed by undici's own parseHeaders, and while it drains: the head node wrote and
//! the body. The framing node adds itself (`Connection: keep-alive`, `Transfer-Encoding: chunked`) is
//! hyper's in the data plane: it is compared as the body's framing.

mod vectors;

use apphost_dataplane::answer::{Body, SMALL_RESPONSE_BYTES, answer, draining, reads_whole, undici_head};
use serde_json::Value;

fn latin1(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("a latin1 char"))
        .collect()
}

/// A body in the vectors: its text, or `{repeat, times}`.
fn body_len(v: &Value) -> usize {
    v.as_str()
        .map_or_else(|| v["times"].as_u64().unwrap() as usize, |s| latin1(s).len())
}

/// node's head less its own framing, names lower-cased; and the framing.
fn sent(v: &Value) -> (Vec<(String, String)>, bool) {
    let mut chunked = false;
    let headers = v["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| {
            let (n, val) = (
                l[0].as_str().unwrap().to_ascii_lowercase(),
                l[1].as_str().unwrap(),
            );
            match (n.as_str(), val) {
                ("connection", "keep-alive") => None,
                ("transfer-encoding", "chunked") => {
                    chunked = true;
                    None
                }
                _ => Some((n, val.replace("<id>", "req-1"))),
            }
        })
        .collect();
    (headers, chunked)
}

#[test]
fn every_answer_gets_the_gateways_head() {
    let v = vectors::load("answers.json");
    let all = &v["cases"][0];
    let cases = all["answers"].as_array().expect("answers");
    assert!(cases.len() >= 25);
    for case in cases {
        let lines: Vec<(String, Vec<u8>)> = case["head"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l[0].as_str().unwrap().to_owned(), latin1(l[1].as_str().unwrap())))
            .collect();
        let head = undici_head(lines.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
        let whole = reads_whole(&head, SMALL_RESPONSE_BYTES);
        assert_eq!(
            Value::Bool(whole),
            case["whole"],
            "read whole or streamed: {case}"
        );
        let status = case["status"].as_u64().unwrap() as u16;
        let a = answer(status, &head, whole.then(|| body_len(&case["body"])), "req-1");
        let (headers, chunked) = sent(&case["sent"]);
        assert_eq!(
            a.status as u64,
            case["sent"]["status"].as_u64().unwrap(),
            "status of {case}"
        );
        assert_eq!(a.headers, headers, "the head of {case}");
        assert_eq!(a.body == Body::Chunked, chunked, "chunked or not: {case}");
        // A bodiless status sends nothing; every other answer sends the app's bytes (node's chunk
        // framing around them in the vector).
        let sent_len = body_len(&case["sent"]["body"]);
        match a.body {
            Body::Empty => assert_eq!(sent_len, 0, "no body for {case}"),
            Body::Whole | Body::Length(_) => assert_eq!(sent_len, body_len(&case["body"]), "body of {case}"),
            Body::Chunked => assert!(sent_len >= body_len(&case["body"]), "body of {case}"),
        }
    }
}

#[test]
fn the_drains_answer_is_the_gateways() {
    let v = vectors::load("answers.json");
    let d = &v["cases"][0]["drain"];
    let (a, body) = draining("req-1", d["retryAfterSeconds"].as_u64().unwrap());
    let want: Vec<(String, String)> = d["sent"]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let v = l[1].as_str().unwrap().replace("<id>", "req-1");
            (l[0].as_str().unwrap().to_ascii_lowercase(), v)
        })
        .collect();
    assert_eq!(a.status as u64, d["sent"]["status"].as_u64().unwrap());
    assert_eq!(a.headers, want, "the drain's head");
    assert_eq!(body, d["sent"]["body"].as_str().unwrap(), "the drain's body");
}
