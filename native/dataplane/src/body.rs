//! The body check of the usual sync call: whether a request body is surely what the gateway's
//! `checkCortexBody` (src/gateway/body.ts) lets through, read from its bytes alone.
//!
//! A port of `isPlainJsonObject`, rule for rule: JSON (RFC 8259, as `JSON.parse` reads it) whose top
//! value is an object, nested at most [`MAX_JSON_DEPTH`] deep, with no number that may not fit a
//! float (an exponent, or 309+ integer digits). `false` means "not sure": the data plane hands the call
//! to Node, whose full check decides and writes the error (design §2). The property the shared vectors
//! check (tests/body_vectors.rs): every body [`accepts`] takes, Node accepts.

/// Deepest nesting of arrays and objects a body may have: body.ts's `MAX_JSON_DEPTH` and the Python
/// runtime's `MAX_DEPTH` (the vectors carry the TS value, and the tests compare them).
pub const MAX_JSON_DEPTH: usize = 512;

/// Whether the data plane may pass `body` on without Node: empty or only SP/HT/LF/CR (no arguments;
/// Node's `trim()` takes more spaces than these, which are handed off), or valid UTF-8 and
/// [`is_plain_json_object`] (design §2, the Cortex body check).
pub fn accepts(body: &[u8]) -> bool {
    is_blank(body) || (is_plain_json_object(body) && std::str::from_utf8(body).is_ok())
}

/// Empty, or only the spaces JSON itself allows (SP, HT, LF, CR).
fn is_blank(body: &[u8]) -> bool {
    body.iter().all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = b.get(i) {
        i += 1;
    }
    i
}

fn is_hex(c: Option<&u8>) -> bool {
    matches!(c, Some(c) if c.is_ascii_hexdigit())
}

fn is_digit(c: Option<&u8>) -> bool {
    matches!(c, Some(c) if c.is_ascii_digit())
}

/// The index after the string whose opening quote is before `i`, or `None` if it is not one.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return Some(i + 1),
            0..=0x1f => return None,
            b'\\' => match b.get(i + 1) {
                // \uXXXX (a lone surrogate too: JSON.parse takes it)
                Some(b'u') => {
                    if !(2..6).all(|k| is_hex(b.get(i + k))) {
                        return None;
                    }
                    i += 6;
                }
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                _ => return None,
            },
            _ => i += 1,
        }
    }
    None
}

/// The index after the number at `i`, or `None` if it is not one — or has an exponent or 309+
/// integer digits, the only numbers that may not fit a float (left to Node's full check).
fn number_end(b: &[u8], mut i: usize) -> Option<usize> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let start = i;
    if b.get(i) == Some(&b'0') {
        i += 1;
    } else {
        while is_digit(b.get(i)) {
            i += 1;
        }
    }
    if i == start || i - start >= 309 || is_digit(b.get(i)) {
        return None;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        let fraction = i;
        while is_digit(b.get(i)) {
            i += 1;
        }
        if i == fraction {
            return None;
        }
    }
    match b.get(i) {
        Some(b'e' | b'E') => None,
        _ => Some(i),
    }
}

/// The index of a member's value: after its key (the opening quote at `i`), its colon and the
/// spaces; or `None`.
fn member_value_start(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let colon = skip_space(b, string_end(b, i + 1)?);
    (b.get(colon) == Some(&b':')).then(|| skip_space(b, colon + 1))
}

fn literal_end(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    b.get(i..i + word.len())
        .filter(|w| *w == word)
        .map(|_| i + word.len())
}

/// `isPlainJsonObject`: whether `b` (taken as UTF-8 by the caller) is surely a JSON object Node's full
/// check passes. It reads the bytes once and builds nothing but a bit per open container.
pub fn is_plain_json_object(b: &[u8]) -> bool {
    // Whether each open container is an object (true) or an array (false).
    let mut open = [false; MAX_JSON_DEPTH];
    let mut depth = 0usize;
    let mut i = skip_space(b, 0);
    if b.get(i) != Some(&b'{') {
        return false;
    }
    loop {
        // A value starts at i.
        let next = match b.get(i) {
            Some(&c @ (b'{' | b'[')) => {
                if depth == MAX_JSON_DEPTH {
                    return false;
                }
                let is_object = c == b'{';
                open[depth] = is_object;
                depth += 1;
                i = skip_space(b, i + 1);
                if b.get(i) == Some(if is_object { &b'}' } else { &b']' }) {
                    depth -= 1;
                    Some(i + 1)
                } else if is_object {
                    match member_value_start(b, i) {
                        Some(v) => {
                            i = v;
                            continue;
                        }
                        None => return false,
                    }
                } else {
                    continue;
                }
            }
            Some(b'"') => string_end(b, i + 1),
            Some(b'-' | b'0'..=b'9') => number_end(b, i),
            Some(b't') => literal_end(b, i, b"true"),
            Some(b'f') => literal_end(b, i, b"false"),
            Some(b'n') => literal_end(b, i, b"null"),
            _ => return false,
        };
        let Some(mut j) = next else { return false };
        // After a value: a comma and the next one, or the end of containers.
        loop {
            if depth == 0 {
                return skip_space(b, j) == b.len();
            }
            j = skip_space(b, j);
            let is_object = open[depth - 1];
            let d = b.get(j);
            if d == Some(if is_object { &b'}' } else { &b']' }) {
                depth -= 1;
                j += 1;
                continue;
            }
            if d != Some(&b',') {
                return false;
            }
            j = skip_space(b, j + 1);
            if is_object {
                match member_value_start(b, j) {
                    Some(v) => j = v,
                    None => return false,
                }
            }
            break;
        }
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_body_and_blank_ones_pass() {
        assert!(accepts(br#"{"user":"bench","n":42,"tags":["a","b","c"]}"#));
        assert!(accepts(b""));
        assert!(accepts(b" \t\r\n"));
        // Node's trim() takes these too; the data plane hands them off.
        assert!(!accepts(b"\x0b"));
        assert!(!accepts("\u{a0}".as_bytes()));
    }

    #[test]
    fn invalid_utf8_inside_a_string_is_handed_off() {
        let b = [b'{', b'"', b'a', b'"', b':', b'"', 0xff, b'"', b'}'];
        assert!(is_plain_json_object(&b));
        assert!(!accepts(&b));
    }
}
