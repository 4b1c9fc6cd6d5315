//! The access line of a call the data plane answers (design §5): the line `logAccess`
//! (src/shared/http/access-log.ts) writes through the gateway's logger (`createLogger` of
//! src/shared/log.ts, `.child({ component: 'gateway' })`), byte for byte as pino lays it out:
//!
//! `{"level":30,"time":"<ISO>","service":"apphost-gateway","name":"apphost-gateway","component":"gateway","requestId":"…","method":"POST","status":200[,"code":"…"],"durationMs":1,"aborted":false,"mode":"sync"[,"project":"p"][,"app":"a"],"msg":"request"}`
//!
//! - the level follows the status: info, warn (30 → 40) for 4xx, error (50) for 5xx; a line under the
//!   logger's level (`APPHOST_LOG_LEVEL`, the `config` frame's `logLevel`) is not built at all;
//! - `time` is `Date.prototype.toISOString` of the wall clock in ms (pino's `stdTimeFunctions.isoTime`);
//! - strings are escaped as pino escapes them: `"` and `\`, and for a string with a control character
//!   (or over 100 UTF-16 units) `JSON.stringify`'s escapes (`\b \t \n \f \r`, other controls `\u00xx`).
//!   The two agree on every string Rust can hold (pino's short path differs only on lone surrogates);
//!   U+2028/U+2029 and DEL are written as they are;
//! - `durationMs` is `Math.round(seconds * 1000)` of `(now - startedAt) / 1000`;
//! - no header or body is ever logged, so pino's redaction has nothing to remove.
//!
//! The lines go into a buffer ([`AccessLog::pending`]) that the server writes out (stdout) once per
//! turn; this module does no I/O. tests/access_log_vectors.rs holds it to tests/vectors/access-log.json,
//! written by running the real pino logger.

use std::fmt::Write as _;

/// pino's level numbers.
pub const TRACE: u32 = 10;
pub const DEBUG: u32 = 20;
pub const INFO: u32 = 30;
pub const WARN: u32 = 40;
pub const ERROR: u32 = 50;
pub const FATAL: u32 = 60;

/// A pino level name's threshold (`silent`: nothing is logged), or `None` for another name.
pub fn level_threshold(name: &str) -> Option<u32> {
    Some(match name {
        "trace" => TRACE,
        "debug" => DEBUG,
        "info" => INFO,
        "warn" => WARN,
        "error" => ERROR,
        "fatal" => FATAL,
        "silent" => u32::MAX,
        _ => return None,
    })
}

/// `logAccess`'s level for a status: error for 5xx, warn for 4xx, info otherwise.
pub fn level_for_status(status: u16) -> u32 {
    if status >= 500 {
        ERROR
    } else if status >= 400 {
        WARN
    } else {
        INFO
    }
}

/// `durationMs`: `Math.round(((now - startedAt) / 1000) * 1000)`, both in epoch ms.
pub fn duration_ms(started_at_ms: i64, now_ms: i64) -> i64 {
    let seconds = (now_ms - started_at_ms) as f64 / 1000.0;
    js_round(seconds * 1000.0)
}

/// JavaScript's `Math.round`: the nearest integer, halves toward +∞ (`-0` is written `0`).
fn js_round(x: f64) -> i64 {
    let f = x.floor();
    (if x - f >= 0.5 { f + 1.0 } else { f }) as i64
}

/// One call's line: what `logAccess` and the gateway's `done` put in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessLine<'a> {
    /// The wall clock when the line is written (epoch ms): pino's `time`.
    pub time_ms: i64,
    pub request_id: &'a str,
    pub method: &'a str,
    pub status: u16,
    /// The error code the data plane answered with, if any (`ctx.state.errorCode`).
    pub code: Option<&'a str>,
    /// [`duration_ms`].
    pub duration_ms: i64,
    /// The answer did not finish (the caller went away first).
    pub aborted: bool,
    /// `sync` or `stream`.
    pub mode: &'a str,
    /// The call's target (the path's or the custom domain's), absent when none resolved.
    pub project: Option<&'a str>,
    pub app: Option<&'a str>,
}

/// The access lines of one process, buffered until the server writes them out.
#[derive(Debug)]
pub struct AccessLog {
    threshold: u32,
    /// `,"service":…,"name":…,"component":…` (the logger's bindings, fixed).
    bindings: String,
    buf: String,
}

impl AccessLog {
    /// A log at `level` (pino's name; `None` for another name) whose lines carry the logger's
    /// `service`/`name` and the child's `component`, as the gateway's: `apphost-gateway`, `gateway`.
    pub fn new(level: &str, service: &str, component: &str) -> Option<Self> {
        let mut bindings = String::new();
        for (k, v) in [("service", service), ("name", service), ("component", component)] {
            let _ = write!(bindings, ",\"{k}\":");
            escape_into(&mut bindings, v);
        }
        Some(AccessLog {
            threshold: level_threshold(level)?,
            bindings,
            buf: String::new(),
        })
    }

    /// The gateway's log: `createLogger({ name: 'apphost-gateway', level }).child({ component: 'gateway' })`.
    pub fn gateway(level: &str) -> Option<Self> {
        Self::new(level, "apphost-gateway", "gateway")
    }

    /// Whether a line of this status is written at this log's level.
    pub fn enabled(&self, status: u16) -> bool {
        level_for_status(status) >= self.threshold
    }

