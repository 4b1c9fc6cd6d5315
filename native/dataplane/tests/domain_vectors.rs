//! Custom-domain hosts against the gateway's: tests/vectors/hostname.json, written by
//! hack/dataplane-vectors.ts from `CallContext.hostname` and `customDomain` (the name it looks up) and
//! local mode's `normalizeHost` (the table's key) over a corpus of Host headers. One-sided: where the
//! data plane looks a host up, it uses the key Node would; it may hand any host to Node.

mod vectors;

use apphost_dataplane::domain::{DomainHost, domain_host};

#[test]
fn every_host_the_data_plane_looks_up_has_nodes_key() {
    let v = vectors::load("hostname.json");
    let cases = v["cases"].as_array().expect("cases");
    let mut looked_up = 0;
    for case in cases {
        let host: Option<Vec<u8>> = case["host"].as_str().map(|s| {
            s.chars()
                .map(|c| u8::try_from(u32::from(c)).expect("latin1"))
                .collect()
        });
        match domain_host(host.as_deref()) {
            DomainHost::None => assert!(case["lookup"].is_null(), "no lookup for {case}, Node looks it up"),
            DomainHost::Key(k) => {
                looked_up += 1;
                assert_eq!(case["key"], k.as_str(), "the key of {case}");
                // The cluster's resolveHost: the looked-up name without one trailing dot.
                let lookup = case["lookup"].as_str().expect("Node looks it up");
                assert_eq!(
                    lookup.strip_suffix('.').unwrap_or(lookup),
                    k,
                    "the cluster's key of {case}"
                );
            }
            DomainHost::HandOff => {}
        }
    }
    assert!(
        looked_up >= 15,
        "the data plane looks up {looked_up} hosts of the corpus"
    );
}
