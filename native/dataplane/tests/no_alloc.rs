//! The fast path's look-ups allocate nothing per call (state.rs, tokens.rs, metrics.rs, access_log.rs,
//! records.rs' admission):
//! a global allocator counts this thread's allocations around each one, after a first call has made
//! what is kept (a new series, the last hit's copy of the token, the log buffer's room).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use apphost_dataplane::access_log::{AccessLine, AccessLog};
use apphost_dataplane::message::Message;
use apphost_dataplane::metrics::Metrics;
use apphost_dataplane::state::{DomainLookup, State, StateFrame};
use apphost_dataplane::tokens::{TokenCheck, digest};
use serde_json::json;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// How many allocations `f` made on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    (out, ALLOCATIONS.with(Cell::get) - before)
}

const NOW: u64 = 1_700_000_000_000;

fn loaded() -> State {
    let hex: String = digest(b"tok-acme").iter().map(|b| format!("{b:02x}")).collect();
    let frame = json!({
        "v": 1, "type": "snapshot", "gen": "g", "seq": 1,
        "apps": [{"projectId": "acme", "appName": "hello", "runtime": "cortex", "upstream": "http://h", "ready": true,
                  "gracePeriodSeconds": 30, "functions": null,
                  "pool": {"capacity": 4, "maxQueue": 40, "queueTimeoutMs": 30000, "coldStartTimeoutMs": 60000, "retryAfterSeconds": 1}}],
        "replicas": [{"key": "acme/hello", "replicas": [{"id": "r1", "url": "http://r1"}]}],
        "failures": [],
        "domains": [{"host": "shop.example.com", "projectId": "acme", "appName": "hello"}],
        "tokens": [{"sha256": hex, "projectId": "acme", "until": NOW + 60_000}],
    });
    let Message::State(f) = Message::from_payload(frame.to_string().as_bytes()).unwrap() else {
        panic!("a state frame")
    };
    let mut s = State::new(100);
    s.apply(StateFrame::from_message(&f).unwrap());
    s
}

#[test]
fn the_fast_path_s_look_ups_allocate_nothing() {
    let mut s = loaded();
    let (app, n) = allocations(|| s.app("acme", "hello").is_some());
    assert!(app);
    assert_eq!(n, 0, "app()");
    let (r, n) = allocations(|| s.replicas("acme", "hello").len() + s.replicas_by_key("acme/hello").len());
    assert_eq!((r, n), (2, 0), "replicas()");
    let (d, n) = allocations(|| matches!(s.domain("SHOP.Example.com"), DomainLookup::Found(_)));
    assert_eq!((d, n), (true, 0), "domain() lower-casing on the stack");
    // The first hit keeps a copy of the token; the next ones, and a hashed look-up, allocate nothing.
    assert_eq!(s.tokens().check(b"tok-acme", "acme", NOW), TokenCheck::Verified);
    let (t, n) = allocations(|| s.tokens().check(b"tok-acme", "acme", NOW));
    assert_eq!((t, n), (TokenCheck::Verified, 0), "the last hit");
    let (t, n) = allocations(|| s.tokens().check(b"tok-other", "acme", NOW));
    assert_eq!((t, n), (TokenCheck::Miss, 0), "a hashed miss");

    let mut m = Metrics::new();
    m.call("acme", "hello", "sync", 200, 0.001);
    let ((), n) = allocations(|| m.call("acme", "hello", "sync", 200, 0.002));
    assert_eq!(n, 0, "Metrics::call on a known series and status");

    let mut log = AccessLog::gateway("info").unwrap();
    let line = AccessLine {
        time_ms: NOW as i64,
        request_id: "8e0a4a4e-5d43-4c7b-9d7e-3f1f7c1c2b1a",
        method: "POST",
        status: 200,
        code: None,
        duration_ms: 1,
        aborted: false,
        mode: "sync",
        project: Some("acme"),
        app: Some("hello"),
    };
    log.append(&line);
    log.clear();
    let (w, n) = allocations(|| log.append(&line));
    assert_eq!((w, n), (true, 0), "AccessLog::append into a buffer with room");
}

#[test]
fn a_call_s_record_admission_allocates_nothing_once_its_app_was_seen_this_second() {
    use apphost_dataplane::records::{SyncCallLimiter, SyncCallSettings};
    let mut limiter = SyncCallLimiter::new(SyncCallSettings {
        per_app_per_second: 2,
        per_second: 200,
    });
    // The first call of an app in a second copies its names (kept for that second).
    assert!(limiter.admit("acme", "hello", 5_000));
    let (admitted, n) = allocations(|| limiter.admit("acme", "hello", 5_100));
    assert_eq!((admitted, n), (true, 0), "admitted, within the bound");
    let (admitted, n) = allocations(|| limiter.admit("acme", "hello", 5_200));
    assert_eq!(
        (admitted, n),
        (false, 0),
        "over the bound: what most calls under load meet"
    );
}
