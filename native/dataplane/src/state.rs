//! The state Node pushes (design §4): the app table with each app's pool settings, ready replicas and
//! start failures per pool key, the custom-domain map and the verified tokens — typed from the state
//! frames' JSON (`snapshot`, `app`, `replicas`, `failure`, `domain`, `token`), and applied in order.
//!
//! - A frame's fields are checked as design §4 fixes them: a missing or wrongly typed field is
//!   `frame_malformed` (fail closed), an extra one is ignored. message.rs reads these frames' `gen` and
//!   `seq` and keeps the rest as JSON ([`message::StateFrame`]); [`StateFrame::from_message`] types it
//!   here, so their bodies are defined once.
//! - A `snapshot` replaces everything and sets `gen`/`seq`. A delta applies when it carries the current
//!   `gen` and `seq` = last + 1. Anything else (a gap, a repeat, another `gen`, a delta before any
//!   snapshot) asks for a resync: the caller sends `resync` with the last applied `gen`/`seq`, and the
//!   deltas that follow are skipped until Node's snapshot comes.
//! - Look-ups for the fast path allocate nothing: an app and its replicas by project and app (or by
//!   pool key), a custom domain by host, lower-cased on the stack.
//!
//! No I/O.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::error::ProtocolError;
use crate::message::{self, MAX_SAFE_INTEGER, StateKind};
use crate::pick::PoolSettings;
use crate::tokens::{self, Token, TokenTable};

/// `Runtime` (src/apis/v1alpha1/types.ts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    Cortex,
    Custom,
}

/// An app as the gateway resolved it (`ResolvedApp`), with its pool's limits (`poolSettingsFor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    pub project_id: String,
    pub app_name: String,
    pub runtime: Runtime,
    /// The app as a whole (its Service): the one replica when no replicas are reported.
    pub upstream: String,
    pub ready: bool,
    pub grace_period_seconds: u64,
    /// The Cortex functions it exports, when known (`None`: do not pre-check).
    pub functions: Option<Vec<String>>,
    pub pool: PoolSettings,
}

/// One ready replica (`Replica`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub id: String,
    pub url: String,
}

/// Why an app cannot start (`StartFailure`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    pub reason: String,
    pub message: String,
}

/// The app a custom domain serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainTarget {
    pub project_id: String,
    pub app_name: String,
}

/// A `snapshot`'s content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub gen_id: String,
    pub seq: u64,
    pub apps: Vec<App>,
    pub replicas: Vec<(String, Vec<Replica>)>,
    pub failures: Vec<(String, StartFailure)>,
    pub domains: Vec<(String, DomainTarget)>,
    pub tokens: Vec<Token>,
}

/// One state frame, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateFrame {
    Snapshot(Snapshot),
    /// `app: null` removes the app.
    App {
        gen_id: String,
        seq: u64,
        key: String,
        app: Option<App>,
    },
    Replicas {
        gen_id: String,
        seq: u64,
        key: String,
        replicas: Vec<Replica>,
    },
    Failure {
        gen_id: String,
        seq: u64,
        key: String,
        failure: Option<StartFailure>,
    },
    /// `host` lower-cased; `target: null` removes the domain.
    Domain {
        gen_id: String,
        seq: u64,
        host: String,
        target: Option<DomainTarget>,
    },
    Token {
        gen_id: String,
        seq: u64,
        token: Token,
    },
}

// --- parsing ------------------------------------------------------------------------------------------

fn malformed(reason: String) -> ProtocolError {
    ProtocolError::FrameMalformed { reason }
}

/// Where a field is, for the error: `snapshot.apps[2].pool.capacity`.
fn at(path: &str, field: &str) -> String {
    format!("{path}.{field}")
}

fn field<'a>(obj: &'a Map<String, Value>, path: &str, name: &str) -> Result<&'a Value, ProtocolError> {
    obj.get(name)
        .ok_or_else(|| malformed(format!("no field {}", at(path, name))))
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ProtocolError> {
    v.as_object()
        .ok_or_else(|| malformed(format!("{path} is not an object")))
}

fn string(obj: &Map<String, Value>, path: &str, name: &str) -> Result<String, ProtocolError> {
    match field(obj, path, name)? {
        Value::String(s) => Ok(s.clone()),
        _ => Err(malformed(format!("{} is not a string", at(path, name)))),
    }
}

/// A non-negative integer Node writes exactly (at most [`MAX_SAFE_INTEGER`]).
fn uint(obj: &Map<String, Value>, path: &str, name: &str) -> Result<u64, ProtocolError> {
    field(obj, path, name)?
        .as_u64()
        .filter(|&n| n <= MAX_SAFE_INTEGER)
        .ok_or_else(|| {
            malformed(format!(
                "{} is not an integer in [0, {MAX_SAFE_INTEGER}]",
                at(path, name)
            ))
        })
}

