//! `schedlab calibrate`: measures this machine (topology, timer frequency, the cost of a context
//! switch, of a cross-CPU wakeup and of leaving idle) and writes a machine file for the simulator.
//!
//! The measurements follow the usual micro-benchmarks: a pipe ping-pong between two threads pinned to
//! one CPU (two switches per round trip, the address space kept: `thread_switch_ns`), between two
//! processes on one CPU (each switch changes address space: `context_switch_ns`) and between threads
//! on two CPUs (two cross-CPU wakeups), the same pipe
//! writes and reads done by one thread (the system calls without a switch), and a thread sleeping on
//! an absolute timer with its timer slack set to 1 ns (the wake-up path from idle). Each number is the
//! median of five runs. How they map onto the simulator's costs is in [`Calibration::costs`]; the
//! default timer slack of a thread (`PR_GET_TIMERSLACK`) becomes `timer_slack_ns`, and half the pipe
//! write + read pair (one light system call) becomes `syscall_ns`. A write pass over a 256 KiB working
//! set right after a move between CPUs 0 and 1, against one on the CPU that just touched it, gives the
//! refill time of such a move (`refill_smt_ns` or `refill_llc_ns`, by how the two share caches).

use crate::sys::{self, now_ns, Pipe, PipeMode};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What was measured, ns unless stated.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Host name.
    pub host: String,
    /// Kernel release.
    pub kernel: String,
    /// Online CPUs.
    pub nr_cpus: usize,
    /// Distinct physical packages.
    pub sockets: usize,
    /// Hardware threads per core.
    pub threads_per_core: usize,
    /// NUMA nodes.
    pub nodes: usize,
    /// CONFIG_HZ, if found.
    pub hz: Option<u32>,
    /// One 4-byte pipe write plus one read by the same thread.
    pub pipe_pair_ns: u64,
    /// Half a ping-pong round trip between two threads on one CPU.
    pub same_cpu_half_rt_ns: u64,
    /// Half a ping-pong round trip between two processes on one CPU (`None` if the fork failed).
    pub same_cpu_process_half_rt_ns: Option<u64>,
    /// Half a ping-pong round trip between threads on CPU 0 and CPU 1 (`None` with one CPU).
    pub cross_cpu_half_rt_ns: Option<u64>,
    /// The same with an idle-policy thread spinning on each CPU, so every wakeup reaches a busy
    /// CPU (`None` with one CPU).
    pub busy_cross_cpu_half_rt_ns: Option<u64>,
    /// Median lateness of a 1 ms absolute timer with 1 ns timer slack.
    pub timer_latency_ns: u64,
    /// The default timer slack of a thread (`PR_GET_TIMERSLACK`).
    pub timer_slack_ns: u64,
    /// The median time a spinning thread loses to each periodic tick (`None`: no tick seen, as on
    /// a CPU that runs tickless while busy).
    pub tick_gap_ns: Option<u64>,
    /// The extra time of one pass over a 256 KiB working set right after moving between CPUs 0 and 1,
    /// and how those CPUs share caches (`None` with one CPU).
    pub migration: Option<(u64, CacheSharing)>,
    /// Per-kind kernel path costs (crate::kernel_costs).
    pub paths: crate::kernel_costs::KernelCosts,
}

/// The simulator's machine-level costs derived from a [`Calibration`] ([`Calibration::costs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DerivedCosts {
    /// `context_switch_ns`: a switch between processes (of address space).
    pub context_switch_ns: u64,
    /// `thread_switch_ns`: a switch between threads of one process.
    pub thread_switch_ns: u64,
    /// `idle_exit_ns` (the exit of an idle CPU an IPI wakes).
    pub idle_exit_ns: u64,
    /// `wakeup_ipi_ns`.
    pub wakeup_ipi_ns: u64,
    /// `timer_exit_ns` (a timer's delivery to an idle CPU).
    pub timer_exit_ns: u64,
}

/// How CPUs 0 and 1 share caches, from /sys/devices/system/cpu/cpu0/{topology,cache}.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheSharing {
    /// SMT siblings of one core.
    Smt,
    /// Different cores sharing the last-level cache.
    Llc,
    /// No shared cache.
    None,
}

impl CacheSharing {
    /// The machine file's refill key for a move between such CPUs.
    pub fn refill_key(self) -> Option<&'static str> {
        match self {
            CacheSharing::Smt => Some("refill_smt_ns"),
            CacheSharing::Llc => Some("refill_llc_ns"),
            CacheSharing::None => None,
        }
    }
}

