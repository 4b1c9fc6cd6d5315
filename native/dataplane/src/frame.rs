//! The control channel's framing (design §4): a 4-byte big-endian length, then that many bytes of one
//! JSON object, at most `DATAPLANE_MAX_FRAME_BYTES`.
//!
//! The decoder does no I/O: bytes go in as they arrive, whole frames come out. The same code then serves
//! step 1's blocking loop (channel.rs) and the tokio channel of step 4.

use crate::error::ProtocolError;

/// Bound on one frame's payload (the length prefix not counted). The largest frame is a `snapshot`
/// of every app, replica, domain and live token; 16 MiB is far above a thousand apps' worth and small
/// enough that a corrupt length is refused before anything is buffered.
pub const DATAPLANE_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Size of the length prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// One frame's bytes: the length prefix, then `payload`. Refuses a payload over the bound, so a side
/// never writes what the other must refuse.
pub fn encode(payload: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    if payload.len() > DATAPLANE_MAX_FRAME_BYTES {
        return Err(ProtocolError::FrameTooLarge {
            bytes: payload.len() as u64,
        });
    }
    let mut out = Vec::with_capacity(LENGTH_PREFIX_BYTES + payload.len());
    // Cannot truncate: the bound is under u32::MAX.
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// Reassembles frames from a byte stream.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
}

impl FrameDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes read from the channel.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame's payload, or `None` until more bytes arrive. A length over the bound is
    /// refused as soon as its prefix is in, before its payload is waited for.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, ProtocolError> {
        let Some(prefix) = self.buf.first_chunk::<LENGTH_PREFIX_BYTES>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*prefix) as usize;
        if len > DATAPLANE_MAX_FRAME_BYTES {
            return Err(ProtocolError::FrameTooLarge { bytes: len as u64 });
        }
        let end = LENGTH_PREFIX_BYTES + len;
        if self.buf.len() < end {
            return Ok(None);
        }
        let payload = self.buf[LENGTH_PREFIX_BYTES..end].to_vec();
        self.buf.drain(..end);
        Ok(Some(payload))
    }

    /// Called at the channel's end: an error when it ended inside a frame. The caller has taken every
    /// whole frame with `next_frame` first.
    pub fn finish(&self) -> Result<(), ProtocolError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let want = match self.buf.first_chunk::<LENGTH_PREFIX_BYTES>() {
            Some(prefix) => LENGTH_PREFIX_BYTES + u32::from_be_bytes(*prefix) as usize,
            None => LENGTH_PREFIX_BYTES,
        };
        Err(ProtocolError::FrameTruncated {
            got: self.buf.len(),
            want,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_with_len(len: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = len.to_be_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn round_trip_one_byte_at_a_time() {
        let frames = [b"{\"a\":1}".to_vec(), b"{}".to_vec(), vec![b' '; 300]];
        let mut wire = Vec::new();
        for f in &frames {
            wire.extend(encode(f).unwrap());
        }
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        for b in wire {
            d.push(&[b]);
            while let Some(p) = d.next_frame().unwrap() {
                got.push(p);
            }
        }
        assert_eq!(got, frames);
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn length_prefix_is_big_endian() {
        assert_eq!(encode(&[7; 258]).unwrap()[..4], [0, 0, 1, 2]);
    }

    #[test]
    fn a_frame_at_the_bound_passes() {
        let payload = vec![b' '; DATAPLANE_MAX_FRAME_BYTES];
        let mut d = FrameDecoder::new();
        d.push(&encode(&payload).unwrap());
        assert_eq!(
            d.next_frame().unwrap().map(|p| p.len()),
            Some(DATAPLANE_MAX_FRAME_BYTES)
        );
    }

    #[test]
    fn a_frame_over_the_bound_is_refused_from_its_prefix() {
        let over = DATAPLANE_MAX_FRAME_BYTES as u32 + 1;
        let mut d = FrameDecoder::new();
        d.push(&over.to_be_bytes());
        let err = d.next_frame().unwrap_err();
        assert_eq!(err, ProtocolError::FrameTooLarge { bytes: over as u64 });
        assert_eq!(err.code(), "frame_too_large");
        // And on the way out: a side never writes what the other must refuse.
        let err = encode(&vec![b' '; DATAPLANE_MAX_FRAME_BYTES + 1]).unwrap_err();
        assert_eq!(err.code(), "frame_too_large");
    }

    #[test]
    fn a_truncated_frame_is_an_error_at_the_end() {
        let mut d = FrameDecoder::new();
        d.push(&frame_with_len(10, b"{\"a\":"));
        assert_eq!(d.next_frame(), Ok(None));
        let err = d.finish().unwrap_err();
        assert_eq!(err, ProtocolError::FrameTruncated { got: 9, want: 14 });
        assert_eq!(err.code(), "frame_truncated");
    }

    #[test]
    fn a_truncated_prefix_is_an_error_at_the_end() {
        let mut d = FrameDecoder::new();
        d.push(&[0, 0]);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(d.finish(), Err(ProtocolError::FrameTruncated { got: 2, want: 4 }));
    }
}