fn uint32(obj: &Map<String, Value>, path: &str, name: &str) -> Result<u32, ProtocolError> {
    u32::try_from(uint(obj, path, name)?)
        .map_err(|_| malformed(format!("{} is over {}", at(path, name), u32::MAX)))
}

fn boolean(obj: &Map<String, Value>, path: &str, name: &str) -> Result<bool, ProtocolError> {
    field(obj, path, name)?
        .as_bool()
        .ok_or_else(|| malformed(format!("{} is not a boolean", at(path, name))))
}

fn array<'a>(obj: &'a Map<String, Value>, path: &str, name: &str) -> Result<&'a [Value], ProtocolError> {
    field(obj, path, name)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| malformed(format!("{} is not an array", at(path, name))))
}

/// A field that may be `null`.
fn nullable<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<Option<&'a Value>, ProtocolError> {
    Ok(Some(field(obj, path, name)?).filter(|v| !v.is_null()))
}

/// `poolKey`: `project/app`, both parts non-empty and without `/`.
fn pool_key(obj: &Map<String, Value>, path: &str) -> Result<String, ProtocolError> {
    let key = string(obj, path, "key")?;
    if split_key(&key).is_none() {
        return Err(malformed(format!(
            "{} {key:?} is not project/app",
            at(path, "key")
        )));
    }
    Ok(key)
}

fn split_key(key: &str) -> Option<(&str, &str)> {
    let (p, a) = key.split_once('/')?;
    (!p.is_empty() && !a.is_empty() && !a.contains('/')).then_some((p, a))
}

fn pool_settings(v: &Value, path: &str) -> Result<PoolSettings, ProtocolError> {
    let o = object(v, path)?;
    Ok(PoolSettings {
        capacity: uint32(o, path, "capacity")?,
        max_queue: uint(o, path, "maxQueue")?,
        queue_timeout_ms: uint(o, path, "queueTimeoutMs")?,
        cold_start_timeout_ms: uint(o, path, "coldStartTimeoutMs")?,
        retry_after_seconds: uint(o, path, "retryAfterSeconds")?,
    })
}

fn app(v: &Value, path: &str) -> Result<App, ProtocolError> {
    let o = object(v, path)?;
    let runtime = match string(o, path, "runtime")?.as_str() {
        "cortex" => Runtime::Cortex,
        "custom" => Runtime::Custom,
        other => {
            return Err(malformed(format!(
                "{} {other:?} is not cortex or custom",
                at(path, "runtime")
            )));
        }
    };
    let functions = match nullable(o, path, "functions")? {
        None => None,
        Some(Value::Array(names)) => Some(
            names
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    n.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| malformed(format!("{path}.functions[{k}] is not a string")))
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => {
            return Err(malformed(format!(
                "{} is not an array or null",
                at(path, "functions")
            )));
        }
    };
    Ok(App {
        project_id: string(o, path, "projectId")?,
        app_name: string(o, path, "appName")?,
        runtime,
        upstream: string(o, path, "upstream")?,
        ready: boolean(o, path, "ready")?,
        grace_period_seconds: uint(o, path, "gracePeriodSeconds")?,
        functions,
        pool: pool_settings(field(o, path, "pool")?, &at(path, "pool"))?,
    })
}

/// An app under `key`: its own project and name must make that key.
fn keyed_app(v: &Value, key: &str, path: &str) -> Result<App, ProtocolError> {
    let a = app(v, path)?;
    if split_key(key) != Some((a.project_id.as_str(), a.app_name.as_str())) {
        return Err(malformed(format!(
            "{path} is {}/{}, not the key {key:?}",
            a.project_id, a.app_name
        )));
    }
    Ok(a)
}

fn replicas(items: &[Value], path: &str) -> Result<Vec<Replica>, ProtocolError> {
    items
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let p = format!("{path}[{k}]");
            let o = object(r, &p)?;
            Ok(Replica {
                id: string(o, &p, "id")?,
                url: string(o, &p, "url")?,
            })
        })
        .collect()
}

fn start_failure(v: &Value, path: &str) -> Result<StartFailure, ProtocolError> {
    let o = object(v, path)?;
    Ok(StartFailure {
        reason: string(o, path, "reason")?,
        message: string(o, path, "message")?,
    })
}

fn domain_target(v: &Value, path: &str) -> Result<DomainTarget, ProtocolError> {
    let o = object(v, path)?;
    Ok(DomainTarget {
        project_id: string(o, path, "projectId")?,
        app_name: string(o, path, "appName")?,
    })
}

