//! What the shadow scheduler asks the machine: facts about a task, whether it still exists, the
//! clock and the topology. [`LinuxHost`] answers from the running kernel (procfs, sysfs and system
//! calls); tests answer from a model.

use schedlab_core::topology::CpuPlace;
use schedlab_core::{CpuId, CpuSet, Ns, SchedClass, Topology};
use std::path::Path;

/// What the policy needs to know about a task that the kernel's message does not carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFacts {
    /// Thread-group id (the process).
    pub tgid: u32,
    /// CPUs it may run on.
    pub allowed: CpuSet,
    /// Nice level, if it could be read (otherwise the kernel's weight gives it).
    pub nice: Option<i8>,
    /// Scheduling class (`sched_getscheduler`; SCHED_DEADLINE is taken as SCHED_FIFO).
    pub class: SchedClass,
    /// Real-time priority (`sched_getparam`): 1-99 in a real-time class, else 0.
    pub rt_priority: u8,
}

/// The machine as the shadow scheduler sees it.
pub trait Host {
    /// Facts about thread `pid`, or `None` if it no longer exists.
    fn task_facts(&mut self, pid: i32) -> Option<TaskFacts>;
    /// Whether thread `pid` still exists.
    fn is_alive(&mut self, pid: i32) -> bool;
    /// Whether thread `pid` is runnable (running or waiting for a CPU): `Some(false)` if it sleeps,
    /// `None` if it no longer exists.
    fn is_runnable(&mut self, pid: i32) -> Option<bool>;
    /// The task group (cgroup of the `cpu` controller) thread `pid` is in, as a path below the
    /// hierarchy's root (`/schedlab-7/fibo`; `/` is the root), or `None` if unknown. The default
    /// knows none: every task stays in the root group.
    fn task_group(&mut self, _pid: i32) -> Option<String> {
        None
    }
    /// The CPU shares of the group at `path` (1024 for the default weight).
    fn group_shares(&mut self, _path: &str) -> u64 {
        1024
    }
}

/// The running Linux kernel.
#[derive(Debug, Default)]
pub struct LinuxHost;

impl Host for LinuxHost {
    fn task_facts(&mut self, pid: i32) -> Option<TaskFacts> {
        let allowed = affinity(pid)?;
        let tgid = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(pid as u32);
        // SAFETY: plain system calls on a thread id with a valid out-pointer (sched_param is plain
        // data); errno is reset before getpriority, whose -1 is also a valid nice level.
        let (nice, policy, param) = unsafe {
            *libc::__errno_location() = 0;
            let prio = libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t);
            let nice = if prio == -1 && *libc::__errno_location() != 0 { None } else { Some(prio) };
            let mut param: libc::sched_param = std::mem::zeroed();
            if libc::sched_getparam(pid, &mut param) != 0 {
                param.sched_priority = 0;
            }
            (nice, libc::sched_getscheduler(pid), param)
        };
        let class = crate::message::class_of_linux_policy(policy.max(0) as u32);
        let rt_priority = crate::message::rt_priority_of(class, param.sched_priority.clamp(0, 99) as u8);
        Some(TaskFacts { tgid, allowed, nice: nice.map(|n| n.clamp(-20, 19) as i8), class, rt_priority })
    }

    fn is_alive(&mut self, pid: i32) -> bool {
        // Not kill(pid, 0): for a thread that is not its process's leader it fails with ESRCH.
        self.is_runnable(pid).is_some()
    }

    fn is_runnable(&mut self, pid: i32) -> Option<bool> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        task_state_runnable(&stat)
    }

    fn task_group(&mut self, pid: i32) -> Option<String> {
        cgroup_of(&std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?)
    }

    fn group_shares(&mut self, path: &str) -> u64 {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let rel = path.trim_start_matches('/');
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [_, dir, fstype, opts, ..] = f[..] else { continue };
            let read = |file: &str| -> Option<u64> {
                std::fs::read_to_string(Path::new(dir).join(rel).join(file)).ok()?.trim().parse().ok()
            };
            if fstype == "cgroup2" {
                if let Some(w) = read("cpu.weight") {
                    return shares_of_weight(w);
                }
            } else if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") {
                if let Some(s) = read("cpu.shares") {
                    return s.max(2);
                }
            }
        }
        1024
    }
}

/// The group path in a `/proc/PID/cgroup` text: the cgroup v1 hierarchy with the `cpu` controller
/// if there is one, else the unified (v2) one (`0::/path`); `None` if neither is listed.
pub fn cgroup_of(text: &str) -> Option<String> {
    let mut unified = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrls.split(',').any(|c| c == "cpu") {
            return Some(path.to_string());
        }
        if ctrls.is_empty() {
            unified = Some(path.to_string());
        }
    }
    unified
}

/// CPU shares for a cgroup v2 `cpu.weight`: the kernel's `sched_weight_from_cgroup`
/// (`DIV_ROUND_CLOSEST_ULL(weight * 1024, 100)`; weight 100 is 1024 shares).
pub fn shares_of_weight(weight: u64) -> u64 {
    (weight * 1024 + 50) / 100
}

