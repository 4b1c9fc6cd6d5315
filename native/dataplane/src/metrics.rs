//! The Prometheus series the data plane owns for the calls it answers (design §5), kept here and
//! rendered as prom-client's `getMetricsAsJSON()` so Node merges them into its `/metrics` with
//! `AggregatorRegistry.aggregate([node, dataPlane])` (sum): the same names, help texts, types, labels
//! (in the same order) and histogram buckets as src/gateway/metrics.ts and balancer/metrics.ts, so the
//! merged text is what one Node registry counting both would show.
//!
//! - `apphost_gateway_requests_total{project,app,mode,status}` and
//!   `apphost_gateway_request_duration_seconds{project,app,mode}` (the 14 buckets of metrics.ts), per
//!   finished call ([`Metrics::call`]); labels only for resolved apps, as `access.done` does;
//! - `apphost_gateway_capacity_rejections_total{project,app,code}`,
//!   `apphost_gateway_replica_refusals_total{project,app,reason}`,
//!   `apphost_gateway_sync_records_skipped_total{reason}`;
//! - the gauges read at a scrape: `apphost_gateway_inflight_requests`,
//!   `apphost_gateway_app_{inflight,queued}_calls{project,app}` (from the pools, passed to
//!   [`Metrics::render_json`]).
//!
//! Series and values come out in the order Node's registry would hold them (prom-client keeps label
//! sets in the order first counted; metrics.ts counts requests by status at a scrape), so an aggregate
//! with Node's registry lists them as Node alone would. A call allocates only the first time its
//! project/app/mode or status is seen. No I/O. tests/metrics_vectors.rs holds the JSON to the TS
//! registries' and the aggregate's text to prom-client's (tests/vectors/metrics.json).

use std::collections::HashMap;
use std::fmt::Write as _;

/// `apphost_gateway_request_duration_seconds`' buckets (src/gateway/metrics.ts), as written in `le`.
pub const DURATION_BUCKETS: [(f64, &str); 14] = [
    (0.005, "0.005"),
    (0.01, "0.01"),
    (0.025, "0.025"),
    (0.05, "0.05"),
    (0.1, "0.1"),
    (0.25, "0.25"),
    (0.5, "0.5"),
    (1.0, "1"),
    (2.5, "2.5"),
    (5.0, "5"),
    (10.0, "10"),
    (30.0, "30"),
    (60.0, "60"),
    (300.0, "300"),
];

pub const REQUESTS_TOTAL: &str = "apphost_gateway_requests_total";
pub const REQUESTS_TOTAL_HELP: &str =
    "Run requests by project, app, mode (sync|async|stream) and response status.";
pub const REQUEST_DURATION: &str = "apphost_gateway_request_duration_seconds";
pub const REQUEST_DURATION_HELP: &str =
    "Time from request to the end of the response (for streams: to the end of the stream).";
pub const SYNC_RECORDS_SKIPPED: &str = "apphost_gateway_sync_records_skipped_total";
pub const SYNC_RECORDS_SKIPPED_HELP: &str = "Sync calls not recorded for the dashboard and runs API: rate (over APPHOST_GATEWAY_SYNC_RECORDS_PER_*), disconnected (NATS reconnecting), publish_failed (connection closed).";
pub const INFLIGHT_REQUESTS: &str = "apphost_gateway_inflight_requests";
pub const INFLIGHT_REQUESTS_HELP: &str =
    "Run requests being served right now (sync calls, streams and async accepts).";
pub const APP_INFLIGHT: &str = "apphost_gateway_app_inflight_calls";
pub const APP_INFLIGHT_HELP: &str = "Calls this gateway has in flight on the app\u{2019}s replicas.";
pub const APP_QUEUED: &str = "apphost_gateway_app_queued_calls";
pub const APP_QUEUED_HELP: &str = "Calls waiting in this gateway for a free replica slot.";
pub const CAPACITY_REJECTIONS: &str = "apphost_gateway_capacity_rejections_total";
pub const CAPACITY_REJECTIONS_HELP: &str = "Calls answered 503 because no replica slot was found in time (code: queue_full, queue_timeout, cold_start_timeout, app_start_failed).";
pub const REPLICA_REFUSALS: &str = "apphost_gateway_replica_refusals_total";
pub const REPLICA_REFUSALS_HELP: &str = "Calls a replica refused without running them, retried elsewhere (reason: at_capacity, shutting_down, unreachable).";

/// One app and mode's calls.
#[derive(Debug)]
struct CallSeries {
    /// (project, app within it, mode within that) in the order first seen: metrics.ts's nested maps,
    /// the order its collect counts them in.
    rank: (usize, usize, usize),
    project: String,
    app: String,
    mode: String,
    /// Calls by status, in the order first seen; `counted` once a scrape has seen the status.
    by_status: Vec<StatusCount>,
    /// Observations per bucket (not cumulative); the +Inf bucket is `count`.
    buckets: [u64; 14],
    sum: f64,
    count: u64,
}

