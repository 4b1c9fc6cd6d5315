//! The fast path (design §2, §8 step 5): the usual sync call served here, walked in the gateway's order —
//! custom domain, route, auth, the gateway's query parameters, app look-up, body bound, body check, a
//! free replica slot, the upstream call, the answer — and every other call handed to Node whole with the
//! reason it left (handoff.rs). The data plane writes only the answers of calls it forwarded and the
//! errors after dispatch (502 `upstream_unreachable`, 504 `upstream_timeout`, a refused call's `gaveUp`);
//! every earlier refusal is Node's.
//!
//! A call that finds no free slot waits in its app's queue (core.rs, pool.rs): up to `queueTimeoutMs`
//! (503 `queue_timeout`), with at most `maxQueue` waiting (503 `queue_full` at once). A replica that
//! refuses a call (`X-Apphost-Refused`, or a connection that was never made) is skipped for its block
//! period and the call waits again at the head of the queue (place.rs), up to `maxRetries` and the
//! deadline set at the first refusal. When the app's replicas drop to zero under waiting calls, each goes
//! to Node with its deadline (reason `no_replica`), where Node's pool holds it (cold start) no longer.
//! The slot is held until the answer's body ends; then the access line and the metrics are written
//! (core.rs). A caller that goes away before the answer's head leaves the queue (or gives its slot back)
//! and gets the line Node writes then: status 404 (the gateway's status until an answer is set),
//! `aborted: true`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::BodyExt;
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, HOST, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};

use crate::access_log::{AccessLine, duration_ms};
use crate::answer::{self, SMALL_RESPONSE_BYTES, undici_head};
use crate::auth::bearer_token;
use crate::body;
use crate::core::{Acquired, Core, Slot};
use crate::domain::{DomainHost, domain_host};
use crate::errors::{ApiError, Refusal};
use crate::handoff::{AnswerBody, CallBody, Handoff, IdleBody, Reason, error_response};
use crate::place::{Next, Placement};
use crate::pool::Outcome;
use crate::query::{forward_query, gateway_params};
use crate::records::SyncCall;
use crate::refused::{REFUSED_HEADER, refusal_of};
use crate::route::route;
use crate::state::{DomainLookup, Runtime};
use crate::tokens::TokenCheck;
use crate::upstream::{Upstream, body_failure_of, build_request};

/// The settings the fast path reads (from the `config` frame).
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_body_bytes: u64,
    pub sync_timeout: Duration,
    /// `None`: no bound between body chunks.
    pub stream_idle: Option<Duration>,
    /// Bound on reading the caller's body, from the call's start ([`BODY_READ_TIMEOUT_MS`]).
    pub body_read_timeout: Duration,
}

/// Bound on reading a caller's whole request: node:http's `requestTimeout` default (300 s), which bounds
/// the gateway's body read (serve.ts sets none). Past it the caller gets what node:http writes then, a bare
/// `408 Request Timeout` with `Connection: close`, and the connection is closed.
pub const BODY_READ_TIMEOUT_MS: u64 = 300_000;

/// What the fast path needs besides the call.
pub struct FastPath {
    pub core: Arc<Mutex<Core>>,
    pub upstream: Upstream,
    pub settings: Settings,
}

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The call as the data plane walks it.
struct Call<'a> {
    id: &'a str,
    start_ms: u64,
}

