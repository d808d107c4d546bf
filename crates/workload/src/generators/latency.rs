//! Latency benchmarks: schbench, cyclictest, an interactive editor model, the latency probe, and the
//! background activity of a running system.

use super::{Args, Generator};
use crate::builder::{ProgramBuilder as P, WorkloadBuilder};
use crate::model::{Dist, StopWhen, Workload};
use schedlab_core::SchedClass;

pub(super) fn generators() -> Vec<Generator> {
    vec![
        Generator {
            name: "schbench",
            summary: "schbench: message threads wake worker threads; workers sleep, then compute under a lock",
            models: "each message thread waits until its workers have all checked in, then wakes them one after another; a woken worker sleeps `sleep`, takes its lock, computes `work` (the matrix multiplies) and checks in again; simplification: one lock per worker instead of per CPU, and a round-based rather than list-based hand-off",
            simplifies: "one lock per worker instead of per CPU; the message thread releases workers round by round after all have checked in",
            score: "wakeup latency of the worker tasks (p50/p90/p99/p99.9); counter `requests` per second",
            params: &[
                ("message_threads", "1", "-m"),
                ("workers", "16", "-t: workers per message thread (schbench defaults to CPUs / m)"),
                ("sleep", "100us", "-s: worker sleep before each request"),
                ("work", "50us", "CPU time of the request (-n 5 matrix multiplies over -F 256 KB)"),
            ],
            build: schbench,
        },
        Generator {
            name: "cyclictest",
            summary: "cyclictest: threads waking on absolute timers, measuring how late they run",
            models: "thread i sleeps with an absolute timer of period interval + i x distance and does almost nothing when it wakes",
            simplifies: "the measuring thread does 1 us of work per wakeup; no clock_nanosleep slack or timer-interrupt cost",
            score: "wakeup latency per thread (cyclictest's Min/Avg/Max)",
            params: &[
                ("threads", "1", "-t"),
                ("interval", "1000us", "-i: base period"),
                ("distance", "500us", "-d: period increment per thread"),
                ("priority", "0", "-p: SCHED_FIFO priority (0 = SCHED_OTHER)"),
                ("loops", "0", "-l: wakeups per thread (0 = until the run ends)"),
            ],
            build: cyclictest,
        },
        Generator {
            name: "editor",
            summary: "an interactive editor: short CPU bursts after think-time sleeps",
            models: "exponential think times and uniform bursts, the interactive load of seed 003 and seed 000",
            simplifies: "keystroke handling is one uniform CPU burst after an exponential think time",
            score: "wakeup latency (responsiveness); counter `keystrokes`; with `keystrokes` set, each editor's elapsed time (exit minus start, seed 003's `time`) and the makespan",
            params: &[
                ("n", "1", "editors"),
                ("think", "200ms", "mean think time"),
                ("burst_min", "1ms", "shortest burst"),
                ("burst_max", "5ms", "longest burst"),
                (
                    "keystrokes",
                    "0",
                    "keystrokes per editor, after which it exits (an editing session of a given length, as seed 003's Expect script edits a file and ends); 0: it types forever",
                ),
            ],
            build: editor,
        },
        Generator {
            name: "latency-probe",
            summary: "a probe that sleeps, wakes and reads the clock: how late it runs is the latency",
            models: "the latency measure of seed 000 sec. 5.1: one process sleeps `period` (a relative sleep, usleep), then reads the clock and records how much later than asked it woke, `work` of CPU time; it is a background task, so a run stops when the workload beside it is done (include it with `{ spec = \"latency-probe\" }` and `stop = \"all_done\"`)",
            simplifies: "the timer fires exactly (high-resolution timers, no timer slack): the lateness is the wakeup latency, from the timer's expiry until the probe runs",
            score: "the probe's wakeup latency (`tasks[*probe*].wakeup_latency.max_ns`, its mean and percentiles); counter `probes`",
            params: &[
                ("period", "250ms", "sleep per probe"),
                ("work", "10us", "CPU time per wakeup: reading the clock and recording the lateness"),
            ],
            build: latency_probe,
        },
        Generator {
            name: "system-noise",
            summary: "the background activity of a running system: per-CPU kernel threads and daemons waking now and then for a moment",
            models: "`n` background tasks (kernel threads such as a CPU's events/N or kblockd/N, and daemons), each waking after exponential intervals of mean `interval` and computing `work`; a woken one preempts a CPU-bound task, which is how a process alone on a CPU still counts involuntary context switches. The default rate is seed 003's own measurement (fig. 4.4): one pi.pl process alone on its core was switched involuntarily 13.6 times in 4.63 s under CFS and 13.48 times in 4.55 s under O(1), 2.95 a second: a mean interval of 340 ms. Background tasks: a run does not wait for them. Pin them with the workload (`taskset`, include `cpus`) where they stand for one CPU's kernel threads",
            simplifies: "one kind of waker at one mean rate (a Poisson process) with a fixed burst, where a real system's kernel threads and daemons each have their own period and work",
            score: "none of its own: it is there for what it does to the foreground tasks (their `nivcsw`)",
            params: &[
                ("n", "1", "background tasks"),
                ("interval", "340ms", "mean time between one task's wakeups"),
                ("work", "50us", "CPU time per wakeup"),
            ],
            build: system_noise,
        },
    ]
}