/// Reads the state letter of a `/proc/PID/stat` line (after the command name, which may hold spaces
/// and parentheses): `R` is runnable, a zombie or dead task is gone, anything else sleeps.
pub fn task_state_runnable(stat: &str) -> Option<bool> {
    let rest = &stat[stat.rfind(')')? + 1..];
    match rest.trim_start().chars().next()? {
        'R' => Some(true),
        'Z' | 'X' | 'x' => None,
        _ => Some(false),
    }
}

/// `sched_getaffinity(pid)` as a [`CpuSet`], or `None` if the thread does not exist.
fn affinity(pid: i32) -> Option<CpuSet> {
    // SAFETY: cpu_set_t is plain data; the call fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return None;
    }
    let mut out = CpuSet::empty();
    for c in 0..CpuSet::MAX_CPUS.min(libc::CPU_SETSIZE as usize) {
        // SAFETY: c is below CPU_SETSIZE.
        if unsafe { libc::CPU_ISSET(c, &set) } {
            out.insert(CpuId(c as u32));
        }
    }
    Some(out)
}

/// `CLOCK_MONOTONIC`, in nanoseconds.
pub fn monotonic_ns() -> Ns {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as Ns * 1_000_000_000 + ts.tv_nsec as Ns
}

/// The CPU this thread runs on now.
pub fn current_cpu() -> Option<CpuId> {
    // SAFETY: no arguments.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(CpuId(c as u32))
}

