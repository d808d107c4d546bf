//! Random workloads for `schedlab validate --random`: mixes of the behaviours schedulers are judged
//! on, none of them tuned for, each a pure function of (seed, index) and written as workload TOML so
//! it can be printed, saved and replayed.
//!
//! A workload draws a task budget of 2-64 and fills it with groups, each of one kind:
//!
//! * `hog`: CPU-bound threads at a random nice level (-10..=10), computing forever;
//! * `periodic`: rt-app style periodic threads (run 0.1-4 ms each period of 2-50 ms, timer-driven);
//! * `sleeper`: compute 50 us-5 ms, sleep 0.1-20 ms, forever;
//! * `locker`: threads of one process sharing a mutex (work outside, work inside, optionally a sleep);
//! * `cond`: a dispatcher that signals or broadcasts a condition variable to 1-4 waiting workers;
//! * `pipe`: sender/receiver pairs over a pipe (as threads or as two processes);
//! * `forker`: a process that forks 1-4 short-lived children, waits for them and sleeps, for a bounded
//!   number of rounds (all forkers of a workload create at most [`FORK_BUDGET`] children).
//!
//! A group is pinned to one random CPU with probability 1/4 (when the machine has more than one).
//! Group names are letters (`hog-a`, `pipe-c-send`) because `validate` compares tasks per kind, the
//! template name without its digits.

use schedlab_sim::random::RunRng;
use schedlab_workload::{fmt_duration, Dist};
use std::fmt::Write;

/// The most tasks one random workload starts with.
pub const MAX_TASKS: u64 = 64;

/// The most children the forkers of one workload create over the run.
pub const FORK_BUDGET: u64 = 120;

/// One random workload: its name and its TOML text.
pub struct RandomWorkload {
    /// `random-<seed>-<index>`.
    pub name: String,
    /// The workload as schedlab TOML (parses with `schedlab_workload::parse_toml`).
    pub toml: String,
    /// Tasks started at time zero (children of forkers not counted).
    pub tasks: u64,
}

struct Gen {
    rng: RunRng,
    toml: String,
    objects: String,
    ncpus: u64,
}

impl Gen {
    /// A uniform integer in `lo..=hi`.
    fn int(&mut self, lo: u64, hi: u64) -> u64 {
        self.rng.draw(Dist::Uniform { lo, hi })
    }

    /// A duration in `lo..=hi` nanoseconds, rounded to a microsecond (readable TOML).
    fn time(&mut self, lo: u64, hi: u64) -> String {
        let ns = self.int(lo / 1000, hi / 1000) * 1000;
        format!("\"{}\"", fmt_duration(ns))
    }

    /// One chance in `n`.
    fn one_in(&mut self, n: u64) -> bool {
        self.int(1, n) == 1
    }

    /// The scheduling properties of a group: a nice level (sometimes) and a pinned CPU (sometimes).
    fn props(&mut self, nice_always: bool) -> String {
        let mut s = String::new();
        if nice_always || self.one_in(3) {
            let nice = self.int(0, 20) as i64 - 10;
            let _ = writeln!(s, "nice = {nice}");
        }
        if self.ncpus > 1 && self.one_in(4) {
            let cpu = self.int(0, self.ncpus - 1);
            let _ = writeln!(s, "cpus = [{cpu}]");
        }
        s
    }

    fn task(&mut self, name: &str, instances: u64, extra: &str, ops: &str) {
        let _ =
            write!(self.toml, "\n[[task]]\nname = \"{name}\"\ninstances = {instances}\n{extra}ops = {ops}\n");
    }
}