fn cpu_list_has(path: &str, cpu: u32) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    text.trim().split(',').any(|part| match part.split_once('-') {
        Some((a, b)) => a.parse::<u32>().is_ok_and(|a| a <= cpu) && b.parse::<u32>().is_ok_and(|b| cpu <= b),
        None => part.parse::<u32>() == Ok(cpu),
    })
}

fn cache_sharing_0_1() -> CacheSharing {
    let base = "/sys/devices/system/cpu/cpu0";
    if cpu_list_has(&format!("{base}/topology/thread_siblings_list"), 1) {
        return CacheSharing::Smt;
    }
    let shared_llc = (0..8).rev().any(|i| cpu_list_has(&format!("{base}/cache/index{i}/shared_cpu_list"), 1));
    if shared_llc {
        CacheSharing::Llc
    } else {
        CacheSharing::None
    }
}

/// The working set of the migration measurement: 256 KiB, a task's hot data that fits a core's
/// private L2 on current CPUs (the model's refill is one number for every task; a larger working set
/// refills for longer).
const WORKING_SET_BYTES: usize = 256 << 10;

/// Median over 21 moves of the extra time of one write pass over the working set (one word per
/// 64-byte line) right after moving between CPUs `a` and `b`, against a pass on the CPU that just
/// touched it: the lines then come from the other core's cache instead of this one's.
fn migration_extra(a: u32, b: u32) -> u64 {
    std::thread::spawn(move || {
        let mut buf = vec![0u64; WORKING_SET_BYTES / 8];
        let pass = |buf: &mut Vec<u64>| {
            let t0 = now_ns();
            for x in buf.iter_mut().step_by(8) {
                *x = std::hint::black_box(x.wrapping_add(1));
            }
            now_ns() - t0
        };
        let mut extra = Vec::with_capacity(21);
        for i in 0..21 {
            let (from, to) = if i % 2 == 0 { (a, b) } else { (b, a) };
            let _ = sys::set_affinity(0, &[from]);
            pass(&mut buf);
            let warm = pass(&mut buf);
            let _ = sys::set_affinity(0, &[to]);
            let cold = pass(&mut buf);
            extra.push(cold.saturating_sub(warm));
        }
        median(extra)
    })
    .join()
    .unwrap_or(0)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

const ROUND_TRIPS: u64 = 20_000;

/// Ping-pong between a thread on `a` and one on `b`: ns per round trip.
fn ping_pong(a: u32, b: u32) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let (ping, pong) = (
        Arc::new(Pipe::new(PipeMode::Stream { bytes: 4096 }).expect("pipe")),
        Arc::new(Pipe::new(PipeMode::Stream { bytes: 4096 }).expect("pipe")),
    );
    let (p2, q2, s2) = (ping.clone(), pong.clone(), stop.clone());
    let echo = std::thread::spawn(move || {
        let _ = sys::set_affinity(0, &[b]);
        let mut buf = [0u8; 4];
        for _ in 0..ROUND_TRIPS {
            if !p2.read_exact(&mut buf, &s2) || !q2.write_all(&buf, &s2) {
                break;
            }
        }
    });
    let _ = sys::set_affinity(0, &[a]);
    let mut buf = [0u8; 4];
    // Let the echo thread reach its first read.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let t0 = now_ns();
    for _ in 0..ROUND_TRIPS {
        if !ping.write_all(&buf, &stop) || !pong.read_exact(&mut buf, &stop) {
            break;
        }
    }
    let dt = now_ns() - t0;
    let _ = echo.join();
    let _ = sys::set_affinity(0, &[]);
    dt / ROUND_TRIPS
}

/// Ping-pong between this thread and a forked process, both on CPU `cpu` (the child inherits the
/// pin): ns per round trip, each switch one of address space. `None` if the fork failed.
fn ping_pong_processes(cpu: u32) -> Option<u64> {
    let ping = Pipe::new(PipeMode::Stream { bytes: 4096 }).ok()?;
    let pong = Pipe::new(PipeMode::Stream { bytes: 4096 }).ok()?;
    let _ = sys::set_affinity(0, &[cpu]);
    // SAFETY: fork; the child only reads and writes the two pipes' descriptors and ends with
    // _exit (no allocation, no lock another thread may hold).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut buf = [0u8; 4];
        for _ in 0..ROUND_TRIPS {
            // SAFETY: open descriptors and a 4-byte buffer.
            let r = unsafe { libc::read(ping.rd, buf.as_mut_ptr().cast(), 4) };
            // SAFETY: as above.
            if r != 4 || unsafe { libc::write(pong.wr, buf.as_ptr().cast(), 4) } != 4 {
                break;
            }
        }
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let rt = (pid > 0).then(|| {
        // Let the child reach its first read.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mut buf = [0u8; 4];
        let t0 = now_ns();
        let mut done = 0;
        for _ in 0..ROUND_TRIPS {
            // SAFETY: open descriptors and a 4-byte buffer.
            let w = unsafe { libc::write(ping.wr, buf.as_ptr().cast(), 4) };
            // SAFETY: as above.
            if w != 4 || unsafe { libc::read(pong.rd, buf.as_mut_ptr().cast(), 4) } != 4 {
                break;
            }
            done += 1;
        }
        let dt = now_ns() - t0;
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        dt / u64::max(done, 1)
    });
    let _ = sys::set_affinity(0, &[]);
    rt.filter(|&ns| ns > 0)
}

