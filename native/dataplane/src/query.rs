//! The query string a sync call forwards: a port of the gateway's `forwardQuery`
//! (src/shared/http/upstream.ts) — the caller's parameters read as `URLSearchParams` reads them, the
//! gateway's own (`async`, `webhookEndpoint`) taken out, the rest written back as `URLSearchParams`
//! writes them (application/x-www-form-urlencoded). tests/query_vectors.rs holds it to
//! tests/vectors/query.json.

/// The gateway's own query parameters, consumed by it (upstream.ts `GATEWAY_QUERY_PARAMS`).
pub const GATEWAY_QUERY_PARAMS: [&str; 2] = ["async", "webhookEndpoint"];

/// A name or value as `URLSearchParams` decodes it: '+' is a space, `%XX` a byte (a `%` without two hex
/// digits stays as it is), and bytes that are not UTF-8 become U+FFFD.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let hex = b
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit));
        match (c, hex) {
            (b'+', _) => out.push(b' '),
            (b'%', Some(h)) => {
                let digit = |d: u8| (d as char).to_digit(16).unwrap_or(0) as u8;
                out.push(digit(h[0]) * 16 + digit(h[1]));
                i += 2;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A name or value as `URLSearchParams` writes it: alphanumerics and `*-._` kept, a space as '+',
/// every other byte of its UTF-8 as `%XX`.
fn encode(s: &str, out: &mut String) {
    for &c in s.as_bytes() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => out.push(c as char),
            b' ' => out.push('+'),
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push('%');
                out.push(HEX[usize::from(c >> 4)] as char);
                out.push(HEX[usize::from(c & 15)] as char);
            }
        }
    }
}

/// The gateway's own parameters a query holds (names decoded as `URLSearchParams` decodes them, any
/// value): `(async, webhookEndpoint)`. Either makes the call Node's (design §2: `prepareRun`).
pub fn gateway_params(search: &str) -> (bool, bool) {
    let search = search.strip_prefix('?').unwrap_or(search);
    let (mut is_async, mut webhook) = (false, false);
    for pair in search.split('&').filter(|p| !p.is_empty()) {
        let name = pair.split_once('=').map_or(pair, |(n, _)| n);
        // Only a name that could decode to one of the two is decoded (the usual query pays nothing).
        if name.len() < 5 {
            continue;
        }
        match decode(name).as_str() {
            "async" => is_async = true,
            "webhookEndpoint" => webhook = true,
            _ => {}
        }
    }
    (is_async, webhook)
}

/// `forwardQuery`: the query string to forward ('' or without the leading '?') of `search` (the
/// request target's query, with or without its '?').
pub fn forward_query(search: &str) -> String {
    let search = search.strip_prefix('?').unwrap_or(search);
    let mut out = String::new();
    for pair in search.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode(name);
        if GATEWAY_QUERY_PARAMS.contains(&name.as_str()) {
            continue;
        }
        if !out.is_empty() {
            out.push('&');
        }
        encode(&name, &mut out);
        out.push('=');
        encode(&decode(value), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_own_parameters_are_found_as_urlsearchparams_decodes_them() {
        assert_eq!(gateway_params(""), (false, false));
        assert_eq!(gateway_params("?a=1&b"), (false, false));
        assert_eq!(gateway_params("async=false"), (true, false));
        assert_eq!(gateway_params("%61sync"), (true, false));
        assert_eq!(
            gateway_params("x=1&webhook%45ndpoint=http%3A%2F%2Fh"),
            (false, true)
        );
        assert_eq!(gateway_params("asyncx=1&Async=1"), (false, false));
    }
}
