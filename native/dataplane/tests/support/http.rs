//! HTTP pieces the binary's tests share: a caller on the data plane's port, a body the test feeds chunk
//! by chunk, and the clock the hand-off marker uses.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::Full;
use hyper::body::{Body, Bytes, Frame};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// A body fed chunk by chunk from the test (an event stream, a slow answer).
pub struct Chunks(pub mpsc::UnboundedReceiver<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|c| c.map(|b| Ok(Frame::data(b))))
    }
}

/// One kept-alive HTTP/1.1 connection to the data plane's port.
pub type Caller = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

pub async fn caller(port: u16) -> Caller {
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

/// Now, in epoch milliseconds (the marker's `start`, a token's `until`).
pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
