//! The state frames (`snapshot`, `app`, `replicas`, `failure`, `domain`, `token`) of
//! tests/vectors/frames.json, written by hack/dataplane-vectors.ts from the Node side's protocol.ts
//! (cases in src/gateway/testing/frame-cases.ts): every one Node's reader reads is typed by state.rs to
//! the same fields (extra ones dropped), and every `layer: "state"` case, which message.rs takes, is
//! refused by state.rs as `frame_malformed`.

mod vectors;

use apphost_dataplane::frame::FrameDecoder;
use apphost_dataplane::message::Message;
use apphost_dataplane::state::{self, StateFrame};
use apphost_dataplane::tokens::Token;
use serde_json::{Value, json};

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|k| u8::from_str_radix(&hex[k..k + 2], 16).unwrap())
        .collect()
}

fn app(a: &state::App) -> Value {
    json!({
        "projectId": a.project_id, "appName": a.app_name,
        "runtime": match a.runtime { state::Runtime::Cortex => "cortex", state::Runtime::Custom => "custom" },
        "upstream": a.upstream, "ready": a.ready, "gracePeriodSeconds": a.grace_period_seconds,
        "functions": a.functions,
        "pool": {
            "capacity": a.pool.capacity, "maxQueue": a.pool.max_queue, "queueTimeoutMs": a.pool.queue_timeout_ms,
            "coldStartTimeoutMs": a.pool.cold_start_timeout_ms, "retryAfterSeconds": a.pool.retry_after_seconds,
        },
    })
}

fn replicas(rs: &[state::Replica]) -> Value {
    rs.iter().map(|r| json!({"id": r.id, "url": r.url})).collect()
}

fn failure(f: &state::StartFailure) -> Value {
    json!({"reason": f.reason, "message": f.message})
}

fn target(t: &state::DomainTarget) -> Value {
    json!({"projectId": t.project_id, "appName": t.app_name})
}

fn token(t: &Token) -> Value {
    let hex: String = t.sha256.iter().map(|b| format!("{b:02x}")).collect();
    json!({"sha256": hex, "projectId": t.project_id, "until": t.until})
}

/// The typed frame back in the protocol's JSON shape, to compare with what Node's reader read.
fn to_json(f: &StateFrame) -> Value {
    let (g, seq) = f.position();
    let mut v = match f {
        StateFrame::Snapshot(s) => json!({
            "apps": s.apps.iter().map(app).collect::<Vec<_>>(),
            "replicas": s.replicas.iter().map(|(k, r)| json!({"key": k, "replicas": replicas(r)})).collect::<Vec<_>>(),
            "failures": s.failures.iter().map(|(k, x)| json!({"key": k, "failure": failure(x)})).collect::<Vec<_>>(),
            "domains": s.domains.iter().map(|(h, t)| { let mut d = target(t); d["host"] = json!(h); d }).collect::<Vec<_>>(),
            "tokens": s.tokens.iter().map(token).collect::<Vec<_>>(),
        }),
        StateFrame::App { key, app: a, .. } => json!({"key": key, "app": a.as_ref().map(app)}),
        StateFrame::Replicas { key, replicas: r, .. } => json!({"key": key, "replicas": replicas(r)}),
        StateFrame::Failure { key, failure: x, .. } => {
            json!({"key": key, "failure": x.as_ref().map(failure)})
        }
        StateFrame::Domain { host, target: t, .. } => json!({"host": host, "target": t.as_ref().map(target)}),
        StateFrame::Token { token: t, .. } => token(t),
    };
    v["type"] = json!(f.type_name());
    v["gen"] = json!(g);
    v["seq"] = json!(seq);
    v
}

#[test]
fn state_frames_read_as_node_reads_them() {
    let v = vectors::load("frames.json");
    let (mut typed, mut refused) = (0, 0);
    for case in v["cases"].as_array().expect("cases") {
        if case["at"] != "dataplane" {
            continue;
        }
        let name = case["name"].as_str().unwrap();
        let mut d = FrameDecoder::new();
        d.push(&hex_bytes(case["hex"].as_str().unwrap()));
        let want = case["messages"].as_array().unwrap();
        let mut k = 0;
        while let Ok(Some(payload)) = d.next_frame() {
            let Ok(Message::State(f)) = Message::from_payload(&payload) else {
                k += 1;
                continue;
            };
            match StateFrame::from_message(&f) {
                Ok(frame) => {
                    assert!(
                        case["layer"] != "state",
                        "{name}: state.rs took a frame Node refuses"
                    );
                    let mut expected = want[k].clone();
                    expected.as_object_mut().unwrap().remove("v");
                    assert_eq!(to_json(&frame), expected, "{name}");
                    typed += 1;
                }
                Err(e) => {
                    assert_eq!(case["layer"], "state", "{name}: {e}");
                    assert_eq!(e.code(), case["error"].as_str().unwrap(), "{name}");
                    refused += 1;
                }
            }
            k += 1;
        }
    }
    assert!(typed >= 10 && refused >= 10, "{typed} typed, {refused} refused");
}