/// A domain's host: lower-cased by Node; one that is not is refused, since it could never be found.
fn host(obj: &Map<String, Value>, path: &str) -> Result<String, ProtocolError> {
    let h = string(obj, path, "host")?;
    if h.bytes().any(|c| c.is_ascii_uppercase()) {
        return Err(malformed(format!(
            "{} {h:?} is not lower-cased",
            at(path, "host")
        )));
    }
    Ok(h)
}

/// `Token`'s fields, in the object given (the `token` frame itself, or an entry of `snapshot.tokens`).
fn token(o: &Map<String, Value>, path: &str) -> Result<Token, ProtocolError> {
    let hex = string(o, path, "sha256")?;
    let sha256 = tokens::parse_hex_digest(&hex)
        .ok_or_else(|| malformed(format!("{} is not 64 lower-case hex digits", at(path, "sha256"))))?;
    Ok(Token {
        sha256,
        project_id: string(o, path, "projectId")?,
        until: uint(o, path, "until")?,
    })
}

impl StateFrame {
    /// A state frame as message.rs read it (`gen`, `seq` and the other fields as JSON), typed.
    pub fn from_message(f: &message::StateFrame) -> Result<Self, ProtocolError> {
        Self::from_body(f.kind, f.generation.clone(), f.seq, &f.body)
    }

    /// A state frame's fields other than `v`, `type`, `gen` and `seq`, typed.
    pub fn from_body(
        kind: StateKind,
        gen_id: String,
        seq: u64,
        o: &Map<String, Value>,
    ) -> Result<Self, ProtocolError> {
        let p = kind.type_name();
        Ok(match kind {
            StateKind::Snapshot => {
                let apps = array(o, p, "apps")?
                    .iter()
                    .enumerate()
                    .map(|(k, a)| app(a, &format!("snapshot.apps[{k}]")))
                    .collect::<Result<_, _>>()?;
                let mut reps = Vec::new();
                for (k, r) in array(o, p, "replicas")?.iter().enumerate() {
                    let path = format!("snapshot.replicas[{k}]");
                    let ro = object(r, &path)?;
                    reps.push((
                        pool_key(ro, &path)?,
                        replicas(array(ro, &path, "replicas")?, &at(&path, "replicas"))?,
                    ));
                }
                let mut failures = Vec::new();
                for (k, f) in array(o, p, "failures")?.iter().enumerate() {
                    let path = format!("snapshot.failures[{k}]");
                    let fo = object(f, &path)?;
                    failures.push((
                        pool_key(fo, &path)?,
                        start_failure(field(fo, &path, "failure")?, &at(&path, "failure"))?,
                    ));
                }
                let mut domains = Vec::new();
                for (k, d) in array(o, p, "domains")?.iter().enumerate() {
                    let path = format!("snapshot.domains[{k}]");
                    let dobj = object(d, &path)?;
                    domains.push((host(dobj, &path)?, domain_target(d, &path)?));
                }
                let toks = array(o, p, "tokens")?
                    .iter()
                    .enumerate()
                    .map(|(k, t)| {
                        let path = format!("snapshot.tokens[{k}]");
                        token(object(t, &path)?, &path)
                    })
                    .collect::<Result<_, _>>()?;
                StateFrame::Snapshot(Snapshot {
                    gen_id,
                    seq,
                    apps,
                    replicas: reps,
                    failures,
                    domains,
                    tokens: toks,
                })
            }
            StateKind::App => {
                let key = pool_key(o, p)?;
                let app = match nullable(o, p, "app")? {
                    None => None,
                    Some(v) => Some(keyed_app(v, &key, "app.app")?),
                };
                StateFrame::App {
                    gen_id,
                    seq,
                    key,
                    app,
                }
            }
            StateKind::Replicas => StateFrame::Replicas {
                gen_id,
                seq,
                key: pool_key(o, p)?,
                replicas: replicas(array(o, p, "replicas")?, "replicas.replicas")?,
            },
            StateKind::Failure => StateFrame::Failure {
                gen_id,
                seq,
                key: pool_key(o, p)?,
                failure: nullable(o, p, "failure")?
                    .map(|f| start_failure(f, "failure.failure"))
                    .transpose()?,
            },
            StateKind::Domain => StateFrame::Domain {
                gen_id,
                seq,
                host: host(o, p)?,
                target: nullable(o, p, "target")?
                    .map(|t| domain_target(t, "domain.target"))
                    .transpose()?,
            },
            StateKind::Token => StateFrame::Token {
                gen_id,
                seq,
                token: token(o, p)?,
            },
        })
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            StateFrame::Snapshot(_) => "snapshot",
            StateFrame::App { .. } => "app",
            StateFrame::Replicas { .. } => "replicas",
            StateFrame::Failure { .. } => "failure",
            StateFrame::Domain { .. } => "domain",
            StateFrame::Token { .. } => "token",
        }
    }

    /// The frame's `gen` and `seq`.
    pub fn position(&self) -> (&str, u64) {
        match self {
            StateFrame::Snapshot(s) => (&s.gen_id, s.seq),
            StateFrame::App { gen_id, seq, .. }
            | StateFrame::Replicas { gen_id, seq, .. }
            | StateFrame::Failure { gen_id, seq, .. }
            | StateFrame::Domain { gen_id, seq, .. }
            | StateFrame::Token { gen_id, seq, .. } => (gen_id, *seq),
        }
    }
}

