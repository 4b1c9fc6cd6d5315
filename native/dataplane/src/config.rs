//! The `config` frame (design §4, "The v1 frames, field by field"): the settings Node parsed from its
//! env (`gatewaySettings`, `balancerSettings` in src/gateway/config.ts) and sends as the first frame
//! after a matching `hello`. The data plane reads none of these from its own env; the one exception is
//! `APPHOST_GATEWAY_DATA_PLANE_THREADS`, which main.rs reads before the runtime exists (main.rs says why).
//!
//! Every field is required and typed: a missing or wrongly typed one is `frame_malformed` (fail closed),
//! an extra one is ignored. Field names are the TS types' camelCase.

use serde_json::{Map, Value, json};

use crate::error::ProtocolError;

/// Where the data plane listens: `APPHOST_GATEWAY_HOST` / `APPHOST_GATEWAY_PORT`.
#[derive(Debug, Clone, PartialEq)]
pub struct Listen {
    pub host: String,
    /// 0: any free port (tests); the port bound is not reported back in v1.
    pub port: u16,
}

/// `gateway: {...}`: `GatewaySettings` plus the hand-off bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewaySettings {
    pub max_body_bytes: u64,
    pub sync_timeout_ms: u64,
    pub stream_idle_timeout_ms: u64,
    pub retry_after_seconds: u64,
    pub drain_timeout_ms: u64,
    pub connection_handover_ms: u64,
    pub cold_start_timeout_ms: u64,
    /// `HANDOFF_MARGIN_MS`: added to the cold-start and sync bounds on Node's answer head (design §3).
    pub handoff_margin_ms: u64,
    pub sync_records_per_app_per_second: f64,
    pub sync_records_per_second: f64,
}

/// `APPHOST_GATEWAY_ROUTING`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    Endpoints,
    Service,
}

/// `balancer: {...}`: `BalancerSettings` (src/gateway/balancer/balancer.ts).
#[derive(Debug, Clone, PartialEq)]
pub struct BalancerSettings {
    pub queue_timeout_ms: u64,
    pub queue_depth_factor: u64,
    pub max_queue_per_app: u64,
    pub capacity_block_ms: u64,
    pub unreachable_block_ms: u64,
    pub max_retries: u64,
    pub retry_after_seconds: u64,
    pub routing: Routing,
}

/// pino's level names (`APPHOST_LOG_LEVEL`).
pub const LOG_LEVELS: [&str; 7] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub listen: Listen,
    /// `$APPHOST_GATEWAY_DATA_PLANE_DIR/handoff.sock`: Node's hand-off server (design §3).
    pub handoff_socket: String,
    pub gateway: GatewaySettings,
    pub balancer: BalancerSettings,
    pub token_cache_max_entries: u64,
    pub load_report_interval_ms: u64,
    pub log_level: String,
}

impl Config {
    /// Bound on Node's answer head to a hand-off: cold start + sync + margin (design §3).
    pub fn handoff_head_ms(&self) -> u64 {
        let g = &self.gateway;
        g.cold_start_timeout_ms
            .saturating_add(g.sync_timeout_ms)
            .saturating_add(g.handoff_margin_ms)
    }

