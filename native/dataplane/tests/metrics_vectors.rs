//! The data plane's metrics against the gateway's: tests/vectors/metrics.json, written by
//! hack/dataplane-vectors.ts. Each run drives this module and a Node registry (the real
//! createGatewayMetrics + createBalancerMetrics) with the same steps; at each scrape:
//! - the JSON rendered here equals the Node registry's `getMetricsAsJSON()` restricted to the data
//!   plane's series (names, help, types, aggregator, values in order, labels, numbers);
//! - prom-client's `AggregatorRegistry.aggregate([node, <this JSON>]).metrics()`, run by Node on this
//!   module's JSON, is the text the generator got from aggregating the Node registry's: /metrics reads
//!   the same. (This half runs `node` from PATH with the repo's node_modules; `make test-native` has both.)

mod vectors;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use apphost_dataplane::metrics::{AppGauge, Metrics};
use serde_json::{Value, json};

/// A value's labels as strings (prom-client reads `le` 0.005 and "0.005" alike), sorted.
fn labels(v: &Value) -> BTreeMap<String, String> {
    v["labels"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, l)| {
            (
                k.clone(),
                l.as_str()
                    .map_or_else(|| l.as_f64().unwrap().to_string(), str::to_owned),
            )
        })
        .collect()
}

fn same_json(got: &Value, want: &Value, at: &str) {
    let (got, want) = (got.as_array().unwrap(), want.as_array().unwrap());
    let names = |ms: &[Value]| {
        ms.iter()
            .map(|m| m["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let sorted = |ms: &[Value]| {
        let mut n = names(ms);
        n.sort();
        n
    };
    assert_eq!(sorted(got), sorted(want), "{at}: the metrics");
    for w in want {
        let g = got.iter().find(|g| g["name"] == w["name"]).unwrap();
        let name = w["name"].as_str().unwrap();
        for field in ["help", "type", "aggregator"] {
            assert_eq!(g[field], w[field], "{at}: {name}.{field}");
        }
        let (gv, wv) = (g["values"].as_array().unwrap(), w["values"].as_array().unwrap());
        assert_eq!(
            gv.len(),
            wv.len(),
            "{at}: {name}: values\n got {gv:?}\nwant {wv:?}"
        );
        for (k, (a, b)) in gv.iter().zip(wv).enumerate() {
            assert_eq!(labels(a), labels(b), "{at}: {name}[{k}] labels");
            assert_eq!(
                a["value"].as_f64(),
                b["value"].as_f64(),
                "{at}: {name}[{k}] {:?}",
                labels(b)
            );
            assert_eq!(a.get("metricName"), b.get("metricName"), "{at}: {name}[{k}]");
        }
    }
}

#[test]
fn the_series_merge_into_node_s_as_node_s_own() {
    let v = vectors::load("metrics.json");
    let runs = v["cases"].as_array().expect("cases");
    assert!(runs.len() >= 2);
    let mut pairs = Vec::new();
    for run in runs {
        let mut m = Metrics::new();
        for (k, step) in run["steps"].as_array().unwrap().iter().enumerate() {
            let s = |f: &str| step[f].as_str().unwrap();
            match s("op") {
                "call" => m.call(
                    s("project"),
                    s("app"),
                    s("mode"),
                    step["status"].as_u64().unwrap() as u16,
                    step["seconds"].as_f64().unwrap(),
                ),
                "rejected" => m.rejected(s("project"), s("app"), s("code")),
                "refused" => m.refused(s("project"), s("app"), s("reason")),
                "skipped" => m.sync_record_skipped(s("reason")),
                "scrape" => {
                    let apps: Vec<AppGauge> = step["apps"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|a| AppGauge {
                            project: a["project"].as_str().unwrap(),
                            app: a["app"].as_str().unwrap(),
                            inflight: a["inflight"].as_u64().unwrap(),
                            queued: a["queued"].as_u64().unwrap(),
                        })
                        .collect();
                    let rendered = m.render_json(step["inflight"].as_u64().unwrap(), &apps);
                    let got: Value = serde_json::from_str(&rendered).expect("the rendered JSON parses");
                    let at = format!("run {} step {k}", run["seed"]);
                    same_json(&got, &step["json"], &at);
                    pairs.push(json!({"at": at, "json": rendered, "text": step["text"]}));
                }
                other => panic!("step {other}"),
            }
        }
    }
    aggregate_in_node(&pairs);
}

/// prom-client's aggregate of Node's registry and each rendered JSON, by Node; every text must be the
/// expected one.
fn aggregate_in_node(pairs: &[Value]) {
    let root = format!("{}/../..", env!("CARGO_MANIFEST_DIR"));
    let script = r#"
        const { AggregatorRegistry } = await import('prom-client');
        let input = '';
        for await (const chunk of process.stdin) input += chunk;
        const { pairs } = JSON.parse(input);
        // Node's registry as the generator wrote it (label order kept: serde_json's Map would sort it).
        const { readFileSync } = await import('node:fs');
        const { node } = JSON.parse(readFileSync(process.argv[1], 'utf8'));
        const out = [];
        for (const p of pairs) {
          const text = await AggregatorRegistry.aggregate([node, JSON.parse(p.json)]).metrics();
          if (text !== p.text) out.push({ at: p.at, got: text, want: p.text });
        }
        process.stdout.write(JSON.stringify(out));
    "#;
    let mut child = Command::new("node")
        .args([
            "--input-type=module",
            "-e",
            script,
            &vectors::path("metrics.json"),
        ])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("node (on PATH, with {root}/node_modules: make test-native has both): {e}")
        });
    let input = json!({ "pairs": pairs }).to_string();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "node failed: {}", out.status);
    let mismatches: Vec<Value> = serde_json::from_slice(&out.stdout).expect("node's answer");
    for m in &mismatches {
        let (got, want) = (m["got"].as_str().unwrap(), m["want"].as_str().unwrap());
        let first = got.lines().zip(want.lines()).find(|(g, w)| g != w);
        eprintln!("{}: first differing line {first:?}", m["at"]);
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} aggregates differ",
        mismatches.len(),
        pairs.len()
    );
}