#[derive(Debug)]
struct StatusCount {
    status: u16,
    n: u64,
    counted: bool,
}

/// A counter whose label sets are kept in the order first counted.
#[derive(Debug, Default)]
struct Counter {
    /// project → app → label value → index into `values`.
    index: HashMap<String, HashMap<String, HashMap<String, usize>>>,
    values: Vec<([String; 3], u64)>,
}

impl Counter {
    fn inc(&mut self, project: &str, app: &str, label: &str) {
        let by_label = self.index.entry_ref(project).entry_ref(app);
        match by_label.get(label) {
            Some(&k) => self.values[k].1 += 1,
            None => {
                by_label.insert(label.to_owned(), self.values.len());
                self.values
                    .push(([project.to_owned(), app.to_owned(), label.to_owned()], 1));
            }
        }
    }
}

/// `HashMap::entry` by a borrowed key, allocating the key only when it is new.
trait EntryRef<V> {
    fn entry_ref(&mut self, key: &str) -> &mut V;
}

impl<V: Default> EntryRef<V> for HashMap<String, V> {
    fn entry_ref(&mut self, key: &str) -> &mut V {
        if !self.contains_key(key) {
            self.insert(key.to_owned(), V::default());
        }
        self.get_mut(key).expect("just inserted")
    }
}

/// One app's pool at a scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppGauge<'a> {
    pub project: &'a str,
    pub app: &'a str,
    pub inflight: u64,
    pub queued: u64,
}

/// The data plane's series.
/// A name's place among its siblings, and what is under it.
#[derive(Debug, Default)]
struct Ranked<V> {
    rank: usize,
    under: V,
}

/// app → mode → index into `series`.
type AppIndex = HashMap<String, Ranked<HashMap<String, usize>>>;

#[derive(Debug, Default)]
pub struct Metrics {
    /// project → app → mode → index into `series`.
    index: HashMap<String, Ranked<AppIndex>>,
    series: Vec<CallSeries>,
    /// (series, status) in the order a scrape first counted them (prom-client's label-set order).
    counted: Vec<(usize, usize)>,
    rejections: Counter,
    refusals: Counter,
    /// Sync calls not recorded, by reason, in the order first seen.
    skipped: Vec<(String, u64)>,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// A finished call (`GatewayMetrics.call`): `project`/`app` are '' for a call that resolved no app.
    pub fn call(&mut self, project: &str, app: &str, mode: &str, status: u16, seconds: f64) {
        let projects = self.index.len();
        let by_app = self.index.entry_ref(project);
        if by_app.under.is_empty() {
            by_app.rank = projects;
        }
        let apps = by_app.under.len();
        let by_mode = by_app.under.entry_ref(app);
        if by_mode.under.is_empty() {
            by_mode.rank = apps;
        }
        let rank = (by_app.rank, by_mode.rank, by_mode.under.len());
        let by_mode = &mut by_mode.under;
        let k = match by_mode.get(mode) {
            Some(&k) => k,
            None => {
                by_mode.insert(mode.to_owned(), self.series.len());
                self.series.push(CallSeries {
                    rank,
                    project: project.to_owned(),
                    app: app.to_owned(),
                    mode: mode.to_owned(),
                    by_status: Vec::new(),
                    buckets: [0; 14],
                    sum: 0.0,
                    count: 0,
                });
                self.series.len() - 1
            }
        };
        let s = &mut self.series[k];
        match s.by_status.iter_mut().find(|c| c.status == status) {
            Some(c) => c.n += 1,
            None => s.by_status.push(StatusCount {
                status,
                n: 1,
                counted: false,
            }),
        }
        // Durations come from integer milliseconds; a non-finite one (Node's histogram throws) is not observed.
        if !seconds.is_finite() {
            return;
        }
        if let Some(b) = DURATION_BUCKETS.iter().position(|(le, _)| seconds <= *le) {
            s.buckets[b] += 1;
        }
        s.sum += seconds;
        s.count += 1;
    }

    /// A call answered 503 `queue_full` / `queue_timeout` (`PoolEvents.rejected`).
    pub fn rejected(&mut self, project: &str, app: &str, code: &str) {
        self.rejections.inc(project, app, code);
    }

    /// A replica's refusal, retried elsewhere (`PoolEvents.refused`).
    pub fn refused(&mut self, project: &str, app: &str, reason: &str) {
        self.refusals.inc(project, app, reason);
    }

    /// A sync call not recorded (`GatewayMetrics.syncRecordSkipped`): `rate` in the data plane.
    pub fn sync_record_skipped(&mut self, reason: &str) {
        match self.skipped.iter_mut().find(|(r, _)| r == reason) {
            Some((_, n)) => *n += 1,
            None => self.skipped.push((reason.to_owned(), 1)),
        }
    }

