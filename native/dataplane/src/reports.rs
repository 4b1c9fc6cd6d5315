//! The data plane's two reports to Node (design §4, step 7), their JSON both ways: `load`, the apps'
//! load every `loadReportIntervalMs` (`AppLoad[]`, shared/contracts/scaling.ts), and `records`, the
//! sync-call records `records.rs` admitted (`SyncCall[]`, runs/sync-calls.ts). The checks are
//! protocol.ts's: a missing or wrongly typed field is `frame_malformed`, an extra one is dropped.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use crate::core::Core;
use crate::error::ProtocolError;
use crate::message::{MAX_SAFE_INTEGER, Message};
use crate::records::SyncCall;

/// A `records` frame is sent once this many admitted records wait (design §4)...
pub const RECORDS_BATCH_MAX: usize = 64;
/// ...or this long after the first of them.
pub const RECORDS_BATCH_MS: u64 = 10;
/// Bound on admitted records waiting for the channel (Node not reading it): about 20 s of the default
/// `APPHOST_GATEWAY_SYNC_RECORDS_PER_SECOND` (200). Past it a record is dropped and counted as skipped
/// (`disconnected`), as the gateway drops one while NATS is away rather than hold it without a bound.
pub const RECORDS_PENDING_MAX: usize = 4096;

/// When the channel loop sends `load` and `records`: `next` waits for the first of the load interval,
/// a batch of records full, or a batch's `RECORDS_BATCH_MS` passed, and answers the frame to send. It is
/// cancel-safe (its state lives here), so it sits in the loop's `select!` beside Node's frames.
pub struct Reporter {
    core: Arc<Mutex<Core>>,
    wake: Arc<Notify>,
    /// `None`: `loadReportIntervalMs` 0, no load reports.
    every: Option<Duration>,
    next_load: Instant,
    flush_at: Option<Instant>,
}

impl Reporter {
    /// Load reports every `load_every_ms` from now (0: none); records as `core` admits them.
    pub fn new(core: Arc<Mutex<Core>>, load_every_ms: u64) -> Self {
        let wake = core.lock().expect("core").reports_wake.clone();
        let every = (load_every_ms > 0).then(|| Duration::from_millis(load_every_ms));
        Reporter {
            core,
            wake,
            every,
            next_load: Instant::now() + every.unwrap_or(Duration::ZERO),
            flush_at: None,
        }
    }

    /// The next frame to send.
    pub async fn next(&mut self) -> Message {
        loop {
            let load_at = self.every.map(|_| self.next_load);
            let due = match (load_at, self.flush_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                _ = self.wake.notified() => {
                    let waiting = self.core.lock().expect("core").pending_records();
                    if waiting >= RECORDS_BATCH_MAX {
                        return self.records();
                    }
                    if waiting > 0 && self.flush_at.is_none() {
                        self.flush_at = Some(Instant::now() + Duration::from_millis(RECORDS_BATCH_MS));
                    }
                }
                _ = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    let now = Instant::now();
                    if self.flush_at.is_some_and(|f| f <= now) {
                        return self.records();
                    }
                    if let Some(every) = self.every.filter(|_| self.next_load <= now) {
                        // A report late by more than an interval (a busy loop) is not sent twice.
                        self.next_load = (self.next_load + every).max(now);
                        return self.load();
                    }
                }
            }
        }
    }

    /// The records waiting now, if any (the last frame before `drained`).
    pub fn flush(&mut self) -> Option<Message> {
        let records = self.core.lock().expect("core").take_records();
        self.flush_at = None;
        (!records.is_empty()).then_some(Message::Records(records))
    }

    fn records(&mut self) -> Message {
        self.flush_at = None;
        Message::Records(self.core.lock().expect("core").take_records())
    }

    fn load(&mut self) -> Message {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        Message::Load(self.core.lock().expect("core").loads(now))
    }
}

/// One app's load since the last report (`AppLoad`).
#[derive(Debug, Clone, PartialEq)]
pub struct AppLoad {
    pub project_id: String,
    pub app_name: String,
    /// In-flight + queued calls, time-averaged over the interval (`ConcurrencyMeter`).
    pub concurrency: f64,
    /// Calls in flight and queued now.
    pub inflight: u64,
    pub queued: u64,
    /// Async runs held: always 0 here (the run worker is Node's).
    pub runs: u64,
    /// In-flight calls per ready replica id; `None` leaves the field out.
    pub replicas: Option<Vec<(String, u64)>>,
}

