//! Batch and throughput workloads: CPU hogs, the mixed demo, kernel builds, UnixBench spawn and execl,
//! Cheng's pi.pl processes, bonnie-like sequential I/O, and the burn* programs of the AVEC thesis.

use super::{Args, Generator};
use crate::builder::{ProgramBuilder as P, WorkloadBuilder};
use crate::model::{Activity, Dist, StopWhen, Workload};
use crate::TemplateId;
use schedlab_core::{NSEC_PER_MSEC as MS, NSEC_PER_USEC as US};

pub(super) fn generators() -> Vec<Generator> {
    vec![
        Generator {
            name: "demo",
            summary: "a mixed machine: CPU hogs at nice 0 and 5, interactive sleepers, pipe ping-pong pairs, threads contending on a mutex",
            models: "no single benchmark: a small mix that exercises fairness, wakeup latency and locking at once",
            simplifies: "not a real benchmark; fixed sizes chosen for a quick look",
            score: "none of its own; read utilization, fairness and wakeup latency",
            params: &[("hogs", "8", "CPU-bound tasks at nice 0 (half as many again at nice 5)")],
            build: demo,
        },
        Generator {
            name: "hogs",
            summary: "n CPU-bound tasks that never sleep",
            models: "the simplest fairness load (seed 003's 1-1000 CPU-bound processes without an end)",
            simplifies: "work is one endless compute loop; no memory or cache footprint beyond the engine's cache model",
            score: "work_ns per task; fairness.work_spread",
            params: &[("n", "16", "number of tasks"), ("nice", "0", "nice level of all tasks")],
            build: hogs,
        },
        Generator {
            name: "fibo",
            summary: "fibo (ULE paper): one thread computing forever without sleeping",
            models: "the CPU-bound half of seed 002's starvation experiment (fibo + sysbench)",
            simplifies: "the Fibonacci computation is an endless CPU burst; its memory footprint is not modelled",
            score: "work_ns of the fibo task (Fibonacci numbers computed are proportional to it)",
            params: &[("threads", "1", "computing threads")],
            build: fibo,
        },
        Generator {
            name: "pi",
            summary: "pi.pl (Cheng, seed 003): n identical CPU-bound processes of ~4 s each, optionally half at nice 10",
            models: "each process computes pi for `work` and exits; with nice_half the second half runs at nice 10",
            simplifies: "perl start-up and output are not modelled; each process is one CPU burst of `work`",
            score: "each process's elapsed time (exited_ns - started_ns) and their standard deviation",
            params: &[
                ("n", "10", "processes"),
                ("work", "4s", "CPU work per process"),
                ("nice_half", "false", "run the second half at nice 10"),
            ],
            build: pi,
        },
        Generator {
            name: "kernel-build",
            summary: "make -jN: a DAG of compile processes with CPU bursts and file I/O, then a link",
            models: "make forks one compiler process per file, at most `jobs` at a time: it starts `jobs`, then waits for a child to exit (`wait()`, as GNU make reaps its jobs) before it forks the next; a compile reads its source, computes a log-normal burst and writes its object on one disk; the link runs when all objects exist. With `processes=kbuild`, each file is Kbuild's command as Linux 2.6's x86 Makefile runs it: make forks a shell (fork, then exec), the shell runs the gcc driver, which runs cc1 and as connected by a pipe (`-pipe`, arch/x86/Makefile): cc1 parses for 40 % of its burst and then writes the assembly in 4 KiB stdio writes spread over the rest, as reads each write as it comes; then the shell runs fixdep. Every program is a fork and an exec (the kernel balances at both). Per file the burst is drawn once for the source tree (`tree_seed`: a tree compiles the same files in every run), and its assembly is `asm_per_ms` bytes a millisecond of burst",
            simplifies: "the dependency DAG is flattened to independent compiles plus one link; make's own CPU time and the page cache are not modelled; one disk serves all I/O; with `processes=kbuild` the programs' costs are fixed CPU bursts measured with perf stat and strace on a 2026 x86-64 VM compiling libbpf's C sources with gcc -O2 -pipe (dash -c: 0.84 ms; the gcc driver: 1.4 ms; as: 2 ms plus 45 us a KiB; fixdep as sed over a 7 KiB .d file: 1.2 ms; cc1: 170-240 bytes of assembly a ms, written 4 KiB at a time from 27-52 % of its life on), not on the papers' machines",
            score: "makespan_ns (the build time); counter `objects`",
            params: &[
                ("jobs", "4", "make -j"),
                ("files", "200", "compilation units"),
                ("compile", "150ms", "mean CPU burst per file"),
                ("compile_stddev", "100ms", "its standard deviation (log-normal)"),
                ("read", "2ms", "disk time to read a source"),
                ("write", "1ms", "disk time to write an object"),
                ("link", "1s", "CPU time of the final link"),
                ("processes", "compile", "`compile` (one process per file) or `kbuild` (make -> sh -> gcc -> cc1 | as, fixdep; fork and exec each)"),
                ("sh_cost", "900us", "kbuild: CPU time of the shell running one command"),
                ("driver_cost", "1400us", "kbuild: CPU time of the gcc driver"),
                ("as_cost", "2ms", "kbuild: CPU time of as apart from its input"),
                ("as_per_kib", "45us", "kbuild: CPU time of as per KiB of assembly"),
                ("asm_per_ms", "210", "kbuild: bytes of assembly cc1 writes per ms of its burst"),
                ("fixdep_cost", "1200us", "kbuild: CPU time of fixdep"),
                ("tree_seed", "1", "kbuild: the source tree (which burst each file has)"),
            ],
            build: kernel_build,
        },
        Generator {
            name: "unixbench-spawn",
            summary: "UnixBench spawn: fork a child that exits at once, wait for it, repeat",
            models: "the parent pays the fork cost, the child a short exit path; both are scheduled",
            simplifies: "fork and exit are CPU bursts of fixed cost; no copy-on-write or page-table work is modelled",
            score: "counter `spawns` per second (UnixBench reports loops per second)",
            params: &[("fork_cost", "30us", "parent CPU time per fork"), ("child_cost", "20us", "child CPU time before exit")],
            build: unixbench_spawn,
        },
        Generator {
            name: "unixbench-execl",
            summary: "UnixBench execl: a process re-executing itself",
            models: "each loop is the exec's work, then `execve()` of the same program (Linux balances the task at exec, `sched_exec`, and may move it to another CPU)",
            simplifies: "the exec's kernel work and the new image's first run are one CPU burst of fixed cost; the image is not modelled as memory, only as the cache refill of a move",
            score: "counter `execs` per second",
            params: &[("exec_cost", "300us", "CPU time per exec")],
            build: unixbench_execl,
        },
        Generator {
            name: "bonnie",
            summary: "bonnie++-like sequential I/O: processes doing block I/O against one disk",
            models: "each process loops block requests (a FIFO disk serves one at a time) with a little CPU per block",
            simplifies: "only sequential block I/O on one FIFO disk; no page cache, no seeks, no file-system metadata",
            score: "counter `blocks` per second",
            params: &[
                ("procs", "1", "I/O processes"),
                ("blocks", "1000", "blocks per process (0 = forever)"),
                ("block_io", "1ms", "disk service time per block"),
                ("block_cpu", "50us", "CPU time per block"),
            ],
            build: bonnie,
        },
        Generator {
            name: "burn",
            summary: "burnP5/P6/K6/K7/MMX/BX (AVEC thesis, seed 004): CPU burners with their activity vectors",
            models: "each burner computes forever; its activity vector is seed 004 table 4.1 (per 10,000 cycles)",
            simplifies: "the burner is an endless compute loop; only its activity vector distinguishes the kinds",
            score: "work_ns; co-scheduling effects come from the contention model",
            params: &[("kind", "P6", "P5, P6, K6, K7, MMX or BX"), ("n", "1", "instances")],
            build: burn,
        },
    ]
}