    /// The series as `getMetricsAsJSON()` gives them, with the gauges read now: requests in flight and
    /// each app pool's calls in flight and queued.
    pub fn render_json(&mut self, inflight: u64, apps: &[AppGauge<'_>]) -> String {
        // As metrics.ts's collect: a status is added to the counter at the first scrape that sees it.
        let mut order: Vec<usize> = (0..self.series.len()).collect();
        order.sort_by_key(|&k| self.series[k].rank);
        for k in order {
            for (j, c) in self.series[k].by_status.iter_mut().enumerate() {
                if !c.counted {
                    c.counted = true;
                    self.counted.push((k, j));
                }
            }
        }
        let mut out = String::from("[");
        // requests_total
        head(&mut out, REQUESTS_TOTAL, REQUESTS_TOTAL_HELP, "counter");
        let mut first = true;
        for &(k, j) in &self.counted {
            let s = &self.series[k];
            let c = &s.by_status[j];
            let status = c.status.to_string();
            value(
                &mut out,
                &mut first,
                &[
                    ("project", &s.project),
                    ("app", &s.app),
                    ("mode", &s.mode),
                    ("status", &status),
                ],
                None,
                Num::Int(c.n),
                None,
            );
        }
        out.push_str("]},");
        // request_duration_seconds
        head(&mut out, REQUEST_DURATION, REQUEST_DURATION_HELP, "histogram");
        let bucket = format!("{REQUEST_DURATION}_bucket");
        let sum = format!("{REQUEST_DURATION}_sum");
        let count = format!("{REQUEST_DURATION}_count");
        let mut first = true;
        for s in &self.series {
            let labels = [
                ("project", s.project.as_str()),
                ("app", &s.app),
                ("mode", &s.mode),
            ];
            let mut acc = 0;
            for (b, (_, le)) in DURATION_BUCKETS.iter().enumerate() {
                acc += s.buckets[b];
                value(
                    &mut out,
                    &mut first,
                    &labels,
                    Some(Le::Bound(le)),
                    Num::Int(acc),
                    Some(&bucket),
                );
            }
            value(
                &mut out,
                &mut first,
                &labels,
                Some(Le::Inf),
                Num::Int(s.count),
                Some(&bucket),
            );
            value(&mut out, &mut first, &labels, None, Num::Float(s.sum), Some(&sum));
            value(
                &mut out,
                &mut first,
                &labels,
                None,
                Num::Int(s.count),
                Some(&count),
            );
        }
        out.push_str("]},");
        // sync_records_skipped_total
        head(
            &mut out,
            SYNC_RECORDS_SKIPPED,
            SYNC_RECORDS_SKIPPED_HELP,
            "counter",
        );
        let mut first = true;
        for (reason, n) in &self.skipped {
            value(
                &mut out,
                &mut first,
                &[("reason", reason)],
                None,
                Num::Int(*n),
                None,
            );
        }
        out.push_str("]},");
        // inflight_requests
        head(&mut out, INFLIGHT_REQUESTS, INFLIGHT_REQUESTS_HELP, "gauge");
        value(&mut out, &mut true, &[], None, Num::Int(inflight), None);
        out.push_str("]},");
        // app_{inflight,queued}_calls
        for (name, help, pick) in [
            (
                APP_INFLIGHT,
                APP_INFLIGHT_HELP,
                (|a: &AppGauge<'_>| a.inflight) as fn(&AppGauge<'_>) -> u64,
            ),
            (APP_QUEUED, APP_QUEUED_HELP, |a: &AppGauge<'_>| a.queued),
        ] {
            head(&mut out, name, help, "gauge");
            let mut first = true;
            for a in apps {
                value(
                    &mut out,
                    &mut first,
                    &[("project", a.project), ("app", a.app)],
                    None,
                    Num::Int(pick(a)),
                    None,
                );
            }
            out.push_str("]},");
        }
        // capacity_rejections_total, replica_refusals_total
        for (name, help, label, counter) in [
            (
                CAPACITY_REJECTIONS,
                CAPACITY_REJECTIONS_HELP,
                "code",
                &self.rejections,
            ),
            (REPLICA_REFUSALS, REPLICA_REFUSALS_HELP, "reason", &self.refusals),
        ] {
            head(&mut out, name, help, "counter");
            let mut first = true;
            for ([p, a, l], n) in &counter.values {
                value(
                    &mut out,
                    &mut first,
                    &[("project", p), ("app", a), (label, l)],
                    None,
                    Num::Int(*n),
                    None,
                );
            }
            out.push_str("]},");
        }
        out.pop();
        out.push(']');
        out
    }
}

enum Num {
    Int(u64),
    Float(f64),
}

enum Le<'a> {
    Bound(&'a str),
    Inf,
}

fn head(out: &mut String, name: &str, help: &str, kind: &str) {
    out.push_str("{\"name\":");
    json_string(out, name);
    out.push_str(",\"help\":");
    json_string(out, help);
    let _ = write!(out, ",\"type\":\"{kind}\",\"aggregator\":\"sum\",\"values\":[");
}

fn value(
    out: &mut String,
    first: &mut bool,
    labels: &[(&str, &str)],
    le: Option<Le<'_>>,
    v: Num,
    metric_name: Option<&str>,
) {
    if !std::mem::take(first) {
        out.push(',');
    }
    out.push_str("{\"labels\":{");
    let mut sep = "";
    match le {
        // As SeriesHistogram and prom-client: `le` first, a number (`+Inf` a string).
        Some(Le::Bound(b)) => {
            let _ = write!(out, "\"le\":{b}");
            sep = ",";
        }
        Some(Le::Inf) => {
            out.push_str("\"le\":\"+Inf\"");
            sep = ",";
        }
        None => {}
    }
    for (k, v) in labels {
        out.push_str(sep);
        json_string(out, k);
        out.push(':');
        json_string(out, v);
        sep = ",";
    }
    out.push_str("},\"value\":");
    match v {
        Num::Int(n) => {
            let _ = write!(out, "{n}");
        }
        // Rust's shortest round-trip form: JSON.parse reads back the same double.
        Num::Float(f) => {
            let _ = write!(out, "{f:?}");
        }
    }
    if let Some(m) = metric_name {
        out.push_str(",\"metricName\":");
        json_string(out, m);
    }
    out.push('}');
}

fn json_string(out: &mut String, s: &str) {
    crate::access_log::escape_into(out, s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn parse(json: &str) -> Vec<Value> {
        serde_json::from_str::<Value>(json)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    fn metric<'a>(all: &'a [Value], name: &str) -> &'a Value {
        all.iter().find(|m| m["name"] == name).unwrap()
    }

    #[test]
    fn every_owned_series_is_rendered_even_empty() {
        let mut m = Metrics::new();
        let all = parse(&m.render_json(0, &[]));
        let names: Vec<&str> = all.iter().map(|x| x["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                REQUESTS_TOTAL,
                REQUEST_DURATION,
                SYNC_RECORDS_SKIPPED,
                INFLIGHT_REQUESTS,
                APP_INFLIGHT,
                APP_QUEUED,
                CAPACITY_REJECTIONS,
                REPLICA_REFUSALS
            ]
        );
        for x in &all {
            assert_eq!(x["aggregator"], "sum");
        }
        assert_eq!(metric(&all, INFLIGHT_REQUESTS)["values"][0]["value"], 0);
    }

    #[test]
    fn a_call_lands_in_its_bucket_and_its_status() {
        let mut m = Metrics::new();
        // (seconds, the first bucket index it counts in; None: +Inf only)
        for (seconds, first_bucket) in [
            (0.0, Some(0)),
            (0.005, Some(0)),
            (0.0051, Some(1)),
            (300.0, Some(13)),
            (300.5, None),
        ] {
            let mut m1 = Metrics::new();
            m1.call("p", "a", "sync", 200, seconds);
            let all = parse(&m1.render_json(0, &[]));
            let values = metric(&all, REQUEST_DURATION)["values"]
                .as_array()
                .unwrap()
                .clone();
            let cumulative: Vec<u64> = values[..14]
                .iter()
                .map(|v| v["value"].as_u64().unwrap())
                .collect();
            let want: Vec<u64> = (0..14)
                .map(|b| u64::from(first_bucket.is_some_and(|f| b >= f)))
                .collect();
            assert_eq!(cumulative, want, "{seconds}");
            assert_eq!(values[14]["labels"]["le"], "+Inf");
            assert_eq!(values[14]["value"], 1);
        }
        m.call("p", "a", "sync", 200, 0.1);
        m.call("p", "a", "sync", 200, 0.2);
        m.call("p", "a", "stream", 502, 1.0);
        let all = parse(&m.render_json(2, &[]));
        let req = metric(&all, REQUESTS_TOTAL)["values"].as_array().unwrap().clone();
        assert_eq!(req.len(), 2);
        assert_eq!(req[0]["labels"]["status"], "200");
        assert_eq!(req[0]["value"], 2);
        assert_eq!(req[1]["labels"]["mode"], "stream");
        let dur = metric(&all, REQUEST_DURATION)["values"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(
            dur[15]["metricName"],
            "apphost_gateway_request_duration_seconds_sum"
        );
        assert_eq!(dur[15]["value"].as_f64().unwrap(), 0.1 + 0.2);
    }
}