// --- the state and its apply --------------------------------------------------------------------------

/// What one pool key holds.
#[derive(Debug, Default)]
struct Pool {
    app: Option<App>,
    replicas: Vec<Replica>,
    failure: Option<StartFailure>,
}

impl Pool {
    fn is_empty(&self) -> bool {
        self.app.is_none() && self.replicas.is_empty() && self.failure.is_none()
    }
}

/// What applying a frame did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The state moved to this frame's `seq`.
    Applied,
    /// The frame does not follow the state (a gap, a repeat, another `gen`, no snapshot yet): nothing
    /// applied; send `resync` with this `gen`/`seq` (the last applied; `""`/0 before any snapshot).
    ResyncNeeded { gen_id: String, seq: u64 },
    /// A resync was already asked: deltas are skipped until the snapshot comes.
    AwaitingSnapshot,
}

/// A custom domain's look-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainLookup<'a> {
    Found(&'a DomainTarget),
    /// Not a custom domain: route by the path.
    NotFound,
    /// A host this look-up does not lower-case as JavaScript's `toLowerCase` would (non-ASCII), or
    /// longer than [`MAX_HOST_BYTES`]: hand the call to Node (reason `domain`).
    Unsure,
}

/// The longest host looked up (lower-cased on the stack); DNS names are at most 253.
pub const MAX_HOST_BYTES: usize = 255;

/// The state Node pushed.
#[derive(Debug)]
pub struct State {
    /// `None` until the first snapshot.
    gen_id: Option<String>,
    seq: u64,
    awaiting_snapshot: bool,
    /// project → app → what its pool key holds.
    pools: HashMap<String, HashMap<String, Pool>>,
    domains: HashMap<String, DomainTarget>,
    tokens: TokenTable,
}

impl State {
    /// Empty, before any snapshot; tokens bounded by `tokenCacheMaxEntries`.
    pub fn new(token_cache_max_entries: usize) -> Self {
        State {
            gen_id: None,
            seq: 0,
            awaiting_snapshot: false,
            pools: HashMap::new(),
            domains: HashMap::new(),
            tokens: TokenTable::new(token_cache_max_entries),
        }
    }

    /// The last applied `gen` and `seq` (what `ready` and `resync` carry); `None` before any snapshot.
    pub fn position(&self) -> Option<(&str, u64)> {
        self.gen_id.as_deref().map(|g| (g, self.seq))
    }

    /// Applies one state frame in channel order.
    pub fn apply(&mut self, frame: StateFrame) -> Applied {
        if let StateFrame::Snapshot(s) = frame {
            self.replace(s);
            return Applied::Applied;
        }
        let (gen_id, seq) = frame.position();
        let follows = self.gen_id.as_deref() == Some(gen_id) && Some(seq) == self.seq.checked_add(1);
        if self.awaiting_snapshot {
            return Applied::AwaitingSnapshot;
        }
        if !follows {
            self.awaiting_snapshot = true;
            return Applied::ResyncNeeded {
                gen_id: self.gen_id.clone().unwrap_or_default(),
                seq: self.seq,
            };
        }
        self.seq = seq;
        match frame {
            StateFrame::Snapshot(_) => unreachable!("applied above"),
            StateFrame::App { key, app, .. } => self.pool_mut(&key, |p| p.app = app),
            StateFrame::Replicas { key, replicas, .. } => self.pool_mut(&key, |p| p.replicas = replicas),
            StateFrame::Failure { key, failure, .. } => self.pool_mut(&key, |p| p.failure = failure),
            StateFrame::Domain { host, target, .. } => {
                match target {
                    Some(t) => self.domains.insert(host, t),
                    None => self.domains.remove(&host),
                };
            }
            StateFrame::Token { token, .. } => self.tokens.remember(token),
        }
        Applied::Applied
    }

    fn replace(&mut self, s: Snapshot) {
        self.gen_id = Some(s.gen_id);
        self.seq = s.seq;
        self.awaiting_snapshot = false;
        self.pools.clear();
        self.domains.clear();
        self.tokens.clear();
        for a in s.apps {
            let key = format!("{}/{}", a.project_id, a.app_name);
            self.pool_mut(&key, |p| p.app = Some(a));
        }
        for (key, r) in s.replicas {
            self.pool_mut(&key, |p| p.replicas = r);
        }
        for (key, f) in s.failures {
            self.pool_mut(&key, |p| p.failure = Some(f));
        }
        self.domains.extend(s.domains);
        for t in s.tokens {
            self.tokens.remember(t);
        }
    }