fn forever_compute(chunk: Ns) -> crate::model::Program {
    P::new().forever(|p| p.compute(chunk)).build()
}

use schedlab_core::Ns;

fn demo(a: &Args) -> Result<Workload, String> {
    let hogs = a.u32("hogs", 0..=10_000)?;
    let mut w = WorkloadBuilder::new("demo");
    w.task("hog", forever_compute(10 * MS)).instances = hogs;
    let niced = w.task("hog-nice5", forever_compute(10 * MS));
    niced.instances = hogs / 2;
    niced.nice = 5;
    w.task("editor", P::new().forever(|p| p.sleep(20 * MS).compute(500 * US)).build()).instances = 4;
    for i in 0..2 {
        let ab = w.pipe(format!("ping{i}"), 65536);
        let ba = w.pipe(format!("pong{i}"), 65536);
        w.task(
            format!("ping{i}"),
            P::new().forever(|p| p.send(ab, 64).recv(ba, 64).compute(20 * US)).build(),
        );
        w.task(
            format!("pong{i}"),
            P::new().forever(|p| p.recv(ab, 64).compute(20 * US).send(ba, 64)).build(),
        );
    }
    let m = w.mutex("lock");
    let t = w.task(
        "locker",
        P::new().forever(|p| p.compute(200 * US).lock(m).compute(50 * US).unlock(m).sleep(MS)).build(),
    );
    t.instances = 4;
    t.threads = true;
    w.build()
}

