//! The forwarded query against the gateway's own: tests/vectors/query.json, written by
//! hack/dataplane-vectors.ts from `forwardQuery` (src/shared/http/upstream.ts).

mod vectors;

use apphost_dataplane::query::forward_query;

#[test]
fn every_vector_gets_the_typescript_answer() {
    let v = vectors::load("query.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 20);
    for case in cases {
        let search = case["in"].as_str().unwrap();
        assert_eq!(
            forward_query(search),
            case["out"].as_str().unwrap(),
            "forwardQuery({search:?})"
        );
    }
}
