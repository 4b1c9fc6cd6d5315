//! The control channel's messages (design §4), to and from one frame's JSON object
//! `{"v":1,"type":...}`. Step 1 has the versioned `hello` and the liveness `ping`/`pong`; the state
//! messages (`config`, `snapshot`, ...) come with the steps that use them.

use serde_json::{Map, Value, json};

use crate::error::ProtocolError;
use crate::frame;

/// The protocol this build speaks: every frame's `v`, and `hello.protocol`. Both sides come from one
/// image, so a mismatch means a broken build and is refused, never negotiated (fail closed).
pub const PROTOCOL_VERSION: u64 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Data plane → Node, the first frame: its protocol and build, which Node checks before anything.
    Hello { protocol: u64, build: String },
    /// Node → data plane: liveness. `id` lets an answer be matched to its question.
    Ping { id: u64 },
    /// Data plane → Node: the answer to the `ping` with the same `id`.
    Pong { id: u64 },
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
        }
    }

    /// The frame's JSON payload.
    pub fn to_payload(&self) -> Vec<u8> {
        let v = PROTOCOL_VERSION;
        let t = self.type_name();
        let value = match self {
            Message::Hello { protocol, build } => {
                json!({ "v": v, "type": t, "protocol": protocol, "build": build })
            }
            Message::Ping { id } | Message::Pong { id } => json!({ "v": v, "type": t, "id": id }),
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
        let v = uint(&obj, "v")?;
        if v != PROTOCOL_VERSION {
            return Err(ProtocolError::VersionMismatch {
                got: v,
                want: PROTOCOL_VERSION,
            });
        }
        let type_name = match obj.get("type") {
            Some(Value::String(s)) => s.as_str(),
            _ => return Err(malformed("no string field \"type\"".to_owned())),
        };
        match type_name {
            "hello" => {
                let protocol = uint(&obj, "protocol")?;
                if protocol != PROTOCOL_VERSION {
                    return Err(ProtocolError::VersionMismatch {
                        got: protocol,
                        want: PROTOCOL_VERSION,
                    });
                }
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
            other => Err(ProtocolError::UnknownType {
                type_name: other.to_owned(),
            }),
        }
    }
}

fn malformed(reason: String) -> ProtocolError {
    ProtocolError::FrameMalformed { reason }
}

/// A required non-negative integer field.
fn uint(obj: &Map<String, Value>, field: &str) -> Result<u64, ProtocolError> {
    obj.get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed(format!("no non-negative integer field {field:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameDecoder;

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
            Message::Pong { id: u64::MAX },
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
