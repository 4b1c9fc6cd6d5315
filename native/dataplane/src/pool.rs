//! One app's replicas as the data plane's balancer sees them: a port of the gateway's `AppPool`
//! (src/gateway/balancer/pool.ts) as a pure state machine. Time is an input (`now`, epoch ms) and the
//! pool's timers (each waiting call's deadline, the look again when a blocked replica unblocks) are
//! run by `advance`, so the server drives it from its own clock and the tests from a script.
//!
//! Each ready replica serves at most `capacity` calls at once; a call goes to the least-loaded replica
//! with a free slot (`pick_replica`), or waits in a FIFO queue of at most `max_queue` calls, each no
//! longer than `queue_timeout_ms` (503 `queue_full`, 503 `queue_timeout`). A call placed once and
//! refused by its replica comes back at the head of the queue with the deadline it had (`requeue`: no
//! queue-full check). A slot is held until its call is released (the answer's body ended) or refused
//! (the slot given back and the replica skipped for a block period).
//!
//! Where `AppPool` holds a call for an app with no ready replica (scale from zero, a start failure,
//! replicas dropping to zero under waiting calls), the data plane does not: the call is handed to Node
//! (design §2, "balancer"), with the deadline it had when it was waiting already. Node's own pool then
//! answers it as `AppPool` would have (the deadline goes in as its `requeue`).
//!
//! tests/pool_vectors.rs holds it to tests/vectors/pool.json: event traces run on the real `AppPool`
//! with a fake clock, every outcome and its time.

use std::collections::{HashMap, VecDeque};

use crate::errors::{ApiError, Detail};
use crate::meter::ConcurrencyMeter;
use crate::pick::{PoolSettings, ReplicaLoad, next_unblock, pick_replica};

/// A call, as its caller names it.
pub type CallId = u64;

/// What became of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A slot on `replica` (at `url`), held until `release` or `refuse`.
    Granted {
        call: CallId,
        replica: String,
        url: String,
    },
    /// Answer the caller with this error (`queue_full`, `queue_timeout`).
    Refused { call: CallId, error: ApiError },
    /// The app has no ready replica: the call goes to Node, with the deadline it had, if any.
    HandOff { call: CallId, deadline: Option<i64> },
}

#[derive(Debug, Clone)]
struct Replica {
    id: String,
    url: String,
    inflight: u32,
    blocked_until: i64,
}

#[derive(Debug, Clone)]
struct Waiter {
    call: CallId,
    deadline: i64,
    /// When it started waiting (for a requeued call, `queue_timeout_ms` before its deadline):
    /// `queue_timeout`'s message says how long it waited.
    since: i64,
    /// Its timer: due time and creation order (timers due at the same time run in that order).
    due: i64,
    seq: u64,
}

/// An app's pool.
#[derive(Debug, Clone)]
pub struct Pool {
    app: String,
    s: PoolSettings,
    replicas: Vec<Replica>,
    /// Replicas no longer routable with calls still in flight (kept in case they come back).
    retired: Vec<Replica>,
    queue: VecDeque<Waiter>,
    /// The calls holding a slot, and the replica's id.
    leases: HashMap<CallId, String>,
    rr: usize,
    /// The look again once a blocked replica with room unblocks: due time and creation order.
    unblock: Option<(i64, u64)>,
    seq: u64,
    /// Calls in flight plus waiting, averaged over time between reads (the load report's concurrency).
    meter: ConcurrencyMeter,
    /// Calls refused by replicas (runtime backstop, shutting down, connection refused).
    pub refusals: u64,
}

fn lookup<'a>(list: &'a mut [Replica], id: &str) -> Option<&'a mut Replica> {
    list.iter_mut().find(|r| r.id == id)
}

impl Pool {
    pub fn new(app: &str, settings: PoolSettings, now: i64) -> Self {
        Pool {
            app: app.to_owned(),
            s: settings,
            replicas: Vec::new(),
            retired: Vec::new(),
            queue: VecDeque::new(),
            leases: HashMap::new(),
            rr: 0,
            unblock: None,
            seq: 0,
            meter: ConcurrencyMeter::new(now),
            refusals: 0,
        }
    }

    pub fn settings(&self) -> &PoolSettings {
        &self.s
    }

    /// New limits (the App changed); a larger capacity lets waiting calls through at once.
    pub fn configure(&mut self, settings: PoolSettings, now: i64) -> Vec<Outcome> {
        self.s = settings;
        let out = self.dispatch(now);
        self.level_changed(now);
        out
    }

