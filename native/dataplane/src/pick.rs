//! Which replica gets the next call: a port of the gateway's `pickReplica` and `nextUnblock`
//! (src/gateway/balancer/pick.ts) and `poolSettingsFor` (balancer.ts). tests/pick_vectors.rs holds them
//! to tests/vectors/pick.json and pool-settings.json.

/// A replica's load as the balancer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaLoad {
    pub inflight: u32,
    /// Not picked before this time (ms).
    pub blocked_until: u64,
}

/// `pickReplica`: the replica with the fewest calls in flight among those below `capacity` and not
/// blocked at `now`; ties go to the first such replica at or after `start` (round robin). `None` when
/// every replica is full or blocked.
pub fn pick_replica(replicas: &[ReplicaLoad], capacity: u32, now: u64, start: usize) -> Option<usize> {
    let n = replicas.len();
    let mut best: Option<(usize, u32)> = None;
    for k in 0..n {
        let i = (start + k) % n;
        let r = replicas[i];
        if r.inflight >= capacity || r.blocked_until > now {
            continue;
        }
        if best.is_none_or(|(_, load)| r.inflight < load) {
            best = Some((i, r.inflight));
            if r.inflight == 0 {
                break;
            }
        }
    }
    best.map(|(i, _)| i)
}

/// `nextUnblock`: the earliest block end of a replica with room (possibly past), or `None` when every
/// replica is full.
pub fn next_unblock(replicas: &[ReplicaLoad], capacity: u32) -> Option<u64> {
    replicas
        .iter()
        .filter(|r| r.inflight < capacity)
        .map(|r| r.blocked_until)
        .min()
}

/// The limits of an app's pool (`PoolSettings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSettings {
    pub capacity: u32,
    pub max_queue: u64,
    pub queue_timeout_ms: u64,
    pub cold_start_timeout_ms: u64,
    pub retry_after_seconds: u64,
}

/// The balancer's settings `poolSettingsFor` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalancerSettings {
    pub queue_timeout_ms: u64,
    pub cold_start_timeout_ms: u64,
    pub queue_depth_factor: u64,
    pub max_queue_per_app: u64,
    pub retry_after_seconds: u64,
}

/// `poolSettingsFor`: a slot per concurrent call of a replica, and a queue of `queue_depth_factor`
/// calls per slot of the app's largest size, at most `max_queue_per_app` and at least 1.
pub fn pool_settings_for(replica_concurrency: u32, max_replicas: u32, s: &BalancerSettings) -> PoolSettings {
    let depth = s.queue_depth_factor * u64::from(replica_concurrency) * u64::from(max_replicas.max(1));
    PoolSettings {
        capacity: replica_concurrency,
        max_queue: s.max_queue_per_app.min(depth).max(1),
        queue_timeout_ms: s.queue_timeout_ms,
        cold_start_timeout_ms: s.cold_start_timeout_ms,
        retry_after_seconds: s.retry_after_seconds,
    }
}