/// [`ping_pong`] between `a` and `b` while a SCHED_IDLE thread spins on each: every wakeup then
/// reaches a busy CPU (the woken thread preempts the spinner at once, as a normal task always
/// preempts an idle-policy one), so the round trip has the IPI and no idle exit.
fn ping_pong_busy(a: u32, b: u32) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = [a, b]
        .into_iter()
        .map(|cpu| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let _ = sys::set_affinity(0, &[cpu]);
                let _ = sys::set_policy(0, sys::Policy::Idle);
                let mut x = 1;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = crate::calibrate::burn(1024, x);
                }
                x
            })
        })
        .collect();
    // Let the spinners start and settle on their CPUs.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let rt = ping_pong(a, b);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in hogs {
        let _ = h.join();
    }
    rt
}

/// A 4-byte write and read by one thread: ns per pair.
fn pipe_pair() -> u64 {
    let stop = AtomicBool::new(false);
    let p = Pipe::new(PipeMode::Stream { bytes: 4096 }).expect("pipe");
    let mut buf = [0u8; 4];
    let t0 = now_ns();
    for _ in 0..ROUND_TRIPS {
        p.write_all(&buf, &stop);
        p.read_exact(&mut buf, &stop);
    }
    (now_ns() - t0) / ROUND_TRIPS
}

/// Median lateness of 200 absolute 1 ms sleeps with 1 ns of timer slack, on CPU `cpu`.
fn timer_latency(cpu: u32) -> u64 {
    std::thread::spawn(move || {
        let _ = sys::set_affinity(0, &[cpu]);
        // SAFETY: prctl with PR_SET_TIMERSLACK and an integer affects only this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let mut lat = Vec::with_capacity(200);
        let mut next = now_ns() + 1_000_000;
        for _ in 0..200 {
            sys::sleep_until(next);
            lat.push(now_ns().saturating_sub(next));
            next += 1_000_000;
        }
        median(lat)
    })
    .join()
    .unwrap_or(0)
}

/// How long a thread spins, clock read after clock read, to find the periodic tick's gaps.
const TICK_SPIN_NS: u64 = 1_000_000_000;

/// The gaps above 500 ns between consecutive clock reads of a thread spinning on `cpu` for
/// [`TICK_SPIN_NS`], as `(start, length)` from the spin's start.
fn spin_gaps(cpu: u32) -> Vec<(u64, u64)> {
    std::thread::spawn(move || {
        let _ = sys::set_affinity(0, &[cpu]);
        let mut gaps = Vec::with_capacity(4096);
        let t0 = now_ns();
        let mut prev = t0;
        loop {
            let t = now_ns();
            if t - prev > 500 && gaps.len() < 1 << 20 {
                gaps.push((prev - t0, t - prev));
            }
            prev = t;
            if t - t0 >= TICK_SPIN_NS {
                break;
            }
        }
        gaps
    })
    .join()
    .unwrap_or_default()
}

/// The periodic tick's cost from the `gaps` of a [`TICK_SPIN_NS`] spin (see [`spin_gaps`]) with a
/// tick every `period_ns`: the ticks of one CPU come at one phase of the period, so the phase bin
/// (of 64) holding the most gaps, with its two neighbours, holds them; the median of those gaps is
/// the tick's cost. `None` when fewer gaps fall there than half the periods the spin covered (no
/// periodic tick, or one too cheap to see).
pub fn tick_gap(gaps: &[(u64, u64)], period_ns: u64, spin_ns: u64) -> Option<u64> {
    const BINS: u64 = 64;
    if period_ns == 0 {
        return None;
    }
    let bin = |at: u64| (at % period_ns) * BINS / period_ns;
    let mut count = [0usize; BINS as usize];
    for &(at, _) in gaps {
        count[bin(at) as usize] += 1;
    }
    let near = |b: u64, c: u64| (b + BINS - c) % BINS <= 1 || (c + BINS - b) % BINS <= 1;
    let around = |c: u64| (0..BINS).filter(|&b| near(b, c)).map(|b| count[b as usize]).sum::<usize>();
    let best = (0..BINS).max_by_key(|&c| (around(c), std::cmp::Reverse(c)))?;
    if (around(best) as u64) * 2 < spin_ns / period_ns {
        return None;
    }
    let ticks: Vec<u64> = gaps.iter().filter(|g| near(bin(g.0), best)).map(|g| g.1).collect();
    Some(median(ticks))
}

