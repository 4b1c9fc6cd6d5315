//! apphost's native data plane (docs/design/native-data-plane.md): the control channel to the gateway's
//! Node process (framing, messages), the server on the gateway port that hands every call to Node (step
//! 4: run.rs, server.rs, handoff.rs), and the pure modules of step 2, held to the gateway's vectors.

pub mod access_log;
pub mod answer;
pub mod auth;
pub mod body;
pub mod channel;
pub mod config;
pub mod core;
pub mod domain;
pub mod error;
pub mod errors;
pub mod fastpath;
pub mod frame;
pub mod handoff;
pub mod handover;
pub mod headers;
pub mod message;
pub mod meter;
pub mod metrics;
pub mod pick;
pub mod place;
pub mod pool;
pub mod query;
pub mod records;
pub mod refused;
pub mod reports;
pub mod route;
pub mod run;
pub mod server;
pub mod state;
pub mod tokens;
pub mod upstream;
pub mod upstream_failure;

/// The build this binary reports in `hello` and `--version`: `make images` sets APPHOST_DATAPLANE_BUILD
/// to `src-` and a hash of the crate's sources (hack/images/build.ts), the Dockerfile to its
/// DATAPLANE_BUILD argument; a developer's build says `dev`.
pub const BUILD: &str = match option_env!("APPHOST_DATAPLANE_BUILD") {
    Some(b) => b,
    None => "dev",
};