fn hogs(a: &Args) -> Result<Workload, String> {
    let n = a.u32("n", 1..=100_000)?;
    let nice = a.i64("nice", -20..=19)? as i8;
    let mut w = WorkloadBuilder::new(format!("hogs[n={n}]"));
    let t = w.task("hog", forever_compute(10 * MS));
    t.instances = n;
    t.nice = nice;
    w.build()
}

fn fibo(a: &Args) -> Result<Workload, String> {
    let n = a.u32("threads", 1..=10_000)?;
    let mut w = WorkloadBuilder::new("fibo");
    w.task("fibo", forever_compute(10 * MS)).instances = n;
    w.build()
}

fn pi(a: &Args) -> Result<Workload, String> {
    let n = a.u32("n", 1..=100_000)?;
    let work = a.dur("work")?;
    let half = a.bool("nice_half")?;
    let mut w = WorkloadBuilder::new("pi");
    let prog = P::new().compute(work).build();
    if half {
        w.task("pi", prog.clone()).instances = n - n / 2;
        let t = w.task("pi-nice10", prog);
        t.instances = n / 2;
        t.nice = 10;
    } else {
        w.task("pi", prog).instances = n;
    }
    w.stop(StopWhen::AllDone);
    w.build()
}

fn kernel_build(a: &Args) -> Result<Workload, String> {
    let jobs = a.u32("jobs", 1..=10_000)?;
    let files = a.u32("files", 1..=1_000_000)?;
    let (mean, stddev) = (a.dur("compile")?, a.dur("compile_stddev")?);
    if mean == 0 {
        return Err("workload `kernel-build`: `compile` must be above zero".into());
    }
    let (read, write, link) = (a.dur("read")?, a.dur("write")?, a.dur("link")?);
    if a.choice("processes", &["compile", "kbuild"])? == "kbuild" {
        let costs = KbuildCosts {
            sh: a.dur("sh_cost")?,
            driver: a.dur("driver_cost")?,
            as_base: a.dur("as_cost")?,
            as_per_kib: a.dur("as_per_kib")?,
            asm_per_ms: a.u32("asm_per_ms", 1..=1_000_000)?,
            fixdep: a.dur("fixdep_cost")?,
        };
        let tree = a.u32("tree_seed", 0..=u32::MAX)?;
        return kbuild(jobs, files, (mean, stddev), (read, write, link), costs, tree);
    }
    let kbuild_only =
        ["sh_cost", "driver_cost", "as_cost", "as_per_kib", "asm_per_ms", "fixdep_cost", "tree_seed"];
    if let Some(key) = kbuild_only.iter().find(|k| a.given(k)) {
        return Err(format!("workload `kernel-build`: `{key}` applies only with `processes=kbuild`"));
    }
    let mut w = WorkloadBuilder::new(format!("kernel-build[jobs={jobs}]"));
    let disk = w.device("disk");
    let objects = w.counter("objects");
    let cc = w.next_template() + 1;
    let ld = cc + 1;
    // make -j: the first `jobs` compiles, then one more each time one exits (see `make_jobs`).
    let mut make = P::new().repeat(jobs.min(files), |p| p.fork(cc));
    if files > jobs {
        make = make.repeat(files - jobs, |p| p.wait_child().fork(cc));
    }
    w.task("make", make.wait_children().fork(ld).wait_children().build());
    let compile = Dist::LogNormal { mean, stddev };
    w.task("cc", P::new().io(disk, read).compute(compile).io(disk, write).count(objects).build()).instances =
        0;
    w.task("ld", P::new().io(disk, read).compute(link).io(disk, write).build()).instances = 0;
    w.stop(StopWhen::AllDone);
    w.build()
}

/// make's job loop with `-j jobs`: it forks the first `jobs` jobs, then, for each further job,
/// waits for a running one to exit (GNU make reaps its children with `wait()`; its job token goes
/// back when it has) and forks the next; `template(f)` is file f's job.
fn make_jobs(mut p: P, jobs: u32, files: u32, template: impl Fn(u32) -> TemplateId) -> P {
    for f in 0..files {
        if f >= jobs {
            p = p.wait_child();
        }
        p = p.fork(template(f));
    }
    p
}

