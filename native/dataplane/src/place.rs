//! What follows a replica's refusal of a call: a port of the loop of the gateway's `placeCall`
//! (src/gateway/balancer/place.ts). The slot is given back with a block period (short for "at
//! capacity", long for a replica going away); "at capacity" is retried without being counted, the
//! others at most `max_retries` times; every retry waits in the queue no later than the deadline set at
//! the first refusal (`queue_timeout_ms` after it). tests/place_vectors.rs holds it to
//! tests/vectors/place.json.

use crate::errors::{ApiError, Refusal, gave_up};

/// The settings `placeCall` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaceSettings {
    pub capacity_block_ms: u64,
    pub unreachable_block_ms: u64,
    pub max_retries: u32,
    pub queue_timeout_ms: u64,
    pub retry_after_seconds: u64,
}

/// What to do after a refusal: the refusing replica is blocked for `block_ms` either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Wait for a slot again (in the queue's order), no later than `requeue_deadline` (ms).
    Retry { block_ms: u64, requeue_deadline: i64 },
    /// Answer the caller with this error.
    GiveUp { block_ms: u64, error: ApiError },
}

/// One call's placement: the retries counted and the queue deadline, once there is one.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    retries: u32,
    deadline: Option<i64>,
}

impl Placement {
    pub fn new() -> Self {
        Placement::default()
    }

    /// The replica's answer was `refused` (with an io error's code as `detail`) at `now` (ms).
    pub fn refused(
        &mut self,
        app: &str,
        refused: Refusal,
        detail: Option<&str>,
        now: i64,
        s: &PlaceSettings,
    ) -> Next {
        let capacity = refused == Refusal::AtCapacity;
        let block_ms = if capacity {
            s.capacity_block_ms
        } else {
            s.unreachable_block_ms
        };
        let give_up = |retries| Next::GiveUp {
            block_ms,
            error: gave_up(app, refused, detail, retries, s.retry_after_seconds),
        };
        if !capacity {
            self.retries += 1;
            if self.retries > s.max_retries {
                return give_up(self.retries);
            }
        }
        let deadline = *self.deadline.get_or_insert(now + s.queue_timeout_ms as i64);
        if now >= deadline {
            return give_up(self.retries);
        }
        Next::Retry {
            block_ms,
            requeue_deadline: deadline,
        }
    }
}