/// A call of a resolved app with no answer yet: if its future is dropped now (the caller went away while
/// its body was read, while it waited for a slot or for the app's head), the access line and the metrics
/// are written as the gateway writes them at the response's `close` then: status 404 (CallContext's
/// status until an answer is set), no code, mode `sync`, `aborted: true`. Disarmed where the call is
/// handed to Node (Node logs it) or gets an answer (its end logs it).
struct Unanswered<'a> {
    core: &'a Arc<Mutex<Core>>,
    id: &'a str,
    start_ms: u64,
    project: String,
    app: String,
    /// The path after the app (the record's `path`).
    path: String,
    armed: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let now = epoch_ms();
        let start_ms = self.start_ms as i64;
        let Ok(mut core) = self.core.lock() else {
            return;
        };
        let seconds = (now - start_ms).max(0) as f64 / 1000.0;
        core.metrics
            .call(&self.project, &self.app, "sync", NO_ANSWER_STATUS, seconds);
        // The gateway's record of it too (access.done: the status then, aborted), when admitted.
        core.record(&self.project, &self.app, now, || SyncCall {
            request_id: self.id.to_owned(),
            project_id: self.project.clone(),
            app_name: self.app.clone(),
            path: self.path.clone(),
            status: NO_ANSWER_STATUS,
            error_code: None,
            error_message: None,
            started_at_ms: start_ms.max(0) as u64,
            finished_at_ms: now.max(0) as u64,
            aborted: true,
            streamed: false,
        });
        let flush = core.log(&AccessLine {
            time_ms: now,
            request_id: self.id,
            method: "POST",
            status: NO_ANSWER_STATUS,
            code: None,
            duration_ms: duration_ms(start_ms, now),
            aborted: true,
            mode: "sync",
            project: Some(&self.project),
            app: Some(&self.app),
        });
        drop(core);
        if flush {
            schedule_flush(self.core.clone());
        }
    }
}

/// The status the gateway's access line has for a call with no answer set (CallContext's constructor).
const NO_ANSWER_STATUS: u16 = 404;

/// Where a call goes after the walk before dispatch.
enum Walked<'a> {
    Serve {
        parts: hyper::http::request::Parts,
        body: Bytes,
        gone: Unanswered<'a>,
    },
    HandOff {
        parts: hyper::http::request::Parts,
        body: CallBody,
        reason: Reason,
    },
    /// Answered here before dispatch: only node:http's own 408 (the body read's bound).
    Answer(Response<AnswerBody>),
}

impl FastPath {
    /// One call (not draining: server.rs answers that first).
    pub async fn call(
        &self,
        handoff: &Handoff,
        req: Request<Incoming>,
        id: &str,
        start_ms: u64,
    ) -> Response<AnswerBody> {
        let c = Call { id, start_ms };
        match self.walk(req, &c).await {
            Walked::HandOff { parts, body, reason } => {
                handoff.hand_off(parts, body, id, start_ms, reason, None).await
            }
            Walked::Serve {
                parts,
                body,
                mut gone,
            } => {
                let res = self.serve(handoff, &c, parts, body, &mut gone).await;
                gone.armed = false;
                res
            }
            Walked::Answer(res) => res,
        }
    }