/// The fixed CPU costs of `kernel-build[processes=kbuild]`'s programs.
struct KbuildCosts {
    sh: u64,
    driver: u64,
    as_base: u64,
    as_per_kib: u64,
    asm_per_ms: u32,
    fixdep: u64,
}

/// cc1's stdio buffer: it writes its assembly 4 KiB at a time (measured with strace on gcc -pipe).
const STDIO_CHUNK: u32 = 4096;
/// The part of cc1's burst before its first write (measured: 27-52 % of cc1's life).
const CC1_PARSE_PERMILLE: u64 = 400;

/// `kernel-build[processes=kbuild]`: per file, make forks a child that execs the shell; the shell
/// forks a child that execs the gcc driver, which forks children that exec cc1 and as, joined by a
/// pipe; then the shell forks a child that execs fixdep, and returns the job token. Every program has
/// its own templates, so each file's cc1 and as share a pipe of their own.
fn kbuild(
    jobs: u32,
    files: u32,
    (mean, stddev): (u64, u64),
    (read, write, link): (u64, u64, u64),
    c: KbuildCosts,
    tree: u32,
) -> Result<Workload, String> {
    if files > 20_000 {
        return Err(format!(
            "workload `kernel-build`: processes=kbuild models at most 20000 files, not {files}"
        ));
    }
    let mut w = WorkloadBuilder::new(format!("kernel-build[jobs={jobs},processes=kbuild]"));
    let disk = w.device("disk");
    let objects = w.counter("objects");
    // Templates: make, then 8 per file (for sh, gcc, cc1 and as: the forked copy of its parent,
    // named after the program it execs, and that program, `-exec`), then fixdep's two and the link.
    const PER_FILE: u32 = 8;
    let make = w.next_template();
    let first = make + 1;
    let fixdep_fork = first + PER_FILE * files;
    let (fixdep, ld) = (fixdep_fork + 1, fixdep_fork + 2);
    let make_prog = make_jobs(P::new(), jobs, files, |f| first + PER_FILE * f);
    w.task("make", make_prog.wait_children().fork(ld).wait_children().build());
    let mut burst = TreeBursts::new(tree, mean, stddev);
    for f in 0..files {
        let t = first + PER_FILE * f;
        let (sh, gcc_fork, gcc, cc1_fork, cc1, as_fork, asm) =
            (t + 1, t + 2, t + 3, t + 4, t + 5, t + 6, t + 7);
        let pipe = w.pipe(format!("cc1-as-{f}"), 65_536);
        let ns = burst.next();
        let asm_bytes = (ns as u128 * c.asm_per_ms as u128 / MS as u128) as u64;
        let chunks = asm_bytes.div_ceil(STDIO_CHUNK as u64).max(1) as u32;
        let parse = ns * CC1_PARSE_PERMILLE / 1000;
        let per_chunk = (ns - parse) / chunks as u64;
        let as_per_chunk = c.as_per_kib * (STDIO_CHUNK as u64 / 1024);
        w.task(format!("sh-{f}"), P::new().exec(sh).build()).instances = 0;
        w.task(
            format!("sh-{f}-exec"),
            P::new().compute(c.sh).fork(gcc_fork).wait_children().fork(fixdep_fork).wait_children().build(),
        )
        .instances = 0;
        w.task(format!("gcc-{f}"), P::new().exec(gcc).build()).instances = 0;
        w.task(
            format!("gcc-{f}-exec"),
            P::new().compute(c.driver).fork(cc1_fork).fork(as_fork).wait_children().build(),
        )
        .instances = 0;
        w.task(format!("cc1-{f}"), P::new().exec(cc1).build()).instances = 0;
        w.task(
            format!("cc1-{f}-exec"),
            P::new()
                .io(disk, read)
                .compute(parse)
                .repeat(chunks, |p| p.compute(per_chunk).send(pipe, STDIO_CHUNK))
                .build(),
        )
        .instances = 0;
        w.task(format!("as-{f}"), P::new().exec(asm).build()).instances = 0;
        w.task(
            format!("as-{f}-exec"),
            P::new()
                .compute(c.as_base)
                .repeat(chunks, |p| p.recv(pipe, STDIO_CHUNK).compute(as_per_chunk))
                .io(disk, write)
                .count(objects)
                .build(),
        )
        .instances = 0;
    }
    w.task("fixdep", P::new().exec(fixdep).build()).instances = 0;
    w.task("fixdep-exec", P::new().compute(c.fixdep).build()).instances = 0;
    w.task("ld", P::new().io(disk, read).compute(link).io(disk, write).build()).instances = 0;
    w.stop(StopWhen::AllDone);
    w.build()
}