    /// Changes a key's pool, dropping it (and its project) once it holds nothing.
    fn pool_mut(&mut self, key: &str, change: impl FnOnce(&mut Pool)) {
        let Some((project, app)) = split_key(key) else {
            return; // the parse refuses such keys; an app's own names cannot make one
        };
        let apps = self.pools.entry(project.to_owned()).or_default();
        let pool = apps.entry(app.to_owned()).or_default();
        change(pool);
        if pool.is_empty() {
            apps.remove(app);
            if apps.is_empty() {
                self.pools.remove(project);
            }
        }
    }

    fn pool(&self, project: &str, app: &str) -> Option<&Pool> {
        self.pools.get(project)?.get(app)
    }

    /// The app, when the table has it.
    pub fn app(&self, project: &str, app: &str) -> Option<&App> {
        self.pool(project, app)?.app.as_ref()
    }

    /// The app's ready replicas (none known: empty).
    pub fn replicas(&self, project: &str, app: &str) -> &[Replica] {
        self.pool(project, app).map_or(&[], |p| &p.replicas)
    }

    /// The replicas of a pool key (`project/app`).
    pub fn replicas_by_key(&self, key: &str) -> &[Replica] {
        split_key(key).map_or(&[], |(p, a)| self.replicas(p, a))
    }

    /// The app's start failure, while it cannot start.
    pub fn start_failure(&self, project: &str, app: &str) -> Option<&StartFailure> {
        self.pool(project, app)?.failure.as_ref()
    }

