//! Why the upstream hop failed, as the gateway names it: the `reason` of a 502 `upstream_unreachable`
//! is undici's code for the failure (`upstreamError`, src/shared/http/upstream.ts), and the balancer
//! retries on another replica only the failures where nothing reached the app (`notConnected`,
//! src/gateway/balancer/caller.ts). The data plane meets io errors (tokio's connect, reads and writes)
//! and hyper's; this is the one table from those to undici's codes (design §2, "errors after dispatch").
//! tests/upstream_failure_vectors.rs holds the codes' answers to tests/vectors/upstream-failures.json.

use std::io;

use crate::errors::{ApiError, upstream_error};

/// A failed upstream call, by what the data plane saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// connect(2): ECONNREFUSED (`io::ErrorKind::ConnectionRefused`).
    Refused,
    /// connect(2): EHOSTUNREACH (`HostUnreachable`).
    HostUnreachable,
    /// connect(2): ENETUNREACH (`NetworkUnreachable`).
    NetworkUnreachable,
    /// connect(2): EADDRNOTAVAIL (`AddrNotAvailable`: no local port left).
    AddrNotAvailable,
    /// The name does not resolve (service routing: getaddrinfo's EAI_NONAME).
    NameNotFound,
    /// The name could not be resolved now (getaddrinfo's EAI_AGAIN).
    NameTryAgain,
    /// The connect bound passed (the client's own connect timeout).
    ConnectTimeout,
    /// ECONNRESET on a read or write (`ConnectionReset`).
    Reset,
    /// ECONNABORTED (`ConnectionAborted`).
    Aborted,
    /// EPIPE writing the request (`BrokenPipe`).
    BrokenPipe,
    /// ETIMEDOUT from the kernel (`TimedOut`: retransmissions or keep-alive probes unanswered).
    TimedOut,
    /// The app closed the connection before the answer was complete (`UnexpectedEof`; hyper's
    /// `is_incomplete_message`): undici's "other side closed".
    Closed,
    /// No answer head within `syncTimeoutMs` (hyper-util has none of its own: the data plane's timer).
    HeadTimeout,
    /// No body chunk within `streamIdleTimeoutMs`.
    BodyTimeout,
    /// An answer head over the parser's bound (hyper's `Parse(TooLarge)`).
    HeadTooLarge,
    /// An answer that is not HTTP/1.1 (hyper's other parse errors). llhttp names the byte it stopped
    /// at (`HPE_INVALID_STATUS`, `HPE_INVALID_HEADER_TOKEN`…) and hyper does not: the data plane says
    /// `HPE_INVALID_CONSTANT` for all of them.
    Malformed,
    /// A body shorter or longer than its Content-Length.
    LengthMismatch,
    /// Anything else: undici's fallback, `error`.
    Other,
}

impl UpstreamFailure {
    /// Every failure, for the tests.
    pub const ALL: [UpstreamFailure; 18] = [
        Self::Refused,
        Self::HostUnreachable,
        Self::NetworkUnreachable,
        Self::AddrNotAvailable,
        Self::NameNotFound,
        Self::NameTryAgain,
        Self::ConnectTimeout,
        Self::Reset,
        Self::Aborted,
        Self::BrokenPipe,
        Self::TimedOut,
        Self::Closed,
        Self::HeadTimeout,
        Self::BodyTimeout,
        Self::HeadTooLarge,
        Self::Malformed,
        Self::LengthMismatch,
        Self::Other,
    ];

    /// undici's code for the same failure: the 502's `reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Refused => "ECONNREFUSED",
            Self::HostUnreachable => "EHOSTUNREACH",
            Self::NetworkUnreachable => "ENETUNREACH",
            Self::AddrNotAvailable => "EADDRNOTAVAIL",
            Self::NameNotFound => "ENOTFOUND",
            Self::NameTryAgain => "EAI_AGAIN",
            Self::ConnectTimeout => "UND_ERR_CONNECT_TIMEOUT",
            Self::Reset => "ECONNRESET",
            Self::Aborted => "ECONNABORTED",
            Self::BrokenPipe => "EPIPE",
            Self::TimedOut => "ETIMEDOUT",
            Self::Closed => "UND_ERR_SOCKET",
            Self::HeadTimeout => "UND_ERR_HEADERS_TIMEOUT",
            Self::BodyTimeout => "UND_ERR_BODY_TIMEOUT",
            Self::HeadTooLarge => "UND_ERR_HEADERS_OVERFLOW",
            Self::Malformed => "HPE_INVALID_CONSTANT",
            Self::LengthMismatch => "UND_ERR_RES_CONTENT_LENGTH_MISMATCH",
            Self::Other => "error",
        }
    }

    /// True when nothing reached the app, so the balancer may try another replica (`notConnected`).
    pub fn not_connected(self) -> bool {
        matches!(
            self,
            Self::Refused
                | Self::HostUnreachable
                | Self::NetworkUnreachable
                | Self::NameNotFound
                | Self::NameTryAgain
                | Self::ConnectTimeout
        )
    }

    /// The error the caller gets when it is not retried (or no retry is left: then place.rs's
    /// `gave_up` with `reason()` as the detail).
    pub fn error(self) -> ApiError {
        upstream_error(self.reason())
    }

    /// An io error of a connect, read or write.
    pub fn from_io(err: &io::Error) -> Self {
        match err.kind() {
            io::ErrorKind::ConnectionRefused => Self::Refused,
            io::ErrorKind::HostUnreachable => Self::HostUnreachable,
            io::ErrorKind::NetworkUnreachable => Self::NetworkUnreachable,
            io::ErrorKind::AddrNotAvailable => Self::AddrNotAvailable,
            io::ErrorKind::ConnectionReset => Self::Reset,
            io::ErrorKind::ConnectionAborted => Self::Aborted,
            io::ErrorKind::BrokenPipe => Self::BrokenPipe,
            io::ErrorKind::TimedOut => Self::TimedOut,
            io::ErrorKind::UnexpectedEof => Self::Closed,
            _ => Self::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::UpstreamFailure;
    use std::io;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_refused_connect_is_econnrefused_and_retried() {
        // A port nothing listens on any more: the kernel refuses the connect.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = TcpStream::connect(("127.0.0.1", port)).expect_err("nothing listens");
        let f = UpstreamFailure::from_io(&err);
        assert_eq!((f.reason(), f.not_connected()), ("ECONNREFUSED", true));
    }

    #[test]
    fn io_kinds_map_to_undici_codes() {
        for (kind, reason) in [
            (io::ErrorKind::ConnectionReset, "ECONNRESET"),
            (io::ErrorKind::BrokenPipe, "EPIPE"),
            (io::ErrorKind::UnexpectedEof, "UND_ERR_SOCKET"),
            (io::ErrorKind::HostUnreachable, "EHOSTUNREACH"),
            (io::ErrorKind::NetworkUnreachable, "ENETUNREACH"),
            (io::ErrorKind::TimedOut, "ETIMEDOUT"),
            (io::ErrorKind::Other, "error"),
        ] {
            assert_eq!(
                UpstreamFailure::from_io(&io::Error::from(kind)).reason(),
                reason,
                "{kind:?}"
            );
        }
        // From the errno, as the kernel gives it (104: ECONNRESET on Linux).
        let reset = io::Error::from_raw_os_error(104);
        assert_eq!(UpstreamFailure::from_io(&reset).reason(), "ECONNRESET");
    }
}