/// Each file's compile burst, drawn once for a source tree: a log-normal of the given mean and
/// standard deviation from a splitmix64 stream seeded by the tree (Box-Muller), so a tree compiles
/// the same files in every run whatever the run's seed.
struct TreeBursts {
    state: u64,
    mu: f64,
    sigma: f64,
}

impl TreeBursts {
    fn new(tree: u32, mean: u64, stddev: u64) -> TreeBursts {
        let (m, s) = (mean as f64, stddev as f64);
        let sigma2 = (1.0 + (s * s) / (m * m)).ln();
        TreeBursts {
            state: 0x9e37_79b9_7f4a_7c15 ^ tree as u64,
            mu: m.ln() - sigma2 / 2.0,
            sigma: sigma2.sqrt(),
        }
    }

    fn unit(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// The next file's burst in ns, at least 1 us.
    fn next(&mut self) -> u64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let x = (self.mu + self.sigma * z).exp();
        (x.round() as u64).clamp(US, crate::MAX_TIME_NS)
    }
}

fn unixbench_spawn(a: &Args) -> Result<Workload, String> {
    let (fork_cost, child_cost) = (a.dur("fork_cost")?, a.dur("child_cost")?);
    if fork_cost + child_cost == 0 {
        return Err("workload `unixbench-spawn`: fork_cost and child_cost cannot both be zero".into());
    }
    let mut w = WorkloadBuilder::new("unixbench-spawn");
    let c = w.counter("spawns");
    let child = w.next_template() + 1;
    w.task("spawn", P::new().forever(|p| p.compute(fork_cost).fork(child).wait_children().count(c)).build());
    w.task("child", P::new().compute(child_cost).build()).instances = 0;
    w.build()
}

fn unixbench_execl(a: &Args) -> Result<Workload, String> {
    let cost = a.dur("exec_cost")?;
    if cost == 0 {
        return Err("workload `unixbench-execl`: exec_cost must be above zero".into());
    }
    let mut w = WorkloadBuilder::new("unixbench-execl");
    let c = w.counter("execs");
    let me = w.next_template();
    w.task("execl", P::new().compute(cost).count(c).exec(me).build());
    w.build()
}

fn bonnie(a: &Args) -> Result<Workload, String> {
    let procs = a.u32("procs", 1..=10_000)?;
    let blocks = a.u32("blocks", 0..=100_000_000)?;
    let (io, cpu) = (a.dur("block_io")?, a.dur("block_cpu")?);
    if io == 0 {
        return Err("workload `bonnie`: block_io must be above zero".into());
    }
    let mut w = WorkloadBuilder::new("bonnie");
    let disk = w.device("disk");
    let c = w.counter("blocks");
    w.task("bonnie", P::new().repeat(blocks, |p| p.io(disk, io).compute(cpu).count(c)).build()).instances =
        procs;
    if blocks > 0 {
        w.stop(StopWhen::AllDone);
    }
    w.build()
}

/// Seed 004 table 4.1: (name, instr, cycles, l2, bus, mmx, sse, x87, branch, int).
const BURN_AVECS: [(&str, [u32; 9]); 6] = [
    ("P5", [6822, 10000, 0, 178, 0, 0, 3208, 201, 202]),
    ("P6", [8559, 10000, 0, 11, 0, 0, 2443, 1833, 0]),
    ("K6", [8514, 10000, 68, 0, 0, 0, 2444, 1833, 0]),
    ("K7", [9096, 10000, 0, 110, 0, 0, 2139, 1070, 1607]),
    ("MMX", [7891, 9999, 10258, 24, 4925, 0, 0, 1316, 0]),
    ("BX", [2, 9999, 10386, 11187, 0, 0, 0, 0, 1]),
];

/// The activity vector of a burn program (seed 004 table 4.1).
pub fn burn_activity(kind: &str) -> Option<Activity> {
    let (_, v) = BURN_AVECS.iter().find(|(k, _)| *k == kind)?;
    let mut a = Activity::default();
    for (name, value) in Activity::FIELDS.iter().zip(v) {
        a.set(name, *value);
    }
    Some(a)
}

fn burn(a: &Args) -> Result<Workload, String> {
    let kind = a.choice("kind", &["P5", "P6", "K6", "K7", "MMX", "BX"])?;
    let n = a.u32("n", 1..=100_000)?;
    let mut w = WorkloadBuilder::new(format!("burn{kind}"));
    let t = w.task(format!("burn{kind}"), forever_compute(10 * MS));
    t.instances = n;
    t.activity = burn_activity(kind);
    w.build()
}