    /// The ready replicas `(id, url)`, replacing the previous set. Calls in flight on a removed replica
    /// finish there. With none left, every waiting call is handed off (in queue order).
    pub fn set_replicas(&mut self, list: &[(String, String)], now: i64) -> Vec<Outcome> {
        let mut old = std::mem::take(&mut self.replicas);
        for (id, url) in list {
            let kept = match old.iter().position(|r| &r.id == id) {
                Some(i) => Some(old.remove(i)),
                None => self
                    .retired
                    .iter()
                    .position(|r| &r.id == id)
                    .map(|i| self.retired.remove(i)),
            };
            self.retired.retain(|r| &r.id != id);
            self.replicas.push(match kept {
                Some(r) => Replica {
                    url: url.clone(),
                    ..r
                },
                None => Replica {
                    id: id.clone(),
                    url: url.clone(),
                    inflight: 0,
                    blocked_until: 0,
                },
            });
        }
        self.retired.extend(old.into_iter().filter(|r| r.inflight > 0));
        let out = if !self.replicas.is_empty() {
            self.dispatch(now)
        } else {
            self.queue
                .drain(..)
                .map(|w| Outcome::HandOff {
                    call: w.call,
                    deadline: Some(w.deadline),
                })
                .collect()
        };
        self.level_changed(now);
        out
    }

    /// A call wants a slot: granted at once, refused at once (`queue_full`), handed off (no ready
    /// replica), or queued (an empty answer: its outcome comes from a later event or `advance`).
    /// `requeue` is the deadline of a call placed once and refused: it waits at the head of the queue.
    pub fn acquire(&mut self, call: CallId, requeue: Option<i64>, now: i64) -> Option<Outcome> {
        let placed = if requeue.is_some() || self.queue.is_empty() {
            self.try_place(call, now)
        } else {
            None
        };
        if placed.is_some() {
            self.level_changed(now);
            return placed;
        }
        if self.replicas.is_empty() {
            return Some(Outcome::HandOff {
                call,
                deadline: requeue,
            });
        }
        let queued = self.queue.len() as u64;
        if requeue.is_none() && queued >= self.s.max_queue {
            let error = ApiError {
                status: 503,
                code: "queue_full",
                message: format!(
                    "app \"{}\" has {queued} calls waiting for a free replica (the limit); retry later",
                    self.app
                ),
                details: vec![("queued", Detail::Count(queued))],
                retry_after: Some(self.s.retry_after_seconds),
            };
            return Some(Outcome::Refused { call, error });
        }
        let deadline = requeue.unwrap_or(now + self.s.queue_timeout_ms as i64);
        self.seq += 1;
        let w = Waiter {
            call,
            deadline,
            // A requeued call's deadline was set `queue_timeout_ms` after it first had to wait.
            since: if requeue.is_some() {
                deadline - self.s.queue_timeout_ms as i64
            } else {
                now
            },
            due: deadline.max(now),
            seq: self.seq,
        };
        if requeue.is_some() {
            self.queue.push_front(w);
        } else {
            self.queue.push_back(w);
        }
        self.level_changed(now);
        self.schedule_unblock(now);
        None
    }

    /// The call's answer ended (or it failed after reaching the app): its slot is free. A second
    /// release, or one of a call without a slot, does nothing.
    pub fn release(&mut self, call: CallId, now: i64) -> Vec<Outcome> {
        if self.free(call, None).is_none() {
            return Vec::new();
        }
        let out = self.dispatch(now);
        self.level_changed(now);
        out
    }

    /// The replica refused the call without running it: the slot is free and the replica skipped for
    /// `block_ms`.
    pub fn refuse(&mut self, call: CallId, block_ms: u64, now: i64) -> Vec<Outcome> {
        if self.free(call, Some(now + block_ms as i64)).is_none() {
            return Vec::new();
        }
        self.refusals += 1;
        let out = self.dispatch(now);
        self.level_changed(now);
        out
    }

    /// The caller went away while waiting: true when it was in the queue (and has left it).
    pub fn cancel(&mut self, call: CallId, now: i64) -> bool {
        match self.queue.iter().position(|w| w.call == call) {
            Some(i) => {
                self.queue.remove(i);
                self.level_changed(now);
                true
            }
            None => false,
        }
    }

    /// The average of calls in flight plus waiting since the previous read (`snapshot().concurrency`).
    pub fn concurrency(&mut self, now: i64) -> f64 {
        self.meter.take(now)
    }

    /// When `advance` has something to do next (a deadline, or a blocked replica's end).
    pub fn next_timer(&self) -> Option<i64> {
        self.next_due().map(|(due, _, _)| due)
    }

    /// Runs every timer due by `to`, each at its own time, in the order they were set: waiting calls
    /// past their deadline get `queue_timeout`, and a replica's block ending lets waiting calls through.
    pub fn advance(&mut self, to: i64) -> Vec<(i64, Outcome)> {
        let mut out = Vec::new();
        while let Some((due, _, waiter)) = self.next_due().filter(|(due, _, _)| *due <= to) {
            match waiter {
                Some(i) => {
                    let w = self.queue.remove(i).expect("a waiter");
                    out.push((due, self.timed_out(&w)));
                }
                None => {
                    self.unblock = None;
                    out.extend(self.dispatch(due).into_iter().map(|o| (due, o)));
                }
            }
            self.level_changed(due);
        }
        out
    }

