//! sysbench (cpu, threads, mutex) and the OLTP-like request-driven thread pool of the ULE paper.

use super::{Args, Generator, Lcg};
use crate::builder::{ProgramBuilder as P, WorkloadBuilder};
use crate::model::{Dist, StopWhen, Workload};
use schedlab_core::NSEC_PER_USEC as US;

pub(super) fn generators() -> Vec<Generator> {
    vec![
        Generator {
            name: "sysbench-cpu",
            summary: "sysbench cpu: threads computing primes by trial division",
            models: "each event checks the numbers up to --cpu-max-prime by trial division; its CPU cost grows as max_prime^1.5 and is `event_cost` at the default 10000",
            simplifies: "the prime search is a CPU burst whose length scales as max_prime^1.5; no per-event bookkeeping",
            score: "counter `events` per second (sysbench's events/s); per-thread fairness = fairness.work_spread",
            params: &[
                ("threads", "1", "--threads"),
                ("max_prime", "10000", "--cpu-max-prime"),
                ("event_cost", "1ms", "CPU time of one event at max_prime 10000"),
                ("events", "0", "--events per thread (0 = until the run ends, like --time)"),
            ],
            build: cpu,
        },
        Generator {
            name: "sysbench-threads",
            summary: "sysbench threads: lock, sched_yield, unlock in a tight loop",
            models: "each event (request) takes one of `locks` mutexes and does `yields` x {lock; sched_yield; unlock}; sysbench numbers its requests with one shared counter and takes lock number request mod locks (tests/threads/sb_threads.c)",
            simplifies: "requests are dealt to the threads in turn, so thread i's k-th request is number i + k x threads and takes lock (i + k x threads) mod locks (with 32 threads and 8 locks, always lock i mod 8), where the real counter hands the next number to whichever thread asks first; a thread runs its requests grouped by lock",
            score: "counter `events` per second; nr_yields per task = events x yields",
            params: &[
                ("threads", "1", "--threads"),
                ("yields", "1000", "--thread-yields per event"),
                ("locks", "8", "--thread-locks"),
                ("events", "0", "requests per thread (0 = until the run ends, unless `requests` is given)"),
                ("requests", "0", "--max-requests (sysbench 0.4; --events in 1.0): requests in total, dealt to the threads in turn; 0 = `events` per thread"),
                ("op_cost", "200ns", "CPU time of one lock or unlock"),
            ],
            build: threads,
        },
        Generator {
            name: "sysbench-mutex",
            summary: "sysbench mutex: empty loops, then lock a random mutex of many, increment, unlock",
            models: "each thread does mutex_locks x {mutex_loops empty iterations; lock one of mutex_num mutexes; unlock}; the random mutex sequence is fixed at build time (16 per thread, cycled) from `seed`",
            simplifies: "each thread cycles 16 mutexes drawn at build time instead of drawing a new one per lock; the empty loop is a CPU burst",
            score: "makespan_ns (sysbench reports total time); counter `locks`",
            params: &[
                ("threads", "1", "--threads"),
                ("mutex_num", "4096", "--mutex-num"),
                ("mutex_locks", "50000", "--mutex-locks per thread"),
                ("mutex_loops", "10000", "--mutex-loops of the empty loop"),
                ("loop_cost", "1ns", "CPU time of one empty-loop iteration"),
                ("seed", "1", "seed of the mutex choices"),
            ],
            build: mutex,
        },
        Generator {
            name: "sysbench-oltp",
            summary: "sysbench OLTP-like (ULE paper sec. 5): a pool of request-driven threads that mostly sleep",
            models: "each of `threads` clients thinks (exponential), runs a query (log-normal CPU time) and updates a table under a mutex; no disk and no separate server process. With `master`, sysbench's main thread creates the clients one after another (pthread_create), computing `master` before each, and every client waits at a start barrier until all are created (sysbench 1.0's thread start barrier): the ULE paper's starvation of late-created threads (sec. 5.2)",
            simplifies: "no database: a think time, a log-normal query burst and a short critical section per transaction; no disk, no server process",
            score: "counter `transactions` per second",
            params: &[
                ("threads", "80", "client threads (the ULE paper uses 80 and 128)"),
                ("think", "10ms", "mean think time between transactions"),
                ("query", "300us", "mean CPU time of a query"),
                ("query_stddev", "200us", "its standard deviation (log-normal)"),
                ("update", "20us", "CPU time inside the table lock"),
                ("master", "0s", "main thread's CPU time before creating each client (0: the clients start together, no main thread)"),
            ],
            build: oltp,
        },
    ]
}

fn events_loop(events: u32) -> u32 {
    events // 0 means forever in the program model
}

fn cpu(a: &Args) -> Result<Workload, String> {
    let threads = a.u32("threads", 1..=100_000)?;
    let max_prime = a.u64("max_prime", 3..=100_000_000)?;
    let base = a.dur("event_cost")?;
    let events = a.u32("events", 0..=u32::MAX)?;
    // Trial division up to sqrt(n) for every n <= max_prime: about max_prime^1.5 steps.
    let cost = (base as f64 * (max_prime as f64 / 10_000.0).powf(1.5)).round().max(1.0) as u64;
    let mut w = WorkloadBuilder::new("sysbench-cpu");
    let c = w.counter("events");
    let t = w.task("sysbench", P::new().repeat(events_loop(events), |p| p.compute(cost).count(c)).build());
    t.instances = threads;
    t.process = Some("sysbench".into());
    if events > 0 {
        w.stop(StopWhen::AllDone);
    }
    w.build()
}

