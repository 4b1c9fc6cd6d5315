//! The verified-token table against the gateway's cache: tests/vectors/tokens.json, written by
//! hack/dataplane-vectors.ts from `cachedRunTokenVerifier` (src/gateway/token-cache.ts) with its
//! `onRemember` hook. Each call is checked here first; what the TS cache remembered after a miss is
//! then pushed, as Node's `token` frame would be. The data plane serves exactly the calls the cache
//! served for the call's project — and hands off every non-ASCII token (node reads the header as
//! latin1 and hashes the token's UTF-8, so only an ASCII token's bytes are what Node hashed).

mod vectors;

use apphost_dataplane::tokens::{Token, TokenCheck, TokenTable, digest, parse_hex_digest};

#[test]
fn the_table_serves_what_the_cache_served() {
    let v = vectors::load("tokens.json");
    let runs = v["cases"].as_array().expect("cases");
    assert!(runs.len() >= 3);
    let (mut served, mut handed_off_hits) = (0, 0);
    for run in runs {
        let mut table = TokenTable::new(run["maxEntries"].as_u64().unwrap() as usize);
        for (k, call) in run["calls"].as_array().unwrap().iter().enumerate() {
            let token = vectors::bytes(call);
            let project = call["project"].as_str().unwrap();
            let now = call["now"].as_u64().unwrap();
            let remembered = &call["remembered"];
            let hit = call["hit"].as_bool().unwrap();
            // The cache served it for the call's project: the claims' project is the one remembered for it.
            let claims_project = remembered["projectId"].as_str();
            let got = table.check(&token, project, now);
            let want = hit && token.is_ascii() && table_project(run, k) == Some(project);
            assert_eq!(
                got == TokenCheck::Verified,
                want,
                "run {} call {k}: {call}",
                run["maxEntries"]
            );
            if got == TokenCheck::Verified {
                served += 1;
            } else if hit {
                handed_off_hits += 1;
            }
            if let Some(p) = claims_project {
                let sha256 = parse_hex_digest(remembered["sha256"].as_str().unwrap()).expect("hex digest");
                if token.is_ascii() {
                    assert_eq!(
                        sha256,
                        digest(&token),
                        "call {k}: the TS digest of the token's UTF-8"
                    );
                }
                table.remember(Token {
                    sha256,
                    project_id: p.to_owned(),
                    until: remembered["until"].as_u64().unwrap(),
                });
            }
        }
    }
    // Both kinds occur: the vectors are not all misses.
    assert!(served > 50 && handed_off_hits > 20, "{served} {handed_off_hits}");
}

/// The project the cache holds for call `k`'s token: the last `remembered` of the same token before it.
fn table_project(run: &serde_json::Value, k: usize) -> Option<&str> {
    let calls = run["calls"].as_array().unwrap();
    let token = vectors::bytes(&calls[k]);
    calls[..k]
        .iter()
        .rev()
        .filter(|c| vectors::bytes(c) == token)
        .find_map(|c| c["remembered"]["projectId"].as_str())
}
