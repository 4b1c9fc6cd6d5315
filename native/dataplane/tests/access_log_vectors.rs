//! The access line against the gateway's: tests/vectors/access-log.json, written by
//! hack/dataplane-vectors.ts running `logAccess` through the real pino logger (`createLogger` +
//! `.child({ component: 'gateway' })`) with its output captured and `Date.now` fixed for pino's time.

mod vectors;

use apphost_dataplane::access_log::{AccessLine, AccessLog, duration_ms};

#[test]
fn every_line_is_pino_s_byte_for_byte() {
    let v = vectors::load("access-log.json");
    let cases = v["cases"].as_array().expect("cases");
    assert!(cases.len() >= 200);
    let mut log = AccessLog::gateway("info").unwrap();
    let mut all = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        let i = &case["in"];
        let s = |f: &str| i[f].as_str();
        let line = AccessLine {
            time_ms: i["timeMs"].as_i64().unwrap(),
            request_id: s("requestId").unwrap(),
            method: s("method").unwrap(),
            status: i["status"].as_u64().unwrap() as u16,
            code: s("code"),
            duration_ms: duration_ms(i["startedAt"].as_i64().unwrap(), i["now"].as_i64().unwrap()),
            aborted: i["aborted"].as_bool().unwrap(),
            mode: s("mode").unwrap(),
            project: s("project"),
            app: s("app"),
        };
        assert!(log.append(&line));
        let want = case["line"].as_str().unwrap();
        let got = std::str::from_utf8(log.pending()).unwrap();
        assert_eq!(got, want, "case {k}: {i}");
        log.flush_into(&mut all).unwrap();
    }
    // The buffer hands on exactly what was appended, line after line.
    let want: String = cases.iter().map(|c| c["line"].as_str().unwrap()).collect();
    assert_eq!(String::from_utf8(all).unwrap(), want);
}

#[test]
fn each_level_writes_what_pino_writes() {
    let v = vectors::load("access-log.json");
    for level in v["levels"].as_array().unwrap() {
        let name = level["level"].as_str().unwrap();
        let log = AccessLog::gateway(name).unwrap();
        for w in level["written"].as_array().unwrap() {
            let status = w[0].as_u64().unwrap() as u16;
            assert_eq!(log.enabled(status), w[1].as_bool().unwrap(), "{name} {status}");
        }
    }
}
