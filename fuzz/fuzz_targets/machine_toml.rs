//! The machine file reader: any input gives a machine or an error, never a panic; a machine it
//! accepts can be simulated (a short run of a small workload on it completes).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(m) = schedlab_sim::Machine::from_toml("fuzz.toml", src) else { return };
    let w = schedlab_workload::generators::builtin("demo").expect("demo").expect("demo exists");
    let mut p = schedlab_policies::create("cfs").expect("cfs");
    let cfg = schedlab_sim::RunConfig {
        duration_ns: 2_000_000,
        check_invariants: true,
        ..schedlab_sim::RunConfig::default()
    };
    let sim = schedlab_sim::Sim::new(&m, &w, p.as_mut(), "cfs", cfg)
        .unwrap_or_else(|e| panic!("a machine the reader accepted is refused by the simulator: {e}"));
    if let Err(e) = sim.run() {
        panic!("a machine the reader accepted fails to simulate: {e}");
    }
});
