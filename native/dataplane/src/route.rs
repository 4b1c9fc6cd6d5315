//! The route of a sync call, `POST /v4/<project_id>/<app_name>/<path>`: a port of the gateway's
//! `route` (src/gateway/middleware/route.ts) and the forwarded path's `checkForwardPath`
//! (src/shared/http/upstream.ts), with the same answers — the target, and the 404/405/400 with the
//! gateway's code and message. tests/route_vectors.rs holds it to tests/vectors/route.json.

/// Where a call goes: the decoded project id and app name, and the path after them (as sent, without
/// its leading slash; '' when there is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub project_id: String,
    pub app_name: String,
    pub path: String,
}

/// A refused call: the status, the error body's `code` and `message`, and the `Allow` header a 405 sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    pub allow: Option<&'static str>,
}

/// The route's answer. As in the gateway, the target is known before some refusals (an app name that
/// cannot exist, a method other than POST, a forwarded path that climbs out): they carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub target: Option<Target>,
    pub refusal: Option<Refusal>,
}

fn refusal(status: u16, code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        code,
        message: message.into(),
        allow: None,
    }
}

fn bad_percent_encoding() -> Refusal {
    refusal(400, "bad_request", "path is not valid percent-encoding")
}

/// JavaScript's `decodeURIComponent`: every `%XX` decoded, and the result valid UTF-8; `None` where
/// it throws (a `%` without two hex digits after it, or bytes that are not UTF-8).
pub fn decode_uri_component(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An RFC 1123 label (src/apis/names.ts `DNS_LABEL`): project ids and app names are one.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && edge(&b[0])
        && edge(&b[b.len() - 1])
        && b.iter().all(|c| edge(c) || *c == b'-')
}

/// `checkForwardPath`: refuses a path that would climb out of the app's namespace once the upstream
/// normalises it (a dot segment, an encoded slash or backslash), or that is not percent-encoding.
pub fn check_forward_path(path: &str) -> Result<(), Refusal> {
    // Nothing to decode and no dot or backslash: nothing to refuse (the usual path).
    if !path.contains(['%', '.', '\\']) {
        return Ok(());
    }
    for seg in path.split('/') {
        let decoded = decode_uri_component(seg).ok_or_else(bad_percent_encoding)?;
        if decoded == ".." || decoded == "." || decoded.contains(['/', '\\']) {
            return Err(refusal(
                400,
                "bad_request",
                "path must not contain dot segments or encoded slashes",
            ));
        }
    }
    Ok(())
}

/// The three parts of `^/v4/([^/]+)/([^/]+)(?:/(.*))?$` (JavaScript: `.` is no line terminator).
fn split(path: &str) -> Option<(&str, &str, &str)> {
    let rest = path.strip_prefix("/v4/")?;
    let (project, rest) = rest.split_once('/')?;
    let (app, tail) = match rest.split_once('/') {
        Some((app, tail)) => (app, tail),
        None => (rest, ""),
    };
    if project.is_empty() || app.is_empty() || tail.contains(['\n', '\r', '\u{2028}', '\u{2029}']) {
        return None;
    }
    Some((project, app, tail))
}

/// `route`: the target of a call to `path` with `method`, or the gateway's refusal.
pub fn route(method: &str, path: &str) -> Routed {
    let Some((project, app, tail)) = split(path) else {
        let message = "no such path; call POST /v4/<project_id>/<app_name>/<path>";
        return Routed {
            target: None,
            refusal: Some(refusal(404, "not_found", message)),
        };
    };
    let (Some(project_id), Some(app_name)) = (decode_uri_component(project), decode_uri_component(app))
    else {
        return Routed {
            target: None,
            refusal: Some(bad_percent_encoding()),
        };
    };
    let target = Target {
        project_id,
        app_name,
        path: tail.to_owned(),
    };
    let refused = if !is_dns_label(&target.project_id) || !is_dns_label(&target.app_name) {
        // Anything else cannot exist: the answer an unknown app gets.
        let message = format!(
            "no app \"{}\" in project \"{}\"",
            target.app_name, target.project_id
        );
        Some(refusal(404, "not_found", message))
    } else if method != "POST" {
        Some(Refusal {
            allow: Some("POST"),
            ..refusal(405, "method_not_allowed", "use POST to run an app")
        })
    } else {
        check_forward_path(&target.path).err()
    };
    Routed {
        target: Some(target),
        refusal: refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_call_routes() {
        let r = route("POST", "/v4/acme/hello/greet");
        assert_eq!(r.refusal, None);
        assert_eq!(
            r.target.map(|t| (t.project_id, t.app_name, t.path)),
            Some(("acme".into(), "hello".into(), "greet".into()))
        );
    }

    #[test]
    fn decode_uri_component_refuses_what_javascript_does() {
        assert_eq!(decode_uri_component("a%2Fb").as_deref(), Some("a/b"));
        assert_eq!(decode_uri_component("%E2%82%AC").as_deref(), Some("€"));
        assert_eq!(decode_uri_component("%E2%82"), None);
        assert_eq!(decode_uri_component("%zz"), None);
        assert_eq!(decode_uri_component("%"), None);
        assert_eq!(decode_uri_component("%ED%A0%80"), None);
    }
}