    /// The `config` frame's fields (without `v` and `type`).
    pub fn from_fields(obj: &Map<String, Value>) -> Result<Self, ProtocolError> {
        let listen = object(obj, "config", "listen")?;
        let port = uint(listen, "config.listen", "port")?;
        let port = u16::try_from(port)
            .map_err(|_| malformed(format!("config.listen.port {port} is not a TCP port")))?;
        let host = string(listen, "config.listen", "host")?;
        if host.is_empty() {
            return Err(malformed("config.listen.host is empty".to_owned()));
        }
        let handoff_socket = string(obj, "config", "handoffSocket")?;
        if !handoff_socket.starts_with('/') {
            return Err(malformed(
                "config.handoffSocket is not an absolute path".to_owned(),
            ));
        }
        let g = object(obj, "config", "gateway")?;
        let gp = "config.gateway";
        let b = object(obj, "config", "balancer")?;
        let bp = "config.balancer";
        let routing = match string(b, bp, "routing")?.as_str() {
            "endpoints" => Routing::Endpoints,
            "service" => Routing::Service,
            other => {
                return Err(malformed(format!(
                    "config.balancer.routing {other:?} is not endpoints or service"
                )));
            }
        };
        let log_level = string(obj, "config", "logLevel")?;
        if !LOG_LEVELS.contains(&log_level.as_str()) {
            return Err(malformed(format!(
                "config.logLevel {log_level:?} is not one of pino's levels"
            )));
        }
        Ok(Config {
            listen: Listen { host, port },
            handoff_socket,
            gateway: GatewaySettings {
                max_body_bytes: uint(g, gp, "maxBodyBytes")?,
                sync_timeout_ms: uint(g, gp, "syncTimeoutMs")?,
                stream_idle_timeout_ms: uint(g, gp, "streamIdleTimeoutMs")?,
                retry_after_seconds: uint(g, gp, "retryAfterSeconds")?,
                drain_timeout_ms: uint(g, gp, "drainTimeoutMs")?,
                connection_handover_ms: uint(g, gp, "connectionHandoverMs")?,
                cold_start_timeout_ms: uint(g, gp, "coldStartTimeoutMs")?,
                handoff_margin_ms: uint(g, gp, "handoffMarginMs")?,
                sync_records_per_app_per_second: number(g, gp, "syncRecordsPerAppPerSecond")?,
                sync_records_per_second: number(g, gp, "syncRecordsPerSecond")?,
            },
            balancer: BalancerSettings {
                queue_timeout_ms: uint(b, bp, "queueTimeoutMs")?,
                queue_depth_factor: uint(b, bp, "queueDepthFactor")?,
                max_queue_per_app: uint(b, bp, "maxQueuePerApp")?,
                capacity_block_ms: uint(b, bp, "capacityBlockMs")?,
                unreachable_block_ms: uint(b, bp, "unreachableBlockMs")?,
                max_retries: uint(b, bp, "maxRetries")?,
                retry_after_seconds: uint(b, bp, "retryAfterSeconds")?,
                routing,
            },
            token_cache_max_entries: uint(obj, "config", "tokenCacheMaxEntries")?,
            load_report_interval_ms: uint(obj, "config", "loadReportIntervalMs")?,
            log_level,
        })
    }

    /// The frame's fields as Node writes them (tests and the round trip).
    pub fn to_fields(&self) -> Map<String, Value> {
        let g = &self.gateway;
        let b = &self.balancer;
        let value = json!({
            "listen": { "host": self.listen.host, "port": self.listen.port },
            "handoffSocket": self.handoff_socket,
            "gateway": {
                "maxBodyBytes": g.max_body_bytes,
                "syncTimeoutMs": g.sync_timeout_ms,
                "streamIdleTimeoutMs": g.stream_idle_timeout_ms,
                "retryAfterSeconds": g.retry_after_seconds,
                "drainTimeoutMs": g.drain_timeout_ms,
                "connectionHandoverMs": g.connection_handover_ms,
                "coldStartTimeoutMs": g.cold_start_timeout_ms,
                "handoffMarginMs": g.handoff_margin_ms,
                "syncRecordsPerAppPerSecond": g.sync_records_per_app_per_second,
                "syncRecordsPerSecond": g.sync_records_per_second,
            },
            "balancer": {
                "queueTimeoutMs": b.queue_timeout_ms,
                "queueDepthFactor": b.queue_depth_factor,
                "maxQueuePerApp": b.max_queue_per_app,
                "capacityBlockMs": b.capacity_block_ms,
                "unreachableBlockMs": b.unreachable_block_ms,
                "maxRetries": b.max_retries,
                "retryAfterSeconds": b.retry_after_seconds,
                "routing": match b.routing { Routing::Endpoints => "endpoints", Routing::Service => "service" },
            },
            "tokenCacheMaxEntries": self.token_cache_max_entries,
            "loadReportIntervalMs": self.load_report_interval_ms,
            "logLevel": self.log_level,
        });
        match value {
            Value::Object(m) => m,
            _ => unreachable!("json! of an object"),
        }
    }

    /// Settings the tests start from: listening on `127.0.0.1:port`, handing off to `handoff_socket`.
    pub fn example(port: u16, handoff_socket: &str) -> Self {
        Config {
            listen: Listen {
                host: "127.0.0.1".to_owned(),
                port,
            },
            handoff_socket: handoff_socket.to_owned(),
            gateway: GatewaySettings {
                max_body_bytes: 6 * 1024 * 1024,
                sync_timeout_ms: 30_000,
                stream_idle_timeout_ms: 30_000,
                retry_after_seconds: 5,
                drain_timeout_ms: 25_000,
                connection_handover_ms: 5_000,
                cold_start_timeout_ms: 60_000,
                handoff_margin_ms: 5_000,
                sync_records_per_app_per_second: 50.0,
                sync_records_per_second: 2000.0,
            },
            balancer: BalancerSettings {
                queue_timeout_ms: 30_000,
                queue_depth_factor: 10,
                max_queue_per_app: 1000,
                capacity_block_ms: 100,
                unreachable_block_ms: 2000,
                max_retries: 3,
                retry_after_seconds: 5,
                routing: Routing::Endpoints,
            },
            token_cache_max_entries: 10_000,
            load_report_interval_ms: 1000,
            log_level: "info".to_owned(),
        }
    }
}