fn timer_slack() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK has no pointer arguments.
    let r = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    r.max(0) as u64
}

fn distinct(glob: &str, nr_cpus: usize) -> usize {
    let mut ids = std::collections::BTreeSet::new();
    for c in 0..nr_cpus {
        if let Ok(s) = std::fs::read_to_string(glob.replace("{}", &c.to_string())) {
            ids.insert(s.trim().to_string());
        }
    }
    ids.len().max(1)
}

/// CONFIG_HZ from /proc/config.gz (through `zcat`) or /boot/config-<release>.
fn config_hz(kernel: &str) -> Option<u32> {
    let text = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .or_else(|| std::fs::read_to_string(format!("/boot/config-{kernel}")).ok())?;
    text.lines().find_map(|l| l.strip_prefix("CONFIG_HZ=")).and_then(|v| v.trim().parse().ok())
}

/// Measures this machine.
pub fn measure() -> std::io::Result<Calibration> {
    let nr_cpus = sys::nr_cpus();
    let kernel = crate::measure::kernel_release();
    let sockets = distinct("/sys/devices/system/cpu/cpu{}/topology/physical_package_id", nr_cpus);
    let cores = distinct("/sys/devices/system/cpu/cpu{}/topology/core_cpus_list", nr_cpus);
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("node")).count())
        .unwrap_or(1)
        .max(1);
    let five = |f: &dyn Fn() -> u64| median((0..5).map(|_| f()).collect());
    let pipe_pair_ns = five(&pipe_pair);
    let same_cpu_half_rt_ns = five(&|| ping_pong(0, 0)) / 2;
    let processes: Vec<u64> = (0..5).filter_map(|_| ping_pong_processes(0)).collect();
    let same_cpu_process_half_rt_ns = (processes.len() == 5).then(|| median(processes) / 2);
    let cross_cpu_half_rt_ns = (nr_cpus > 1).then(|| five(&|| ping_pong(0, 1)) / 2);
    let busy_cross_cpu_half_rt_ns = (nr_cpus > 1).then(|| five(&|| ping_pong_busy(0, 1)) / 2);
    let timer_latency_ns = timer_latency(nr_cpus.saturating_sub(1) as u32);
    let hz = config_hz(&kernel);
    let tick_gap_ns = tick_gap(&spin_gaps(0), 1_000_000_000 / hz.unwrap_or(250).max(1) as u64, TICK_SPIN_NS);
    let migration = (nr_cpus > 1).then(|| (migration_extra(0, 1), cache_sharing_0_1()));
    let paths = crate::kernel_costs::measure()?;
    Ok(Calibration {
        host: crate::measure::hostname(),
        hz,
        kernel,
        nr_cpus,
        sockets,
        threads_per_core: (nr_cpus / cores).max(1),
        nodes,
        pipe_pair_ns,
        same_cpu_half_rt_ns,
        same_cpu_process_half_rt_ns,
        cross_cpu_half_rt_ns,
        busy_cross_cpu_half_rt_ns,
        timer_latency_ns,
        timer_slack_ns: timer_slack(),
        tick_gap_ns,
        migration,
        paths,
    })
}

/// The simulator's default cost of a scheduling decision, which the measured times include.
const SCHED_BASE_NS: u64 = 250;

impl Calibration {
    /// The simulator's machine-level costs from the measurements:
    /// * `thread_switch_ns` = half a same-CPU round trip between threads minus the pipe system calls
    ///   and the decision cost (a round trip is two writes, two reads, two decisions and two
    ///   switches); `context_switch_ns` the same between processes (each switch changes address
    ///   space), or the threads' if that was not measured;
    /// * `timer_exit_ns` = the timer's lateness minus a switch and a decision (the path from idle
    ///   to the woken thread);
    /// * `wakeup_ipi_ns` = half a cross-CPU round trip to busy CPUs minus the same-CPU half (the
    ///   extra of waking another CPU);
    /// * `idle_exit_ns` = half a cross-CPU round trip to idle CPUs minus the busy one (the extra
    ///   when that CPU is idle). With one CPU there is no IPI to measure: the IPI is the 2 us
    ///   default and an idle CPU's exit is the timer's.
    ///
    /// Each is at least 100 ns.
    pub fn costs(&self) -> DerivedCosts {
        let less_calls = |half_rt: u64| half_rt.saturating_sub(self.pipe_pair_ns + SCHED_BASE_NS).max(100);
        let switch = less_calls(self.same_cpu_half_rt_ns);
        let process_switch = self.same_cpu_process_half_rt_ns.map_or(switch, less_calls);
        let timer_exit = self.timer_latency_ns.saturating_sub(switch + SCHED_BASE_NS).max(100);
        let (ipi, idle_exit) = match (self.cross_cpu_half_rt_ns, self.busy_cross_cpu_half_rt_ns) {
            (Some(idle), Some(busy)) => {
                (busy.saturating_sub(self.same_cpu_half_rt_ns).max(100), idle.saturating_sub(busy).max(100))
            }
            _ => (2_000, timer_exit),
        };
        DerivedCosts {
            context_switch_ns: process_switch,
            thread_switch_ns: switch,
            idle_exit_ns: idle_exit,
            wakeup_ipi_ns: ipi,
            timer_exit_ns: timer_exit,
        }
    }

