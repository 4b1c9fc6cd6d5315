//! The control channel against Node's reader: tests/vectors/frames.json, written by
//! hack/dataplane-vectors.ts from src/gateway/dataplane/protocol.ts (cases in
//! src/gateway/testing/frame-cases.ts). Each case is the bytes on the channel, then its end, read by the
//! side `at` names; Rust reads them as that side would — frame.rs's codec, message.rs's messages, the
//! direction (a message the reader's peer never sends is `unexpected_message`) and, for the data plane,
//! state.rs's typing of the state frames — and must read the same messages (extra fields dropped) and
//! stop at the same error code.

mod vectors;

use apphost_dataplane::error::ProtocolError;
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

/// Numbers equal as numbers (serde writes 10.0 where JSON.stringify writes 10), the rest exactly.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// One message as the reader at `at` takes it, as JSON without `v`.
fn read(payload: &[u8], at: &str) -> Result<Value, ProtocolError> {
    let m = Message::from_payload(payload)?;
    if m.from_node() != (at == "dataplane") {
        return Err(ProtocolError::UnexpectedMessage {
            type_name: m.type_name().to_owned(),
        });
    }
    let mut v = match &m {
        Message::State(f) if at == "dataplane" => to_json(&StateFrame::from_message(f)?),
        _ => serde_json::from_slice(&m.to_payload()).unwrap(),
    };
    v.as_object_mut().unwrap().remove("v");
    Ok(v)
}

#[test]
fn every_case_reads_as_node_s_reader_reads_it() {
    let v = vectors::load("frames.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() >= 70);
    let mut state_refusals = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let at = case["at"].as_str().unwrap();
        let mut d = FrameDecoder::new();
        d.push(&hex_bytes(case["hex"].as_str().unwrap()));
        let mut got = Vec::new();
        let error = loop {
            match d.next_frame() {
                Ok(Some(payload)) => match read(&payload, at) {
                    Ok(m) => got.push(m),
                    Err(e) => break Some(e),
                },
                Ok(None) => break d.finish().err(),
                Err(e) => break Some(e),
            }
        };
        if error.is_some() && case["layer"] == "state" {
            state_refusals += 1;
        }
        let want = case["messages"].as_array().unwrap();
        assert!(
            got.len() == want.len() && got.iter().zip(want).all(|(g, w)| same(g, w)),
            "{name} ({at}): read\n {got:?}\nwant\n {want:?}"
        );
        assert_eq!(
            error.as_ref().map(ProtocolError::code),
            case["error"].as_str(),
            "{name} ({at}): {error:?}"
        );
    }
    // state.rs refused every case marked for it (message.rs took them).
    let marked = cases.iter().filter(|c| c["layer"] == "state").count();
    assert!(marked >= 10);
    assert_eq!(state_refusals, marked);
}
