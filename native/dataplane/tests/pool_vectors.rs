//! The pool against the gateway's: tests/vectors/pool.json, written by hack/dataplane-vectors.ts from
//! event traces run on the real `AppPool` (src/gateway/balancer/pool.ts) with a fake clock — calls
//! acquired (fresh, or requeued with a deadline), released (twice, too), refused with a block, cancelled
//! while waiting; replicas set and removed; start failures; new limits — and what became of every call
//! and when (granted on which replica, 503 queue_full / queue_timeout with their bytes, handed off where
//! AppPool would hold the call for an app with no ready replica), and what the pool holds after each event.

mod vectors;

use apphost_dataplane::errors::ApiError;
use apphost_dataplane::pick::PoolSettings;
use apphost_dataplane::pool::{Outcome, Pool};
use serde_json::{Map, Value, json};

fn settings(v: &Value) -> PoolSettings {
    PoolSettings {
        capacity: v["capacity"].as_u64().unwrap() as u32,
        max_queue: v["maxQueue"].as_u64().unwrap(),
        queue_timeout_ms: v["queueTimeoutMs"].as_u64().unwrap(),
        cold_start_timeout_ms: v["coldStartTimeoutMs"].as_u64().unwrap(),
        retry_after_seconds: v["retryAfterSeconds"].as_u64().unwrap(),
    }
}

fn wire(e: &ApiError) -> Value {
    json!({ "status": e.status, "retryAfter": e.retry_after, "body": e.body() })
}

fn outcome(at: i64, o: &Outcome) -> Value {
    match o {
        Outcome::Granted { call, replica, url } => {
            assert_eq!(url, &format!("http://{replica}"));
            json!({ "call": call, "at": at, "granted": replica })
        }
        Outcome::Refused { call, error } => {
            let mut v = wire(error);
            v["call"] = json!(call);
            v["at"] = json!(at);
            v
        }
        Outcome::HandOff { call, deadline } => json!({ "call": call, "at": at, "handoff": deadline }),
    }
}

/// A TS outcome as the data plane can give it: where AppPool held the call (or refused it for an app
/// with no ready replica), the data plane hands it to Node, so only the call, the time and the deadline
/// it carries are compared.
fn expected(v: &Value) -> Value {
    if v.get("handoff").is_some() {
        return json!({ "call": v["call"], "at": v["at"], "handoff": v["handoff"] });
    }
    v.clone()
}

/// Hand-offs of one event in call order (AppPool's run takes held calls out in the order they came,
/// the data plane's pool in queue order, where a requeued call comes first).
fn sorted_handoffs(mut list: Vec<Value>) -> Vec<Value> {
    let mut k = 0;
    while k < list.len() {
        let mut end = k;
        while end < list.len() && list[end].get("handoff").is_some() && list[end]["at"] == list[k]["at"] {
            end += 1;
        }
        if end > k + 1 {
            list[k..end].sort_by_key(|v| v["call"].as_u64());
        }
        k = end.max(k + 1);
    }
    list
}

fn state(pool: &Pool) -> Value {
    let (inflight, queued, _) = pool.stats();
    let load: Map<String, Value> = pool
        .replica_load()
        .into_iter()
        .map(|(id, n)| (id.to_owned(), json!(n)))
        .collect();
    json!([inflight, queued, load])
}

#[test]
fn every_trace_ends_as_it_ends_in_typescript() {
    let v = vectors::load("pool.json");
    let runs = v["cases"].as_array().expect("cases");
    assert!(runs.len() >= 60);
    for run in runs {
        let seed = &run["seed"];
        let mut pool = Pool::new(
            "acme/hello",
            settings(&run["settings"]),
            run["start"].as_i64().unwrap(),
        );
        let want: Vec<Value> = run["outcomes"].as_array().unwrap().iter().map(expected).collect();
        let want = sorted_handoffs(want);
        let mut got = Vec::new();
        for (k, ev) in run["events"].as_array().unwrap().iter().enumerate() {
            let at = ev["at"].as_i64().unwrap();
            got.extend(pool.advance(at).iter().map(|(t, o)| outcome(*t, o)));
            let call = ev["call"].as_u64().unwrap_or(0);
            let outs: Vec<Outcome> = match ev["op"].as_str().unwrap() {
                "acquire" => pool
                    .acquire(call, ev["requeue"].as_i64(), at)
                    .into_iter()
                    .collect(),
                "release" => pool.release(call, at),
                "refuse" => pool.refuse(call, ev["blockMs"].as_u64().unwrap(), at),
                "cancel" => {
                    if pool.cancel(call, at) {
                        got.push(json!({ "call": call, "at": at, "cancelled": true }));
                    }
                    vec![]
                }
                "replicas" => {
                    let list: Vec<(String, String)> = ev["ids"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|id| {
                            (
                                id.as_str().unwrap().to_owned(),
                                format!("http://{}", id.as_str().unwrap()),
                            )
                        })
                        .collect();
                    pool.set_replicas(&list, at)
                }
                // A start failure changes only what AppPool answers for an app with no ready replica,
                // which the data plane hands off whatever it is.
                "failure" => vec![],
                "configure" => pool.configure(settings(&ev["settings"]), at),
                "snapshot" => {
                    let c = pool.concurrency(at);
                    // To the bit (JSON writes a whole average without a fraction: compared as f64).
                    assert_eq!(
                        Some(c.to_bits()),
                        ev["concurrency"].as_f64().map(f64::to_bits),
                        "the average concurrency at event {k} ({ev}) of run {seed}"
                    );
                    vec![]
                }
                other => panic!("an event this build does not know: {other}"),
            };
            got.extend(outs.iter().map(|o| outcome(at, o)));
            if let Some(after) = ev.get("after") {
                let n = got.len().min(want.len());
                assert_eq!(
                    sorted_handoffs(got[..n].to_vec()),
                    want[..n],
                    "the outcomes by event {k} ({ev}) of run {seed}"
                );
                assert_eq!(
                    &state(&pool),
                    after,
                    "the pool after event {k} ({ev}) of run {seed}"
                );
            }
        }
        got.extend(pool.advance(i64::MAX).iter().map(|(t, o)| outcome(*t, o)));
        let want: Vec<Value> = run["outcomes"].as_array().unwrap().iter().map(expected).collect();
        assert_eq!(
            sorted_handoffs(got),
            sorted_handoffs(want),
            "the outcomes of run {seed}"
        );
        assert_eq!(state(&pool), run["end"], "the pool at the end of run {seed}");
    }
}