    /// Design §2's order up to the dispatch.
    async fn walk<'a>(&'a self, req: Request<Incoming>, c: &Call<'a>) -> Walked<'a> {
        let (parts, incoming) = req.into_parts();
        let off = |parts, body, reason| Walked::HandOff { parts, body, reason };
        // Custom domain: a mapped (or unusual) host is Node's until step 7.
        let host = parts.headers.get(HOST).map(HeaderValue::as_bytes);
        let domain = match domain_host(host) {
            DomainHost::None => false,
            DomainHost::HandOff => true,
            DomainHost::Key(k) => {
                let core = self.core.lock().expect("core");
                !matches!(core.state.domain(&k), DomainLookup::NotFound)
            }
        };
        if domain {
            return off(parts, CallBody::stream(incoming), Reason::Domain);
        }
        // Route: anything but the plain run path is Node's (its 404/405/400 included).
        let routed = route(parts.method.as_str(), parts.uri.path());
        let target = match (routed.target, routed.refusal) {
            (Some(t), None) => t,
            _ => return off(parts, CallBody::stream(incoming), Reason::NotServed),
        };
        // Auth: a token Node verified for this project, still within its `until`.
        let token = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| bearer_token(v.as_bytes()));
        let Some(token) = token else {
            return off(parts, CallBody::stream(incoming), Reason::TokenMiss);
        };
        let now = epoch_ms();
        let (verified, app) = {
            let mut core = self.core.lock().expect("core");
            let verified =
                core.state.tokens().check(token, &target.project_id, now as u64) == TokenCheck::Verified;
            let app = core
                .state
                .app(&target.project_id, &target.app_name)
                .map(|a| (a.runtime, a.functions.as_ref().map(|f| f.contains(&target.path))));
            (verified, app)
        };
        if !verified {
            return off(parts, CallBody::stream(incoming), Reason::TokenMiss);
        }
        // The gateway's own query parameters.
        let (is_async, webhook) = gateway_params(parts.uri.query().unwrap_or(""));
        if is_async {
            return off(parts, CallBody::stream(incoming), Reason::Async);
        }
        if webhook {
            return off(parts, CallBody::stream(incoming), Reason::Webhook);
        }
        // The app, and a Cortex function it is known to export.
        let runtime = match app {
            None => return off(parts, CallBody::stream(incoming), Reason::UnknownApp),
            Some((Runtime::Cortex, _)) if target.path.is_empty() || target.path.contains(['/', '%']) => {
                return off(parts, CallBody::stream(incoming), Reason::UnknownApp);
            }
            Some((Runtime::Cortex, Some(false))) => {
                return off(parts, CallBody::stream(incoming), Reason::UnknownApp);
            }
            Some((r, _)) => r,
        };
        // The body, read whole up to the bound.
        let limit = self.settings.max_body_bytes;
        let declared = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit) {
            return off(parts, CallBody::stream(incoming), Reason::BodyOverLimit);
        }
        // From here the gateway has the app: a caller gone now gets its access line (Unanswered).
        let mut gone = Unanswered {
            core: &self.core,
            id: c.id,
            start_ms: c.start_ms,
            project: target.project_id,
            app: target.app_name,
            path: target.path,
            armed: true,
        };
        let mut incoming = incoming;
        let mut read: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0) as usize);
        let mut first: Option<Bytes> = None;
        let read_by = tokio::time::Instant::now() + self.settings.body_read_timeout;
        loop {
            let Ok(frame) = tokio::time::timeout_at(read_by, incoming.frame()).await else {
                let mut res = Response::new(AnswerBody::whole(Bytes::new()));
                *res.status_mut() = StatusCode::REQUEST_TIMEOUT;
                res.headers_mut()
                    .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                return Walked::Answer(res);
            };
            let frame = match frame {
                None => break,
                Some(Ok(f)) => f,
                // The caller's body broke: Node meets the same break (and answers as it does).
                Some(Err(_)) => {
                    gone.armed = false;
                    let got = take_read(first, read);
                    return off(parts, CallBody::prefixed(got, incoming), Reason::NotServed);
                }
            };
            let Ok(data) = frame.into_data() else { continue };
            let total = first.as_ref().map_or(0, Bytes::len) + read.len() + data.len();
            if first.is_none() && read.is_empty() {
                first = Some(data);
            } else {
                if let Some(f) = first.take() {
                    read.extend_from_slice(&f);
                }
                read.extend_from_slice(&data);
            }
            if total as u64 > limit {
                gone.armed = false;
                let got = take_read(first, read);
                return off(parts, CallBody::prefixed(got, incoming), Reason::BodyOverLimit);
            }
        }
        let body = take_read(first, read);
        if runtime == Runtime::Cortex && !body::accepts(&body) {
            gone.armed = false;
            return off(parts, CallBody::whole(body), Reason::RefusedCheck);
        }
        Walked::Serve { parts, body, gone }
    }

    /// Places the call on a replica (retrying refusals elsewhere) and answers with the app's answer.
    #[allow(clippy::too_many_arguments)]
    async fn serve(
        &self,
        handoff: &Handoff,
        c: &Call<'_>,
        parts: hyper::http::request::Parts,
        body: Bytes,
        gone: &mut Unanswered<'_>,
    ) -> Response<AnswerBody> {
        let (project, app) = (gone.project.clone(), gone.app.clone());
        let key = format!("{project}/{app}");
        let query = forward_query(parts.uri.query().unwrap_or(""));
        let mut placement = Placement::new();
        let mut requeue: Option<i64> = None;
        let call = self.core.lock().expect("core").call_id();
        let mut held = Held {
            core: &self.core,
            key,
            call,
            armed: false,
            waiting: None,
        };
        loop {
            let now = epoch_ms();
            let acquired = self
                .core
                .lock()
                .expect("core")
                .acquire(&held.key, call, requeue, now);
            let granted = match acquired {
                Acquired::Slot(s) => Ok(s),
                Acquired::Refused(error) => Err(Ok(error)),
                Acquired::HandOff(deadline) => Err(Err(deadline)),
                Acquired::Wait(rx) => {
                    // In the queue until a slot, a refusal or a hand-off comes (the pool's timers, run
                    // by core::drive, bound the wait); dropped here, Held takes the call out.
                    let waiting = held.waiting.insert(rx);
                    let got = waiting.await;
                    held.waiting = None;
                    match got {
                        Ok(Outcome::Granted { url, .. }) => Ok(Slot { call, url }),
                        Ok(Outcome::Refused { error, .. }) => Err(Ok(error)),
                        Ok(Outcome::HandOff { deadline, .. }) => Err(Err(deadline)),
                        // Not sent (not reached: every waiting call gets an outcome): Node decides.
                        Err(_) => Err(Err(requeue)),
                    }
                }
            };
            let slot = match granted {
                Ok(s) => {
                    held.armed = true;
                    s
                }
                // `queue_full`, `queue_timeout`.
                Err(Ok(error)) => {
                    return self.fail(
                        c,
                        &held.key,
                        call,
                        &project,
                        &app,
                        gone.path.clone(),
                        error,
                        false,
                    );
                }
                Err(Err(deadline)) => {
                    // No ready replica (now, or since the call started waiting): Node's pool holds it
                    // (cold start), no later than the deadline it had.
                    gone.armed = false;
                    let deadline = deadline.map(|d| d.max(0) as u64);
                    return handoff
                        .hand_off(
                            parts,
                            CallBody::whole(body),
                            c.id,
                            c.start_ms,
                            Reason::NoReplica,
                            deadline,
                        )
                        .await;
                }
            };
            let Some(req) = build_request(&slot.url, &gone.path, &query, &parts.headers, c.id, body.clone())
            else {
                // A URL or header the client cannot write: Node's undici decides.
                held.armed = false;
                gone.armed = false;
                self.core
                    .lock()
                    .expect("core")
                    .release(&held.key, call, epoch_ms());
                return handoff
                    .hand_off(
                        parts,
                        CallBody::whole(body),
                        c.id,
                        c.start_ms,
                        Reason::NotServed,
                        None,
                    )
                    .await;
            };
            let sent = tokio::time::timeout(self.settings.sync_timeout, self.upstream.send(req)).await;
            let (refusal, detail) = match sent {
                Err(_) => {
                    let f = crate::upstream_failure::UpstreamFailure::HeadTimeout;
                    held.armed = false;
                    return self.fail(
                        c,
                        &held.key,
                        call,
                        &project,
                        &app,
                        gone.path.clone(),
                        f.error(),
                        true,
                    );
                }
                Ok(Err(f)) if f.not_connected() => (Refusal::Unreachable, Some(f.reason())),
                Ok(Err(f)) => {
                    held.armed = false;
                    return self.fail(
                        c,
                        &held.key,
                        call,
                        &project,
                        &app,
                        gone.path.clone(),
                        f.error(),
                        true,
                    );
                }
                Ok(Ok(res)) => {
                    let refused = refusal_of(
                        res.status().as_u16(),
                        res.headers().get(REFUSED_HEADER).map(HeaderValue::as_bytes),
                    );
                    match refused {
                        None => return self.answer(c, held, project, app, &mut gone.path, res).await,
                        Some(r) => (r, None),
                    }
                }
            };
            let now = epoch_ms();
            // The slot goes back below (refuse), whatever comes next.
            held.armed = false;
            let mut core = self.core.lock().expect("core");
            core.metrics.refused(&project, &app, refusal.as_str());
            let settings = core.place;
            match placement.refused(&held.key, refusal, detail, now, &settings) {
                Next::Retry {
                    block_ms,
                    requeue_deadline,
                } => {
                    core.refuse(&held.key, call, block_ms, now);
                    requeue = Some(requeue_deadline);
                }
                Next::GiveUp { block_ms, error } => {
                    core.refuse(&held.key, call, block_ms, now);
                    drop(core);
                    return self.fail(
                        c,
                        &held.key,
                        call,
                        &project,
                        &app,
                        gone.path.clone(),
                        error,
                        false,
                    );
                }
            }
        }
    }

    /// An error after dispatch, as the gateway writes it; `release`: the call still holds its slot.
    #[allow(clippy::too_many_arguments)]
    fn fail(
        &self,
        c: &Call<'_>,
        key: &str,
        call: u64,
        project: &str,
        app: &str,
        path: String,
        error: ApiError,
        release: bool,
    ) -> Response<AnswerBody> {
        if release {
            self.core.lock().expect("core").release(key, call, epoch_ms());
        }
        let res = error_response(&error, c.id, false);
        let (res, body) = res.into_parts();
        let done = self.done(
            c,
            None,
            Names {
                project: project.to_owned(),
                app: app.to_owned(),
                path,
            },
            error.status,
            Some((error.code, error.message)),
            "sync",
        );
        Response::from_parts(res, body.on_end(done))
    }

    /// What runs when the answer is done with: the slot freed, the metrics, the access line and, when
    /// the rate bounds admit it, the sync-call record (built only then). `error`: the data plane's own
    /// error code and message, when it answered with one.
    fn done(
        &self,
        c: &Call<'_>,
        slot: Option<(String, u64)>,
        names: Names,
        status: u16,
        error: Option<(&'static str, String)>,
        mode: &'static str,
    ) -> crate::handoff::OnEnd {
        let core = self.core.clone();
        let id = c.id.to_owned();
        let start_ms = c.start_ms as i64;
        Box::new(move |ended| {
            let now = epoch_ms();
            let Names { project, app, path } = names;
            let flush = {
                let mut core = core.lock().expect("core");
                if let Some((key, call)) = &slot {
                    core.release(key, *call, now);
                }
                let seconds = (now - start_ms).max(0) as f64 / 1000.0;
                core.metrics.call(&project, &app, mode, status, seconds);
                core.record(&project, &app, now, || SyncCall {
                    request_id: id.clone(),
                    project_id: project.clone(),
                    app_name: app.clone(),
                    path: path.clone(),
                    status,
                    error_code: error.as_ref().map(|(code, _)| (*code).to_owned()),
                    error_message: error.as_ref().map(|(_, message)| message.clone()),
                    started_at_ms: start_ms.max(0) as u64,
                    finished_at_ms: now.max(0) as u64,
                    aborted: !ended,
                    streamed: mode == "stream",
                });
                core.log(&AccessLine {
                    time_ms: now,
                    request_id: &id,
                    method: "POST",
                    status,
                    code: error.as_ref().map(|(code, _)| *code),
                    duration_ms: duration_ms(start_ms, now),
                    aborted: !ended,
                    mode,
                    project: Some(&project),
                    app: Some(&app),
                })
            };
            if flush {
                schedule_flush(core);
            }
        })
    }

    /// The app's answer, head by answer.rs; read whole when small, else streamed with the idle bound.
    async fn answer(
        &self,
        c: &Call<'_>,
        mut held: Held<'_>,
        project: String,
        app: String,
        // The caller's Unanswered's: taken only once the answer is made (gone meanwhile, its record has it).
        path: &mut String,
        res: Response<Incoming>,
    ) -> Response<AnswerBody> {
        let (parts, incoming) = res.into_parts();
        let head = undici_head(parts.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
        let status = parts.status.as_u16();
        let idle = IdleBody::new(incoming, self.settings.stream_idle);
        let (a, body) = if answer::reads_whole(&head, SMALL_RESPONSE_BYTES) {
            let whole = match idle.collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    let f = body_failure_of(e.as_ref());
                    held.armed = false;
                    return self.fail(
                        c,
                        &held.key,
                        held.call,
                        &project,
                        &app,
                        path.clone(),
                        f.error(),
                        true,
                    );
                }
            };
            let a = answer::answer(status, &head, Some(whole.len()), c.id);
            (a, AnswerBody::whole(whole))
        } else {
            let a = answer::answer(status, &head, None, c.id);
            (a, AnswerBody::stream(idle))
        };
        let mode = if a.stream { "stream" } else { "sync" };
        let mut out = Response::new(if a.body == answer::Body::Empty {
            AnswerBody::whole(Bytes::new())
        } else {
            body
        });
        *out.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        let h = out.headers_mut();
        for (name, value) in &a.headers {
            let bytes: Vec<u8> = value.chars().map(|ch| ch as u32 as u8).collect();
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_bytes(&bytes),
            ) {
                h.append(n, v);
            }
        }
        // From here the answer's end gives the slot back (done, run when the body ends or is dropped).
        held.armed = false;
        let done = self.done(
            c,
            Some((std::mem::take(&mut held.key), held.call)),
            Names {
                project,
                app,
                path: std::mem::take(path),
            },
            status,
            None,
            mode,
        );
        let (parts, body) = out.into_parts();
        Response::from_parts(parts, body.on_end(done))
    }
}

