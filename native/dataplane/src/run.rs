//! The data plane's life (design §4), driven by the control channel:
//!
//! 1. `hello`; then `config` and the first `snapshot`, within `DATAPLANE_START_WAIT_MS`;
//! 2. bind `listen`, send `ready {gen, seq}`, serve (every call handed to Node in step 4);
//! 3. `ping` → `pong` and `ask-metrics` → `metrics` throughout (before the first snapshot: no series);
//!    state frames move `gen`/`seq` (a gap sends `resync` once, until the snapshot that answers it; a
//!    new `gen`'s snapshot sends `ready` again); from `ready` on, `load` every `loadReportIntervalMs`
//!    and admitted sync-call records in batches (reports.rs);
//! 4. `drain{handover}`, then `drain{drain}` → the server's drain, up to `drainTimeoutMs`, then `drained`;
//!    the end of the channel (Node gone) or SIGTERM → the same drain, without `drained`. Then exit 0.
//!    SIGINT is ignored: Node, in the same process group, decides.
//!
//! A protocol error ends the run at once (exit 3): Node respawns the child.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use crate::channel::{ChannelError, FrameReader, FrameWriter};
use crate::config::Config;
use crate::core::Core;
use crate::error::ProtocolError;
use crate::frame::DATAPLANE_MAX_FRAME_BYTES;
use crate::message::{DrainPhase, Message, StateKind};
use crate::reports::Reporter;
use crate::server::Server;
use crate::state::{self, Applied};

/// Bound on the start: from `hello` to `config` and the first `snapshot`. Node sends `config` at once
/// and the snapshot once its resolver has listed the apps (`APPHOST_GATEWAY_CACHE_SYNC_TIMEOUT_MS`,
/// 60 s by default, bounds that list); past this the child exits 3 (`start_timeout`) and Node respawns it.
pub const DATAPLANE_START_WAIT_MS: u64 = 90_000;

/// How a run ended other than cleanly.
#[derive(Debug)]
pub enum Fatal {
    /// The channel broke the protocol, or the start did not complete in time: exit 3.
    Channel(ChannelError),
    /// `listen` could not be bound: exit 4.
    Listen(std::io::Error),
}

impl From<ChannelError> for Fatal {
    fn from(e: ChannelError) -> Self {
        Fatal::Channel(e)
    }
}

impl From<ProtocolError> for Fatal {
    fn from(e: ProtocolError) -> Self {
        Fatal::Channel(e.into())
    }
}

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Room in a frame for `metrics`' fields other than the series (`{"v":1,"type":"metrics","id":…,"metrics":}`).
const METRICS_HEAD_BYTES: usize = 64;

/// The answer to `ask-metrics {id}`: the series as they are now (core.rs, metrics.rs). None when they
/// would not fit in a frame of `max_frame` bytes (`DATAPLANE_MAX_FRAME_BYTES`: some thousands of apps'
/// histograms): the question is left unanswered and said on stderr, and Node's scrape keeps this
/// child's last counters, rather than the data plane writing a frame Node must refuse, or ending on it.
fn metrics(core: &Mutex<Core>, id: u64, max_frame: usize) -> Option<Message> {
    let metrics = core.lock().expect("core").metrics_json();
    if metrics.len() + METRICS_HEAD_BYTES > max_frame {
        eprintln!(
            "apphost-dataplane: ask-metrics {id} not answered: {} bytes of series are over a frame's {max_frame}",
            metrics.len()
        );
        return None;
    }
    Some(Message::Metrics { id, metrics })
}

fn unexpected(m: &Message) -> ProtocolError {
    ProtocolError::UnexpectedMessage {
        type_name: m.type_name().to_owned(),
    }
}

