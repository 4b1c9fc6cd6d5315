//! What the fast path shares between calls and the channel loop (design §2, §4, §5): the state Node
//! pushed (state.rs), one balancer pool per app (pool.rs) kept in step with the app's replicas and
//! limits, the metrics (metrics.rs) and the access lines waiting for the turn's flush (access_log.rs).
//! Held behind one mutex, taken for short, non-blocking sections only (no I/O under it but the flush of
//! the access lines to stdout).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::access_log::{AccessLine, AccessLog};
use crate::config::{Config, Routing};
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
}

/// A slot on a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub call: CallId,
    pub url: String,
}

/// Why no slot was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSlot {
    /// The app has no ready replica.
    NoReplica,
    /// Every ready replica is at its capacity (or blocked).
    Full,
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
            self.pools.remove(key);
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
            .or_insert_with(|| Pool::new(app_name, settings, now));
        if pool.settings() != &settings {
            pool.configure(settings, now);
        }
        // The fast path never queues, so no waiting call can come out of these.
        pool.set_replicas(&replicas, now);
    }

    /// A new call's id.
    pub fn call_id(&mut self) -> CallId {
        self.next_call += 1;
        self.next_call
    }

    /// A free slot for `call` on the app of `key`, at once or not at all (the queue is Node's until
    /// step 6: a call that would wait is taken back out of the queue). `requeue`: the deadline of a call
    /// a replica refused.
    pub fn acquire(
        &mut self,
        key: &str,
        call: CallId,
        requeue: Option<i64>,
        now: i64,
    ) -> Result<Slot, NoSlot> {
        let Some(pool) = self.pools.get_mut(key) else {
            return Err(NoSlot::NoReplica);
        };
        match pool.acquire(call, requeue, now) {
            Some(Outcome::Granted { url, .. }) => Ok(Slot { call, url }),
            Some(Outcome::HandOff { .. }) => Err(NoSlot::NoReplica),
            Some(Outcome::Refused { .. }) => Err(NoSlot::Full),
            None => {
                pool.cancel(call, now);
                Err(NoSlot::Full)
            }
        }
    }

    /// The call's answer ended: its slot is free.
    pub fn release(&mut self, key: &str, call: CallId, now: i64) {
        if let Some(p) = self.pools.get_mut(key) {
            p.release(call, now);
        }
    }

    /// The replica refused the call: its slot is free, the replica skipped for `block_ms`.
    pub fn refuse(&mut self, key: &str, call: CallId, block_ms: u64, now: i64) {
        if let Some(p) = self.pools.get_mut(key) {
            p.refuse(call, block_ms, now);
        }
    }

    /// Calls in flight, waiting, and ready replicas of the app of `key`.
    pub fn pool_stats(&self, key: &str) -> Option<(usize, usize, usize)> {
        self.pools.get(key).map(Pool::stats)
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
