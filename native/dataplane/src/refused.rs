//! The runtime's refusal of a call, as the gateway reads it (`refusalOf`, src/gateway/balancer/caller.ts):
//! a 429 whose `X-Apphost-Refused` is `at_capacity`, or a 503 whose is `shutting_down`, proves the
//! function did not run, so the call may go to another replica. The header's first value, as undici
//! gives it (latin1: one char a byte), trimmed as JavaScript's `trim()` trims (HT, LF, VT, FF, CR, SP
//! and NBSP among latin1 bytes; not U+0085) and lower-cased. tests/refused_vectors.rs holds it to
//! tests/vectors/refused.json.

use crate::errors::Refusal;

/// The header's name (lower-case, as hyper gives names).
pub const REFUSED_HEADER: &str = "x-apphost-refused";

/// JavaScript's white space among latin1 bytes.
fn js_space(b: u8) -> bool {
    matches!(b, 0x09..=0x0d | b' ' | 0xa0)
}

/// The refusal an answer carries: its status and the first `X-Apphost-Refused` value's bytes.
pub fn refusal_of(status: u16, first_value: Option<&[u8]>) -> Option<Refusal> {
    let v = first_value?;
    let start = v.iter().position(|&b| !js_space(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|&b| !js_space(b)).map_or(start, |i| i + 1);
    let v = &v[start..end.max(start)];
    match status {
        429 if v.eq_ignore_ascii_case(b"at_capacity") => Some(Refusal::AtCapacity),
        503 if v.eq_ignore_ascii_case(b"shutting_down") => Some(Refusal::ShuttingDown),
        _ => None,
    }
}