fn malformed(reason: String) -> ProtocolError {
    ProtocolError::FrameMalformed { reason }
}

fn object<'a>(
    obj: &'a Map<String, Value>,
    at: &str,
    field: &str,
) -> Result<&'a Map<String, Value>, ProtocolError> {
    obj.get(field)
        .and_then(Value::as_object)
        .ok_or_else(|| malformed(format!("{at} has no object field {field:?}")))
}

fn string(obj: &Map<String, Value>, at: &str, field: &str) -> Result<String, ProtocolError> {
    obj.get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| malformed(format!("{at} has no string field {field:?}")))
}

fn uint(obj: &Map<String, Value>, at: &str, field: &str) -> Result<u64, ProtocolError> {
    obj.get(field)
        .and_then(Value::as_u64)
        .filter(|&n| n <= crate::message::MAX_SAFE_INTEGER)
        .ok_or_else(|| {
            malformed(format!(
                "{at} has no integer field {field:?} in [0, {}]",
                crate::message::MAX_SAFE_INTEGER
            ))
        })
}

fn number(obj: &Map<String, Value>, at: &str, field: &str) -> Result<f64, ProtocolError> {
    obj.get(field)
        .and_then(Value::as_f64)
        .filter(|n| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| malformed(format!("{at} has no non-negative number field {field:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let c = Config::example(8080, "/run/apphost/handoff.sock");
        assert_eq!(Config::from_fields(&c.to_fields()).unwrap(), c);
        assert_eq!(c.handoff_head_ms(), 95_000);
    }

    #[test]
    fn fractional_record_rates_are_taken() {
        let mut f = Config::example(0, "/s").to_fields();
        f["gateway"]["syncRecordsPerAppPerSecond"] = json!(0.5);
        assert_eq!(
            Config::from_fields(&f)
                .unwrap()
                .gateway
                .sync_records_per_app_per_second,
            0.5
        );
    }

    #[test]
    fn every_missing_or_wrongly_typed_field_is_malformed() {
        let good = Config::example(8080, "/run/apphost/handoff.sock").to_fields();
        let mut paths: Vec<Vec<String>> = Vec::new();
        for (k, v) in &good {
            match v {
                Value::Object(inner) => {
                    paths.push(vec![k.clone()]);
                    paths.extend(inner.keys().map(|i| vec![k.clone(), i.clone()]));
                }
                _ => paths.push(vec![k.clone()]),
            }
        }
        assert_eq!(paths.len(), 7 + 2 + 10 + 8);
        for path in &paths {
            for bad in [None, Some(json!("1")), Some(json!(-1)), Some(json!(null))] {
                let mut f = good.clone();
                let parent = if path.len() == 2 {
                    f.get_mut(&path[0]).unwrap().as_object_mut().unwrap()
                } else {
                    &mut f
                };
                let last = path.last().unwrap();
                match &bad {
                    None => {
                        parent.remove(last);
                    }
                    Some(v) => {
                        // A string where a string belongs is not wrong: give strings a number.
                        let v = if parent[last].is_string() {
                            json!(1)
                        } else {
                            v.clone()
                        };
                        parent.insert(last.clone(), v);
                    }
                }
                let err = Config::from_fields(&f).unwrap_err();
                assert_eq!(err.code(), "frame_malformed", "{path:?} = {bad:?}");
            }
        }
    }

    #[test]
    fn bad_values_are_malformed() {
        let good = Config::example(8080, "/s").to_fields();
        let cases = [
            ("port", json!({"host": "h", "port": 65536})),
            ("port", json!({"host": "", "port": 8080})),
            ("handoffSocket", json!("relative/handoff.sock")),
            ("logLevel", json!("verbose")),
        ];
        for (field, v) in cases {
            let mut f = good.clone();
            let key = if field == "port" { "listen" } else { field };
            f.insert(key.to_owned(), v);
            assert_eq!(
                Config::from_fields(&f).unwrap_err().code(),
                "frame_malformed",
                "{field}"
            );
        }
        let mut f = good.clone();
        f["balancer"]["routing"] = json!("dns");
        assert_eq!(Config::from_fields(&f).unwrap_err().code(), "frame_malformed");
    }

    #[test]
    fn extra_fields_are_ignored() {
        let mut f = Config::example(1, "/s").to_fields();
        f.insert("future".to_owned(), json!({"x": 1}));
        f["gateway"]["later"] = json!(true);
        assert_eq!(Config::from_fields(&f).unwrap(), Config::example(1, "/s"));
    }
}