/// Runs the data plane on the channel `(r, w)` until it is done; `handover`: Node's IPC channel, where
/// connections whose first request is Node's go (design §3a). `Ok` is exit 0.
pub async fn run<R, W>(r: R, w: W, handover: Option<OwnedFd>) -> Result<(), Fatal>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut rx = FrameReader::new(r);
    let mut tx = FrameWriter::new(w);
    let mut sigterm = signal(SignalKind::terminate()).map_err(|e| Fatal::Channel(e.into()))?;
    // SIGINT is Node's to act on: a Ctrl-C in a terminal (`apphost dev`) reaches the whole process group,
    // and Node then drives the drain over the channel, or its end drains us. Taken and never acted on,
    // so it no longer kills the child mid-call.
    let _sigint = signal(SignalKind::interrupt()).map_err(|e| Fatal::Channel(e.into()))?;
    tx.send(&Message::hello()).await?;

    // 1. config, then the first snapshot.
    let deadline = Instant::now() + Duration::from_millis(DATAPLANE_START_WAIT_MS);
    let mut config: Option<Box<Config>> = None;
    let first = loop {
        let msg = tokio::select! {
            m = rx.next() => m?,
            _ = sleep_until(deadline) => {
                return Err(ProtocolError::StartTimeout {
                    waited_ms: DATAPLANE_START_WAIT_MS,
                    missing: if config.is_none() { "config" } else { "snapshot" },
                }
                .into());
            }
            _ = sigterm.recv() => return Ok(()),
        };
        match msg {
            // Node went away, or is stopping, before anything was served.
            None => return Ok(()),
            Some(Message::Drain { .. }) => {
                tx.send(&Message::Drained).await?;
                return Ok(());
            }
            Some(Message::Ping { id }) => tx.send(&Message::Pong { id }).await?,
            // Nothing served yet: no series.
            Some(Message::AskMetrics { id }) => {
                tx.send(&Message::Metrics {
                    id,
                    metrics: "[]".to_owned(),
                })
                .await?;
            }
            Some(Message::Config(c)) if config.is_none() => config = Some(c),
            Some(Message::State(f)) if config.is_some() && f.kind == StateKind::Snapshot => break f,
            // A change before the first snapshot: the snapshot that follows holds it.
            Some(Message::State(_)) if config.is_some() => {}
            Some(other) => return Err(unexpected(&other).into()),
        }
    };
    let config = config.expect("the loop ends only after config");

    // 2. the first snapshot applied, listen, then ready.
    let mut core = Core::new(&config);
    core.apply(state::StateFrame::from_message(&first)?, epoch_ms());
    let mut generation = first.generation.clone();
    let core = Arc::new(Mutex::new(core));
    // Without it (or when it cannot be used), every connection is hyper's, as before §3a.
    let handover = handover.and_then(|fd| {
        crate::handover::Handover::start(fd)
            .map_err(|e| eprintln!("apphost-dataplane: connection hand-over channel: {e}; not used"))
            .ok()
    });
    let server = Server::start(&config, core.clone(), handover)
        .await
        .map_err(Fatal::Listen)?;
    tx.send(&Message::Ready {
        generation: generation.clone(),
        seq: first.seq,
    })
    .await?;
    // From ready on: `load` every loadReportIntervalMs, admitted records in batches (design §4, step 7).
    let mut reporter = Reporter::new(core.clone(), config.load_report_interval_ms);

    // 3. serve until a drain.
    let drain_bound = Duration::from_millis(config.gateway.drain_timeout_ms);
    let tell_node = loop {
        let msg = tokio::select! {
            m = rx.next() => m?,
            _ = sigterm.recv() => break false,
            report = reporter.next() => {
                tx.send(&report).await?;
                continue;
            }
        };
        match msg {
            None => break false,
            Some(Message::Ping { id }) => tx.send(&Message::Pong { id }).await?,
            Some(Message::AskMetrics { id }) => {
                if let Some(m) = metrics(&core, id, DATAPLANE_MAX_FRAME_BYTES) {
                    tx.send(&m).await?;
                }
            }
            Some(Message::State(f)) => {
                // Typed first: a malformed frame is a protocol error (exit 3).
                let typed = state::StateFrame::from_message(&f)?;
                let applied = core.lock().expect("core").apply(typed, epoch_ms());
                match applied {
                    // A new gen's snapshot (Node restarted): ready again, once per gen.
                    Applied::Applied if f.kind == StateKind::Snapshot && f.generation != generation => {
                        generation = f.generation.clone();
                        tx.send(&Message::Ready {
                            generation: generation.clone(),
                            seq: f.seq,
                        })
                        .await?;
                    }
                    Applied::Applied | Applied::AwaitingSnapshot => {}
                    Applied::ResyncNeeded { gen_id, seq } => {
                        tx.send(&Message::Resync {
                            generation: gen_id,
                            seq,
                        })
                        .await?;
                    }
                }
            }
            Some(Message::Drain {
                phase: DrainPhase::Handover,
            }) => server.handover(),
            Some(Message::Drain {
                phase: DrainPhase::Drain,
            }) => break true,
            Some(other) => return Err(unexpected(&other).into()),
        }
    };

    // 4. drain: pings are still answered while calls finish; the channel's end stops the reading only.
    let drained = server.drain(drain_bound);
    tokio::pin!(drained);
    let mut reading = tell_node;
    loop {
        tokio::select! {
            _ = &mut drained => break,
            // Calls that end during the drain are reported too (Node's reporter stops after it).
            report = reporter.next(), if reading => {
                if tx.send(&report).await.is_err() {
                    reading = false;
                }
            }
            m = rx.next(), if reading => match m {
                Ok(Some(Message::Ping { id })) => tx.send(&Message::Pong { id }).await?,
                // The calls still finishing are counted: a scrape while draining sees them.
                Ok(Some(Message::AskMetrics { id })) => {
                    if let Some(m) = metrics(&core, id, DATAPLANE_MAX_FRAME_BYTES) {
                        tx.send(&m).await?;
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => reading = false,
            },
        }
    }
    if tell_node {
        // Node may be gone by now; the exit is the same. The last records first: `drained` ends the run.
        if let Some(records) = reporter.flush() {
            let _ = tx.send(&records).await;
        }
        let _ = tx.send(&Message::Drained).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_over_a_frame_are_not_answered_rather_than_sent_or_fatal() {
        let core = Mutex::new(Core::new(&Config::example(1, "/s")));
        let len = core.lock().unwrap().metrics_json().len();
        let Some(Message::Metrics { id, metrics: text }) = metrics(&core, 5, DATAPLANE_MAX_FRAME_BYTES)
        else {
            panic!("answered")
        };
        assert_eq!((id, text.len()), (5, len));
        // The largest answer a frame holds is written whole; one byte less room and it is not answered.
        let fits = len + METRICS_HEAD_BYTES;
        let m = metrics(&core, 99_999_999_999, fits).expect("fits");
        assert!(m.to_frame().unwrap().len() <= fits + crate::frame::LENGTH_PREFIX_BYTES);
        assert!(metrics(&core, 5, fits - 1).is_none());
    }
}
