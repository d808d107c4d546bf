//! Every policy's core operations at 10 to 100,000 runnable tasks, on a 4-CPU flat machine driven by
//! the policies' own test harness (`schedlab_policies::testworld`, no engine around it):
//!
//! * `switch`: `pick_next` on CPU 0, then `put_prev` of the picked task as preempted (it stays
//!   queued): one context switch's worth of queue work;
//! * `block_wake`: pick, `put_prev` as blocked (dequeue), then the wakeup: `select_cpu` (wakeup CPU
//!   selection) and `enqueue`;
//! * `tick`: one scheduler tick of the running task on CPU 0 (time advances a tick).
//!
//! The tasks start spread by the policy's own `task_new`. Run with `cargo bench -p schedlab-policies`;
//! docs/performance.md has the numbers and the fitted growth.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use schedlab_core::{CpuId, SchedPolicy, SwitchReason};
use schedlab_policies::testworld::TestWorld;
use std::time::Duration;

const SIZES: [u32; 5] = [10, 100, 1_000, 10_000, 100_000];
const POLICIES: [&str; 13] =
    ["cfs", "eevdf", "linux24", "elsc", "pmqs", "o1", "rsdl", "ule", "4bsd", "bfs", "htfs", "vtrr", "fifo"];

fn world(policy: &str, n: u32) -> (TestWorld, Box<dyn SchedPolicy>) {
    let mut p = schedlab_policies::create(policy).unwrap();
    let mut w = TestWorld::new(4);
    p.init(&w.ctx());
    for i in 0..n {
        let t = w.add_task(((i % 40) as i8) - 20);
        w.start(p.as_mut(), t);
    }
    (w, p)
}

fn bench(c: &mut Criterion) {
    for policy in POLICIES {
        let mut g = c.benchmark_group(policy);
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_millis(500));
        for n in SIZES {
            let (mut w, mut p) = world(policy, n);
            g.bench_with_input(BenchmarkId::new("switch", n), &n, |b, _| {
                b.iter(|| {
                    if w.pick(p.as_mut(), CpuId(0)).is_some() {
                        w.stop(p.as_mut(), CpuId(0), SwitchReason::Preempted);
                    }
                })
            });
            g.bench_with_input(BenchmarkId::new("block_wake", n), &n, |b, _| {
                b.iter(|| {
                    if w.pick(p.as_mut(), CpuId(0)).is_some() {
                        let t = w.stop(p.as_mut(), CpuId(0), SwitchReason::Blocked);
                        w.wake(p.as_mut(), t, CpuId(1));
                    }
                })
            });
            if w.pick(p.as_mut(), CpuId(0)).is_some() {
                let tick = w.tick_ns;
                g.bench_with_input(BenchmarkId::new("tick", n), &n, |b, _| {
                    b.iter(|| w.advance(p.as_mut(), tick));
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
