//! The route against the gateway's own: tests/vectors/route.json, written by hack/dataplane-vectors.ts
//! from `route` (src/gateway/middleware/route.ts) and `checkForwardPath` (src/shared/http/upstream.ts).

mod vectors;

use apphost_dataplane::route::route;
use serde_json::{Value, json};

#[test]
fn every_vector_gets_the_typescript_answer() {
    let v = vectors::load("route.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 30, "the corpus is there: {}", cases.len());
    for case in cases {
        let (method, path) = (case["method"].as_str().unwrap(), case["path"].as_str().unwrap());
        let r = route(method, path);
        let target = r.target.map_or(
            Value::Null,
            |t| json!({ "projectId": t.project_id, "appName": t.app_name, "path": t.path }),
        );
        assert_eq!(target, case["target"], "target of {method} {path}");
        let error = r.refusal.map(|e| {
            let headers = match e.allow {
                Some(allow) => json!({ "allow": allow }),
                None => json!({}),
            };
            json!({ "status": e.status, "body": { "error": { "code": e.code, "message": e.message } }, "headers": headers })
        });
        assert_eq!(error.as_ref(), case.get("error"), "refusal of {method} {path}");
    }
}
