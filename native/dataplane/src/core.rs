//! What the fast path shares between calls and the channel loop (design §2, §4, §5): the state Node
//! pushed (state.rs), one balancer pool per app (pool.rs) kept in step with the app's replicas and
//! limits, the metrics (metrics.rs) and the access lines waiting for the turn's flush (access_log.rs).
//! Held behind one mutex, taken for short, non-blocking sections only (no I/O under it but the flush of
//! the access lines to stdout).
//!
//! The queue (step 6): a call that finds no free slot waits in its app's pool (pool.rs, `AppPool`'s FIFO
//! with `maxQueue` and `queueTimeoutMs`) on a oneshot channel; every pool event that decides a waiting
//! call's fate (a slot released or refused, replicas or limits changed, a timer due) sends the outcome
//! there: a slot, a 503 (`queue_timeout`), or a hand-off to Node (the app's replicas went to zero, or the
//! app went away: the call carries its deadline to Node's queue). The pools' timers (deadlines, a blocked
//! replica's end) are run by one task, [`drive`], woken when a pool with waiting calls changes. The usual
//! call (a free slot, nobody waiting) touches neither the channel nor the task.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{Notify, oneshot};

use crate::access_log::{AccessLine, AccessLog};
use crate::config::{Config, Routing};
use crate::errors::ApiError;
use crate::metrics::{AppGauge, Metrics};
use crate::place::PlaceSettings;
use crate::pool::{CallId, Outcome, Pool};
use crate::records::{SyncCall, SyncCallLimiter, SyncCallSettings};
use crate::reports::{AppLoad, RECORDS_BATCH_MAX, RECORDS_PENDING_MAX};
use crate::state::{Applied, State, StateFrame};

/// The shared part of the data plane.
pub struct Core {
    pub state: State,
    pools: HashMap<String, Pool>,
    pub metrics: Metrics,
    log: Option<AccessLog>,
    flush_scheduled: bool,
    routing: Routing,
    next_call: CallId,
    pub place: PlaceSettings,
    /// Which finished calls get a sync-call record (records.rs), and the admitted ones not yet sent.
    records: SyncCallLimiter,
    pending: Vec<SyncCall>,
    /// Wakes the channel loop's `Reporter` (reports.rs): the first record of a batch, or a full batch.
    pub reports_wake: Arc<Notify>,
    /// The calls waiting in a pool's queue, and where their outcome goes.
    waiters: HashMap<CallId, oneshot::Sender<Outcome>>,
    /// Pools that may have a timer (calls waiting): the keys [`drive`] looks at.
    timed: HashSet<String>,
    /// Wakes [`drive`]: a pool with calls waiting changed, so its next timer may be earlier.
    wake: Arc<Notify>,
}

/// A slot on a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub call: CallId,
    pub url: String,
}

/// What a call asking for a slot gets.
#[derive(Debug)]
pub enum Acquired {
    /// A slot at once.
    Slot(Slot),
    /// Queued: the outcome (a slot, a refusal, a hand-off) comes on this channel. The caller that goes
    /// away leaves the queue with [`Core::leave`].
    Wait(oneshot::Receiver<Outcome>),
    /// Answer the caller with this error (`queue_full`).
    Refused(ApiError),
    /// The app has no ready replica (or none is known): the call goes to Node with this deadline.
    HandOff(Option<i64>),
}