/// The workload `index` of the random series `seed` for a machine of `ncpus` CPUs, `duration_ns` long.
pub fn generate(seed: u64, index: u64, ncpus: u64, duration_ns: u64) -> RandomWorkload {
    // Each workload has a generator of its own, so workload i is the same whatever N is.
    let mut g = Gen {
        rng: RunRng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index),
        toml: String::new(),
        objects: String::new(),
        ncpus: ncpus.max(1),
    };
    let budget = g.int(2, MAX_TASKS);
    let mut used = 0u64;
    let mut letter = b'a';
    let mut forks_left = FORK_BUDGET;
    while used < budget && letter <= b'z' {
        let left = budget - used;
        let l = letter as char;
        let kind = g.int(0, 6);
        let n = match kind {
            0 => {
                let k = g.int(1, 4.min(left));
                let p = g.props(true);
                let chunk = g.time(1_000_000, 10_000_000);
                g.task(
                    &format!("hog-{l}"),
                    k,
                    &p,
                    &format!("[ {{ loop = \"forever\", ops = [ {{ compute = {chunk} }} ] }} ]"),
                );
                k
            }
            1 => {
                let k = g.int(1, 3.min(left));
                let period = g.int(2_000, 50_000) * 1000;
                let run = g.time(100_000, (period / 2).min(4_000_000));
                let p = g.props(false);
                let ops = format!(
                    "[ {{ loop = \"forever\", ops = [ {{ compute = {run} }}, {{ timer = \"{}\" }} ] }} ]",
                    fmt_duration(period)
                );
                g.task(&format!("periodic-{l}"), k, &p, &ops);
                k
            }
            2 => {
                let k = g.int(1, 4.min(left));
                let run = g.time(50_000, 5_000_000);
                let sleep = g.time(100_000, 20_000_000);
                let p = g.props(false);
                let ops = format!(
                    "[ {{ loop = \"forever\", ops = [ {{ compute = {run} }}, {{ sleep = {sleep} }} ] }} ]"
                );
                g.task(&format!("sleeper-{l}"), k, &p, &ops);
                k
            }
            3 if left >= 2 => {
                let k = g.int(2, 6.min(left));
                let _ = write!(g.objects, "\n[[mutex]]\nname = \"m-{l}\"\n");
                let outside = g.time(10_000, 2_000_000);
                let inside = g.time(5_000, 500_000);
                let sleep = if g.one_in(2) {
                    format!(", {{ sleep = {} }}", g.time(50_000, 5_000_000))
                } else {
                    String::new()
                };
                let p = g.props(false) + "threads = true\n";
                let ops = format!(
                    "[ {{ loop = \"forever\", ops = [ {{ compute = {outside} }}, {{ lock = \"m-{l}\" }}, {{ compute = {inside} }}, {{ unlock = \"m-{l}\" }}{sleep} ] }} ]"
                );
                g.task(&format!("locker-{l}"), k, &p, &ops);
                k
            }
            4 if left >= 2 => {
                let k = g.int(1, 4.min(left - 1));
                let _ = write!(g.objects, "\n[[mutex]]\nname = \"cm-{l}\"\n\n[[cond]]\nname = \"c-{l}\"\n");
                let work = g.time(20_000, 3_000_000);
                let gap = g.time(200_000, 10_000_000);
                let wake = if g.one_in(2) { "broadcast" } else { "signal" };
                let p = g.props(false);
                let props = format!("{p}process = \"cond-{l}\"\n");
                let ops = format!(
                    "[ {{ loop = \"forever\", ops = [ {{ sleep = {gap} }}, {{ lock = \"cm-{l}\" }}, {{ {wake} = \"c-{l}\" }}, {{ unlock = \"cm-{l}\" }} ] }} ]"
                );
                g.task(&format!("cond-{l}-dispatch"), 1, &props, &ops);
                let ops = format!(
                    "[ {{ loop = \"forever\", ops = [ {{ lock = \"cm-{l}\" }}, {{ wait = \"c-{l}\", mutex = \"cm-{l}\" }}, {{ unlock = \"cm-{l}\" }}, {{ compute = {work} }} ] }} ]"
                );
                g.task(&format!("cond-{l}-worker"), k, &props, &ops);
                k + 1
            }
            5 if left >= 2 => {
                let pairs = g.int(1, 3.min(left / 2));
                let bytes = [64u64, 512, 4096][g.int(0, 2) as usize];
                let send_work = g.time(5_000, 1_000_000);
                let recv_work = g.time(5_000, 1_000_000);
                let threads = g.one_in(2);
                for i in 0..pairs {
                    let _ = write!(g.objects, "\n[[pipe]]\nname = \"p-{l}-{i}\"\ncapacity = 65536\n");
                }
                let p = g.props(false);
                // One template per side per pair (each pair its own pipe); the kind drops the digits.
                for i in 0..pairs {
                    let pl = format!("{p}process = \"pipe-{l}-{}\"\n", if threads { 0 } else { i });
                    let send = format!(
                        "[ {{ loop = \"forever\", ops = [ {{ compute = {send_work} }}, {{ send = \"p-{l}-{i}\", bytes = {bytes} }} ] }} ]"
                    );
                    let recv = format!(
                        "[ {{ loop = \"forever\", ops = [ {{ recv = \"p-{l}-{i}\", bytes = {bytes} }}, {{ compute = {recv_work} }} ] }} ]"
                    );
                    g.task(&format!("pipe-{l}-send{i}"), 1, &pl, &send);
                    // A receiver of a process pair is a process of its own.
                    let rl = if threads { pl.clone() } else { format!("{p}process = \"pipe-{l}-r{i}\"\n") };
                    g.task(&format!("pipe-{l}-recv{i}"), 1, &rl, &recv);
                }
                2 * pairs
            }
            6 if forks_left >= 4 => {
                let children = g.int(1, 4);
                // The whole workload forks at most FORK_BUDGET children (a real run's thread limit
                // counts every thread it creates), so a forker loops a bounded number of times.
                let rounds = g.int(1, (forks_left / children).min(20));
                forks_left -= rounds * children;
                let child_work = g.time(100_000, 5_000_000);
                let sleep = g.time(1_000_000, 20_000_000);
                // A process, as a forking program is (exec forks it, and it forks its children).
                let p = g.props(false);
                let forks = vec![format!("{{ fork = \"forker-{l}-child\" }}"); children as usize].join(", ");
                let ops = format!(
                    "[ {{ loop = {rounds}, ops = [ {forks}, {{ wait_children = true }}, {{ sleep = {sleep} }} ] }} ]"
                );
                g.task(&format!("forker-{l}"), 1, &p, &ops);
                g.task(&format!("forker-{l}-child"), 0, "", &format!("[ {{ compute = {child_work} }} ]"));
                1
            }
            _ => continue, // a group needing two tasks with one left: draw again
        };
        used += n;
        letter += 1;
    }
    let name = format!("random-{seed}-{index}");
    let mut toml = format!(
        "# schedlab validate --random: workload {index} of seed {seed} ({used} tasks at start)\nname = \"{name}\"\nduration = \"{}\"\n",
        fmt_duration(duration_ns)
    );
    toml.push_str(&g.objects);
    toml.push_str(&g.toml);
    RandomWorkload { name, toml, tasks: used }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_random_workload_parses_and_keeps_its_budget() {
        for i in 0..300 {
            let w = generate(7, i, 2, 2_000_000_000);
            let parsed = schedlab_workload::parse_toml(&w.name, &w.toml)
                .unwrap_or_else(|e| panic!("workload {i} does not parse: {e}\n{}", w.toml));
            let started: u64 = parsed.tasks.iter().map(|t| t.instances as u64).sum();
            assert_eq!(started, w.tasks, "{}", w.toml);
            assert!((2..=MAX_TASKS).contains(&started), "{started} tasks\n{}", w.toml);
            // Every child any forker creates, over the whole run.
            let forks: u64 = parsed
                .tasks
                .iter()
                .map(|t| {
                    let ops = &t.program.ops;
                    let per_round =
                        ops.iter().filter(|o| matches!(o, schedlab_workload::Op::Fork(_))).count() as u64;
                    let rounds = ops
                        .iter()
                        .find_map(|o| match o {
                            schedlab_workload::Op::Loop { count, .. } => Some(*count as u64),
                            _ => None,
                        })
                        .unwrap_or(1);
                    per_round * rounds
                })
                .sum();
            assert!(forks <= FORK_BUDGET, "{forks} forks\n{}", w.toml);
        }
    }

    #[test]
    fn a_workload_depends_on_seed_and_index_only() {
        assert_eq!(generate(3, 5, 2, 1_000_000_000).toml, generate(3, 5, 2, 1_000_000_000).toml);
        assert_ne!(generate(3, 5, 2, 1_000_000_000).toml, generate(3, 6, 2, 1_000_000_000).toml);
        assert_ne!(generate(3, 5, 2, 1_000_000_000).toml, generate(4, 5, 2, 1_000_000_000).toml);
    }

    #[test]
    fn the_series_covers_every_kind_of_group() {
        let all: String = (0..50).map(|i| generate(1, i, 4, 1_000_000_000).toml).collect();
        for kind in
            ["hog-", "periodic-", "sleeper-", "locker-", "cond-", "pipe-", "forker-", "cpus = [", "nice = -"]
        {
            assert!(all.contains(kind), "no `{kind}` in 50 workloads");
        }
    }
}
