use schedlab_sim::{Machine, RunConfig, Sim};
use schedlab_workload::{ProgramBuilder, WorkloadBuilder};

#[test]
fn smoke() {
    let m = Machine::preset("xeon-e5520-2s").unwrap();
    let mut w = WorkloadBuilder::new("smoke");
    let p = w.pipe("p", 4096);
    w.task("hog", ProgramBuilder::new().forever(|p| p.compute(1_000_000)).build()).instances = 20;
    w.task("ping", ProgramBuilder::new().forever(|b| b.send(p, 100).compute(10_000).sleep(100_000)).build());
    w.task("pong", ProgramBuilder::new().forever(|b| b.recv(p, 100).compute(20_000)).build());
    let w = w.build().unwrap();
    for spec in ["cfs", "fifo", "rr"] {
        let mut pol = schedlab_policies::create(spec).unwrap();
        let cfg = RunConfig { duration_ns: 1_000_000_000, check_invariants: true, ..RunConfig::default() };
        let r = Sim::new(&m, &w, pol.as_mut(), spec, cfg).unwrap().run().unwrap();
        println!("{}", r.summary_table());
    }
}
