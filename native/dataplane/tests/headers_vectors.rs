//! The header rules against the gateway's own: tests/vectors/{request,response}-headers.json, written by
//! hack/dataplane-vectors.ts from node's header map and `forwardRequestHeaders`/`forwardResponseHeaders`.

mod vectors;

use apphost_dataplane::headers::{Value, forward_request_headers, forward_response_headers, node_headers};
use serde_json::{Map, Value as Json, json};

fn lines(case: &Json) -> Vec<(&str, &str)> {
    let raw = case["in"].as_array().expect("in");
    raw.iter()
        .map(|l| (l[0].as_str().unwrap(), l[1].as_str().unwrap()))
        .collect()
}

fn as_json(value: &Value) -> Json {
    match value {
        Value::One(v) => json!(v),
        Value::Many(vs) => json!(vs),
    }
}

/// A header list as the vectors' object; a name twice would be a divergence of its own.
fn object<V>(headers: &[(String, V)], f: impl Fn(&V) -> Json) -> Json {
    let mut map = Map::new();
    for (n, v) in headers {
        assert!(map.insert(n.clone(), f(v)).is_none(), "{n} twice");
    }
    Json::Object(map)
}

#[test]
fn request_headers_get_the_typescript_answer() {
    let v = vectors::load("request-headers.json");
    let request_id = v["requestId"].as_str().unwrap();
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 10);
    for case in cases {
        let node = node_headers(lines(case));
        assert_eq!(
            object(&node, as_json),
            case["node"],
            "node's map of {}",
            case["in"]
        );
        let out = forward_request_headers(&node, request_id);
        assert_eq!(
            object(&out, |v| json!(v)),
            case["out"],
            "forwarded of {}",
            case["in"]
        );
    }
}

#[test]
fn response_headers_get_the_typescript_answer() {
    let v = vectors::load("response-headers.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 5);
    for case in cases {
        let node = node_headers(lines(case));
        assert_eq!(
            object(&node, as_json),
            case["node"],
            "node's map of {}",
            case["in"]
        );
        let out = forward_response_headers(&node);
        assert_eq!(
            object(&out, as_json),
            case["out"],
            "passed back of {}",
            case["in"]
        );
    }
}
