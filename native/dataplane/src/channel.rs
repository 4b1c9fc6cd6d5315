//! The control channel's I/O on tokio (design §4): whole messages read from and written to fd 3, with
//! the frame codec of frame.rs. What the messages mean is run.rs's.

use std::fmt;
use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

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

/// Frames from Node, read as they come. `next` is cancel-safe (a partly read frame stays in the decoder),
/// so it can sit in a `select!` beside the server's events.
pub struct FrameReader<R> {
    io: R,
    decoder: FrameDecoder,
    chunk: Vec<u8>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(io: R) -> Self {
        FrameReader {
            io,
            decoder: FrameDecoder::new(),
            chunk: vec![0u8; READ_CHUNK_BYTES],
        }
    }

    /// The next message, or `None` when Node closed the channel between two frames.
    pub async fn next(&mut self) -> Result<Option<Message>, ChannelError> {
        loop {
            if let Some(payload) = self.decoder.next_frame()? {
                return Ok(Some(Message::from_payload(&payload)?));
            }
            let n = match self.io.read(&mut self.chunk).await {
                Ok(0) => {
                    self.decoder.finish()?;
                    return Ok(None);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            self.decoder.push(&self.chunk[..n]);
        }
    }
}

/// Frames to Node, each written whole before the next.
pub struct FrameWriter<W> {
    io: W,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub fn new(io: W) -> Self {
        FrameWriter { io }
    }

    pub async fn send(&mut self, msg: &Message) -> Result<(), ChannelError> {
        self.io.write_all(&msg.to_frame()?).await?;
        self.io.flush().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(msgs: &[Message]) -> Vec<u8> {
        msgs.iter().flat_map(|m| m.to_frame().unwrap()).collect()
    }

    async fn read_all(input: Vec<u8>) -> (Vec<Message>, Result<(), ChannelError>) {
        let (mut ours, theirs) = tokio::io::duplex(7);
        tokio::spawn(async move {
            // Seven bytes a write: frames arrive in pieces, as a socket may deliver them.
            ours.write_all(&input).await.unwrap();
        });
        let mut r = FrameReader::new(theirs);
        let mut got = Vec::new();
        loop {
            match r.next().await {
                Ok(Some(m)) => got.push(m),
                Ok(None) => return (got, Ok(())),
                Err(e) => return (got, Err(e)),
            }
        }
    }

    #[tokio::test]
    async fn messages_come_whole_then_none_at_the_end() {
        let msgs = [Message::Ping { id: 1 }, Message::Drained, Message::Ping { id: 2 }];
        let (got, end) = read_all(frames(&msgs)).await;
        assert_eq!(got, msgs);
        assert!(end.is_ok(), "{end:?}");
    }

    #[tokio::test]
    async fn a_protocol_error_comes_after_what_came_before() {
        let mut input = frames(&[Message::Ping { id: 1 }]);
        input.extend(crate::frame::encode(br#"{"v":2,"type":"ping","id":2}"#).unwrap());
        let (got, end) = read_all(input).await;
        assert_eq!(got, [Message::Ping { id: 1 }]);
        match end {
            Err(ChannelError::Protocol(e)) => assert_eq!(e.code(), "version_mismatch"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_end_inside_a_frame_is_a_protocol_error() {
        let mut input = frames(&[Message::Ping { id: 1 }]);
        input.pop();
        match read_all(input).await.1 {
            Err(ChannelError::Protocol(e)) => assert_eq!(e.code(), "frame_truncated"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn written_frames_decode_to_what_was_sent() {
        let (ours, theirs) = tokio::io::duplex(1024);
        let mut w = FrameWriter::new(ours);
        w.send(&Message::hello()).await.unwrap();
        w.send(&Message::Pong { id: 9 }).await.unwrap();
        drop(w);
        let mut r = FrameReader::new(theirs);
        assert_eq!(r.next().await.unwrap(), Some(Message::hello()));
        assert_eq!(r.next().await.unwrap(), Some(Message::Pong { id: 9 }));
        assert_eq!(r.next().await.unwrap(), None);
    }
}
