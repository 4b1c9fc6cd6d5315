//! Record admission against the gateway's: tests/vectors/records.json, written by
//! hack/dataplane-vectors.ts from `createSyncCallLimiter` (src/runs/sync-calls.ts).

mod vectors;

use apphost_dataplane::records::{SyncCallLimiter, SyncCallSettings};

#[test]
fn every_call_gets_the_typescript_answer() {
    let v = vectors::load("records.json");
    let runs = v["cases"].as_array().expect("cases");
    assert!(runs.len() >= 5);
    for run in runs {
        let s = SyncCallSettings {
            per_app_per_second: run["perAppPerSecond"].as_u64().unwrap() as u32,
            per_second: run["perSecond"].as_u64().unwrap() as u32,
        };
        let mut limiter = SyncCallLimiter::new(s);
        for (k, call) in run["calls"].as_array().unwrap().iter().enumerate() {
            let (p, a) = (call[0].as_str().unwrap(), call[1].as_str().unwrap());
            let got = limiter.admit(p, a, call[2].as_i64().unwrap());
            assert_eq!(got, call[3].as_bool().unwrap(), "call {k} {call} with {s:?}");
        }
    }
}
