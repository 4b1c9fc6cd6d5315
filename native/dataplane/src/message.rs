//! The control channel's messages (design §4, "The v1 frames, field by field"), to and from one
//! frame's JSON object `{"v":1,"type":...}`: every v1 type, typed. A missing or wrongly typed field is
//! `frame_malformed`, an unknown type `unknown_type`; an extra field is ignored.
//!
//! The state frames (`snapshot`, `app`, `replicas`, `failure`, `domain`, `token`) are read here as far
//! as their shared header, `gen` and `seq`; the rest of their fields is kept as JSON for state.rs, which
//! owns the App/Token/snapshot types and their checks (step 5). Step 4 applies nothing from them but
//! `gen`/`seq`, to answer `ready` and to notice a gap.

use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::error::ProtocolError;
use crate::frame;
use crate::records::SyncCall;
use crate::reports::{self, AppLoad};

/// The protocol this build speaks: every frame's `v`, and `hello.protocol`. Both sides come from one
/// image, so a mismatch means a broken build and is refused, never negotiated (fail closed).
pub const PROTOCOL_VERSION: u64 = 1;

/// The largest integer a frame carries: `Number.MAX_SAFE_INTEGER`, the last one Node reads and writes
/// exactly. A larger one is `frame_malformed` on both sides (protocol.ts refuses it too).
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Data plane → Node, the first frame: its protocol and build, which Node checks before anything.
    Hello { protocol: u64, build: String },
    /// Node → data plane: liveness. `id` lets an answer be matched to its question.
    Ping { id: u64 },
    /// Data plane → Node: the answer to the `ping` with the same `id`.
    Pong { id: u64 },
    /// Node → data plane, the first frame after a matching `hello`: the parsed settings.
    Config(Box<Config>),
    /// Node → data plane: a state frame (a whole `snapshot`, or one change).
    State(StateFrame),
    /// Node → data plane: a step of the SIGTERM sequence (design §4, "Draining").
    Drain { phase: DrainPhase },
    /// Data plane → Node: a `seq` gap; `gen` (`generation`: `gen` is a keyword in Rust 2024) and `seq`
    /// are the last applied. Node answers with a `snapshot`.
    Resync { generation: String, seq: u64 },
    /// Data plane → Node: listening on `listen`, the state of `gen`/`seq` applied. Once per `gen`.
    Ready { generation: String, seq: u64 },
    /// Data plane → Node: in-flight calls ended (or the drain bound passed); the child exits next.
    Drained,
    /// Data plane → Node, every `loadReportIntervalMs` (step 7): the apps with load (reports.rs).
    Load(Vec<AppLoad>),
    /// Data plane → Node (step 7): admitted sync-call records, batched (reports.rs).
    Records(Vec<SyncCall>),
    /// Node → data plane: a scrape of Node's /metrics (design §5). `id` is Node's counter.
    AskMetrics { id: u64 },
    /// Data plane → Node: the answer to the `ask-metrics` with the same `id`. `metrics` is the JSON text
    /// of prom-client's `getMetricsAsJSON()` array (metrics.rs writes it), spliced into the frame as is
    /// (read back, as the shared vectors do, it is re-printed: its objects' keys may come reordered).
    Metrics { id: u64, metrics: String },
}

/// The state frames' types; they share one `seq` counter per `gen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    Snapshot,
    App,
    Replicas,
    Failure,
    Domain,
    Token,
}

impl StateKind {
    pub const ALL: [StateKind; 6] = [
        StateKind::Snapshot,
        StateKind::App,
        StateKind::Replicas,
        StateKind::Failure,
        StateKind::Domain,
        StateKind::Token,
    ];

    pub fn type_name(self) -> &'static str {
        match self {
            StateKind::Snapshot => "snapshot",
            StateKind::App => "app",
            StateKind::Replicas => "replicas",
            StateKind::Failure => "failure",
            StateKind::Domain => "domain",
            StateKind::Token => "token",
        }
    }
}