    /// The per-kind kernel path costs as machine-file keys (`[costs]`): the measured CPU time per
    /// call, except that a call that blocks loses the switch the simulator charges apart (measured
    /// between threads: a thread switch)
    /// (the waiter's measured time includes its switch-in, which the simulator counts as switch
    /// overhead); each at least `syscall_ns`.
    pub fn path_costs(&self) -> Vec<(&'static str, u64)> {
        let k = &self.paths;
        let call = self.pipe_pair_ns / 2;
        let switch = self.costs().thread_switch_ns;
        let blocking = |ns: u64| ns.saturating_sub(switch).max(call);
        vec![
            ("sleep_ns", blocking(k.sleep_ns)),
            ("yield_ns", k.yield_ns.max(call)),
            ("fork_ns", k.fork_ns.max(call)),
            ("fork_process_ns", k.fork_process_ns.max(call)),
            ("exit_process_ns", k.exit_process_ns.max(call)),
            ("pipe_wait_ns", blocking(k.pipe_wait_ns)),
            ("pipe_wake_ns", k.pipe_wake_ns.max(call)),
            ("mutex_wait_ns", blocking(k.mutex_wait_ns)),
            ("mutex_wake_ns", k.mutex_wake_ns.max(call)),
            ("cond_wait_ns", blocking(k.cond_wait_ns)),
            ("cond_wake_ns", k.cond_wake_ns.max(call)),
            ("futex_wait_ns", blocking(k.futex_wait_ns)),
            ("futex_wake_ns", k.futex_wake_ns.max(call)),
        ]
    }