fn threads(a: &Args) -> Result<Workload, String> {
    let threads = a.u32("threads", 1..=100_000)?;
    let yields = a.u32("yields", 1..=10_000_000)?;
    let locks = a.u32("locks", 1..=4096)?;
    let per_thread = a.u32("events", 0..=u32::MAX)?;
    let requests = a.u32("requests", 0..=u32::MAX)?;
    let op_cost = a.dur("op_cost")?;
    if requests > 0 && per_thread > 0 {
        return Err(
            "workload `sysbench-threads`: give `events` (per thread) or `requests` (in total), not both"
                .into(),
        );
    }
    if requests > 0 && requests < threads {
        return Err(format!(
            "workload `sysbench-threads`: {requests} requests for {threads} threads leave a thread without one"
        ));
    }
    let mut w = WorkloadBuilder::new("sysbench-threads");
    let c = w.counter("events");
    let mutexes: Vec<u32> = (0..locks).map(|i| w.mutex(format!("lock{i}"))).collect();
    let event = |p: P, m: u32| {
        p.repeat(yields, |q| q.lock(m).compute(op_cost).yield_now().unlock(m).compute(op_cost)).count(c)
    };
    for i in 0..threads {
        // Requests dealt in turn: thread i's k-th is number i + k x threads, and takes lock
        // (i + k x threads) mod locks, a cycle of locks / gcd(threads, locks) locks.
        let cycle = locks / gcd(threads, locks);
        let order: Vec<u32> = (0..cycle).map(|k| mutexes[((i + k * threads) % locks) as usize]).collect();
        let locks = cycle;
        let events = if requests > 0 { (requests - i).div_ceil(threads) } else { per_thread };
        let prog = if events == 0 {
            P::new().forever(|mut p| {
                for &m in &order {
                    p = event(p, m);
                }
                p
            })
        } else {
            let mut p = P::new();
            for e in 0..events.min(locks) {
                let m = order[e as usize];
                let reps = (events - e).div_ceil(locks);
                p = p.repeat(reps, |q| event(q, m));
            }
            p
        };
        w.task(format!("thread{i}"), prog.build()).process = Some("sysbench".into());
    }
    if requests > 0 || per_thread > 0 {
        w.stop(StopWhen::AllDone);
    }
    w.build()
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn mutex(a: &Args) -> Result<Workload, String> {
    let threads = a.u32("threads", 1..=100_000)?;
    let num = a.u32("mutex_num", 1..=1_000_000)?;
    let locks = a.u32("mutex_locks", 1..=u32::MAX)?;
    let loops = a.u64("mutex_loops", 0..=1_000_000_000)?;
    let loop_cost = a.dur("loop_cost")?;
    let mut rng = Lcg::new(a.u64("seed", 0..=u64::MAX)?);
    let mut w = WorkloadBuilder::new("sysbench-mutex");
    let c = w.counter("locks");
    let mut ids = std::collections::BTreeMap::new();
    let spin = loops * loop_cost;
    for i in 0..threads {
        let picks: Vec<u32> = (0..16)
            .map(|_| {
                let k = rng.below(num as u64) as u32;
                *ids.entry(k).or_insert_with(|| w.mutex(format!("mutex{k}")))
            })
            .collect();
        let one = |p: P, m: u32| p.compute(spin).lock(m).compute(10).unlock(m).count(c);
        let mut p = P::new().repeat(locks / 16, |mut q| {
            for &m in &picks {
                q = one(q, m);
            }
            q
        });
        for &m in picks.iter().take((locks % 16) as usize) {
            p = one(p, m);
        }
        w.task(format!("thread{i}"), p.build()).process = Some("sysbench".into());
    }
    w.stop(StopWhen::AllDone);
    w.build()
}

fn oltp(a: &Args) -> Result<Workload, String> {
    let threads = a.u32("threads", 1..=100_000)?;
    let think = a.dur("think")?;
    let (query, stddev) = (a.dur("query")?, a.dur("query_stddev")?);
    let update = a.dur("update")?;
    let master = a.dur("master")?;
    if query == 0 {
        return Err("workload `sysbench-oltp`: query must be above zero".into());
    }
    let mut w = WorkloadBuilder::new("sysbench-oltp");
    let c = w.counter("transactions");
    let table = w.mutex("table");
    // With a main thread, it is template 0 and the clients template 1, only created by it; all
    // of them meet at the start barrier once every client exists.
    let start = (master > 0).then(|| w.barrier("start", threads + 1));
    if let Some(b) = start {
        let client = w.next_template() + 1;
        let main = P::new().repeat(threads, |p| p.compute(master).fork(client)).barrier(b).wait_children();
        w.task("main", main.build()).process = Some("sysbench".into());
    }
    let first = match start {
        Some(b) => P::new().barrier(b),
        None => P::new(),
    };
    let t = w.task(
        "client",
        first
            .forever(|p| {
                p.sleep(Dist::Exponential { mean: think })
                    .compute(Dist::LogNormal { mean: query, stddev })
                    .lock(table)
                    .compute(update.max(US / 10))
                    .unlock(table)
                    .count(c)
            })
            .build(),
    );
    t.instances = if start.is_some() { 0 } else { threads };
    t.process = Some("sysbench".into());
    w.build()
}
