//! Parallel programs from the ULE paper: NAS MG, c-ray, and the pinned spinners of the load-balancing
//! experiment.

use super::{Args, Generator};
use crate::builder::{ProgramBuilder as P, WorkloadBuilder};
use crate::model::{StopWhen, Workload};
use schedlab_core::NSEC_PER_MSEC as MS;

pub(super) fn generators() -> Vec<Generator> {
    vec![
        Generator {
            name: "nas-mg",
            summary: "NAS MG (OpenMP): a barrier-heavy multigrid V-cycle with spin-then-sleep waits",
            models: "per iteration the V-cycle goes down `levels` grid levels and back up; at each step every thread computes its share (8x less per coarser level, so coarse levels take microseconds) and meets the others at a barrier where libgomp spins before sleeping (the ULE paper observes 100 ms spins)",
            simplifies: "every grid step is one compute burst per thread and one barrier; the real MG has several sweeps and barriers per level",
            score: "makespan_ns (NAS reports Mop/s, total operations / time)",
            params: &[
                ("threads", "16", "OMP_NUM_THREADS"),
                ("iterations", "4", "V-cycles (class A runs 4)"),
                ("levels", "8", "grid levels (class A: 256^3 -> 8)"),
                ("top_work", "40ms", "CPU time per thread at the finest level"),
                ("spin", "100ms", "busy-wait at a barrier before sleeping"),
            ],
            build: nas_mg,
        },
        Generator {
            name: "c-ray",
            summary: "c-ray (seed 002 sec. 6.2): 512 threads released by a cascading barrier, then computing",
            models: "all threads start together, or with `create_cost` > 0 a main thread creates them one by one, computing that long before each (so ULE's children inherit a growing run history); thread 0 releases thread 1, 1 releases 2, and so on (a semaphore each, so an early release is remembered); then each computes its part of the image without sleeping",
            simplifies: "rendering is one equal CPU burst per thread; the cascade uses semaphores (an early release is remembered)",
            score: "makespan_ns (render time); last_wakeup_ns of each thread shows the cascade order",
            params: &[
                ("threads", "512", "threads"),
                ("work", "2s", "CPU time per thread after the cascade"),
                ("create_cost", "0s", "main-thread CPU time before creating each thread (0: all start at once)"),
            ],
            build: c_ray,
        },
        Generator {
            name: "pinned-spinners",
            summary: "spinners pinned to one CPU, unpinned later (seed 002 sec. 6.1, 512 threads on CPU 0)",
            models: "`threads` busy-looping threads start pinned to `cpu`; at `unpin_at` their affinity becomes all CPUs (the taskset command) and the balancer spreads them",
            simplifies: "spinners are endless busy loops; the taskset call is an instant affinity change",
            score: "series.nr_running: how fast and how evenly the threads spread after unpin_at",
            params: &[
                ("threads", "512", "spinning threads"),
                ("cpu", "0", "the CPU they start pinned to"),
                ("unpin_at", "14.5s", "when taskset unpins them"),
            ],
            build: pinned_spinners,
        },
    ]
}

fn nas_mg(a: &Args) -> Result<Workload, String> {
    let threads = a.u32("threads", 1..=10_000)?;
    let iterations = a.u32("iterations", 1..=100_000)?;
    let levels = a.u32("levels", 1..=12)?;
    let top = a.dur("top_work")?;
    let spin = a.dur("spin")?;
    let mut w = WorkloadBuilder::new("nas-mg");
    let b = w.barrier("step", threads);
    // Work at level k (k = levels is the finest): top / 8^(levels - k), at least 1 us.
    let work = |k: u32| (top >> (3 * (levels - k))).max(1_000);
    let step = |p: P, k: u32| {
        let p = p.compute(work(k));
        if threads > 1 {
            p.barrier_spin(b, spin)
        } else {
            p
        }
    };
    let prog = P::new().repeat(iterations, |mut p| {
        for k in (1..=levels).rev() {
            p = step(p, k);
        }
        for k in 1..=levels {
            p = step(p, k);
        }
        p
    });
    let t = w.task("mg", prog.build());
    t.instances = threads;
    t.process = Some("mg".into());
    w.stop(StopWhen::AllDone);
    w.build()
}

fn c_ray(a: &Args) -> Result<Workload, String> {
    let n = a.u32("threads", 1..=100_000)?;
    let work = a.dur("work")?;
    let create = a.dur("create_cost")?;
    let mut w = WorkloadBuilder::new(format!("c-ray[threads={n}]"));
    let sems: Vec<u32> = (0..n).map(|i| w.semaphore(format!("start{i}"), 0)).collect();
    if create > 0 {
        // The main thread is template 0; thread i is template i + 1, only forked.
        let first = w.next_template() + 1;
        let main = (0..n).fold(P::new(), |p, i| p.compute(create).fork(first + i));
        w.task("main", main.wait_children().build()).process = Some("c-ray".into());
    }
    for i in 0..n as usize {
        let mut p = P::new();
        if i > 0 {
            p = p.sem_wait(sems[i]);
        }
        if i + 1 < n as usize {
            p = p.sem_post(sems[i + 1]);
        }
        let t = w.task(format!("c-ray{i}"), p.compute(work).build());
        t.process = Some("c-ray".into());
        if create > 0 {
            t.instances = 0;
        }
    }
    w.stop(StopWhen::AllDone);
    w.build()
}

fn pinned_spinners(a: &Args) -> Result<Workload, String> {
    let n = a.u32("threads", 1..=100_000)?;
    let cpu = a.u32("cpu", 0..=1023)?;
    let at = a.dur("unpin_at")?;
    let mut w = WorkloadBuilder::new("pinned-spinners");
    let t = w.task("spinner", P::new().forever(|p| p.spin(10 * MS)).build());
    t.instances = n;
    t.cpus = Some(vec![cpu]);
    t.process = Some("spinners".into());
    w.affinity_change(0, at, None);
    w.build()
}
