//! A workload the TOML reader accepts runs: 20 simulated ms on a small SMT machine under one of the
//! policies (chosen by the input's length), with invariant checks after every event and the run
//! limits set low. The workload may fail at run time in ways it asked for (unlocking a mutex it does
//! not hold, a loop that never uses time, a limit), but never with a panic, a policy violation or a
//! broken invariant.
#![no_main]
use libfuzzer_sys::fuzz_target;
use schedlab_sim::{Machine, RunConfig, RunError, Sim};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(w) = schedlab_workload::parse_toml("fuzz.toml", src) else { return };
    let mut m = Machine::flat(1);
    m.topology = schedlab_core::Topology::symmetric(1, 1, 2, 2, 2).expect("8 CPUs");
    m.speed_permille = vec![1000; 8];
    let names: Vec<&str> = schedlab_policies::policies().iter().map(|p| p.name).collect();
    let spec = names[data.len() % names.len()];
    let mut p = schedlab_policies::create(spec).expect("registered policy");
    let cfg = RunConfig {
        duration_ns: 20_000_000,
        check_invariants: true,
        max_tasks: 500,
        max_events: 200_000,
        max_trace_events: 10_000,
        trace: true,
        ..RunConfig::default()
    };
    let result = match Sim::new(&m, &w, p.as_mut(), spec, cfg) {
        Ok(sim) => sim.run_traced().map(|_| ()),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) | Err(RunError::Workload { .. } | RunError::Setup(_) | RunError::Limit { .. }) => {}
        Err(e) => panic!("{spec}: {e}"),
    }
});