/// The call's names as routed: its app's, and the function path after them (the record's `path`).
struct Names {
    project: String,
    app: String,
    path: String,
}

/// A slot a call holds while its future may still be dropped (the caller went away mid-call: hyper drops
/// the call's future, and the upstream call with it): given back then, as the gateway releases a lease
/// when the caller aborts. `armed` is cleared where the slot is given back or passed on (a refusal, an
/// error after dispatch, or the answer, whose end gives it back).
struct Held<'a> {
    core: &'a Mutex<Core>,
    key: String,
    call: u64,
    armed: bool,
    /// The call waits in the queue: dropped now, it leaves the queue (or gives back a slot just granted).
    waiting: Option<tokio::sync::oneshot::Receiver<Outcome>>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if !self.armed && self.waiting.is_none() {
            return;
        }
        // Never poisoned in practice; a poisoned lock is left alone rather than panicking in drop.
        if let Ok(mut core) = self.core.lock() {
            let now = epoch_ms();
            if let Some(mut rx) = self.waiting.take() {
                core.leave(&self.key, self.call, &mut rx, now);
            }
            if self.armed {
                core.release(&self.key, self.call, now);
            }
        }
    }
}

fn take_read(first: Option<Bytes>, read: Vec<u8>) -> Bytes {
    match first {
        Some(f) => f,
        None => Bytes::from(read),
    }
}

/// Writes the access lines of this turn once the turn's other tasks have run (one write per turn).
fn schedule_flush(core: Arc<Mutex<Core>>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        core.lock()
            .expect("core")
            .flush_log(&mut std::io::stdout().lock());
        return;
    };
    rt.spawn(async move {
        tokio::task::yield_now().await;
        core.lock()
            .expect("core")
            .flush_log(&mut std::io::stdout().lock());
    });
}