impl AppLoad {
    fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("projectId".to_owned(), json!(self.project_id));
        o.insert("appName".to_owned(), json!(self.app_name));
        o.insert("concurrency".to_owned(), json!(self.concurrency));
        o.insert("inflight".to_owned(), json!(self.inflight));
        o.insert("queued".to_owned(), json!(self.queued));
        o.insert("runs".to_owned(), json!(self.runs));
        if let Some(rs) = &self.replicas {
            let m: Map<String, Value> = rs.iter().map(|(id, n)| (id.clone(), json!(n))).collect();
            o.insert("replicas".to_owned(), Value::Object(m));
        }
        Value::Object(o)
    }

    fn from_json(v: &Value, path: &str) -> Result<Self, ProtocolError> {
        let o = object(v, path)?;
        let concurrency = o
            .get("concurrency")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0)
            .ok_or_else(|| malformed(format!("{path}.concurrency: not a number >= 0")))?;
        let replicas = match o.get("replicas") {
            None => None,
            Some(Value::Object(m)) => Some(
                m.iter()
                    .map(|(id, n)| Ok((id.clone(), count(n, &format!("{path}.replicas.{id}"))?)))
                    .collect::<Result<Vec<_>, ProtocolError>>()?,
            ),
            Some(_) => return Err(malformed(format!("{path}.replicas: not an object"))),
        };
        Ok(AppLoad {
            project_id: name(o, path, "projectId")?,
            app_name: name(o, path, "appName")?,
            concurrency,
            inflight: uint(o, path, "inflight")?,
            queued: uint(o, path, "queued")?,
            runs: uint(o, path, "runs")?,
            replicas,
        })
    }
}

impl SyncCall {
    fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("requestId".to_owned(), json!(self.request_id));
        o.insert("projectId".to_owned(), json!(self.project_id));
        o.insert("appName".to_owned(), json!(self.app_name));
        o.insert("path".to_owned(), json!(self.path));
        o.insert("status".to_owned(), json!(self.status));
        if let Some(code) = &self.error_code {
            o.insert("errorCode".to_owned(), json!(code));
        }
        if let Some(message) = &self.error_message {
            o.insert("errorMessage".to_owned(), json!(message));
        }
        o.insert("startedAtMs".to_owned(), json!(self.started_at_ms));
        o.insert("finishedAtMs".to_owned(), json!(self.finished_at_ms));
        o.insert("aborted".to_owned(), json!(self.aborted));
        o.insert("streamed".to_owned(), json!(self.streamed));
        Value::Object(o)
    }

    fn from_json(v: &Value, path: &str) -> Result<Self, ProtocolError> {
        let o = object(v, path)?;
        let optional = |field: &str| match o.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(malformed(format!("{path}.{field}: not a string"))),
        };
        let status = uint(o, path, "status")?;
        Ok(SyncCall {
            request_id: name(o, path, "requestId")?,
            project_id: name(o, path, "projectId")?,
            app_name: name(o, path, "appName")?,
            path: match o.get("path") {
                Some(Value::String(s)) => s.clone(),
                _ => return Err(malformed(format!("{path}.path: not a string"))),
            },
            status: u16::try_from(status)
                .ok()
                .filter(|s| *s <= 999)
                .ok_or_else(|| malformed(format!("{path}.status: over 999")))?,
            error_code: optional("errorCode")?,
            error_message: optional("errorMessage")?,
            started_at_ms: uint(o, path, "startedAtMs")?,
            finished_at_ms: uint(o, path, "finishedAtMs")?,
            aborted: boolean(o, path, "aborted")?,
            streamed: boolean(o, path, "streamed")?,
        })
    }
}

/// `load`'s fields.
pub fn load_fields(apps: &[AppLoad]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("apps".to_owned(), apps.iter().map(AppLoad::to_json).collect());
    m
}

/// `records`' fields.
pub fn records_fields(records: &[SyncCall]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "records".to_owned(),
        records.iter().map(SyncCall::to_json).collect(),
    );
    m
}

/// A `load` frame's apps.
pub fn load_from(obj: &Map<String, Value>) -> Result<Vec<AppLoad>, ProtocolError> {
    items(obj, "apps")?
        .iter()
        .enumerate()
        .map(|(i, v)| AppLoad::from_json(v, &format!("load.apps.{i}")))
        .collect()
}

/// A `records` frame's records.
pub fn records_from(obj: &Map<String, Value>) -> Result<Vec<SyncCall>, ProtocolError> {
    items(obj, "records")?
        .iter()
        .enumerate()
        .map(|(i, v)| SyncCall::from_json(v, &format!("records.records.{i}")))
        .collect()
}