/// The topology of the machine whose sysfs is at `sys` (`/sys` for this one): cores from
/// `topology/physical_package_id` and `core_id`, last-level caches from the highest
/// `cache/indexN/shared_cpu_list` (a core of its own where there is none), NUMA nodes from the
/// `nodeN` links. CPUs must be numbered 0..n without holes (all online).
pub fn topology_from_sysfs(sys: &Path) -> Result<Topology, String> {
    let cpu_dir = sys.join("devices/system/cpu");
    let online = std::fs::read_to_string(cpu_dir.join("online"))
        .map_err(|e| format!("{}: {e}", cpu_dir.join("online").display()))?;
    let cpus =
        parse_cpu_list(online.trim()).ok_or_else(|| format!("cannot read the online CPU list {online:?}"))?;
    if cpus.iter().enumerate().any(|(i, &c)| i != c) || cpus.is_empty() {
        return Err(format!("online CPUs must be 0..n without holes, found {}", online.trim()));
    }
    let read = |cpu: usize, rel: &str| -> Option<String> {
        std::fs::read_to_string(cpu_dir.join(format!("cpu{cpu}")).join(rel))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut raw = Vec::new();
    for &cpu in &cpus {
        let socket: u32 = read(cpu, "topology/physical_package_id").and_then(|s| s.parse().ok()).unwrap_or(0);
        let core: u32 = read(cpu, "topology/core_id").and_then(|s| s.parse().ok()).unwrap_or(cpu as u32);
        let mut llc: Option<usize> = None;
        for index in (0..8).rev() {
            if let Some(list) = read(cpu, &format!("cache/index{index}/shared_cpu_list")) {
                llc = parse_cpu_list(&list).and_then(|l| l.first().copied());
                break;
            }
        }
        let node = std::fs::read_dir(cpu_dir.join(format!("cpu{cpu}")))
            .ok()
            .and_then(|d| {
                d.flatten().find_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("node"))
                        .and_then(|n| n.parse::<u32>().ok())
                })
            })
            .unwrap_or(0);
        raw.push((socket, node, llc, core));
    }
    let dense = |keys: Vec<(u32, u32, u64)>| -> Vec<u32> {
        let mut seen: Vec<(u32, u32, u64)> = Vec::new();
        keys.into_iter()
            .map(|k| match seen.iter().position(|s| *s == k) {
                Some(i) => i as u32,
                None => {
                    seen.push(k);
                    (seen.len() - 1) as u32
                }
            })
            .collect()
    };
    let sockets = dense(raw.iter().map(|r| (r.0, 0, 0)).collect());
    let nodes = dense(raw.iter().map(|r| (r.1, 0, 0)).collect());
    let cores = dense(raw.iter().map(|r| (r.0, r.3, 0)).collect());
    // A CPU with no shared cache list is its own last-level cache domain (keyed by its core).
    let llcs = dense(
        raw.iter()
            .zip(&cores)
            .map(|(r, &core)| match r.2 {
                Some(first) => (0, 0, first as u64),
                None => (1, core, 0),
            })
            .collect(),
    );
    let places = (0..cpus.len())
        .map(|i| CpuPlace { core: cores[i], llc: llcs[i], node: nodes[i], socket: sockets[i] })
        .collect();
    Topology::from_places(places).map_err(|e| format!("the topology read from {}: {e}", sys.display()))
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b >= CpuSet::MAX_CPUS {
                    return None;
                }
                out.extend(a..=b);
            }
            None => {
                let c: usize = part.parse().ok()?;
                if c >= CpuSet::MAX_CPUS {
                    return None;
                }
                out.push(c);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_like_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("0-5000"), None);
    }

    /// `/proc/PID/cgroup` as cgroup v1 with the cpu controller (this project's machine) and as
    /// cgroup v2 (the VM) write it; the weights of v2 as the kernel converts them.
    #[test]
    fn a_threads_group_is_its_cpu_cgroup() {
        let v1 = "12:pids:/user.slice\n4:cpu,cpuacct:/schedlab-9/fibo\n0::/user.slice/session-1.scope\n";
        assert_eq!(cgroup_of(v1).as_deref(), Some("/schedlab-9/fibo"));
        assert_eq!(cgroup_of("0::/schedlab-7/sysbench\n").as_deref(), Some("/schedlab-7/sysbench"));
        assert_eq!(cgroup_of("0::/\n").as_deref(), Some("/"));
        assert_eq!(cgroup_of("garbage"), None);
        assert_eq!(
            (shares_of_weight(100), shares_of_weight(1), shares_of_weight(10_000)),
            (1024, 10, 102_400)
        );
        // This process's own group is readable, and the real thread reads as the same group.
        let own = LinuxHost.task_group(std::process::id() as i32);
        assert!(own.as_deref().is_some_and(|p| p.starts_with('/')), "{own:?}");
        assert!(LinuxHost.group_shares(own.as_deref().unwrap_or("/")) >= 2);
    }

    #[test]
    fn this_machines_topology_has_every_cpu_the_kernel_runs() {
        let t = topology_from_sysfs(Path::new("/sys")).unwrap();
        let n = std::thread::available_parallelism().unwrap().get();
        // available_parallelism honours this process's affinity, which may be narrower.
        assert!(t.nr_cpus() >= n, "{} CPUs in sysfs, {n} usable", t.nr_cpus());
    }

    #[test]
    fn a_made_up_sysfs_with_smt_and_two_llcs_reads_back() {
        let dir = std::env::temp_dir().join(format!("scx-sysfs-{}", std::process::id()));
        let cpu = dir.join("devices/system/cpu");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("online"), "0-3\n").unwrap();
        // Two cores of two threads each, each core with its own L3 (CPUs 0,1 and 2,3).
        for c in 0..4 {
            let d = cpu.join(format!("cpu{c}"));
            std::fs::create_dir_all(d.join("topology")).unwrap();
            std::fs::create_dir_all(d.join("cache/index3")).unwrap();
            std::fs::create_dir_all(d.join("node0")).unwrap();
            std::fs::write(d.join("topology/physical_package_id"), "0\n").unwrap();
            std::fs::write(d.join("topology/core_id"), format!("{}\n", c / 2)).unwrap();
            let l3 = if c < 2 { "0-1" } else { "2-3" };
            std::fs::write(d.join("cache/index3/shared_cpu_list"), format!("{l3}\n")).unwrap();
        }
        let t = topology_from_sysfs(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(t.nr_cpus(), 4);
        assert_eq!(t.level(CpuId(0), CpuId(1)), schedlab_core::Level::Smt);
        assert_eq!(t.level(CpuId(0), CpuId(2)), schedlab_core::Level::Node);
        assert_eq!(t.smt_width(CpuId(3)), 2);
    }

    #[test]
    fn the_state_letter_is_read_after_the_command_name() {
        assert_eq!(task_state_runnable("42 (a) b) R 1 2"), Some(true));
        assert_eq!(task_state_runnable("42 (sleepy) S 1 2"), Some(false));
        assert_eq!(task_state_runnable("42 (gone) Z 1 2"), None);
        assert_eq!(task_state_runnable("garbage"), None);
    }

    #[test]
    fn this_process_has_facts_and_a_dead_pid_has_none() {
        let mut h = LinuxHost;
        let me = std::process::id() as i32;
        let f = h.task_facts(me).unwrap();
        assert_eq!(f.tgid, me as u32);
        assert!(!f.allowed.is_empty());
        assert!(h.is_alive(me));
        // The thread asking is running.
        // SAFETY: gettid has no arguments.
        let tid = unsafe { libc::gettid() };
        assert_eq!(h.is_runnable(tid), Some(true));
        // A sleeping child sleeps.
        let mut sleeper = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let spid = sleeper.id() as i32;
        let mut state = None;
        for _ in 0..100 {
            state = h.is_runnable(spid);
            if state == Some(false) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        assert_eq!(state, Some(false));
        // A thread that is not its process's leader exists too.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let th = std::thread::spawn(move || {
            // SAFETY: gettid has no arguments.
            tx.send(unsafe { libc::gettid() }).unwrap();
            done_rx.recv().unwrap();
        });
        let thread_tid = rx.recv().unwrap();
        assert!(h.is_alive(thread_tid));
        assert_eq!(h.task_facts(thread_tid).unwrap().tgid, me as u32);
        done_tx.send(()).unwrap();
        th.join().unwrap();
        // A child that has exited and been reaped no longer exists.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!h.is_alive(pid));
        assert_eq!(h.task_facts(pid), None);
        assert_eq!(h.is_runnable(pid), None);
    }
}
