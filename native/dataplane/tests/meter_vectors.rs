//! The meter against the gateway's: tests/vectors/meter.json, written by hack/dataplane-vectors.ts from
//! `ConcurrencyMeter` (src/gateway/balancer/meter.ts).

mod vectors;

use apphost_dataplane::meter::ConcurrencyMeter;

#[test]
fn every_run_gets_the_typescript_averages() {
    let v = vectors::load("meter.json");
    let runs = v["cases"].as_array().expect("cases");
    assert!(runs.len() >= 40);
    for run in runs {
        let mut meter = ConcurrencyMeter::new(run["start"].as_i64().unwrap());
        for step in run["steps"].as_array().unwrap() {
            if let Some(now) = step["take"].as_i64() {
                let want = step["avg"].as_f64().unwrap();
                assert_eq!(
                    meter.take(now).to_bits(),
                    want.to_bits(),
                    "take at {now} in {run}"
                );
            } else {
                meter.set(
                    step["set"].as_i64().unwrap(),
                    step["level"].as_u64().unwrap() as u32,
                );
            }
        }
        assert_eq!(u64::from(meter.level()), run["level"].as_u64().unwrap());
    }
}