/// A state frame: its header, typed, and its other fields as they came (state.rs reads them).
#[derive(Debug, Clone, PartialEq)]
pub struct StateFrame {
    pub kind: StateKind,
    /// `gen` (a keyword in Rust 2024): new per Node start; a new one replaces all state.
    pub generation: String,
    pub seq: u64,
    /// The frame's fields other than `v`, `type`, `gen` and `seq`.
    pub body: Map<String, Value>,
}

/// `drain.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainPhase {
    /// Close the listener; answer kept-alive connections with `Connection: close`.
    Handover,
    /// Close idle connections, refuse new calls, wait for in-flight ones, then `drained`.
    Drain,
}

impl DrainPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            DrainPhase::Handover => "handover",
            DrainPhase::Drain => "drain",
        }
    }
}

impl Message {
    /// This build's `hello`.
    pub fn hello() -> Self {
        Message::Hello {
            protocol: PROTOCOL_VERSION,
            build: crate::BUILD.to_owned(),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Ping { .. } => "ping",
            Message::Pong { .. } => "pong",
            Message::Config(_) => "config",
            Message::State(f) => f.kind.type_name(),
            Message::Drain { .. } => "drain",
            Message::Resync { .. } => "resync",
            Message::Ready { .. } => "ready",
            Message::Drained => "drained",
            Message::Load(_) => "load",
            Message::Records(_) => "records",
            Message::AskMetrics { .. } => "ask-metrics",
            Message::Metrics { .. } => "metrics",
        }
    }

    /// Whether Node sends this type (the data plane takes only these).
    pub fn from_node(&self) -> bool {
        matches!(
            self,
            Message::Ping { .. }
                | Message::Config(_)
                | Message::State(_)
                | Message::Drain { .. }
                | Message::AskMetrics { .. }
        )
    }

