//! A custom domain's host: the name the gateway looks up for a request's `Host` (`customDomain`,
//! src/gateway/middleware/custom-domain.ts, over `CallContext.hostname`): the part before the first
//! `:`, lower-cased, and the resolvers' key drops one trailing `.` (the cluster's `resolveHost`, local
//! mode's `normalizeHost`). A bracketed IPv6 host goes through WHATWG `URL` in Node, and a name with
//! anything but letters, digits, `.`, `-` and `_` is lower-cased by JavaScript's Unicode rules (or
//! trimmed by one resolver and not the other): those are handed to Node (hand-off reason `domain`).
//! tests/domain_vectors.rs holds it to tests/vectors/hostname.json.

/// What the data plane does with a request's Host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainHost {
    /// No name: no custom domain (the usual `/v4/...` route).
    None,
    /// Look this key up in the domain map.
    Key(String),
    /// Node decides.
    HandOff,
}

/// The Host header's bytes (None when absent).
pub fn domain_host(host: Option<&[u8]>) -> DomainHost {
    let Some(host) = host else {
        return DomainHost::None;
    };
    if host.first() == Some(&b'[') {
        return DomainHost::HandOff;
    }
    let name = match host.iter().position(|&b| b == b':') {
        Some(i) => &host[..i],
        None => host,
    };
    if name.is_empty() {
        return DomainHost::None;
    }
    if !name
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return DomainHost::HandOff;
    }
    let name = name.strip_suffix(b".").unwrap_or(name);
    DomainHost::Key(String::from_utf8_lossy(name).to_ascii_lowercase())
}
