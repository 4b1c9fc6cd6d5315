//! What can go wrong on the control channel, as typed values with stable codes.
//!
//! The codes are the vocabulary the Node side (src/gateway/dataplane/supervise.ts, step 4) logs and
//! tests against, so they never change meaning; a new failure gets a new code.

use std::fmt;

/// A protocol error: the side that sees one closes the channel (design §4, "Framing").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// A frame's declared length is over `DATAPLANE_MAX_FRAME_BYTES` (or an outgoing message would be).
    FrameTooLarge { bytes: u64 },
    /// The channel ended inside a frame: `got` of the `want` bytes (length prefix included) arrived.
    FrameTruncated { got: usize, want: usize },
    /// A frame's payload is not a JSON object with the fields its type requires.
    FrameMalformed { reason: String },
    /// The peer speaks another protocol version: a frame's `v`, or `hello.protocol`.
    VersionMismatch { got: u64, want: u64 },
    /// A `type` this build does not know (both sides come from one image: a broken build).
    UnknownType { type_name: String },
    /// A known message sent the wrong way (Node sent what only the data plane sends), or out of order
    /// (anything but `ping` before `config`, a second `config`).
    UnexpectedMessage { type_name: String },
    /// Node did not send `config` and the first `snapshot` within `DATAPLANE_START_WAIT_MS`.
    StartTimeout { waited_ms: u64, missing: &'static str },
}

impl ProtocolError {
    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            ProtocolError::FrameTooLarge { .. } => "frame_too_large",
            ProtocolError::FrameTruncated { .. } => "frame_truncated",
            ProtocolError::FrameMalformed { .. } => "frame_malformed",
            ProtocolError::VersionMismatch { .. } => "version_mismatch",
            ProtocolError::UnknownType { .. } => "unknown_type",
            ProtocolError::UnexpectedMessage { .. } => "unexpected_message",
            ProtocolError::StartTimeout { .. } => "start_timeout",
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = self.code();
        match self {
            ProtocolError::FrameTooLarge { bytes } => write!(
                f,
                "{code}: a frame of {bytes} bytes is over the bound of {} bytes",
                crate::frame::DATAPLANE_MAX_FRAME_BYTES
            ),
            ProtocolError::FrameTruncated { got, want } => {
                write!(
                    f,
                    "{code}: the channel ended after {got} of a frame's {want} bytes"
                )
            }
            ProtocolError::FrameMalformed { reason } => write!(f, "{code}: {reason}"),
            ProtocolError::VersionMismatch { got, want } => {
                write!(f, "{code}: the peer speaks protocol {got}, this build {want}")
            }
            ProtocolError::UnknownType { type_name } => {
                write!(
                    f,
                    "{code}: no message of type {type_name:?} in protocol {}",
                    crate::message::PROTOCOL_VERSION
                )
            }
            ProtocolError::UnexpectedMessage { type_name } => {
                write!(
                    f,
                    "{code}: the data plane does not take a {type_name:?} message here"
                )
            }
            ProtocolError::StartTimeout { waited_ms, missing } => {
                write!(f, "{code}: no {missing} from the gateway within {waited_ms} ms")
            }
        }
    }
}

impl std::error::Error for ProtocolError {}