    /// The frame's JSON payload.
    pub fn to_payload(&self) -> Vec<u8> {
        let v = PROTOCOL_VERSION;
        let t = self.type_name();
        if let Message::Metrics { id, metrics } = self {
            // The series' text as metrics.rs wrote it: not parsed again (its floats stay as written).
            return format!(r#"{{"v":{v},"type":"{t}","id":{id},"metrics":{metrics}}}"#).into_bytes();
        }
        let value = match self {
            Message::Hello { protocol, build } => {
                json!({ "v": v, "type": t, "protocol": protocol, "build": build })
            }
            Message::Ping { id } | Message::Pong { id } => json!({ "v": v, "type": t, "id": id }),
            Message::Config(c) => with_header(t, c.to_fields()),
            Message::State(f) => {
                let mut fields = f.body.clone();
                fields.insert("gen".to_owned(), json!(f.generation));
                fields.insert("seq".to_owned(), json!(f.seq));
                with_header(t, fields)
            }
            Message::Drain { phase } => json!({ "v": v, "type": t, "phase": phase.as_str() }),
            Message::Resync { generation, seq } | Message::Ready { generation, seq } => {
                json!({ "v": v, "type": t, "gen": generation, "seq": seq })
            }
            Message::Drained => json!({ "v": v, "type": t }),
            Message::Load(apps) => with_header(t, reports::load_fields(apps)),
            Message::Records(records) => with_header(t, reports::records_fields(records)),
            Message::AskMetrics { id } => json!({ "v": v, "type": t, "id": id }),
            Message::Metrics { .. } => unreachable!("written above"),
        };
        serde_json::to_vec(&value).expect("a JSON value always serialises")
    }

    /// The whole frame: length prefix and payload.
    pub fn to_frame(&self) -> Result<Vec<u8>, ProtocolError> {
        frame::encode(&self.to_payload())
    }

    /// A frame's payload as a message. The version is checked before the type, because a peer of
    /// another version may name its types differently: the version is the more useful error.
    pub fn from_payload(payload: &[u8]) -> Result<Self, ProtocolError> {
        let value: Value =
            serde_json::from_slice(payload).map_err(|e| malformed(format!("not JSON ({e})")))?;
        let Value::Object(obj) = value else {
            return Err(malformed("not a JSON object".to_owned()));
        };
        same_version(uint(&obj, "v")?)?;
        let type_name = match obj.get("type") {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(malformed("no string field \"type\"".to_owned())),
        };
        match type_name.as_str() {
            "hello" => {
                let protocol = same_version(uint(&obj, "protocol")?)?;
                let build = match obj.get("build") {
                    Some(Value::String(s)) => s.clone(),
                    _ => return Err(malformed("hello has no string field \"build\"".to_owned())),
                };
                Ok(Message::Hello { protocol, build })
            }
            "ping" => Ok(Message::Ping {
                id: uint(&obj, "id")?,
            }),
            "pong" => Ok(Message::Pong {
                id: uint(&obj, "id")?,
            }),
            "config" => Ok(Message::Config(Box::new(Config::from_fields(&obj)?))),
            "drain" => Ok(Message::Drain {
                phase: match obj.get("phase").and_then(Value::as_str) {
                    Some("handover") => DrainPhase::Handover,
                    Some("drain") => DrainPhase::Drain,
                    _ => {
                        return Err(malformed(
                            "drain has no phase \"handover\" or \"drain\"".to_owned(),
                        ));
                    }
                },
            }),
            "resync" => Ok(Message::Resync {
                generation: string(&obj, "gen")?,
                seq: uint(&obj, "seq")?,
            }),
            "ready" => Ok(Message::Ready {
                generation: string(&obj, "gen")?,
                seq: uint(&obj, "seq")?,
            }),
            "drained" => Ok(Message::Drained),
            "load" => Ok(Message::Load(reports::load_from(&obj)?)),
            "records" => Ok(Message::Records(reports::records_from(&obj)?)),
            "ask-metrics" => Ok(Message::AskMetrics {
                id: uint(&obj, "id")?,
            }),
            "metrics" => {
                let id = uint(&obj, "id")?;
                let Some(Value::Array(series)) = obj.get("metrics") else {
                    return Err(malformed("metrics has no array field \"metrics\"".to_owned()));
                };
                series.iter().try_for_each(check_metric)?;
                Ok(Message::Metrics {
                    id,
                    metrics: Value::Array(series.clone()).to_string(),
                })
            }
            other => match StateKind::ALL.into_iter().find(|k| k.type_name() == other) {
                Some(kind) => {
                    let generation = string(&obj, "gen")?;
                    let seq = uint(&obj, "seq")?;
                    let mut body = obj;
                    for header in ["v", "type", "gen", "seq"] {
                        body.remove(header);
                    }
                    Ok(Message::State(StateFrame {
                        kind,
                        generation,
                        seq,
                        body,
                    }))
                }
                None => Err(ProtocolError::UnknownType {
                    type_name: other.to_owned(),
                }),
            },
        }
    }
}

/// One series of a `metrics` frame as protocol.ts's MetricSchema takes it (what prom-client's
/// `AggregatorRegistry.aggregate` reads): Node reads these frames; the data plane only writes them, so
/// this is what holds the Rust reader of the shared frame vectors to Node's.
fn check_metric(m: &Value) -> Result<(), ProtocolError> {
    let bad = |what: &str| malformed(format!("a metric's {what}"));
    let Value::Object(m) = m else {
        return Err(bad("series is not an object"));
    };
    for field in ["name", "help"] {
        if !m.get(field).is_some_and(Value::is_string) {
            return Err(bad(field));
        }
    }
    let one_of = |field: &str, allowed: &[&str]| {
        m.get(field)
            .and_then(Value::as_str)
            .filter(|s| allowed.contains(s))
            .map(|_| ())
            .ok_or_else(|| bad(field))
    };
    one_of("type", &["counter", "gauge", "histogram", "summary"])?;
    one_of("aggregator", &["sum", "first", "min", "max", "average", "omit"])?;
    let Some(Value::Array(values)) = m.get("values") else {
        return Err(bad("values"));
    };
    for v in values {
        let ok = v.as_object().is_some_and(|v| {
            v.get("labels")
                .and_then(Value::as_object)
                .is_some_and(|l| l.values().all(|x| x.is_string() || x.is_number()))
                && v.get("value").is_some_and(Value::is_number)
                && v.get("metricName").is_none_or(Value::is_string)
        });
        if !ok {
            return Err(bad("value"));
        }
    }
    Ok(())
}

/// `{"v":1,"type":t}` followed by `fields`.
fn with_header(t: &str, fields: Map<String, Value>) -> Value {
    let mut out = Map::new();
    out.insert("v".to_owned(), json!(PROTOCOL_VERSION));
    out.insert("type".to_owned(), json!(t));
    out.extend(fields);
    Value::Object(out)
}

/// `got` if it is this build's protocol (a frame's `v`, `hello.protocol`), else `version_mismatch`.
fn same_version(got: u64) -> Result<u64, ProtocolError> {
    if got == PROTOCOL_VERSION {
        Ok(got)
    } else {
        Err(ProtocolError::VersionMismatch {
            got,
            want: PROTOCOL_VERSION,
        })
    }
}

fn malformed(reason: String) -> ProtocolError {
    ProtocolError::FrameMalformed { reason }
}

/// A required string field.
fn string(obj: &Map<String, Value>, field: &str) -> Result<String, ProtocolError> {
    obj.get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| malformed(format!("no string field {field:?}")))
}