    /// Calls in flight, calls waiting, ready replicas.
    pub fn stats(&self) -> (usize, usize, usize) {
        (self.leases.len(), self.queue.len(), self.replicas.len())
    }

    /// Calls in flight per ready replica, in the replicas' order.
    pub fn replica_load(&self) -> Vec<(&str, u32)> {
        self.replicas
            .iter()
            .map(|r| (r.id.as_str(), r.inflight))
            .collect()
    }

    fn level_changed(&mut self, now: i64) {
        self.meter.set(now, (self.leases.len() + self.queue.len()) as u32);
    }

    /// The earliest timer: (due, creation order, the waiter's index or None for the unblock).
    fn next_due(&self) -> Option<(i64, u64, Option<usize>)> {
        let waiters = self
            .queue
            .iter()
            .enumerate()
            .map(|(i, w)| (w.due, w.seq, Some(i)));
        let unblock = self.unblock.map(|(due, seq)| (due, seq, None));
        waiters.chain(unblock).min_by_key(|&(due, seq, _)| (due, seq))
    }

    fn timed_out(&self, w: &Waiter) -> Outcome {
        if self.replicas.is_empty() {
            // Not reached: waiting calls are handed off when the replicas go.
            return Outcome::HandOff {
                call: w.call,
                deadline: Some(w.deadline),
            };
        }
        let error = ApiError {
            status: 503,
            code: "queue_timeout",
            message: format!(
                "no replica of app \"{}\" had a free slot within {} s; retry later",
                self.app,
                js_seconds(w.deadline - w.since)
            ),
            details: vec![],
            retry_after: Some(self.s.retry_after_seconds),
        };
        Outcome::Refused { call: w.call, error }
    }

    fn loads(&self) -> Vec<ReplicaLoad> {
        // pick.rs takes times as u64: a block in the past is no block.
        self.replicas
            .iter()
            .map(|r| ReplicaLoad {
                inflight: r.inflight,
                blocked_until: r.blocked_until.max(0) as u64,
            })
            .collect()
    }

    fn try_place(&mut self, call: CallId, now: i64) -> Option<Outcome> {
        let i = pick_replica(&self.loads(), self.s.capacity, now.max(0) as u64, self.rr)?;
        self.rr = (i + 1) % self.replicas.len().max(1);
        let r = &mut self.replicas[i];
        r.inflight += 1;
        self.leases.insert(call, r.id.clone());
        Some(Outcome::Granted {
            call,
            replica: r.id.clone(),
            url: r.url.clone(),
        })
    }

    /// Gives the call's slot back (blocking its replica until `block_until`, if given).
    fn free(&mut self, call: CallId, block_until: Option<i64>) -> Option<()> {
        let id = self.leases.remove(&call)?;
        if let Some(r) = lookup(&mut self.replicas, &id) {
            r.inflight -= 1;
            if let Some(b) = block_until {
                r.blocked_until = r.blocked_until.max(b);
            }
        } else if let Some(i) = self.retired.iter().position(|r| r.id == id) {
            let r = &mut self.retired[i];
            r.inflight -= 1;
            if r.inflight == 0 {
                self.retired.remove(i);
            } else if let Some(b) = block_until {
                r.blocked_until = r.blocked_until.max(b);
            }
        }
        Some(())
    }

    fn dispatch(&mut self, now: i64) -> Vec<Outcome> {
        let mut out = Vec::new();
        while let Some(call) = self.queue.front().map(|w| w.call) {
            let Some(granted) = self.try_place(call, now) else {
                break;
            };
            self.queue.pop_front();
            out.push(granted);
        }
        self.schedule_unblock(now);
        out
    }

    /// With calls waiting and only blocked replicas having room, look again when the first unblocks.
    fn schedule_unblock(&mut self, now: i64) {
        self.unblock = None;
        if self.queue.is_empty() {
            return;
        }
        if let Some(at) = next_unblock(&self.loads(), self.s.capacity) {
            self.seq += 1;
            self.unblock = Some((now + (at as i64 - now).max(1), self.seq));
        }
    }
}

/// `Math.round(ms / 100) / 10` as JavaScript writes the number: seconds to a tenth, no trailing `.0`,
/// and `-0` as `0`.
fn js_seconds(ms: i64) -> String {
    let tenths = (ms as f64 / 100.0 + 0.5).floor();
    let s = tenths / 10.0;
    if s == 0.0 { "0".to_owned() } else { format!("{s}") }
}

#[cfg(test)]
mod tests {
    use super::js_seconds;

    #[test]
    fn seconds_are_written_as_javascript_writes_them() {
        for (ms, s) in [
            (1000, "1"),
            (1049, "1"),
            (1050, "1.1"),
            (50, "0.1"),
            (49, "0"),
            (0, "0"),
            (-50, "0"),
        ] {
            assert_eq!(js_seconds(ms), s, "{ms} ms");
        }
        assert_eq!(js_seconds(-150), "-0.1");
        assert_eq!(js_seconds(29_950), "30");
        assert_eq!(js_seconds(123_456), "123.5");
    }
}
