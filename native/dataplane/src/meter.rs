//! The time-weighted average of a level (calls in flight + queued) between two reads: a port of the
//! gateway's `ConcurrencyMeter` (src/gateway/balancer/meter.ts), as Knative's queue-proxy reports
//! concurrency (a call that lasted half the interval counts as 0.5). Times are ms; the arithmetic is
//! f64 in the same order as the TS, so the averages agree to the bit (tests/meter_vectors.rs).

#[derive(Debug, Clone)]
pub struct ConcurrencyMeter {
    level: u32,
    since: i64,
    area: f64,
    from: i64,
}

impl ConcurrencyMeter {
    pub fn new(now: i64) -> Self {
        ConcurrencyMeter {
            level: 0,
            since: now,
            area: 0.0,
            from: now,
        }
    }

    /// The level from `now` on (a clock that steps back adds nothing).
    pub fn set(&mut self, now: i64, level: u32) {
        self.area += f64::from(self.level) * (now - self.since).max(0) as f64;
        self.since = now;
        self.level = level;
    }

    /// The average since the previous take (the current level when no time has passed), and restarts.
    pub fn take(&mut self, now: i64) -> f64 {
        self.set(now, self.level);
        let span = now - self.from;
        let avg = if span > 0 {
            self.area / span as f64
        } else {
            f64::from(self.level)
        };
        self.area = 0.0;
        self.from = now;
        avg
    }

    pub fn level(&self) -> u32 {
        self.level
    }
}