/// A required non-negative integer field.
fn uint(obj: &Map<String, Value>, field: &str) -> Result<u64, ProtocolError> {
    obj.get(field)
        .and_then(Value::as_u64)
        .filter(|&n| n <= MAX_SAFE_INTEGER)
        .ok_or_else(|| malformed(format!("no integer field {field:?} in [0, {MAX_SAFE_INTEGER}]")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameDecoder;

    impl Message {
        fn with_gen(mut self, g: &str) -> Self {
            if let Message::State(f) = &mut self {
                f.generation = g.to_owned();
            }
            self
        }
    }

    fn decode_all(wire: &[u8]) -> Vec<Message> {
        let mut d = FrameDecoder::new();
        d.push(wire);
        let mut out = Vec::new();
        while let Some(p) = d.next_frame().unwrap() {
            out.push(Message::from_payload(&p).unwrap());
        }
        d.finish().unwrap();
        out
    }

    #[test]
    fn round_trip_every_message() {
        let msgs = [
            Message::hello(),
            Message::Ping { id: 0 },
            Message::Pong { id: MAX_SAFE_INTEGER },
            Message::Hello {
                protocol: 1,
                build: "é\"\n".to_owned(),
            },
        ];
        let mut wire = Vec::new();
        for m in &msgs {
            wire.extend(m.to_frame().unwrap());
        }
        assert_eq!(decode_all(&wire), msgs);
    }

    fn state(kind: StateKind, seq: u64, body: Value) -> Message {
        let Value::Object(body) = body else { panic!() };
        Message::State(StateFrame {
            kind,
            generation: "g1".to_owned(),
            seq,
            body,
        })
    }

    #[test]
    fn round_trip_every_v1_type() {
        let mut msgs = vec![
            Message::Config(Box::new(Config::example(8080, "/run/apphost/handoff.sock"))),
            Message::Drain {
                phase: DrainPhase::Handover,
            },
            Message::Drain {
                phase: DrainPhase::Drain,
            },
            Message::Resync {
                generation: "g".to_owned(),
                seq: 4,
            },
            Message::Ready {
                generation: "g".to_owned(),
                seq: 0,
            },
            Message::Drained,
            Message::Load(vec![
                AppLoad {
                    project_id: "p".to_owned(),
                    app_name: "a".to_owned(),
                    concurrency: 1.25,
                    inflight: 2,
                    queued: 1,
                    runs: 0,
                    replicas: Some(vec![("r1".to_owned(), 2), ("r2".to_owned(), 0)]),
                },
                AppLoad {
                    project_id: "p".to_owned(),
                    app_name: "b".to_owned(),
                    concurrency: 0.0,
                    inflight: 0,
                    queued: 0,
                    runs: 0,
                    replicas: None,
                },
            ]),
            Message::Load(Vec::new()),
            Message::Records(vec![
                SyncCall {
                    request_id: "id-1".to_owned(),
                    project_id: "p".to_owned(),
                    app_name: "a".to_owned(),
                    path: "f/é".to_owned(),
                    status: 200,
                    error_code: None,
                    error_message: None,
                    started_at_ms: 1_795_000_000_000,
                    finished_at_ms: 1_795_000_000_002,
                    aborted: true,
                    streamed: true,
                },
                SyncCall {
                    request_id: "id-2".to_owned(),
                    project_id: "p".to_owned(),
                    app_name: "a".to_owned(),
                    path: String::new(),
                    status: 504,
                    error_code: Some("upstream_timeout".to_owned()),
                    error_message: Some("no answer \"within\" 60 s".to_owned()),
                    started_at_ms: 0,
                    finished_at_ms: MAX_SAFE_INTEGER,
                    aborted: false,
                    streamed: false,
                },
            ]),
            Message::AskMetrics { id: 7 },
            Message::Metrics {
                id: 7,
                metrics: "[]".to_owned(),
            },
        ];
        for (i, kind) in StateKind::ALL.into_iter().enumerate() {
            msgs.push(state(kind, i as u64, json!({ "key": "p/a", "app": null })));
        }
        let mut wire = Vec::new();
        for m in &msgs {
            wire.extend(m.to_frame().unwrap());
        }
        assert_eq!(decode_all(&wire), msgs);
    }

    #[test]
    fn state_frames_keep_their_other_fields_for_state_rs() {
        let m = Message::from_payload(
            br#"{"v":1,"type":"token","gen":"7f","seq":12,"sha256":"ab","projectId":"p","until":5}"#,
        )
        .unwrap();
        assert_eq!(
            m,
            state(
                StateKind::Token,
                12,
                json!({"sha256": "ab", "projectId": "p", "until": 5})
            )
            .with_gen("7f")
        );
    }

    #[test]
    fn which_side_sends_what() {
        let node = [
            Message::Ping { id: 1 },
            Message::Config(Box::new(Config::example(1, "/s"))),
            state(StateKind::Snapshot, 0, json!({})),
            Message::Drain {
                phase: DrainPhase::Drain,
            },
            Message::AskMetrics { id: 1 },
        ];
        assert!(node.iter().all(Message::from_node));
        let ours = [
            Message::hello(),
            Message::Pong { id: 1 },
            Message::Ready {
                generation: "g".to_owned(),
                seq: 1,
            },
            Message::Resync {
                generation: "g".to_owned(),
                seq: 1,
            },
            Message::Drained,
            Message::Load(Vec::new()),
            Message::Records(Vec::new()),
            Message::Metrics {
                id: 1,
                metrics: "[]".to_owned(),
            },
        ];
        assert!(!ours.iter().any(Message::from_node));
    }

    #[test]
    fn metrics_carry_the_series_text_as_written() {
        // A sum as metrics.rs writes it (shortest round-trip form): spliced, not parsed and re-printed.
        let series = r#"[{"name":"n","help":"h","type":"histogram","aggregator":"sum","values":[{"labels":{"le":0.005,"p":"a"},"value":0.30000000000000004,"metricName":"n_sum"}]}]"#;
        let m = Message::Metrics {
            id: 3,
            metrics: series.to_owned(),
        };
        let payload = m.to_payload();
        assert_eq!(
            String::from_utf8(payload.clone()).unwrap(),
            format!(r#"{{"v":1,"type":"metrics","id":3,"metrics":{series}}}"#)
        );
        // Read back (Node's side: the data plane never reads one), the same series, keys maybe reordered.
        let Message::Metrics { id, metrics } = Message::from_payload(&payload).unwrap() else {
            panic!()
        };
        assert_eq!(id, 3);
        assert_eq!(
            serde_json::from_str::<Value>(&metrics).unwrap(),
            serde_json::from_str::<Value>(series).unwrap()
        );
    }

    #[test]
    fn missing_or_wrongly_typed_fields_of_the_v1_types_are_malformed() {
        for payload in [
            &br#"{"v":1,"type":"drain"}"#[..],
            br#"{"v":1,"type":"drain","phase":"now"}"#,
            br#"{"v":1,"type":"drain","phase":1}"#,
            br#"{"v":1,"type":"ready","seq":1}"#,
            br#"{"v":1,"type":"ready","gen":1,"seq":1}"#,
            br#"{"v":1,"type":"resync","gen":"g"}"#,
            br#"{"v":1,"type":"snapshot","seq":0,"apps":[]}"#,
            br#"{"v":1,"type":"snapshot","gen":"g","seq":-1}"#,
            br#"{"v":1,"type":"app","gen":"g","seq":"1"}"#,
            br#"{"v":1,"type":"token","gen":null,"seq":1}"#,
            br#"{"v":1,"type":"config"}"#,
            br#"{"v":1,"type":"config","listen":{"host":"h","port":1}}"#,
            br#"{"v":1,"type":"load"}"#,
            br#"{"v":1,"type":"load","apps":[{"projectId":"","appName":"a","concurrency":0,"inflight":0,"queued":0,"runs":0}]}"#,
            br#"{"v":1,"type":"load","apps":[{"projectId":"p","appName":"a","concurrency":0,"inflight":0,"queued":0,"runs":0,"replicas":null}]}"#,
            br#"{"v":1,"type":"records","records":[{}]}"#,
            br#"{"v":1,"type":"records","records":[{"requestId":"x","projectId":"p","appName":"a","path":"f","status":1000,"startedAtMs":1,"finishedAtMs":2,"aborted":false,"streamed":false}]}"#,
            br#"{"v":1,"type":"records","records":[{"requestId":"x","projectId":"p","appName":"a","path":"f","status":200,"errorMessage":null,"startedAtMs":1,"finishedAtMs":2,"aborted":false,"streamed":false}]}"#,
        ] {
            let err = Message::from_payload(payload).unwrap_err();
            assert_eq!(
                err.code(),
                "frame_malformed",
                "{}",
                String::from_utf8_lossy(payload)
            );
        }
    }

    #[test]
    fn hello_is_versioned_on_the_wire() {
        let v: Value = serde_json::from_slice(&Message::hello().to_payload()).unwrap();
        assert_eq!(v["v"], 1);
        assert_eq!(v["type"], "hello");
        assert_eq!(v["protocol"], 1);
        assert_eq!(v["build"], crate::BUILD);
    }

    #[test]
    fn another_version_is_refused() {
        let err = Message::from_payload(br#"{"v":2,"type":"ping","id":1}"#).unwrap_err();
        assert_eq!(err, ProtocolError::VersionMismatch { got: 2, want: 1 });
        assert_eq!(err.code(), "version_mismatch");
        // Before the type: a v2 peer's unknown type is reported as the version it is.
        let err = Message::from_payload(br#"{"v":2,"type":"config2"}"#).unwrap_err();
        assert_eq!(err.code(), "version_mismatch");
        // A v1 frame whose hello names another protocol.
        let err = Message::from_payload(br#"{"v":1,"type":"hello","protocol":2,"build":"x"}"#).unwrap_err();
        assert_eq!(err, ProtocolError::VersionMismatch { got: 2, want: 1 });
    }

    #[test]
    fn unknown_type_is_refused() {
        let err = Message::from_payload(br#"{"v":1,"type":"snapshot2"}"#).unwrap_err();
        assert_eq!(
            err,
            ProtocolError::UnknownType {
                type_name: "snapshot2".to_owned()
            }
        );
        assert_eq!(err.code(), "unknown_type");
    }

    #[test]
    fn malformed_payloads_are_refused() {
        for payload in [
            &b""[..],
            b"{",
            b"[1]",
            b"{\"type\":\"ping\",\"id\":1}",
            b"{\"v\":\"1\",\"type\":\"ping\",\"id\":1}",
            b"{\"v\":-1,\"type\":\"ping\",\"id\":1}",
            b"{\"v\":1,\"id\":1}",
            b"{\"v\":1,\"type\":\"ping\"}",
            b"{\"v\":1,\"type\":\"ping\",\"id\":1.5}",
            // Over Number.MAX_SAFE_INTEGER: Node cannot have written it.
            b"{\"v\":1,\"type\":\"ping\",\"id\":9007199254740992}",
            b"{\"v\":1,\"type\":\"hello\",\"protocol\":1}",
        ] {
            let err = Message::from_payload(payload).unwrap_err();
            assert_eq!(
                err.code(),
                "frame_malformed",
                "{}",
                String::from_utf8_lossy(payload)
            );
        }
    }
}
