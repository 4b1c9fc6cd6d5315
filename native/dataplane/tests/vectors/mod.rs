//! Reads the shared vectors (tests/vectors/*.json, written by hack/dataplane-vectors.ts).
#![allow(dead_code)] // each test file uses its part

use serde_json::Value;

/// A vector file's path.
pub fn path(name: &str) -> String {
    format!("{}/tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"))
}

pub fn load(name: &str) -> Value {
    let path = path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A case's body: `text` (UTF-8) or `hex` (any bytes).
pub fn bytes(case: &Value) -> Vec<u8> {
    if let Some(t) = case["text"].as_str() {
        return t.as_bytes().to_vec();
    }
    let hex = case["hex"].as_str().expect("text or hex");
    (0..hex.len())
        .step_by(2)
        .map(|k| u8::from_str_radix(&hex[k..k + 2], 16).expect("hex"))
        .collect()
}
