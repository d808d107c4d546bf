//! PARSEC programs from the ULE paper's fig. 9 (seed 002 sec. 6.4): blackscholes and ferret, as their
//! pthreads versions run (pkgs/apps/blackscholes/src/blackscholes.c,
//! pkgs/apps/ferret/src/benchmark/ferret-pthreads.c and its queue.c).

use super::{Args, Generator};
use crate::builder::{ProgramBuilder as P, WorkloadBuilder};
use crate::model::{StopWhen, Workload};

pub(super) fn generators() -> Vec<Generator> {
    vec![
        Generator {
            name: "blackscholes",
            summary: "PARSEC blackscholes (pthreads): a serial input read, `threads` equal pricing threads, a serial output write",
            models: "the main thread parses the input file (one line per option, fscanf), creates `threads` threads and joins them, then writes the prices; thread i prices its contiguous 1/`threads` of the options `runs` times over (NUM_RUNS), computing without sleeping or synchronising until it exits",
            simplifies: "each phase is one CPU burst (read, each thread's pricing, write) with no page-cache or disk time: the input file is read from the page cache, where PARSEC's run script has just unpacked it",
            score: "makespan_ns (PARSEC reports the run's time)",
            params: &[
                ("threads", "4", "pricing threads (blackscholes' nthreads argument)"),
                ("options", "10000000", "options in the input (native: in_10M.txt)"),
                ("runs", "100", "times each option is priced (NUM_RUNS)"),
                ("price_cost", "100ns", "CPU time to price one option once"),
                ("read_cost", "1us", "main-thread CPU time to parse one input line"),
                ("write_cost", "100ns", "main-thread CPU time to write one price"),
            ],
            build: blackscholes,
        },
        Generator {
            name: "ferret",
            summary: "PARSEC ferret (pthreads): a six-stage image-search pipeline over bounded queues",
            models: "one load thread reads the query images; `threads` threads each segment them, extract their features, query the index (vec) and rank the candidates; one output thread prints the results; consecutive stages pass each query through a queue of `depth` entries (queue.c: a mutex with `empty` and `full` conditions), so a thread sleeps on an empty input queue or a full output queue",
            simplifies: "each stage's work on a query is one fixed CPU burst; a queue is a pair of counting semaphores (free slots, queued items), which sleep and wake as the mutex and conditions do, without the mutex's contention; a stage's threads each take a fixed share of the queries (`queries / threads`, the first `queries % threads` one more) where the real threads take whatever is queued until the terminate signal; the database load before the timed part is left out",
            score: "makespan_ns (PARSEC reports the query time)",
            params: &[
                ("threads", "4", "threads per parallel stage (ferret's n argument: 4n + 2 threads)"),
                ("queries", "3500", "query images (native: 3,500)"),
                ("depth", "20", "entries per queue (the run scripts' depth argument)"),
                ("load_cost", "2ms", "CPU time to read and decode one image (the serial load stage)"),
                ("seg_cost", "8ms", "CPU time to segment one image"),
                ("extract_cost", "4ms", "CPU time to extract one image's region features"),
                ("vec_cost", "16ms", "CPU time of one index (LSH) query"),
                ("rank_cost", "24ms", "CPU time to rank one query's candidates (EMD)"),
                ("out_cost", "100us", "CPU time to print one result (the serial output stage)"),
            ],
            build: ferret,
        },
    ]
}

fn blackscholes(a: &Args) -> Result<Workload, String> {
    let threads = a.u32("threads", 1..=10_000)?;
    let options = a.u64("options", 1..=1_000_000_000)?;
    let runs = a.u64("runs", 1..=1_000_000)?;
    let price = a.dur("price_cost")?;
    let read = a.dur("read_cost")?;
    let write = a.dur("write_cost")?;
    let mut w = WorkloadBuilder::new(format!("blackscholes[threads={threads}]"));
    // Thread i prices options [i * (options / threads), +options / threads) (bs_thread: the last
    // `options % threads` are never priced, as in the source).
    let share = options / threads as u64;
    let pricing = share.saturating_mul(runs).saturating_mul(price);
    let first = w.next_template() + 1;
    let main = (0..threads).fold(P::new().compute(options.saturating_mul(read)), |p, i| p.fork(first + i));
    w.task("main", main.wait_children().compute(options.saturating_mul(write)).build()).process =
        Some("blackscholes".into());
    for i in 0..threads {
        let t = w.task(format!("worker{i}"), P::new().compute(pricing).build());
        t.process = Some("blackscholes".into());
        t.instances = 0;
    }
    w.stop(StopWhen::AllDone);
    w.build()
}

/// The stages between the load and the output threads: name and cost parameter.
const PARALLEL_STAGES: [(&str, &str); 4] =
    [("seg", "seg_cost"), ("extract", "extract_cost"), ("vec", "vec_cost"), ("rank", "rank_cost")];

fn ferret(a: &Args) -> Result<Workload, String> {
    let n = a.u32("threads", 1..=10_000)?;
    let queries = a.u32("queries", 1..=10_000_000)?;
    let depth = a.u32("depth", 1..=1_000_000)?;
    let load = a.dur("load_cost")?;
    let out = a.dur("out_cost")?;
    let mut w = WorkloadBuilder::new(format!("ferret[threads={n}]"));
    // Queue q between stage q and stage q + 1: free slots and queued items.
    let queues: Vec<_> = (0..=PARALLEL_STAGES.len())
        .map(|q| (w.semaphore(format!("q{q}-free"), depth), w.semaphore(format!("q{q}-items"), 0)))
        .collect();
    let enqueue = |p: P, q: usize| p.sem_wait(queues[q].0).sem_post(queues[q].1);
    let dequeue = |p: P, q: usize| p.sem_wait(queues[q].1).sem_post(queues[q].0);
    let task = |w: &mut WorkloadBuilder, name: String, instances: u32, prog: P| {
        let t = w.task(name, prog.build());
        t.instances = instances;
        t.process = Some("ferret".into());
    };
    task(&mut w, "load".into(), 1, P::new().repeat(queries, |p| enqueue(p.compute(load), 0)));
    let (per_thread, extra) = (queries / n, queries % n);
    for (s, (stage, key)) in PARALLEL_STAGES.iter().enumerate() {
        let cost = a.dur(key)?;
        let body = |count: u32| P::new().repeat(count, |p| enqueue(dequeue(p, s).compute(cost), s + 1));
        // The first `extra` threads of a stage take one query more.
        if extra > 0 {
            task(&mut w, format!("{stage}+"), extra, body(per_thread + 1));
        }
        if per_thread > 0 {
            task(&mut w, stage.to_string(), n - extra, body(per_thread));
        }
    }
    let last = PARALLEL_STAGES.len();
    task(&mut w, "out".into(), 1, P::new().repeat(queries, |p| dequeue(p, last).compute(out)));
    w.stop(StopWhen::AllDone);
    w.build()
}