    /// The custom domain of a Host's hostname, lower-cased (ASCII) as the map's hosts are.
    pub fn domain(&self, hostname: &str) -> DomainLookup<'_> {
        let found = |h: &str| {
            self.domains
                .get(h)
                .map_or(DomainLookup::NotFound, DomainLookup::Found)
        };
        if !hostname.bytes().any(|c| c.is_ascii_uppercase() || !c.is_ascii()) {
            return found(hostname);
        }
        if !hostname.is_ascii() || hostname.len() > MAX_HOST_BYTES {
            return DomainLookup::Unsure;
        }
        let mut buf = [0u8; MAX_HOST_BYTES];
        let lower = &mut buf[..hostname.len()];
        lower.copy_from_slice(hostname.as_bytes());
        lower.make_ascii_lowercase();
        found(std::str::from_utf8(lower).expect("ASCII"))
    }

    /// The verified tokens (checked by the fast path's auth step; mutable: an expired hit is forgotten).
    pub fn tokens(&mut self) -> &mut TokenTable {
        &mut self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::tokens::{TokenCheck, digest};
    use serde_json::json;

    const NOW: u64 = 1_700_000_000_000;

    fn hex(d: &[u8]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn app_json(project: &str, name: &str) -> Value {
        json!({
            "projectId": project, "appName": name, "runtime": "cortex", "upstream": format!("http://{name}.{project}:8080"),
            "ready": true, "gracePeriodSeconds": 30, "functions": ["greet", "sum"],
            "pool": {"capacity": 8, "maxQueue": 64, "queueTimeoutMs": 30000, "coldStartTimeoutMs": 60000, "retryAfterSeconds": 1}
        })
    }

    fn snapshot_json(gen_id: &str, seq: u64) -> Value {
        json!({
            "v": 1, "type": "snapshot", "gen": gen_id, "seq": seq,
            "apps": [app_json("acme", "hello"), app_json("acme", "bye")],
            "replicas": [{"key": "acme/hello", "replicas": [{"id": "10.0.0.1:8080", "url": "http://10.0.0.1:8080"}]}],
            "failures": [{"key": "acme/bye", "failure": {"reason": "ImagePullBackOff", "message": "no image"}}],
            "domains": [{"host": "shop.example.com", "projectId": "acme", "appName": "hello"}],
            "tokens": [{"sha256": hex(&digest(b"tok-acme")), "projectId": "acme", "until": NOW + 60_000}],
            "extra": "ignored"
        })
    }

    /// A frame's JSON (without `v`) through message.rs, as the channel reads it, then typed here.
    fn parse(v: &Value) -> Result<StateFrame, ProtocolError> {
        let mut v = v.clone();
        v["v"] = json!(1);
        match Message::from_payload(&serde_json::to_vec(&v).unwrap())? {
            Message::State(f) => StateFrame::from_message(&f),
            other => panic!("not a state frame: {other:?}"),
        }
    }

    fn frame(v: Value) -> StateFrame {
        parse(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
    }

    fn loaded() -> State {
        let mut s = State::new(100);
        assert_eq!(s.apply(frame(snapshot_json("g1", 10))), Applied::Applied);
        s
    }

    #[test]
    fn a_snapshot_is_typed_and_looked_up() {
        let mut s = loaded();
        assert_eq!(s.position(), Some(("g1", 10)));
        let a = s.app("acme", "hello").unwrap();
        assert_eq!(a.runtime, Runtime::Cortex);
        assert_eq!(a.upstream, "http://hello.acme:8080");
        assert_eq!(
            a.functions.as_deref(),
            Some(&["greet".to_owned(), "sum".to_owned()][..])
        );
        assert_eq!(
            a.pool,
            PoolSettings {
                capacity: 8,
                max_queue: 64,
                queue_timeout_ms: 30_000,
                cold_start_timeout_ms: 60_000,
                retry_after_seconds: 1
            }
        );
        assert_eq!(s.app("acme", "nope"), None);
        assert_eq!(s.app("other", "hello"), None);
        assert_eq!(s.replicas("acme", "hello")[0].url, "http://10.0.0.1:8080");
        assert_eq!(s.replicas_by_key("acme/hello").len(), 1);
        assert!(s.replicas("acme", "bye").is_empty());
        for bad in ["acme", "acme/", "/hello", "acme/hello/x", ""] {
            assert!(s.replicas_by_key(bad).is_empty(), "{bad}");
        }
        assert_eq!(s.start_failure("acme", "bye").unwrap().reason, "ImagePullBackOff");
        assert_eq!(s.start_failure("acme", "hello"), None);
        assert_eq!(s.tokens().check(b"tok-acme", "acme", NOW), TokenCheck::Verified);
    }

    #[test]
    fn domains_are_found_by_lower_cased_host() {
        let s = loaded();
        let hello = DomainTarget {
            project_id: "acme".into(),
            app_name: "hello".into(),
        };
        let long = "a".repeat(MAX_HOST_BYTES + 1);
        let long_upper = "A".repeat(MAX_HOST_BYTES + 1);
        let cases: [(&str, DomainLookup); 8] = [
            ("shop.example.com", DomainLookup::Found(&hello)),
            ("SHOP.Example.COM", DomainLookup::Found(&hello)),
            ("shop.example.co", DomainLookup::NotFound),
            ("", DomainLookup::NotFound),
            ("shop.example.com.", DomainLookup::NotFound),
            ("shöp.example.com", DomainLookup::Unsure),
            // Already lower-case: looked up as it is, however long; else lower-cased on the stack.
            (&long, DomainLookup::NotFound),
            (&long_upper, DomainLookup::Unsure),
        ];
        for (host, want) in cases {
            assert_eq!(s.domain(host), want, "{host}");
        }
    }

    #[test]
    fn deltas_apply_in_sequence() {
        let mut s = loaded();
        let steps = [
            json!({"type": "replicas", "gen": "g1", "seq": 11, "key": "acme/bye", "replicas": [{"id": "r1", "url": "http://r1"}, {"id": "r2", "url": "http://r2"}]}),
            json!({"type": "failure", "gen": "g1", "seq": 12, "key": "acme/bye", "failure": null}),
            json!({"type": "app", "gen": "g1", "seq": 13, "key": "zed/new", "app": app_json("zed", "new")}),
            json!({"type": "domain", "gen": "g1", "seq": 14, "host": "new.example.com", "target": {"projectId": "zed", "appName": "new"}}),
            json!({"type": "domain", "gen": "g1", "seq": 15, "host": "shop.example.com", "target": null}),
            json!({"type": "token", "gen": "g1", "seq": 16, "sha256": hex(&digest(b"tok-zed")), "projectId": "zed", "until": NOW + 1}),
            json!({"type": "app", "gen": "g1", "seq": 17, "key": "acme/hello", "app": null}),
            json!({"type": "replicas", "gen": "g1", "seq": 18, "key": "acme/hello", "replicas": []}),
        ];
        for step in steps {
            assert_eq!(s.apply(frame(step.clone())), Applied::Applied, "{step}");
        }
        assert_eq!(s.position(), Some(("g1", 18)));
        assert_eq!(s.replicas_by_key("acme/bye").len(), 2);
        assert_eq!(s.start_failure("acme", "bye"), None);
        assert_eq!(s.app("zed", "new").unwrap().app_name, "new");
        assert!(matches!(s.domain("new.example.com"), DomainLookup::Found(t) if t.app_name == "new"));
        assert_eq!(s.domain("shop.example.com"), DomainLookup::NotFound);
        assert_eq!(s.tokens().check(b"tok-zed", "zed", NOW), TokenCheck::Verified);
        assert_eq!(s.app("acme", "hello"), None);
        assert!(s.replicas("acme", "hello").is_empty());
        // An emptied key leaves nothing behind.
        assert!(!s.pools["acme"].contains_key("hello"));
    }

    #[test]
    fn out_of_sequence_asks_for_a_resync_once() {
        // (frame's gen, frame's seq) after a snapshot at g1/10: each must ask for a resync at g1/10.
        let cases: [(&str, u64); 5] = [("g1", 12), ("g1", 10), ("g1", 9), ("g2", 11), ("g0", 11)];
        for (gen_id, seq) in cases {
            let mut s = loaded();
            let delta = |g: &str, q: u64| {
                frame(
                    json!({"type": "failure", "gen": g, "seq": q, "key": "acme/hello", "failure": {"reason": "CrashLoopBackOff", "message": "m"}}),
                )
            };
            assert_eq!(
                s.apply(delta(gen_id, seq)),
                Applied::ResyncNeeded {
                    gen_id: "g1".into(),
                    seq: 10
                },
                "{gen_id}/{seq}"
            );
            assert_eq!(s.start_failure("acme", "hello"), None, "{gen_id}/{seq}: applied");
            // Until the snapshot, deltas are skipped, even one that would have followed.
            assert_eq!(s.apply(delta("g1", 11)), Applied::AwaitingSnapshot);
            assert_eq!(s.position(), Some(("g1", 10)));
            // Node's answer replaces everything, and the next delta follows it.
            let mut snap = snapshot_json("g1", 20);
            snap["apps"] = json!([app_json("acme", "hello")]);
            snap["failures"] = json!([]);
            assert_eq!(s.apply(frame(snap)), Applied::Applied);
            assert_eq!(s.app("acme", "bye"), None);
            assert_eq!(s.apply(delta("g1", 21)), Applied::Applied);
            assert_eq!(
                s.start_failure("acme", "hello").unwrap().reason,
                "CrashLoopBackOff"
            );
        }
    }

    #[test]
    fn a_delta_before_any_snapshot_asks_for_one() {
        let mut s = State::new(10);
        assert_eq!(s.position(), None);
        let d = frame(json!({"type": "domain", "gen": "g1", "seq": 1, "host": "a.b", "target": null}));
        assert_eq!(
            s.apply(d),
            Applied::ResyncNeeded {
                gen_id: String::new(),
                seq: 0
            }
        );
    }

    #[test]
    fn a_new_gen_snapshot_replaces_everything() {
        let mut s = loaded();
        let snap = json!({"type": "snapshot", "gen": "g2", "seq": 0, "apps": [], "replicas": [], "failures": [], "domains": [], "tokens": []});
        assert_eq!(s.apply(frame(snap)), Applied::Applied);
        assert_eq!(s.position(), Some(("g2", 0)));
        assert_eq!(s.app("acme", "hello"), None);
        assert!(s.replicas("acme", "hello").is_empty());
        assert_eq!(s.start_failure("acme", "bye"), None);
        assert_eq!(s.domain("shop.example.com"), DomainLookup::NotFound);
        assert_eq!(s.tokens().check(b"tok-acme", "acme", NOW), TokenCheck::Miss);
    }

    #[test]
    fn bad_fields_are_frame_malformed() {
        // (a change to a good frame, the error's path)
        let snap = || snapshot_json("g1", 1);
        let mut cases: Vec<(Value, &str)> = Vec::new();
        let mut with = |f: &dyn Fn(&mut Value), path: &'static str| {
            let mut v = snap();
            f(&mut v);
            cases.push((v, path));
        };
        with(&|v| drop(v.as_object_mut().unwrap().remove("gen")), "\"gen\"");
        with(&|v| v["gen"] = json!(1), "\"gen\"");
        with(&|v| v["seq"] = json!(-1), "\"seq\"");
        with(&|v| v["seq"] = json!(1.5), "\"seq\"");
        with(
            &|v| v["tokens"][0]["until"] = json!(MAX_SAFE_INTEGER + 1),
            "snapshot.tokens[0].until",
        );
        with(
            &|v| v["apps"][0]["pool"]["maxQueue"] = json!(u64::MAX),
            "snapshot.apps[0].pool.maxQueue",
        );
        with(&|v| v["apps"] = json!({}), "snapshot.apps");
        with(&|v| v["apps"][0] = json!("x"), "snapshot.apps[0]");
        with(
            &|v| v["apps"][1]["runtime"] = json!("python"),
            "snapshot.apps[1].runtime",
        );
        with(
            &|v| v["apps"][0]["ready"] = json!("true"),
            "snapshot.apps[0].ready",
        );
        with(
            &|v| v["apps"][0]["functions"] = json!("greet"),
            "snapshot.apps[0].functions",
        );
        with(
            &|v| v["apps"][0]["functions"] = json!([1]),
            "snapshot.apps[0].functions[0]",
        );
        with(
            &|v| drop(v["apps"][0].as_object_mut().unwrap().remove("functions")),
            "snapshot.apps[0].functions",
        );
        with(
            &|v| v["apps"][0]["pool"]["capacity"] = json!(1u64 << 32),
            "snapshot.apps[0].pool.capacity",
        );
        with(
            &|v| drop(v["apps"][0]["pool"].as_object_mut().unwrap().remove("maxQueue")),
            "snapshot.apps[0].pool.maxQueue",
        );
        with(
            &|v| v["apps"][0]["gracePeriodSeconds"] = json!(null),
            "snapshot.apps[0].gracePeriodSeconds",
        );
        with(
            &|v| v["replicas"][0]["key"] = json!("acme"),
            "snapshot.replicas[0].key",
        );
        with(
            &|v| v["replicas"][0]["key"] = json!("a/b/c"),
            "snapshot.replicas[0].key",
        );
        with(
            &|v| v["replicas"][0]["replicas"][0]["url"] = json!(null),
            "snapshot.replicas[0].replicas[0].url",
        );
        with(
            &|v| v["failures"][0]["failure"] = json!(null),
            "snapshot.failures[0].failure",
        );
        with(
            &|v| {
                drop(
                    v["failures"][0]["failure"]
                        .as_object_mut()
                        .unwrap()
                        .remove("message"),
                )
            },
            "snapshot.failures[0].failure.message",
        );
        with(
            &|v| v["domains"][0]["host"] = json!("Shop.example.com"),
            "snapshot.domains[0].host",
        );
        with(
            &|v| drop(v["domains"][0].as_object_mut().unwrap().remove("appName")),
            "snapshot.domains[0].appName",
        );
        with(
            &|v| v["tokens"][0]["sha256"] = json!("ABC"),
            "snapshot.tokens[0].sha256",
        );
        with(
            &|v| v["tokens"][0]["until"] = json!("soon"),
            "snapshot.tokens[0].until",
        );
        with(
            &|v| drop(v.as_object_mut().unwrap().remove("tokens")),
            "snapshot.tokens",
        );
        let deltas = [
            (
                json!({"type": "app", "gen": "g", "seq": 1, "key": "acme/other", "app": app_json("acme", "hello")}),
                "app.app",
            ),
            (
                json!({"type": "app", "gen": "g", "seq": 1, "key": "acme/hello"}),
                "app.app",
            ),
            (
                json!({"type": "replicas", "gen": "g", "seq": 1, "key": "acme/hello", "replicas": null}),
                "replicas.replicas",
            ),
            (
                json!({"type": "failure", "gen": "g", "seq": 1, "key": "acme/hello", "failure": {"reason": 1, "message": "m"}}),
                "failure.failure.reason",
            ),
            (
                json!({"type": "domain", "gen": "g", "seq": 1, "host": "a.b", "target": {"projectId": "p"}}),
                "domain.target.appName",
            ),
            (
                json!({"type": "domain", "gen": "g", "seq": 1, "target": null}),
                "domain.host",
            ),
            (
                json!({"type": "token", "gen": "g", "seq": 1, "sha256": "00", "projectId": "p", "until": 1}),
                "token.sha256",
            ),
            (
                json!({"type": "token", "gen": "g", "sha256": hex(&[0; 32]), "projectId": "p", "until": 1}),
                "\"seq\"",
            ),
        ];
        cases.extend(deltas);
        for (v, path) in cases {
            let err = parse(&v).expect_err(&v.to_string());
            assert_eq!(err.code(), "frame_malformed", "{v}");
            assert!(err.to_string().contains(path), "{err} should name {path}");
        }
        // An extra field is ignored; null where null is allowed is taken.
        assert!(parse(&snap()).is_ok());
        let mut v = snap();
        v["tokens"][0]["until"] = json!(MAX_SAFE_INTEGER);
        assert!(parse(&v).is_ok(), "2^53 - 1 is exact in Node");
        let mut v = snap();
        v["apps"][0]["functions"] = json!(null);
        assert_eq!(
            match parse(&v).unwrap() {
                StateFrame::Snapshot(s) => s.apps[0].functions.clone(),
                _ => unreachable!(),
            },
            None
        );
    }

    #[test]
    fn every_state_kind_is_typed() {
        for kind in StateKind::ALL {
            // Each kind reads its own fields: an empty body is refused, naming the first one.
            let err = StateFrame::from_body(kind, "g".into(), 1, &Map::new()).unwrap_err();
            assert_eq!(err.code(), "frame_malformed", "{kind:?}");
            assert!(err.to_string().contains(kind.type_name()), "{err}");
        }
    }
}