    /// Appends the call's line, unless its level is off. Returns whether it was written.
    pub fn append(&mut self, line: &AccessLine<'_>) -> bool {
        if !self.enabled(line.status) {
            return false;
        }
        let b = &mut self.buf;
        let _ = write!(b, "{{\"level\":{},\"time\":\"", level_for_status(line.status));
        iso_time_into(b, line.time_ms);
        b.push('"');
        b.push_str(&self.bindings);
        b.push_str(",\"requestId\":");
        escape_into(b, line.request_id);
        b.push_str(",\"method\":");
        escape_into(b, line.method);
        let _ = write!(b, ",\"status\":{}", line.status);
        if let Some(code) = line.code.filter(|c| !c.is_empty()) {
            b.push_str(",\"code\":");
            escape_into(b, code);
        }
        let _ = write!(
            b,
            ",\"durationMs\":{},\"aborted\":{}",
            line.duration_ms, line.aborted
        );
        b.push_str(",\"mode\":");
        escape_into(b, line.mode);
        if let Some(p) = line.project {
            b.push_str(",\"project\":");
            escape_into(b, p);
        }
        if let Some(a) = line.app {
            b.push_str(",\"app\":");
            escape_into(b, a);
        }
        b.push_str(",\"msg\":\"request\"}\n");
        true
    }

    /// The lines appended since the last [`AccessLog::clear`], to be written out as they are.
    pub fn pending(&self) -> &[u8] {
        self.buf.as_bytes()
    }

    /// Forgets the written lines (the buffer's memory is kept for the next turn).
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Hands the pending lines to `write` (the server's stdout), then clears them: the only way out.
    pub fn flush_into<W: std::io::Write>(&mut self, out: &mut W) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            out.write_all(self.buf.as_bytes())?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// A string as `JSON.stringify` writes it (what pino writes for every string Rust can hold).
pub fn escape_into(out: &mut String, s: &str) {
    out.push('"');
    let mut last = 0;
    for (i, c) in s.bytes().enumerate() {
        let esc: &str = match c {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\x08' => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            b'\x0c' => "\\f",
            b'\r' => "\\r",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[last..i]);
        if esc.is_empty() {
            let _ = write!(out, "\\u{c:04x}");
        } else {
            out.push_str(esc);
        }
        last = i + 1;
    }
    out.push_str(&s[last..]);
    out.push('"');
}

/// `new Date(ms).toISOString()`: `YYYY-MM-DDTHH:mm:ss.sssZ`, years outside 0–9999 as `±YYYYYY`.
pub fn iso_time_into(out: &mut String, ms: i64) {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    if (0..=9999).contains(&y) {
        let _ = write!(out, "{y:04}");
    } else {
        let _ = write!(out, "{}{:06}", if y < 0 { '-' } else { '+' }, y.unsigned_abs());
    }
    let _ = write!(
        out,
        "-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    );
}

/// Howard Hinnant's days-to-civil: (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(status: u16) -> AccessLine<'static> {
        AccessLine {
            time_ms: 1_700_000_000_123,
            request_id: "8e0a4a4e-5d43-4c7b-9d7e-3f1f7c1c2b1a",
            method: "POST",
            status,
            code: None,
            duration_ms: 3,
            aborted: false,
            mode: "sync",
            project: Some("acme"),
            app: Some("hello"),
        }
    }

    #[test]
    fn the_design_s_line() {
        let mut log = AccessLog::gateway("info").unwrap();
        assert!(log.append(&line(200)));
        assert_eq!(
            std::str::from_utf8(log.pending()).unwrap(),
            "{\"level\":30,\"time\":\"2023-11-14T22:13:20.123Z\",\"service\":\"apphost-gateway\",\"name\":\"apphost-gateway\",\"component\":\"gateway\",\"requestId\":\"8e0a4a4e-5d43-4c7b-9d7e-3f1f7c1c2b1a\",\"method\":\"POST\",\"status\":200,\"durationMs\":3,\"aborted\":false,\"mode\":\"sync\",\"project\":\"acme\",\"app\":\"hello\",\"msg\":\"request\"}\n"
        );
        let mut out = Vec::new();
        log.flush_into(&mut out).unwrap();
        assert!(log.pending().is_empty());
        assert_eq!(out.last(), Some(&b'\n'));
    }

    #[test]
    fn levels_filter_by_status() {
        // (logger level, statuses written among 200, 404, 503)
        let cases = [
            ("trace", [true, true, true]),
            ("info", [true, true, true]),
            ("warn", [false, true, true]),
            ("error", [false, false, true]),
            ("fatal", [false, false, false]),
            ("silent", [false, false, false]),
        ];
        for (level, want) in cases {
            let mut log = AccessLog::gateway(level).unwrap();
            for (status, w) in [200, 404, 503].into_iter().zip(want) {
                assert_eq!(log.append(&line(status)), w, "{level} {status}");
            }
        }
        assert!(AccessLog::gateway("verbose").is_none());
    }

    #[test]
    fn iso_times() {
        for (ms, want) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
            (253_402_300_800_000, "+010000-01-01T00:00:00.000Z"),
            (-62_167_219_200_001, "-000001-12-31T23:59:59.999Z"),
        ] {
            let mut s = String::new();
            iso_time_into(&mut s, ms);
            assert_eq!(s, want, "{ms}");
        }
    }
}
