//! Which sync calls get a record: a port of the gateway's `createSyncCallLimiter`
//! (src/runs/sync-calls.ts) — at most `per_app_per_second` records per app and `per_second` in all
//! within each wall-clock second; memory is one counter per app seen in the current second.
//! tests/records_vectors.rs holds it to tests/vectors/records.json.

use std::collections::HashMap;

/// A finished sync call the data plane answered, as the gateway's `access.done` records it (`SyncCall`
/// in src/runs/sync-calls.ts; never `webhookHost`: webhook calls are handed to Node). Built only for a
/// call `SyncCallLimiter` admitted.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncCall {
    /// The id sent as `X-Request-Id`.
    pub request_id: String,
    pub project_id: String,
    pub app_name: String,
    /// The function path after the app's name, as routed.
    pub path: String,
    /// The status the caller got (the app's, or the data plane's own error status).
    pub status: u16,
    /// The data plane's own error code and message, when it answered with an error instead of the app.
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub started_at_ms: u64,
    pub finished_at_ms: u64,
    /// The caller went away before the answer was complete.
    pub aborted: bool,
    /// The app answered text/event-stream.
    pub streamed: bool,
}

/// The record rate bounds (`SyncCallSettings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncCallSettings {
    /// Records per second for one app (per data plane); 0 records no sync call.
    pub per_app_per_second: u32,
    /// Records per second for all apps together.
    pub per_second: u32,
}

impl SyncCallSettings {
    /// From the `config` frame's rates, which may be fractional: the TS limiter's `n >= rate` for a count
    /// `n` is `n >= ceil(rate)`, so the bounds are the rates rounded up (0 and below: no record).
    pub fn from_rates(per_app_per_second: f64, per_second: f64) -> Self {
        let bound = |r: f64| {
            if r > 0.0 {
                r.ceil().min(f64::from(u32::MAX)) as u32
            } else {
                0
            }
        };
        SyncCallSettings {
            per_app_per_second: bound(per_app_per_second),
            per_second: bound(per_second),
        }
    }
}

#[derive(Debug)]
pub struct SyncCallLimiter {
    s: SyncCallSettings,
    second: i64,
    total: u32,
    /// project → app → records this second: an app's names are copied once a second, not per call.
    per_app: HashMap<String, HashMap<String, u32>>,
}

impl SyncCallLimiter {
    pub fn new(s: SyncCallSettings) -> Self {
        SyncCallLimiter {
            s,
            second: -1,
            total: 0,
            per_app: HashMap::new(),
        }
    }

    /// Whether any call can get a record (`perAppPerSecond` above 0): when not, a refusal is no skip.
    pub fn enabled(&self) -> bool {
        self.s.per_app_per_second > 0
    }

    /// Whether a call of this app, finished at `now_ms` (wall clock), gets a record.
    pub fn admit(&mut self, project_id: &str, app_name: &str, now_ms: i64) -> bool {
        if self.s.per_app_per_second == 0 {
            return false;
        }
        let now = now_ms.div_euclid(1000);
        if now != self.second {
            self.second = now;
            self.total = 0;
            self.per_app.clear();
        }
        if self.total >= self.s.per_second {
            return false;
        }
        let apps = match self.per_app.get_mut(project_id) {
            Some(apps) => apps,
            None => self.per_app.entry(project_id.to_owned()).or_default(),
        };
        let n = match apps.get_mut(app_name) {
            Some(n) => n,
            None => apps.entry(app_name.to_owned()).or_insert(0),
        };
        if *n >= self.s.per_app_per_second {
            return false;
        }
        *n += 1;
        self.total += 1;
        true
    }
}
