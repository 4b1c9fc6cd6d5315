//! The run token of a sync call: a port of the parse in the gateway's `authorize`
//! (src/gateway/middleware/auth.ts), `^Bearer\s+(\S+)\s*$` case-insensitively, on the Authorization
//! header's bytes as node reads them (latin1: one char a byte). Verifying the token stays a look-up of
//! the cache Node feeds (design §2); this is only where the token is. tests/auth_vectors.rs holds it to
//! tests/vectors/auth.json.

/// The 401 for a call without a bearer token: the error body's code and message, and `WWW-Authenticate`.
pub const MISSING_TOKEN: (u16, &str, &str, &str) = (
    401,
    "unauthenticated",
    "missing bearer token (Authorization: Bearer <token>)",
    "Bearer",
);

/// JavaScript's `\s` over latin1: tab, line feed, vertical tab, form feed, carriage return, space and
/// no-break space (0xa0; not 0x85).
fn is_space(c: u8) -> bool {
    matches!(c, 0x09..=0x0d | 0x20 | 0xa0)
}

/// The token of an Authorization header (`None` when it is absent: the caller passes `b""`), or `None`
/// when it holds no bearer token — the 401 of [`MISSING_TOKEN`].
pub fn bearer_token(header: &[u8]) -> Option<&[u8]> {
    let scheme = header.get(..6)?;
    if !scheme.eq_ignore_ascii_case(b"Bearer") {
        return None;
    }
    let rest = &header[6..];
    let start = rest.iter().position(|&c| !is_space(c))?;
    if start == 0 {
        return None;
    }
    let rest = &rest[start..];
    let end = rest.iter().position(|&c| is_space(c)).unwrap_or(rest.len());
    rest[end..].iter().all(|&c| is_space(c)).then_some(&rest[..end])
}