impl Core {
    pub fn new(config: &Config) -> Self {
        let b = &config.balancer;
        Core {
            state: State::new(usize::try_from(config.token_cache_max_entries).unwrap_or(usize::MAX)),
            pools: HashMap::new(),
            metrics: Metrics::new(),
            log: AccessLog::gateway(&config.log_level),
            flush_scheduled: false,
            routing: b.routing,
            next_call: 0,
            place: PlaceSettings {
                capacity_block_ms: b.capacity_block_ms,
                unreachable_block_ms: b.unreachable_block_ms,
                max_retries: u32::try_from(b.max_retries).unwrap_or(u32::MAX),
                queue_timeout_ms: b.queue_timeout_ms,
                retry_after_seconds: b.retry_after_seconds,
            },
            records: SyncCallLimiter::new(SyncCallSettings::from_rates(
                config.gateway.sync_records_per_app_per_second,
                config.gateway.sync_records_per_second,
            )),
            pending: Vec::new(),
            reports_wake: Arc::new(Notify::new()),
            waiters: HashMap::new(),
            timed: HashSet::new(),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Applies a state frame and brings the pools it touches in step.
    pub fn apply(&mut self, frame: StateFrame, now: i64) -> Applied {
        let keys: Vec<String> = match &frame {
            StateFrame::Snapshot(s) => s
                .apps
                .iter()
                .map(|a| format!("{}/{}", a.project_id, a.app_name))
                .chain(self.pools.keys().cloned())
                .collect(),
            StateFrame::App { key, .. } | StateFrame::Replicas { key, .. } => vec![key.clone()],
            _ => Vec::new(),
        };
        let applied = self.state.apply(frame);
        if applied == Applied::Applied {
            for key in keys {
                self.sync_pool(&key, now);
            }
        }
        applied
    }

    /// The pool of `key` made to match the app's limits and ready replicas (with routing `service`:
    /// its upstream while it is ready); dropped with the app.
    fn sync_pool(&mut self, key: &str, now: i64) {
        let Some((project, app_name)) = key.split_once('/') else {
            return;
        };
        let Some(app) = self.state.app(project, app_name) else {
            // The app went away: its waiting calls go to Node (which answers as it does for an unknown
            // app), the calls in flight finish on their replicas.
            if let Some(mut pool) = self.pools.remove(key) {
                let out = pool.set_replicas(&[], now);
                self.deliver(key, out, now);
                self.timed.remove(key);
            }
            return;
        };
        let replicas: Vec<(String, String)> = match self.routing {
            Routing::Service if app.ready => vec![(app.upstream.clone(), app.upstream.clone())],
            Routing::Service => Vec::new(),
            Routing::Endpoints => self
                .state
                .replicas(project, app_name)
                .iter()
                .map(|r| (r.id.clone(), r.url.clone()))
                .collect(),
        };
        let settings = app.pool;
        let pool = self
            .pools
            .entry(key.to_owned())
            // Named by its key, as balancer.ts names an AppPool: the 503s' messages say `app "p/a"`.
            .or_insert_with(|| Pool::new(key, settings, now));
        let mut out = Vec::new();
        if pool.settings() != &settings {
            out = pool.configure(settings, now);
        }
        out.extend(pool.set_replicas(&replicas, now));
        let timed = pool.next_timer().is_some();
        self.after(key, out, timed, now);
    }

    /// A new call's id.
    pub fn call_id(&mut self) -> CallId {
        self.next_call += 1;
        self.next_call
    }

    /// A slot for `call` on the app of `key`: at once, after a wait in the app's queue, refused
    /// (`queue_full`), or none because the app has no ready replica (handed to Node). `requeue`: the
    /// deadline of a call a replica refused (it waits at the head of the queue, no queue-full check).
    pub fn acquire(&mut self, key: &str, call: CallId, requeue: Option<i64>, now: i64) -> Acquired {
        let Some(pool) = self.pools.get_mut(key) else {
            return Acquired::HandOff(requeue);
        };
        match pool.acquire(call, requeue, now) {
            Some(Outcome::Granted { url, .. }) => Acquired::Slot(Slot { call, url }),
            Some(Outcome::HandOff { deadline, .. }) => Acquired::HandOff(deadline),
            Some(Outcome::Refused { error, .. }) => {
                self.rejected(key, error.code);
                Acquired::Refused(error)
            }
            None => {
                let (tx, rx) = oneshot::channel();
                self.waiters.insert(call, tx);
                self.timer_changed(key);
                Acquired::Wait(rx)
            }
        }
    }

    /// The call's answer ended: its slot is free (and may go to a waiting call).
    pub fn release(&mut self, key: &str, call: CallId, now: i64) {
        if let Some(p) = self.pools.get_mut(key) {
            let out = p.release(call, now);
            let timed = p.next_timer().is_some();
            self.after(key, out, timed, now);
        }
    }

    /// The replica refused the call: its slot is free, the replica skipped for `block_ms`.
    pub fn refuse(&mut self, key: &str, call: CallId, block_ms: u64, now: i64) {
        if let Some(p) = self.pools.get_mut(key) {
            let out = p.refuse(call, block_ms, now);
            let timed = p.next_timer().is_some();
            self.after(key, out, timed, now);
        }
    }

    /// The waiting call's caller went away: it leaves the queue at once. `rx` is its channel: an outcome
    /// already sent there is undone (a slot granted to it goes back, to the next waiting call).
    pub fn leave(&mut self, key: &str, call: CallId, rx: &mut oneshot::Receiver<Outcome>, now: i64) {
        self.waiters.remove(&call);
        if self.pools.get_mut(key).is_some_and(|p| p.cancel(call, now)) {
            return;
        }
        if let Ok(Outcome::Granted { .. }) = rx.try_recv() {
            self.release(key, call, now);
        }
    }

    /// Calls in flight, waiting, and ready replicas of the app of `key`.
    pub fn pool_stats(&self, key: &str) -> Option<(usize, usize, usize)> {
        self.pools.get(key).map(Pool::stats)
    }

    /// The earliest timer of the pools with waiting calls (forgetting pools that have none).
    fn next_timer(&mut self) -> Option<i64> {
        let pools = &self.pools;
        self.timed
            .retain(|k| pools.get(k).is_some_and(|p| p.next_timer().is_some()));
        self.timed
            .iter()
            .filter_map(|k| pools.get(k).and_then(Pool::next_timer))
            .min()
    }

    /// Runs every pool timer due by `now`.
    fn advance(&mut self, now: i64) {
        let keys: Vec<String> = self.timed.iter().cloned().collect();
        for key in keys {
            let Some(p) = self.pools.get_mut(&key) else {
                continue;
            };
            let out: Vec<Outcome> = p.advance(now).into_iter().map(|(_, o)| o).collect();
            self.deliver(&key, out, now);
        }
    }

    /// A pool event's outcomes delivered; then the timer task told if the pool still has waiting calls
    /// (`timed`: it has a timer after the event). Not for the timer task's own `advance`: a wake from it
    /// would have it run again at once, for ever.
    fn after(&mut self, key: &str, out: Vec<Outcome>, timed: bool, now: i64) {
        if !out.is_empty() {
            self.deliver(key, out, now);
        } else if timed {
            self.timer_changed(key);
        }
    }

    /// Sends each outcome to its waiting call. A slot granted to a call no longer waiting (its caller
    /// gone between the event and now) goes back at once, possibly to the next one.
    fn deliver(&mut self, key: &str, out: Vec<Outcome>, now: i64) {
        let mut out = out;
        while !out.is_empty() {
            let mut again = Vec::new();
            for o in out {
                let call = match &o {
                    Outcome::Granted { call, .. }
                    | Outcome::Refused { call, .. }
                    | Outcome::HandOff { call, .. } => *call,
                };
                if let Outcome::Refused { error, .. } = &o {
                    self.rejected(key, error.code);
                }
                let sent = match self.waiters.remove(&call) {
                    Some(tx) => tx.send(o),
                    None => Err(o),
                };
                if let (Err(Outcome::Granted { .. }), Some(p)) = (sent, self.pools.get_mut(key)) {
                    again.extend(p.release(call, now));
                }
            }
            out = again;
        }
    }

    /// `apphost_gateway_capacity_rejections_total`, counted as the pool's `rejected` event does.
    fn rejected(&mut self, key: &str, code: &str) {
        if let Some((project, app)) = key.split_once('/') {
            self.metrics.rejected(project, app, code);
        }
    }

    fn timer_changed(&mut self, key: &str) {
        if !self.timed.contains(key) {
            self.timed.insert(key.to_owned());
        }
        self.wake.notify_one();
    }

    /// Appends an access line; true when the caller must schedule a flush (the first line of a turn).
    pub fn log(&mut self, line: &AccessLine<'_>) -> bool {
        let Some(log) = &mut self.log else {
            return false;
        };
        if !log.append(line) || self.flush_scheduled {
            return false;
        }
        self.flush_scheduled = true;
        true
    }

    /// Writes the turn's access lines to `out`.
    pub fn flush_log<W: Write>(&mut self, out: &mut W) {
        self.flush_scheduled = false;
        if let Some(log) = &mut self.log {
            // stdout gone: the lines are dropped, as pino's would be.
            let _ = log.flush_into(out);
        }
    }

    /// The data plane's series for a scrape (`ask-metrics`, design §5), as prom-client's
    /// `getMetricsAsJSON()`: the counters, and the gauges read now from the pools, by app key. A call
    /// in flight here holds a slot or waits in its app's queue (a handed-off one is Node's), so the
    /// requests in flight are those summed.
    pub fn metrics_json(&mut self) -> String {
        let mut keys: Vec<&String> = self.pools.keys().collect();
        keys.sort();
        let mut inflight = 0;
        let mut apps = Vec::with_capacity(keys.len());
        for key in keys {
            let (held, queued, _) = self.pools[key].stats();
            inflight += (held + queued) as u64;
            let (project, app) = key.split_once('/').unwrap_or((key, ""));
            apps.push(AppGauge {
                project,
                app,
                inflight: held as u64,
                queued: queued as u64,
            });
        }
        self.metrics.render_json(inflight, &apps)
    }

    /// A finished call's sync-call record: `build` runs only when the rate bounds admit the call (most
    /// calls under load are over them, and build nothing); one over them is counted as skipped (`rate`).
    /// Admitted records wait here for the channel loop, at most `RECORDS_PENDING_MAX`.
    pub fn record(&mut self, project: &str, app: &str, now_ms: i64, build: impl FnOnce() -> SyncCall) {
        if !self.records.admit(project, app, now_ms) {
            if self.records.enabled() {
                self.metrics.sync_record_skipped("rate");
            }
            return;
        }
        if self.pending.len() >= RECORDS_PENDING_MAX {
            // Node has not read the channel for a while: as the gateway drops a record while NATS is away.
            self.metrics.sync_record_skipped("disconnected");
            return;
        }
        self.pending.push(build());
        if self.pending.len() == 1 || self.pending.len() == RECORDS_BATCH_MAX {
            self.reports_wake.notify_one();
        }
    }

    /// Admitted records waiting for the channel.
    pub fn pending_records(&self) -> usize {
        self.pending.len()
    }

    /// The admitted records, taken for a `records` frame.
    pub fn take_records(&mut self) -> Vec<SyncCall> {
        std::mem::take(&mut self.pending)
    }

    /// The `load` frame's apps (design §4): each pool's time-averaged level (in flight + queued) since the
    /// last report, its counts now and in flight per replica; only apps with load in the interval or a
    /// level above 0 now, as the gateway's reporter leaves idle apps out. `runs` is Node's (always 0).
    pub fn loads(&mut self, now: i64) -> Vec<AppLoad> {
        let mut out = Vec::new();
        for (key, pool) in &mut self.pools {
            let concurrency = pool.concurrency(now);
            let (inflight, queued, _) = pool.stats();
            if concurrency <= 0.0 && inflight == 0 && queued == 0 {
                continue;
            }
            let Some((project, app)) = key.split_once('/') else {
                continue;
            };
            out.push(AppLoad {
                project_id: project.to_owned(),
                app_name: app.to_owned(),
                concurrency,
                inflight: inflight as u64,
                queued: queued as u64,
                runs: 0,
                replicas: Some(
                    pool.replica_load()
                        .into_iter()
                        .map(|(id, n)| (id.to_owned(), u64::from(n)))
                        .collect(),
                ),
            });
        }
        out
    }
}

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Runs the pools' timers for as long as the data plane serves: sleeps until the earliest one (or until
/// a pool with waiting calls changes), then runs what is due. Spawned once, by server.rs.
pub async fn drive(core: Arc<Mutex<Core>>) {
    let wake = core.lock().expect("core").wake.clone();
    loop {
        let next = core.lock().expect("core").next_timer();
        match next {
            None => wake.notified().await,
            Some(at) => {
                let wait = at - epoch_ms();
                if wait > 0 {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
                        _ = wake.notified() => {}
                    }
                }
            }
        }
        core.lock().expect("core").advance(epoch_ms());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use serde_json::{Value, json};

    const T0: i64 = 1_700_000_000_000;

    fn frame(v: Value) -> StateFrame {
        let Message::State(f) = Message::from_payload(v.to_string().as_bytes()).unwrap() else {
            panic!("a state frame")
        };
        StateFrame::from_message(&f).unwrap()
    }

    /// App `p/a`: capacity 1, a queue of 1 waiting 400 ms, on replica r1.
    fn core() -> Core {
        let mut core = Core::new(&Config::example(0, "/nonexistent"));
        core.apply(
            frame(json!({
                "v": 1, "type": "snapshot", "gen": "g", "seq": 1,
                "apps": [{"projectId": "p", "appName": "a", "runtime": "custom", "upstream": "http://a", "ready": true,
                          "gracePeriodSeconds": 30, "functions": null,
                          "pool": {"capacity": 1, "maxQueue": 1, "queueTimeoutMs": 400, "coldStartTimeoutMs": 60000, "retryAfterSeconds": 5}}],
                "replicas": [{"key": "p/a", "replicas": [{"id": "r1", "url": "http://r1"}]}],
                "failures": [], "domains": [], "tokens": [],
            })),
            T0,
        );
        core
    }

    /// Calls in flight and waiting in `p/a`'s pool.
    fn level(core: &Core) -> (usize, usize) {
        let (inflight, queued, _) = core.pool_stats("p/a").unwrap();
        (inflight, queued)
    }

    /// A series' values from the metrics a scrape gets, as `label=value` (the label named `by`).
    fn series(core: &mut Core, name: &str, by: &str) -> String {
        let v: Value = serde_json::from_str(&core.metrics_json()).unwrap();
        let m = v.as_array().unwrap().iter().find(|m| m["name"] == name).unwrap();
        m["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| format!("{}={}", x["labels"][by].as_str().unwrap(), x["value"]))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn rejections(core: &mut Core) -> String {
        series(core, crate::metrics::CAPACITY_REJECTIONS, "code")
    }

    #[test]
    fn a_full_app_queues_then_refuses_and_a_released_slot_goes_to_the_waiting_call() {
        let mut core = core();
        assert!(matches!(core.acquire("p/a", 1, None, T0), Acquired::Slot(_)));
        let Acquired::Wait(mut rx) = core.acquire("p/a", 2, None, T0) else {
            panic!("queued")
        };
        let Acquired::Refused(e) = core.acquire("p/a", 3, None, T0) else {
            panic!("queue_full")
        };
        assert_eq!((e.status, e.code, e.retry_after), (503, "queue_full", Some(5)));
        assert_eq!(level(&core), (1, 1));
        assert_eq!(series(&mut core, crate::metrics::APP_QUEUED, "app"), "a=1");
        assert_eq!(rejections(&mut core), "queue_full=1");
        assert!(rx.try_recv().is_err(), "still waiting");
        core.release("p/a", 1, T0 + 10);
        assert!(matches!(rx.try_recv(), Ok(Outcome::Granted { call: 2, .. })));
        assert_eq!(level(&core), (1, 0));
    }

    #[test]
    fn a_waiting_call_times_out_when_the_timer_task_runs_its_deadline() {
        let mut core = core();
        core.acquire("p/a", 1, None, T0);
        let Acquired::Wait(mut rx) = core.acquire("p/a", 2, None, T0) else {
            panic!("queued")
        };
        assert_eq!(core.next_timer(), Some(T0 + 400));
        core.advance(T0 + 399);
        assert!(rx.try_recv().is_err());
        core.advance(T0 + 400);
        let Ok(Outcome::Refused { error, .. }) = rx.try_recv() else {
            panic!("queue_timeout")
        };
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                "queue_timeout",
                "no replica of app \"p/a\" had a free slot within 0.4 s; retry later"
            )
        );
        assert_eq!(rejections(&mut core), "queue_timeout=1");
        assert_eq!(core.next_timer(), None, "nothing left to time");
    }

    #[test]
    fn a_caller_that_leaves_frees_its_place_and_a_slot_granted_to_it_goes_back() {
        let mut core = core();
        core.acquire("p/a", 1, None, T0);
        let Acquired::Wait(mut rx) = core.acquire("p/a", 2, None, T0) else {
            panic!("queued")
        };
        core.leave("p/a", 2, &mut rx, T0 + 1);
        assert_eq!(level(&core), (1, 0));
        assert!(matches!(core.acquire("p/a", 3, None, T0 + 2), Acquired::Wait(_)));
        // Call 3's channel was dropped above (its caller gone): the slot freed for it goes back at once.
        core.release("p/a", 1, T0 + 3);
        assert_eq!(level(&core), (0, 0), "no slot held by a dead caller");
        assert!(matches!(core.acquire("p/a", 4, None, T0 + 4), Acquired::Slot(_)));
        let Acquired::Wait(mut rx) = core.acquire("p/a", 5, None, T0 + 4) else {
            panic!("queued")
        };
        // Granted to call 5, whose caller goes before reading it: given back.
        core.release("p/a", 4, T0 + 5);
        core.leave("p/a", 5, &mut rx, T0 + 6);
        assert_eq!(level(&core), (0, 0));
        assert!(matches!(core.acquire("p/a", 6, None, T0 + 7), Acquired::Slot(_)));
    }

    #[test]
    fn waiting_calls_are_handed_over_with_their_deadline_when_the_replicas_go_or_the_app_does() {
        for last in [
            json!({"v": 1, "type": "replicas", "gen": "g", "seq": 2, "key": "p/a", "replicas": []}),
            json!({"v": 1, "type": "app", "gen": "g", "seq": 2, "key": "p/a", "app": null}),
        ] {
            let mut core = core();
            core.acquire("p/a", 1, None, T0);
            let Acquired::Wait(mut rx) = core.acquire("p/a", 2, None, T0 + 50) else {
                panic!("queued")
            };
            core.apply(frame(last.clone()), T0 + 100);
            assert!(
                matches!(rx.try_recv(), Ok(Outcome::HandOff { call: 2, deadline: Some(d) }) if d == T0 + 450),
                "{last}"
            );
            assert!(matches!(
                core.acquire("p/a", 3, None, T0 + 101),
                Acquired::HandOff(None)
            ));
            assert_eq!(core.next_timer(), None);
        }
    }
}
