//! The data plane's life (design §4), driven by the control channel:
//!
//! 1. `hello`; then `config` and the first `snapshot`, within `DATAPLANE_START_WAIT_MS`;
//! 2. bind `listen`, send `ready {gen, seq}`, serve (every call handed to Node in step 4);
//! 3. `ping` → `pong` throughout; state frames move `gen`/`seq` (a gap sends `resync` once, until the
//!    snapshot that answers it; a new `gen`'s snapshot sends `ready` again);
//! 4. `drain{handover}`, then `drain{drain}` → the server's drain, up to `drainTimeoutMs`, then `drained`;
//!    the end of the channel (Node gone) or SIGTERM → the same drain, without `drained`. Then exit 0.
//!    SIGINT is ignored: Node, in the same process group, decides.
//!
//! A protocol error ends the run at once (exit 3): Node respawns the child.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use crate::channel::{ChannelError, FrameReader, FrameWriter};
use crate::config::Config;
use crate::error::ProtocolError;
use crate::message::{DrainPhase, Message, StateFrame, StateKind};
use crate::server::Server;

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

/// Where the state stands: the `gen` and `seq` last applied, and whether a `resync` is outstanding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateCursor {
    pub generation: String,
    pub seq: u64,
    awaiting_snapshot: bool,
}

impl StateCursor {
    /// After the first snapshot.
    pub fn new(first: &StateFrame) -> Self {
        StateCursor {
            generation: first.generation.clone(),
            seq: first.seq,
            awaiting_snapshot: false,
        }
    }

    /// Takes one state frame; returns the message to send Node, if any: `ready` for a new `gen`'s
    /// snapshot, `resync` at the first gap (then nothing until a snapshot comes).
    pub fn take(&mut self, f: &StateFrame) -> Option<Message> {
        if f.kind == StateKind::Snapshot {
            let new_gen = f.generation != self.generation;
            self.generation = f.generation.clone();
            self.seq = f.seq;
            self.awaiting_snapshot = false;
            return new_gen.then(|| Message::Ready {
                generation: self.generation.clone(),
                seq: self.seq,
            });
        }
        if self.awaiting_snapshot {
            return None;
        }
        if f.generation == self.generation && Some(f.seq) == self.seq.checked_add(1) {
            self.seq = f.seq;
            return None;
        }
        self.awaiting_snapshot = true;
        Some(Message::Resync {
            generation: self.generation.clone(),
            seq: self.seq,
        })
    }
}

fn unexpected(m: &Message) -> ProtocolError {
    ProtocolError::UnexpectedMessage {
        type_name: m.type_name().to_owned(),
    }
}

/// Runs the data plane on the channel `(r, w)` until it is done. `Ok` is exit 0.
pub async fn run<R, W>(r: R, w: W) -> Result<(), Fatal>
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
            Some(Message::Config(c)) if config.is_none() => config = Some(c),
            Some(Message::State(f)) if config.is_some() && f.kind == StateKind::Snapshot => break f,
            // A change before the first snapshot: the snapshot that follows holds it.
            Some(Message::State(_)) if config.is_some() => {}
            Some(other) => return Err(unexpected(&other).into()),
        }
    };
    let config = config.expect("the loop ends only after config");

    // 2. listen, then ready.
    let server = Server::start(&config).await.map_err(Fatal::Listen)?;
    let mut cursor = StateCursor::new(&first);
    tx.send(&Message::Ready {
        generation: cursor.generation.clone(),
        seq: cursor.seq,
    })
    .await?;

    // 3. serve until a drain.
    let drain_bound = Duration::from_millis(config.gateway.drain_timeout_ms);
    let tell_node = loop {
        let msg = tokio::select! {
            m = rx.next() => m?,
            _ = sigterm.recv() => break false,
        };
        match msg {
            None => break false,
            Some(Message::Ping { id }) => tx.send(&Message::Pong { id }).await?,
            Some(Message::State(f)) => {
                if let Some(answer) = cursor.take(&f) {
                    tx.send(&answer).await?;
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
            m = rx.next(), if reading => match m {
                Ok(Some(Message::Ping { id })) => tx.send(&Message::Pong { id }).await?,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => reading = false,
            },
        }
    }
    if tell_node {
        // Node may be gone by now; the exit is the same.
        let _ = tx.send(&Message::Drained).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn frame(kind: StateKind, generation: &str, seq: u64) -> StateFrame {
        StateFrame {
            kind,
            generation: generation.to_owned(),
            seq,
            body: Map::new(),
        }
    }

    #[test]
    fn changes_in_order_move_the_seq_silently() {
        let mut c = StateCursor::new(&frame(StateKind::Snapshot, "g1", 4));
        for (i, kind) in [StateKind::App, StateKind::Replicas, StateKind::Token]
            .into_iter()
            .enumerate()
        {
            assert_eq!(c.take(&frame(kind, "g1", 5 + i as u64)), None);
        }
        assert_eq!(c.seq, 7);
    }

    #[test]
    fn a_gap_asks_once_for_a_snapshot_and_the_snapshot_answers_it() {
        let mut c = StateCursor::new(&frame(StateKind::Snapshot, "g1", 4));
        let resync = Some(Message::Resync {
            generation: "g1".to_owned(),
            seq: 4,
        });
        assert_eq!(c.take(&frame(StateKind::App, "g1", 6)), resync);
        assert_eq!(c.take(&frame(StateKind::App, "g1", 7)), None, "asked once");
        // The answer, same gen: no second ready.
        assert_eq!(c.take(&frame(StateKind::Snapshot, "g1", 9)), None);
        assert_eq!(c.take(&frame(StateKind::Domain, "g1", 10)), None);
        assert_eq!((c.generation.as_str(), c.seq), ("g1", 10));
        // A repeated seq is a gap too.
        assert!(matches!(
            c.take(&frame(StateKind::Domain, "g1", 10)),
            Some(Message::Resync { .. })
        ));
    }

    #[test]
    fn a_new_gen_is_ready_again_after_its_snapshot() {
        let mut c = StateCursor::new(&frame(StateKind::Snapshot, "g1", 4));
        // Node restarted: a change of another gen is a gap.
        assert!(matches!(
            c.take(&frame(StateKind::App, "g2", 1)),
            Some(Message::Resync { .. })
        ));
        assert_eq!(
            c.take(&frame(StateKind::Snapshot, "g2", 0)),
            Some(Message::Ready {
                generation: "g2".to_owned(),
                seq: 0
            })
        );
        assert_eq!(c.take(&frame(StateKind::App, "g2", 1)), None);
    }
}
