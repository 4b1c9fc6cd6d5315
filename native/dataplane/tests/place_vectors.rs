//! The placement loop against the gateway's: tests/vectors/place.json, written by
//! hack/dataplane-vectors.ts from `placeCall` (src/gateway/balancer/place.ts) on a scripted pool — what
//! it asked the pool (acquire with a requeue deadline, refuse with a block period) and its outcome.

mod vectors;

use apphost_dataplane::errors::Refusal;
use apphost_dataplane::place::{Next, PlaceSettings, Placement};
use serde_json::{Value, json};

#[test]
fn every_run_asks_the_pool_what_typescript_asks() {
    let v = vectors::load("place.json");
    let runs = v["cases"].as_array().expect("cases");
    assert!(runs.len() >= 120);
    for run in runs {
        let st = &run["settings"];
        let s = PlaceSettings {
            capacity_block_ms: st["capacityBlockMs"].as_u64().unwrap(),
            unreachable_block_ms: st["unreachableBlockMs"].as_u64().unwrap(),
            max_retries: st["maxRetries"].as_u64().unwrap() as u32,
            queue_timeout_ms: st["queueTimeoutMs"].as_u64().unwrap(),
            retry_after_seconds: st["retryAfterSeconds"].as_u64().unwrap(),
        };
        let mut placement = Placement::new();
        let mut log = vec![json!({ "acquire": null })];
        let mut outcome = Value::Null;
        for step in run["script"].as_array().unwrap() {
            let (refused, name) = match step["result"].as_str().unwrap() {
                "ok" => {
                    outcome = json!("ok");
                    break;
                }
                "at_capacity" => (Refusal::AtCapacity, "at_capacity"),
                "shutting_down" => (Refusal::ShuttingDown, "shutting_down"),
                "unreachable" => (Refusal::Unreachable, "unreachable"),
                other => panic!("unknown result {other}"),
            };
            let now = step["at"].as_i64().unwrap();
            match placement.refused("acme/hello", refused, step["detail"].as_str(), now, &s) {
                Next::Retry {
                    block_ms,
                    requeue_deadline,
                } => {
                    log.push(json!({ "refuse": block_ms, "refused": name }));
                    log.push(json!({ "acquire": requeue_deadline }));
                }
                Next::GiveUp { block_ms, error } => {
                    log.push(json!({ "refuse": block_ms, "refused": name }));
                    outcome = json!({ "status": error.status, "retryAfter": error.retry_after, "body": error.body() });
                    break;
                }
            }
        }
        assert_eq!(json!(log), run["log"], "what placeCall asked the pool in {run}");
        assert_eq!(outcome, run["outcome"], "placeCall's outcome in {run}");
    }
}