fn system_noise(a: &Args) -> Result<Workload, String> {
    let n = a.u32("n", 1..=100_000)?;
    let (interval, work) = (a.dur("interval")?, a.dur("work")?);
    if interval == 0 {
        return Err("workload `system-noise`: interval must be above zero".into());
    }
    let mut w = WorkloadBuilder::new("system-noise");
    let c = w.counter("noise_wakeups");
    let prog = P::new().forever(|p| p.sleep(Dist::Exponential { mean: interval }).compute(work).count(c));
    let t = w.task("noise", prog.build());
    t.instances = n;
    t.background = true;
    w.build()
}

fn latency_probe(a: &Args) -> Result<Workload, String> {
    let (period, work) = (a.dur("period")?, a.dur("work")?);
    if period == 0 {
        return Err("workload `latency-probe`: period must be above zero".into());
    }
    let mut w = WorkloadBuilder::new("latency-probe");
    let c = w.counter("probes");
    let t = w.task("probe", P::new().forever(|p| p.sleep(period).compute(work).count(c)).build());
    t.background = true;
    w.build()
}

fn schbench(a: &Args) -> Result<Workload, String> {
    let m = a.u32("message_threads", 1..=1000)?;
    let t = a.u32("workers", 1..=10_000)?;
    let (sleep, work) = (a.dur("sleep")?, a.dur("work")?);
    let mut w = WorkloadBuilder::new("schbench");
    let requests = w.counter("requests");
    for i in 0..m {
        let checkin = w.semaphore(format!("m{i}-checkin"), 0);
        let wake: Vec<u32> = (0..t).map(|j| w.semaphore(format!("m{i}-w{j}"), 0)).collect();
        let msg = P::new().forever(|mut p| {
            p = p.repeat(t, |q| q.sem_wait(checkin));
            for &s in &wake {
                p = p.sem_post(s);
            }
            p
        });
        w.task(format!("message{i}"), msg.build()).process = Some("schbench".into());
        for (j, &s) in wake.iter().enumerate() {
            let lock = w.mutex(format!("m{i}-w{j}-lock"));
            let worker = P::new().forever(|p| {
                p.sem_post(checkin)
                    .sem_wait(s)
                    .sleep(sleep)
                    .lock(lock)
                    .compute(work)
                    .unlock(lock)
                    .count(requests)
            });
            w.task(format!("m{i}-worker{j}"), worker.build()).process = Some("schbench".into());
        }
    }
    w.build()
}

fn cyclictest(a: &Args) -> Result<Workload, String> {
    let threads = a.u32("threads", 1..=10_000)?;
    let (interval, distance) = (a.dur("interval")?, a.dur("distance")?);
    let prio = a.u32("priority", 0..=99)?;
    let loops = a.u32("loops", 0..=u32::MAX)?;
    if interval == 0 {
        return Err("workload `cyclictest`: interval must be above zero".into());
    }
    let mut w = WorkloadBuilder::new("cyclictest");
    for i in 0..threads {
        let period = interval + i as u64 * distance;
        let t = w.task(
            format!("cyclic{i}"),
            P::new().repeat(loops, |p| p.timer_absolute(period).compute(1_000)).build(),
        );
        t.process = Some("cyclictest".into());
        if prio > 0 {
            t.class = SchedClass::Fifo;
            t.rt_priority = prio as u8;
        }
    }
    if loops > 0 {
        w.stop(crate::model::StopWhen::AllDone);
    }
    w.build()
}

fn editor(a: &Args) -> Result<Workload, String> {
    let n = a.u32("n", 1..=100_000)?;
    let think = a.dur("think")?;
    let (lo, hi) = (a.dur("burst_min")?, a.dur("burst_max")?);
    if lo > hi {
        return Err("workload `editor`: burst_min is above burst_max".into());
    }
    let keystrokes = a.u32("keystrokes", 0..=u32::MAX)?;
    let mut w = WorkloadBuilder::new("editor");
    let c = w.counter("keystrokes");
    let keystroke =
        |p: P| p.sleep(Dist::Exponential { mean: think }).compute(Dist::Uniform { lo, hi }).count(c);
    let prog =
        if keystrokes == 0 { P::new().forever(keystroke) } else { P::new().repeat(keystrokes, keystroke) };
    w.task("editor", prog.build()).instances = n;
    if keystrokes > 0 {
        w.stop(StopWhen::AllDone);
    }
    w.build()
}
