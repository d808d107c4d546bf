//! Policy specs (`name[key=value,...]`): any string gives a policy or an error, never a panic; a
//! policy it gives, with any parameters in their allowed ranges, runs 20 ms of the `demo` workload
//! on 4 SMT CPUs with invariant checks after every event, and breaks neither the interface nor an
//! invariant.
#![no_main]
use libfuzzer_sys::fuzz_target;
use schedlab_sim::{Machine, RunConfig, Sim};

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = std::str::from_utf8(data) else { return };
    let Ok(mut p) = schedlab_policies::create(spec) else { return };
    let mut m = Machine::flat(1);
    m.topology = schedlab_core::Topology::symmetric(1, 1, 1, 2, 2).expect("4 CPUs");
    m.speed_permille = vec![1000; 4];
    let w = schedlab_workload::generators::builtin("demo").expect("demo").expect("demo exists");
    let cfg = RunConfig { duration_ns: 20_000_000, check_invariants: true, ..RunConfig::default() };
    let sim = Sim::new(&m, &w, p.as_mut(), spec, cfg).unwrap_or_else(|e| panic!("{spec}: {e}"));
    if let Err(e) = sim.run() {
        panic!("{spec}: {e}");
    }
});
