//! The balancer's pick and pool limits against the gateway's: tests/vectors/pick.json and
//! pool-settings.json, written by hack/dataplane-vectors.ts from pick.ts and balancer.ts.

mod vectors;

use apphost_dataplane::pick::{BalancerSettings, ReplicaLoad, next_unblock, pick_replica, pool_settings_for};
use serde_json::json;

#[test]
fn picks_get_the_typescript_answer() {
    let v = vectors::load("pick.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 300);
    for case in cases {
        let replicas: Vec<ReplicaLoad> = case["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| ReplicaLoad {
                inflight: r["inflight"].as_u64().unwrap() as u32,
                blocked_until: r["blockedUntil"].as_u64().unwrap(),
            })
            .collect();
        let capacity = case["capacity"].as_u64().unwrap() as u32;
        let (now, start) = (
            case["now"].as_u64().unwrap(),
            case["start"].as_u64().unwrap() as usize,
        );
        let pick = pick_replica(&replicas, capacity, now, start).map_or(-1, |i| i as i64);
        assert_eq!(json!(pick), case["pick"], "pickReplica of {case}");
        assert_eq!(
            json!(next_unblock(&replicas, capacity)),
            case["nextUnblock"],
            "nextUnblock of {case}"
        );
    }
}

#[test]
fn pool_settings_get_the_typescript_answer() {
    let v = vectors::load("pool-settings.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() > 50);
    for case in cases {
        let (sc, st) = (&case["scaling"], &case["settings"]);
        let s = BalancerSettings {
            queue_timeout_ms: st["queueTimeoutMs"].as_u64().unwrap(),
            cold_start_timeout_ms: st["coldStartTimeoutMs"].as_u64().unwrap(),
            queue_depth_factor: st["queueDepthFactor"].as_u64().unwrap(),
            max_queue_per_app: st["maxQueuePerApp"].as_u64().unwrap(),
            retry_after_seconds: st["retryAfterSeconds"].as_u64().unwrap(),
        };
        let concurrency = sc["replicaConcurrency"].as_u64().unwrap() as u32;
        let p = pool_settings_for(concurrency, sc["maxReplicas"].as_u64().unwrap() as u32, &s);
        let got = json!({ "capacity": p.capacity, "maxQueue": p.max_queue, "queueTimeoutMs": p.queue_timeout_ms,
            "coldStartTimeoutMs": p.cold_start_timeout_ms, "retryAfterSeconds": p.retry_after_seconds });
        assert_eq!(got, case["pool"], "poolSettingsFor of {case}");
    }
}
