//! The data plane's side of the control channel, step 1: `hello` first, then a `pong` for each `ping`,
//! until Node closes the channel. Blocking I/O on one thread is enough while the channel is all the
//! process does; step 4 moves this loop onto tokio beside the listener, with the same codec.

use std::fmt;
use std::io::{self, Read, Write};

use crate::error::ProtocolError;
use crate::frame::FrameDecoder;
use crate::message::Message;

/// Bytes asked of one read: the channel carries small frames, and a large `snapshot` just takes more reads.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Why the channel ended other than by Node closing it between frames.
#[derive(Debug)]
pub enum ChannelError {
    /// The peer broke the protocol; the channel is closed (design §4: exit code 3).
    Protocol(ProtocolError),
    /// Reading or writing the socket failed.
    Io(io::Error),
}

impl From<ProtocolError> for ChannelError {
    fn from(e: ProtocolError) -> Self {
        ChannelError::Protocol(e)
    }
}

impl From<io::Error> for ChannelError {
    fn from(e: io::Error) -> Self {
        ChannelError::Io(e)
    }
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelError::Protocol(e) => write!(f, "protocol error: {e}"),
            ChannelError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

impl std::error::Error for ChannelError {}

/// Serves the channel until Node closes it. `Ok` means it closed between two frames; the stream is
/// dropped (closed) on every return, so after a protocol error Node sees the channel end.
pub fn serve<S: Read + Write>(mut stream: S) -> Result<(), ChannelError> {
    send(&mut stream, &Message::hello())?;
    let mut decoder = FrameDecoder::new();
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    loop {
        while let Some(payload) = decoder.next_frame()? {
            match Message::from_payload(&payload)? {
                Message::Ping { id } => send(&mut stream, &Message::Pong { id })?,
                other => {
                    return Err(ProtocolError::UnexpectedMessage {
                        type_name: other.type_name().to_owned(),
                    }
                    .into());
                }
            }
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Ok(decoder.finish()?),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        decoder.push(&chunk[..n]);
    }
}

fn send<W: Write>(w: &mut W, msg: &Message) -> Result<(), ChannelError> {
    w.write_all(&msg.to_frame()?)?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::PROTOCOL_VERSION;

    /// A channel whose input is fixed and whose output is kept.
    struct Script {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Script {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn run(input: Vec<u8>) -> (Result<(), ChannelError>, Vec<Message>) {
        let mut script = Script {
            input: io::Cursor::new(input),
            output: Vec::new(),
        };
        let result = serve(&mut script);
        let mut d = FrameDecoder::new();
        d.push(&script.output);
        let mut sent = Vec::new();
        while let Some(p) = d.next_frame().unwrap() {
            sent.push(Message::from_payload(&p).unwrap());
        }
        d.finish().unwrap();
        (result, sent)
    }

    fn frames(msgs: &[Message]) -> Vec<u8> {
        msgs.iter().flat_map(|m| m.to_frame().unwrap()).collect()
    }

    #[test]
    fn hello_then_a_pong_per_ping_then_ok_at_the_end() {
        let (result, sent) = run(frames(&[Message::Ping { id: 1 }, Message::Ping { id: 2 }]));
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(
            sent,
            [Message::hello(), Message::Pong { id: 1 }, Message::Pong { id: 2 }]
        );
    }

    #[test]
    fn a_protocol_error_ends_the_channel_after_what_came_before() {
        let mut input = frames(&[Message::Ping { id: 1 }]);
        input.extend(crate::frame::encode(br#"{"v":2,"type":"ping","id":2}"#).unwrap());
        input.extend(frames(&[Message::Ping { id: 3 }]));
        let (result, sent) = run(input);
        match result {
            Err(ChannelError::Protocol(e)) => assert_eq!(e.code(), "version_mismatch"),
            other => panic!("{other:?}"),
        }
        assert_eq!(sent, [Message::hello(), Message::Pong { id: 1 }]);
    }

    #[test]
    fn an_end_inside_a_frame_is_a_protocol_error() {
        let mut input = frames(&[Message::Ping { id: 1 }]);
        input.pop();
        match run(input).0 {
            Err(ChannelError::Protocol(e)) => assert_eq!(e.code(), "frame_truncated"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_message_only_the_data_plane_sends_is_refused() {
        let input = frames(&[Message::Hello {
            protocol: PROTOCOL_VERSION,
            build: "x".to_owned(),
        }]);
        match run(input).0 {
            Err(ChannelError::Protocol(e)) => assert_eq!(e.code(), "unexpected_message"),
            other => panic!("{other:?}"),
        }
    }
}