fn malformed(reason: String) -> ProtocolError {
    ProtocolError::FrameMalformed { reason }
}

fn items<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<&'a [Value], ProtocolError> {
    obj.get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| malformed(format!("no array field {field:?}")))
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ProtocolError> {
    v.as_object()
        .ok_or_else(|| malformed(format!("{path}: not an object")))
}

/// A non-empty string (`z.string().min(1)`).
fn name(o: &Map<String, Value>, path: &str, field: &str) -> Result<String, ProtocolError> {
    match o.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(malformed(format!("{path}.{field}: not a non-empty string"))),
    }
}

fn count(v: &Value, path: &str) -> Result<u64, ProtocolError> {
    v.as_u64()
        .filter(|&n| n <= MAX_SAFE_INTEGER)
        .ok_or_else(|| malformed(format!("{path}: not an integer in [0, {MAX_SAFE_INTEGER}]")))
}

fn uint(o: &Map<String, Value>, path: &str, field: &str) -> Result<u64, ProtocolError> {
    count(o.get(field).unwrap_or(&Value::Null), &format!("{path}.{field}"))
}

fn boolean(o: &Map<String, Value>, path: &str, field: &str) -> Result<bool, ProtocolError> {
    o.get(field)
        .and_then(Value::as_bool)
        .ok_or_else(|| malformed(format!("{path}.{field}: not a boolean")))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::config::Config;
    use crate::state::StateFrame;

    fn core(per_app: f64, per_second: f64) -> Core {
        let mut c = Config::example(1, "/s");
        c.gateway.sync_records_per_app_per_second = per_app;
        c.gateway.sync_records_per_second = per_second;
        Core::new(&c)
    }

    fn call(id: &str) -> SyncCall {
        SyncCall {
            request_id: id.to_owned(),
            project_id: "p".to_owned(),
            app_name: "a".to_owned(),
            path: "f".to_owned(),
            status: 200,
            error_code: None,
            error_message: None,
            started_at_ms: 1,
            finished_at_ms: 2,
            aborted: false,
            streamed: false,
        }
    }

    /// `apphost_gateway_sync_records_skipped_total` by reason, as the data plane would report it.
    fn skipped(core: &mut Core) -> Vec<(String, f64)> {
        let all: Value = serde_json::from_str(&core.metrics.render_json(0, &[])).unwrap();
        let m = all
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == crate::metrics::SYNC_RECORDS_SKIPPED)
            .unwrap();
        m["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["labels"]["reason"].as_str().unwrap().to_owned(),
                    v["value"].as_f64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_record_is_built_only_when_admitted_and_one_over_the_bounds_is_counted() {
        let mut core = core(2.0, 100.0);
        let built = Cell::new(0);
        for i in 0..5 {
            core.record("p", "a", 10_000 + i, || {
                built.set(built.get() + 1);
                call(&format!("c{i}"))
            });
        }
        assert_eq!(built.get(), 2, "only the admitted calls build a record");
        assert_eq!(core.pending_records(), 2);
        assert_eq!(skipped(&mut core), [("rate".to_owned(), 3.0)]);
        // Another second: admitted again.
        core.record("p", "a", 11_000, || call("next"));
        let ids: Vec<String> = core.take_records().into_iter().map(|c| c.request_id).collect();
        assert_eq!(ids, ["c0", "c1", "next"]);
        assert_eq!(core.pending_records(), 0);
    }

    #[test]
    fn records_off_builds_nothing_and_counts_nothing() {
        let mut core = core(0.0, 100.0);
        core.record("p", "a", 1_000, || panic!("no record is built"));
        assert_eq!(core.pending_records(), 0);
        assert_eq!(skipped(&mut core), []);
    }

    #[test]
    fn fractional_rates_are_the_gateways_bounds() {
        // The gateway's `n >= 0.5` refuses the second call of a second, `total >= 2.5` the fourth.
        let s = crate::records::SyncCallSettings::from_rates(0.5, 2.5);
        assert_eq!((s.per_app_per_second, s.per_second), (1, 3));
        let s = crate::records::SyncCallSettings::from_rates(-1.0, 1e12);
        assert_eq!((s.per_app_per_second, s.per_second), (0, u32::MAX));
    }

    #[test]
    fn waiting_records_are_bounded() {
        let mut core = core(1e9, 1e9);
        for i in 0..RECORDS_PENDING_MAX + 3 {
            core.record("p", "a", 5_000, || call(&i.to_string()));
        }
        assert_eq!(core.pending_records(), RECORDS_PENDING_MAX);
        assert_eq!(skipped(&mut core), [("disconnected".to_owned(), 3.0)]);
    }

    fn with_app(core: &mut Core, now: i64) {
        let m = Message::from_payload(
            br#"{"v":1,"type":"snapshot","gen":"g","seq":1,
                "apps":[{"projectId":"p","appName":"a","runtime":"custom","upstream":"http://a","ready":true,
                  "gracePeriodSeconds":30,"functions":null,
                  "pool":{"capacity":2,"maxQueue":4,"queueTimeoutMs":1000,"coldStartTimeoutMs":1000,"retryAfterSeconds":1}}],
                "replicas":[{"key":"p/a","replicas":[{"id":"r1","url":"http://r1"},{"id":"r2","url":"http://r2"}]}],
                "failures":[],"domains":[],"tokens":[]}"#,
        )
        .unwrap();
        let Message::State(f) = m else { panic!() };
        core.apply(StateFrame::from_message(&f).unwrap(), now);
    }

    #[test]
    fn loads_are_the_pools_time_averaged_level_and_leave_idle_apps_out() {
        let mut core = core(1.0, 1.0);
        with_app(&mut core, 1_000);
        assert_eq!(core.loads(1_000), [], "no load yet");
        let first = core.call_id();
        assert!(matches!(
            core.acquire("p/a", first, None, 1_000),
            crate::core::Acquired::Slot(_)
        ));
        let second = core.call_id();
        assert!(matches!(
            core.acquire("p/a", second, None, 1_050),
            crate::core::Acquired::Slot(_)
        ));
        // Level 1 for 50 ms, 2 for 50 ms: 1.5 on average.
        let got = core.loads(1_100);
        assert_eq!(
            got,
            [AppLoad {
                project_id: "p".to_owned(),
                app_name: "a".to_owned(),
                concurrency: 1.5,
                inflight: 2,
                queued: 0,
                runs: 0,
                replicas: Some(vec![("r1".to_owned(), 1), ("r2".to_owned(), 1)]),
            }]
        );
        core.release("p/a", first, 1_100);
        core.release("p/a", second, 1_150);
        // Level 1 for half the interval, none now: still reported, then left out.
        let got = core.loads(1_200);
        assert_eq!((got[0].concurrency, got[0].inflight), (0.5, 0));
        assert_eq!(core.loads(1_300), []);
    }

    #[tokio::test(start_paused = true)]
    async fn records_go_in_batches_of_64_or_after_10_ms_and_load_every_interval() {
        let core = Arc::new(Mutex::new(core(1e9, 1e9)));
        let mut reporter = Reporter::new(core.clone(), 1_000);
        let push = |n: usize| {
            let mut c = core.lock().unwrap();
            for i in 0..n {
                c.record("p", "a", 7_000, || call(&i.to_string()));
            }
        };
        // One record: sent RECORDS_BATCH_MS after it.
        let t0 = Instant::now();
        push(1);
        let Message::Records(r) = reporter.next().await else {
            panic!("records first")
        };
        assert_eq!(r.len(), 1);
        assert_eq!(t0.elapsed(), Duration::from_millis(RECORDS_BATCH_MS));
        // A full batch: at once.
        let t1 = Instant::now();
        push(RECORDS_BATCH_MAX);
        let Message::Records(r) = reporter.next().await else {
            panic!("records")
        };
        assert_eq!(r.len(), RECORDS_BATCH_MAX);
        assert_eq!(t1.elapsed(), Duration::ZERO);
        // Nothing waiting: the load report, at its interval from the start, then every interval.
        let Message::Load(apps) = reporter.next().await else {
            panic!("load")
        };
        assert_eq!(apps, []);
        assert_eq!(t0.elapsed(), Duration::from_millis(1_000));
        let Message::Load(_) = reporter.next().await else {
            panic!("load")
        };
        assert_eq!(t0.elapsed(), Duration::from_millis(2_000));
        assert!(reporter.flush().is_none());
        push(2);
        let Some(Message::Records(r)) = reporter.flush() else {
            panic!("the last records")
        };
        assert_eq!(r.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn no_load_reports_with_an_interval_of_0() {
        let core = Arc::new(Mutex::new(core(1e9, 1e9)));
        let mut reporter = Reporter::new(core, 0);
        assert!(
            tokio::time::timeout(Duration::from_secs(3600), reporter.next())
                .await
                .is_err()
        );
    }
}