    /// The resume curve's machine-file values (`resume_after_ns`, `resume_idle_ns`,
    /// `resume_busy_ns`): each measured sleep's CPU time less that of the shortest absence on the
    /// same kind of CPU (idle or busy), whose cost `sleep_ns` and the per-kind waits already hold;
    /// at least 0. Empty if the curve was not measured.
    pub fn resume_curve(&self) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let r = &self.paths.resume;
        let Some(&(_, idle0, busy0)) = r.first() else { return Default::default() };
        (
            r.iter().map(|p| p.0).collect(),
            r.iter().map(|p| p.1.saturating_sub(idle0)).collect(),
            r.iter().map(|p| p.2.saturating_sub(busy0)).collect(),
        )
    }

    /// The refill time of a move between CPUs 0 and 1 and its machine-file key: the model runs a task
    /// at `cold_speed_pct` (50 %) for the refill time after a move, which costs it half that time, so
    /// the refill is twice the measured extra time (at least 100 ns).
    pub fn refill(&self) -> Option<(&'static str, u64)> {
        let (extra, sharing) = self.migration?;
        Some((sharing.refill_key()?, (2 * extra).max(100)))
    }

    /// A machine file (docs/architecture.md#machines) for the simulator.
    pub fn to_toml(&self) -> String {
        let c = self.costs();
        let refill = match (self.migration, self.refill()) {
            (Some((extra, _)), Some((key, ns))) => {
                format!(
                    "# A {} KiB working set after a move between CPUs 0 and 1: {extra} ns more per pass.\n{key} = {ns}\n",
                    WORKING_SET_BYTES >> 10
                )
            }
            _ => String::new(),
        };
        let k = &self.paths;
        let paths: String = self.path_costs().iter().map(|(key, ns)| format!("{key} = {ns}\n")).collect();
        let list = |v: &[u64]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
        let resume = match self.resume_curve() {
            (after, _, _) if after.is_empty() => String::new(),
            (after, idle, busy) => format!(
                "# A sleep's CPU time by its length {lens} ns: on an idle CPU {idle_raw}, on a busy one {busy_raw};\n\
                 # the growth over the shortest is charged to a blocked task's return.\n\
                 resume_after_ns = [{a}]\nresume_idle_ns = [{i}]\nresume_busy_ns = [{b}]\n",
                lens = list(&after),
                idle_raw = list(&k.resume.iter().map(|p| p.1).collect::<Vec<_>>()),
                busy_raw = list(&k.resume.iter().map(|p| p.2).collect::<Vec<_>>()),
                a = list(&after),
                i = list(&idle),
                b = list(&busy),
            ),
        };
        // The simulator takes 100, 250, 300 or 1000 Hz.
        let hz = self.hz.filter(|h| [100, 250, 300, 1000].contains(h)).unwrap_or(250);
        let cores_per_socket = (self.nr_cpus / self.sockets / self.threads_per_core).max(1);
        let nodes_per_socket = (self.nodes / self.sockets).max(1);
        format!(
            "# Written by `schedlab calibrate` on {host}, Linux {kernel}.\n\
             # Measured (medians of five runs): 4-byte pipe write + read {pair} ns; half a pipe ping-pong\n\
             # round trip on one CPU {same} ns{processes}{cross}; 1 ms absolute timer lateness with 1 ns slack {timer} ns;\n\
             # default timer slack {slack} ns.{hz_note}\n\
             # Per call, the calling thread's CPU time (medians; a blocking call's includes its switch-in):\n\
             # mutex wait {mw} / wake {mk}, condition wait {cw} / signal {ck}, semaphore wait {fw} / post {fk},\n\
             # pipe read that blocks {pw} / write that wakes {pk}, 50 us sleep {sl}, sched_yield {y}, thread creation {fo},\n\
             # a task process's fork {fp} (the forking thread's part) and exit {ep}.\n\
             name = \"{host}\"\n\
             description = \"calibrated from this machine by schedlab calibrate\"\n\
             sockets = {sockets}\n\
             nodes_per_socket = {nodes_per_socket}\n\
             llcs_per_node = 1\n\
             cores_per_llc = {cpl}\n\
             threads_per_core = {tpc}\n\
             hz = {hz}\n\
             \n[costs]\n\
             context_switch_ns = {switch}\n\
             thread_switch_ns = {thread_switch}\n\
             idle_exit_ns = {idle_exit}\n\
             wakeup_ipi_ns = {ipi}\n\
             timer_exit_ns = {timer_exit}\n\
             timer_slack_ns = {slack}\n\
             {tick}\
             syscall_ns = {syscall}\n\
             {paths}\
             {quiesce}\
             {resume}\
             {refill}",
            quiesce = if k.cond_quiesce {
                "# A broadcast that switches a condition's groups waited for a woken waiter to run: the\n\
                 # libc's condition variables quiesce their old group first (glibc 2.25-2.40).\n\
                 cond_quiesce = true\n"
            } else {
                ""
            },
            tick = match self.tick_gap_ns {
                Some(g) => format!(
                    "# Each periodic tick took {g} ns from a thread spinning on CPU 0 (median over 1 s).\n\
                     tick_irq_ns = {g}\n"
                ),
                None => "# A thread spinning on CPU 0 for 1 s saw no periodic tick: tick_irq_ns unset.\n".into(),
            },
            switch = c.context_switch_ns,
            thread_switch = c.thread_switch_ns,
            idle_exit = c.idle_exit_ns,
            ipi = c.wakeup_ipi_ns,
            timer_exit = c.timer_exit_ns,
            syscall = self.pipe_pair_ns / 2,
            host = self.host,
            kernel = self.kernel,
            pair = self.pipe_pair_ns,
            same = self.same_cpu_half_rt_ns,
            processes = match self.same_cpu_process_half_rt_ns {
                Some(p) => format!(" between threads, {p} ns between processes"),
                None => String::new(),
            },
            cross = match (self.cross_cpu_half_rt_ns, self.busy_cross_cpu_half_rt_ns) {
                (Some(c), Some(b)) => format!(", across CPUs 0 and 1 {c} ns (to busy CPUs {b} ns)"),
                (Some(c), None) => format!(", across CPUs 0 and 1 {c} ns"),
                _ => String::new(),
            },
            timer = self.timer_latency_ns,
            slack = self.timer_slack_ns,
            hz_note = if self.hz.is_some() { "" } else { "\n# CONFIG_HZ not found (no /proc/config.gz or /boot/config): 250 assumed." },
            mw = k.mutex_wait_ns,
            mk = k.mutex_wake_ns,
            cw = k.cond_wait_ns,
            ck = k.cond_wake_ns,
            fw = k.futex_wait_ns,
            fk = k.futex_wake_ns,
            pw = k.pipe_wait_ns,
            pk = k.pipe_wake_ns,
            sl = k.sleep_ns,
            y = k.yield_ns,
            fo = k.fork_ns,
            fp = k.fork_process_ns,
            ep = k.exit_process_ns,
            sockets = self.sockets,
            cpl = (cores_per_socket / nodes_per_socket).max(1),
            tpc = self.threads_per_core,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Calibration {
        Calibration {
            host: "box".into(),
            kernel: "6.18".into(),
            nr_cpus: 8,
            sockets: 2,
            threads_per_core: 2,
            nodes: 2,
            hz: Some(250),
            pipe_pair_ns: 1_000,
            same_cpu_half_rt_ns: 3_000,
            same_cpu_process_half_rt_ns: Some(4_000),
            cross_cpu_half_rt_ns: Some(9_000),
            busy_cross_cpu_half_rt_ns: Some(7_000),
            timer_latency_ns: 4_000,
            timer_slack_ns: 50_000,
            tick_gap_ns: Some(2_500),
            migration: Some((3_000, CacheSharing::Llc)),
            paths: crate::kernel_costs::KernelCosts {
                mutex_wait_ns: 4_000,
                mutex_wake_ns: 1_500,
                cond_wait_ns: 5_000,
                cond_wake_ns: 2_500,
                futex_wait_ns: 3_500,
                futex_wake_ns: 1_200,
                pipe_wait_ns: 1_900,
                pipe_wake_ns: 300,
                sleep_ns: 8_000,
                resume: vec![
                    (50_000, 8_000, 6_000),
                    (1_000_000, 15_000, 5_000),
                    (30_000_000, 48_000, 26_000),
                ],
                yield_ns: 200,
                fork_ns: 12_000,
                fork_process_ns: 300_000,
                exit_process_ns: 200,
                cond_quiesce: true,
            },
        }
    }

    #[test]
    fn costs_follow_the_documented_subtractions() {
        // thread switch = 3000 - 1000 - 250, process switch = 4000 - 1000 - 250; timer exit =
        // 4000 - 1750 - 250; ipi = 7000 - 3000 (busy targets); idle exit = 9000 - 7000 (idle
        // targets over busy ones).
        let want = DerivedCosts {
            context_switch_ns: 2_750,
            thread_switch_ns: 1_750,
            idle_exit_ns: 2_000,
            wakeup_ipi_ns: 4_000,
            timer_exit_ns: 2_000,
        };
        assert_eq!(sample().costs(), want);
        let tiny = Calibration {
            same_cpu_half_rt_ns: 500,
            same_cpu_process_half_rt_ns: None,
            timer_latency_ns: 0,
            cross_cpu_half_rt_ns: None,
            busy_cross_cpu_half_rt_ns: None,
            ..sample()
        };
        let floors = DerivedCosts {
            context_switch_ns: 100,
            thread_switch_ns: 100,
            idle_exit_ns: 100,
            wakeup_ipi_ns: 2_000,
            timer_exit_ns: 100,
        };
        assert_eq!(tiny.costs(), floors, "floors; with one CPU the default IPI and the timer's exit");
        let unforked = Calibration { same_cpu_process_half_rt_ns: None, ..sample() };
        assert_eq!(unforked.costs().context_switch_ns, 1_750, "without the process ping-pong, the threads'");
        let one_cpu = Calibration { cross_cpu_half_rt_ns: None, busy_cross_cpu_half_rt_ns: None, ..sample() };
        assert_eq!(one_cpu.costs().idle_exit_ns, 2_000, "one CPU: an idle CPU exits as for its timer");
    }

    #[test]
    fn blocking_calls_lose_the_switch_the_simulator_charges_apart() {
        // syscall = 1000 / 2; thread switch = 1750 (above; the calls are measured in threads).
        // Waits lose 1750, floored at 500; wakes and plain calls are kept, floored at 500.
        let got: std::collections::BTreeMap<_, _> = sample().path_costs().into_iter().collect();
        let want: std::collections::BTreeMap<_, _> = [
            ("sleep_ns", 6_250),
            ("yield_ns", 500),
            ("fork_ns", 12_000),
            ("fork_process_ns", 300_000),
            ("exit_process_ns", 500),
            ("pipe_wait_ns", 500),
            ("pipe_wake_ns", 500),
            ("mutex_wait_ns", 2_250),
            ("mutex_wake_ns", 1_500),
            ("cond_wait_ns", 3_250),
            ("cond_wake_ns", 2_500),
            ("futex_wait_ns", 1_750),
            ("futex_wake_ns", 1_200),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_machine_file_reads_back_with_the_measured_topology_and_costs() {
        let text = sample().to_toml();
        let m = schedlab_sim::Machine::from_toml("calibrated.toml", &text).unwrap();
        assert_eq!(m.topology.nr_cpus(), 8, "2 sockets x 1 node x 2 cores x 2 threads");
        assert_eq!(m.hz, 250);
        assert_eq!(
            (m.costs.context_switch_ns, m.costs.idle_exit_ns, m.costs.wakeup_ipi_ns, m.costs.timer_exit_ns),
            (2_750, 2_000, 4_000, Some(2_000))
        );
        assert_eq!(m.costs.thread_switch_ns, Some(1_750));
        let c = &m.costs;
        assert_eq!(
            [c.sleep_ns, c.yield_ns, c.fork_ns, c.pipe_wait_ns, c.pipe_wake_ns, c.mutex_wait_ns],
            [Some(6_250), Some(500), Some(12_000), Some(500), Some(500), Some(2_250)]
        );
        assert_eq!(
            [c.mutex_wake_ns, c.cond_wait_ns, c.cond_wake_ns, c.futex_wait_ns, c.futex_wake_ns],
            [Some(1_500), Some(3_250), Some(2_500), Some(1_750), Some(1_200)]
        );
        assert_eq!((c.fork_process_ns, c.exit_process_ns), (Some(300_000), Some(500)));
        assert!(c.cond_quiesce, "the probe's finding is kept");
        let mut fixed = sample();
        fixed.paths.cond_quiesce = false;
        let m2 = schedlab_sim::Machine::from_toml("fixed.toml", &fixed.to_toml()).unwrap();
        assert!(!m2.costs.cond_quiesce, "no key: glibc 2.41's condition variables");
        assert_eq!((m.costs.timer_slack_ns, m.costs.syscall_ns), (50_000, 500), "half the 1000 ns pipe pair");
        assert_eq!(m.costs.refill_llc_ns, 6_000, "twice the 3 us extra: half speed while refilling");
        // The resume curve: the growth over the shortest absence, per kind of CPU, floored at 0.
        assert_eq!(c.resume_after_ns, [50_000, 1_000_000, 30_000_000]);
        assert_eq!(c.resume_idle_ns, [0, 7_000, 40_000]);
        assert_eq!(c.resume_busy_ns, [0, 0, 20_000]);
        let smt = Calibration { migration: Some((3_000, CacheSharing::Smt)), ..sample() };
        let m = schedlab_sim::Machine::from_toml("smt.toml", &smt.to_toml()).unwrap();
        assert_eq!((m.costs.refill_smt_ns, m.costs.refill_llc_ns), (6_000, 10_000), "the LLC default kept");
        let apart = Calibration { migration: Some((3_000, CacheSharing::None)), ..sample() };
        assert!(!apart.to_toml().contains("refill_"), "no shared cache: no key");
        // The tick's gap becomes the interrupt's cost; none seen, no key.
        assert_eq!(m.costs.tick_irq_ns, Some(2_500));
        let tickless = Calibration { tick_gap_ns: None, ..sample() };
        let m = schedlab_sim::Machine::from_toml("tickless.toml", &tickless.to_toml()).unwrap();
        assert_eq!(m.costs.tick_irq_ns, None);
    }

    #[test]
    fn the_tick_is_the_gap_that_recurs_at_one_phase_of_the_period() {
        // A 1 s spin at 250 Hz: a 20-24 us gap at 1.3 ms into every 4 ms period (the phase drifting
        // by up to 30 us), and 100 other interrupts of 3 us at phases spread over the period.
        let period = 4_000_000u64;
        let mut gaps: Vec<(u64, u64)> = (0..250u64)
            .map(|k| (k * period + 1_300_000 + (k % 7) * 5_000, 20_000 + (k % 5) * 1_000))
            .collect();
        gaps.extend((0..100u64).map(|k| (k * 9_999_991 % 1_000_000_000, 3_000)));
        gaps.sort_unstable();
        assert_eq!(tick_gap(&gaps, period, 1_000_000_000), Some(22_000));
        // Only the scattered ones: no tick (a tickless busy CPU).
        let scattered: Vec<(u64, u64)> =
            (0..100u64).map(|k| (k * 9_999_991 % 1_000_000_000, 3_000)).collect();
        assert_eq!(tick_gap(&scattered, period, 1_000_000_000), None);
        // A tick in every other period only: 125 of 250 periods, half, which still counts.
        let every_other: Vec<(u64, u64)> = gaps.iter().copied().filter(|g| g.1 != 3_000).step_by(2).collect();
        assert_eq!(tick_gap(&every_other, period, 1_000_000_000).map(|g| g >= 20_000), Some(true));
        assert_eq!(tick_gap(&[], period, 1_000_000_000), None);
    }
}
