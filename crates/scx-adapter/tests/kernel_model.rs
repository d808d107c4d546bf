//! The shadow scheduler against a model of `scx_rustland_core`'s kernel side: tasks that run and
//! sleep, a message to user space whenever one becomes runnable (woken, or its kernel slice over),
//! per-CPU dispatch queues served in order, `SCX_ENQ_PREEMPT`, and dispatches dropped when the
//! enqueue counter is stale. The real kernel is exercised by `schedlab vm-test`; this model checks
//! the adapter's logic quickly and exactly (the expected values are computed from the policies'
//! documented behaviour, not from the adapter).

use schedlab_core::{CpuId, CpuSet, Ns, SchedClass, Topology, NSEC_PER_MSEC, NSEC_PER_SEC};
use schedlab_scx_adapter::weight::scx_weight_of_nice;
use schedlab_scx_adapter::{Host, KernelTask, Order, Shadow, TaskFacts};
use std::collections::VecDeque;

const DT: Ns = 50_000;
/// The kernel's tick period (HZ 250, the shadows' rate here). `update_curr_scx` wears a running
/// task's slice down as it runs, but only `task_tick_scx` reschedules when it is used up
/// (kernel/sched/ext.c), so a slice ends at the first tick at or after its end.
const TICK_NS: Ns = 4_000_000;

#[derive(Clone, Copy, Debug, PartialEq)]
enum St {
    /// Waiting for a dispatch (in the BPF scheduler's custody).
    Queued,
    /// In a CPU's dispatch queue.
    Dsq,
    Running(usize),
    Sleeping(Ns),
    /// In the kernel's real-time class (out of sched_ext), running on this CPU ahead of every
    /// sched_ext task there.
    Rt(usize),
    Done,
}

/// A message to user space.
#[derive(Clone, Copy, Debug)]
struct Msg {
    task: usize,
    wakeup: bool,
    /// When the scheduler can see it.
    at: Ns,
    /// `ops.disable`: the task left sched_ext (schedlab's BPF variant).
    left: bool,
    /// The class and real-time priority it reports.
    class: SchedClass,
    rt_priority: u8,
}

#[derive(Clone, Debug)]
struct Task {
    pid: i32,
    nice: i8,
    burst_ns: Ns,
    sleep_ns: Ns,
    /// Bursts before exiting (None: forever).
    bursts: Option<u32>,
    left: Ns,
    st: St,
    cpu: usize,
    start_ts: Ns,
    stop_ts: Ns,
    enq_cnt: u64,
    /// Times it started running (`ops.running`).
    nr_starts: u64,
    run_ns: Ns,
    runnable_since: Ns,
    max_wait_ns: Ns,
    allowed: CpuSet,
    /// Run time on each CPU.
    run_on: Vec<Ns>,
    /// Its cgroup (`/` the root).
    group: String,
    class: SchedClass,
    rt_priority: u8,
}

struct Kernel {
    now: Ns,
    tasks: Vec<Task>,
    running: Vec<Option<(usize, Ns)>>,
    dsq: Vec<VecDeque<(usize, Ns)>>,
    /// Messages to user space.
    msgs: Vec<Msg>,
    /// How long a message takes to reach the user-space scheduler (0: at once).
    msg_latency_ns: Ns,
    weight_only: bool,
    /// The scheduler sleeps until then after a round that left tasks queued.
    sched_sleep_until: Ns,
    sched_last_run: Ns,
    /// `cpu.weight` of each cgroup made (100 when not listed).
    weights: Vec<(String, u64)>,
    /// A kernel thread of a higher class preempts each busy CPU every `.0` ns for `.1` ns; the
    /// task it preempts goes back to the head of the CPU's queue with the rest of its slice and no
    /// message if it has slice left (`put_prev_for_higher_class`).
    kthread: Option<(Ns, Ns)>,
    /// The kernel thread runs on each CPU until then.
    kthread_until: Vec<Ns>,
    /// How long a CPU has nothing to run before the scheduler is run for it and sees it free.
    idle_latency_ns: Ns,
    /// Since when each CPU has had nothing to run.
    idle_since: Vec<Option<Ns>>,
    /// How long an order takes from the scheduler's decision to the CPU's dispatch queue (the
    /// dispatch half of a round trip; 0: at once).
    dispatch_latency_ns: Ns,
    /// Orders on their way, with when they arrive.
    in_flight: Vec<(Order, Ns)>,
    /// Messages carry the start on the scheduler's clock (`KernelTask::start_mono_ns`), as
    /// schedlab's variant of the BPF program sends it.
    send_start_mono: bool,
    /// Dispatches that arrived for a task in the real-time class (the kernel drops them).
    orders_for_rt: u32,
    /// The last task to stop on each CPU, when, and whether it stayed runnable, as schedlab's BPF
    /// program records it.
    last_stop: Vec<Option<(i32, Ns, bool)>>,
    /// Whether the model hands the scheduler its per-CPU stop records (schedlab's BPF program).
    record_stops: bool,
    /// The scheduler's questions to the host whether a task is runnable (a /proc read each).
    runnable_queries: std::cell::Cell<u64>,
    /// Where the kernel's ticks fall within each `TICK_NS` (0: on multiples of it).
    tick_phase_ns: Ns,
    /// Each CPU's last tick that found a task running (`ops.tick`, schedlab's BPF program).
    last_tick: Vec<Option<Ns>>,
    /// Whether the model hands the scheduler those ticks.
    report_ticks: bool,
}

struct ModelHost<'a>(&'a Kernel);

impl Host for ModelHost<'_> {
    fn task_facts(&mut self, pid: i32) -> Option<TaskFacts> {
        let t = self.0.tasks.iter().find(|t| t.pid == pid)?;
        let nice = if self.0.weight_only { None } else { Some(t.nice) };
        Some(TaskFacts {
            tgid: pid as u32,
            allowed: t.allowed,
            nice,
            class: t.class,
            rt_priority: t.rt_priority,
        })
    }
    fn is_alive(&mut self, pid: i32) -> bool {
        self.0.tasks.iter().any(|t| t.pid == pid && t.st != St::Done)
    }
    fn is_runnable(&mut self, pid: i32) -> Option<bool> {
        self.0.runnable_queries.set(self.0.runnable_queries.get() + 1);
        match self.0.tasks.iter().find(|t| t.pid == pid)?.st {
            St::Done => None,
            St::Sleeping(_) => Some(false),
            _ => Some(true),
        }
    }
    fn task_group(&mut self, pid: i32) -> Option<String> {
        Some(self.0.tasks.iter().find(|t| t.pid == pid)?.group.clone())
    }
    fn group_shares(&mut self, path: &str) -> u64 {
        let w = self.0.weights.iter().find(|(p, _)| p == path).map_or(100, |(_, w)| *w);
        schedlab_scx_adapter::host::shares_of_weight(w)
    }
}

impl Kernel {
    fn new(cpus: usize) -> Kernel {
        Kernel {
            now: 0,
            tasks: Vec::new(),
            running: vec![None; cpus],
            dsq: vec![VecDeque::new(); cpus],
            msgs: Vec::new(),
            msg_latency_ns: 0,
            weight_only: false,
            sched_sleep_until: 0,
            sched_last_run: 0,
            weights: Vec::new(),
            kthread: None,
            kthread_until: vec![0; cpus],
            idle_latency_ns: 0,
            idle_since: vec![None; cpus],
            dispatch_latency_ns: 0,
            in_flight: Vec::new(),
            send_start_mono: true,
            orders_for_rt: 0,
            last_stop: vec![None; cpus],
            record_stops: true,
            runnable_queries: std::cell::Cell::new(0),
            tick_phase_ns: 0,
            last_tick: vec![None; cpus],
            report_ticks: true,
        }
    }

    /// A task that runs `burst_ns`, sleeps `sleep_ns`, and so on (`sleep_ns` 0: a CPU hog).
    fn spawn(&mut self, nice: i8, burst_ns: Ns, sleep_ns: Ns, bursts: Option<u32>) -> usize {
        let i = self.tasks.len();
        self.tasks.push(Task {
            pid: 1000 + i as i32,
            nice,
            burst_ns,
            sleep_ns,
            bursts,
            left: burst_ns,
            st: St::Queued,
            cpu: 0,
            start_ts: 0,
            stop_ts: 0,
            enq_cnt: 0,
            nr_starts: 0,
            run_ns: 0,
            runnable_since: self.now,
            max_wait_ns: 0,
            allowed: CpuSet::first_n(self.running.len()),
            run_on: vec![0; self.running.len()],
            group: "/".into(),
            class: SchedClass::Normal,
            rt_priority: 0,
        });
        self.message(i, false);
        i
    }

    fn message(&mut self, i: usize, wakeup: bool) {
        let t = &mut self.tasks[i];
        t.st = St::Queued;
        t.enq_cnt += 1;
        t.runnable_since = self.now;
        let (class, rt_priority) = (t.class, t.rt_priority);
        self.msgs.push(Msg {
            task: i,
            wakeup,
            at: self.now + self.msg_latency_ns,
            left: false,
            class,
            rt_priority,
        });
    }

    /// `sched_setscheduler`: to a real-time class the task leaves sched_ext (`ops.disable` sends
    /// its message, with the class it had) and runs on its CPU ahead of the sched_ext tasks; back from one it is
    /// re-enqueued (the real kernel lets a task that changed its own class run on unseen until its
    /// slice ends); between fair classes it is re-enqueued if runnable, as a nice change is.
    fn set_class(&mut self, i: usize, class: SchedClass, rt_priority: u8) {
        let was = self.tasks[i].st;
        let (old_class, old_rt_priority) = (self.tasks[i].class, self.tasks[i].rt_priority);
        self.tasks[i].class = class;
        self.tasks[i].rt_priority = rt_priority;
        if class.is_rt() {
            let cpu = match was {
                St::Running(c) => {
                    self.stop(c);
                    c
                }
                _ => self.tasks[i].cpu,
            };
            let t = &mut self.tasks[i];
            t.st = St::Rt(cpu);
            t.cpu = cpu;
            t.enq_cnt += 1;
            let at = self.now + self.msg_latency_ns;
            // On Linux 7.2 `ops.disable` runs before the task's new policy is written: its
            // message carries the old one (measured in the VM), and the adapter asks the host.
            self.msgs.push(Msg {
                task: i,
                wakeup: false,
                at,
                left: true,
                class: old_class,
                rt_priority: old_rt_priority,
            });
            return;
        }
        match was {
            St::Rt(_) | St::Queued | St::Dsq => self.message(i, false),
            St::Running(c) => {
                self.stop(c);
                self.message(i, false);
            }
            _ => {}
        }
    }

    /// `sched_setaffinity`: a queued task is taken back and re-enqueued, a running one on a CPU it
    /// may no longer use is stopped and re-enqueued, and a nice change re-enqueues too.
    fn set_attrs(&mut self, i: usize, allowed: CpuSet, nice: i8) {
        self.tasks[i].allowed = allowed;
        self.tasks[i].nice = nice;
        match self.tasks[i].st {
            St::Dsq | St::Queued => self.message(i, false),
            St::Running(cpu) => {
                self.stop(cpu);
                self.message(i, false);
            }
            _ => {}
        }
    }

    fn stop(&mut self, cpu: usize) -> usize {
        let (i, _) = self.running[cpu].take().unwrap();
        self.tasks[i].stop_ts = self.now;
        // Runnable unless it blocks: the caller makes it sleep (or exit) right after.
        self.last_stop[cpu] = Some((self.tasks[i].pid, self.now, true));
        i
    }

    /// A higher class takes `cpu` from its running task, whose slice ends at `slice_end`:
    /// `put_prev_task_scx` puts a task with slice left back at the head of the CPU's queue without
    /// a message, and one whose slice is used up (waiting for its tick) through `ops.enqueue`.
    fn put_prev_for_higher_class(&mut self, cpu: usize, slice_end: Ns) {
        let i = self.stop(cpu);
        if slice_end > self.now {
            self.tasks[i].st = St::Dsq;
            self.dsq[cpu].push_front((i, slice_end - self.now));
        } else {
            self.message(i, false);
        }
    }

    /// Runs the model for `duration_ns`, calling the shadow scheduler whenever a message is pending.
    fn run(&mut self, shadow: &mut Shadow, duration_ns: Ns) {
        let end = self.now + duration_ns;
        let mut orders: Vec<Order> = Vec::new();
        while self.now < end {
            self.now += DT;
            if let Some((every, len)) = self.kthread {
                for cpu in 0..self.running.len() {
                    let Some((_, slice_end)) = self.running[cpu] else { continue };
                    if self.now % every == 0 {
                        self.put_prev_for_higher_class(cpu, slice_end);
                        self.kthread_until[cpu] = self.now + len;
                    }
                }
            }
            for i in 0..self.tasks.len() {
                let St::Rt(cpu) = self.tasks[i].st else { continue };
                // The real-time class takes the CPU: a sched_ext task there goes back to the head
                // of its queue with the rest of its slice, without a message.
                if let Some((_, slice_end)) = self.running[cpu] {
                    self.put_prev_for_higher_class(cpu, slice_end);
                }
                self.tasks[i].run_ns += DT;
                self.tasks[i].run_on[cpu] += DT;
            }
            for cpu in 0..self.running.len() {
                let Some((i, slice_end)) = self.running[cpu] else { continue };
                if self.now % TICK_NS == self.tick_phase_ns {
                    self.last_tick[cpu] = Some(self.now);
                }
                let t = &mut self.tasks[i];
                t.run_ns += DT;
                t.run_on[cpu] += DT;
                t.left = t.left.saturating_sub(DT);
                if t.left == 0 && t.sleep_ns > 0 {
                    let i = self.stop(cpu);
                    // It blocks (or exits): `ops.stopping` with `runnable` false.
                    if let Some(s) = self.last_stop[cpu].as_mut() {
                        s.2 = false;
                    }
                    let t = &mut self.tasks[i];
                    t.left = t.burst_ns;
                    if let Some(b) = t.bursts.as_mut() {
                        *b -= 1;
                        if *b == 0 {
                            t.st = St::Done;
                            continue;
                        }
                    }
                    t.st = St::Sleeping(self.now + t.sleep_ns);
                } else if self.now >= slice_end && self.now % TICK_NS == self.tick_phase_ns {
                    let i = self.stop(cpu);
                    self.message(i, false);
                }
            }
            for i in 0..self.tasks.len() {
                if let St::Sleeping(until) = self.tasks[i].st {
                    if until <= self.now {
                        self.message(i, true);
                    }
                }
            }
            // The BPF side runs the scheduler when it has messages, or when it said tasks are pending
            // and a CPU has run out of work; never while it sleeps; at least once a second.
            let now = self.now;
            let rt_on = |k: &Kernel, c: usize| k.tasks.iter().any(|t| t.st == St::Rt(c));
            for c in 0..self.running.len() {
                if self.running[c].is_some() || !self.dsq[c].is_empty() || rt_on(self, c) {
                    self.idle_since[c] = None;
                } else if self.idle_since[c].is_none() {
                    self.idle_since[c] = Some(now);
                }
            }
            let lat = self.idle_latency_ns;
            let wants_work = |k: &Kernel, c: usize| k.idle_since[c].is_some_and(|t| t + lat <= now);
            let cpu_wants_work = (0..self.running.len()).any(|c| wants_work(self, c));
            let wanted = self.msgs.iter().any(|m| m.at <= now)
                || (shadow.nr_queued() > 0 && cpu_wants_work)
                || self.now >= self.sched_last_run + NSEC_PER_SEC;
            if wanted && self.now >= self.sched_sleep_until {
                self.sched_last_run = self.now;
                for c in (0..self.running.len()).filter(|_| self.report_ticks) {
                    if let Some(at) = self.last_tick[c] {
                        shadow.kernel_tick(CpuId(c as u32), at);
                    }
                }
                let (msgs, later): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut self.msgs).into_iter().partition(|m| m.at <= now);
                self.msgs = later;
                for m in msgs {
                    let t = &self.tasks[m.task];
                    let kt = KernelTask {
                        pid: t.pid,
                        cpu: t.cpu as i32,
                        wakeup: m.wakeup,
                        start_ts: t.start_ts,
                        stop_ts: t.stop_ts,
                        weight: scx_weight_of_nice(t.nice),
                        nr_cpus_allowed: t.allowed.count() as u64,
                        enq_cnt: t.enq_cnt,
                        nr_starts: t.nr_starts,
                        // The model has one clock.
                        start_mono_ns: if self.send_start_mono { t.start_ts } else { 0 },
                        class: Some(m.class),
                        rt_priority: m.rt_priority,
                        left_ext: m.left,
                    };
                    shadow.queued(&mut ModelHost(self), self.now, &kt).unwrap();
                }
                let free: Vec<CpuId> = (0..self.running.len())
                    .filter(|&c| wants_work(self, c))
                    .map(|c| CpuId(c as u32))
                    .collect();
                for &c in free.iter().filter(|_| self.record_stops) {
                    if let Some((pid, stop_ts, runnable)) = self.last_stop[c.idx()] {
                        shadow.cpu_stopped(c, pid, stop_ts, runnable);
                    }
                }
                shadow.schedule(&mut ModelHost(self), self.now, &free, &mut orders).unwrap();
                let arrive = self.now + self.dispatch_latency_ns;
                self.in_flight.extend(orders.drain(..).map(|o| (o, arrive)));
                if let Some(sleep) = shadow.sleep_ns() {
                    self.sched_sleep_until = self.now + sleep;
                }
            }
            let (due, later): (Vec<_>, Vec<_>) =
                std::mem::take(&mut self.in_flight).into_iter().partition(|&(_, at)| at <= now);
            self.in_flight = later;
            {
                for (o, _) in due {
                    let Some(i) = self.tasks.iter().position(|t| t.pid == o.pid) else { continue };
                    if matches!(self.tasks[i].st, St::Rt(_)) {
                        self.orders_for_rt += 1;
                    }
                    // The kernel drops a dispatch of a task not in its custody or with a stale counter.
                    if self.tasks[i].st != St::Queued || self.tasks[i].enq_cnt != o.enq_cnt {
                        continue;
                    }
                    // A CPU the task may not use: the BPF side keeps it on its previous CPU ("bounce").
                    let cpu =
                        if self.tasks[i].allowed.contains(o.cpu) { o.cpu.idx() } else { self.tasks[i].cpu };
                    if o.preempt {
                        if let Some((j, _)) = self.running[cpu] {
                            let j2 = self.stop(cpu);
                            assert_eq!(j, j2);
                            self.message(j, false);
                        }
                    }
                    self.tasks[i].st = St::Dsq;
                    self.dsq[cpu].push_back((i, o.slice_ns));
                }
            }
            for cpu in 0..self.running.len() {
                // Entries of tasks that left the queue since (an affinity change re-enqueued them) go.
                self.dsq[cpu].retain(|&(i, _)| self.tasks[i].st == St::Dsq);
                if self.running[cpu].is_none() && self.now >= self.kthread_until[cpu] && !rt_on(self, cpu) {
                    if let Some((i, slice)) = self.dsq[cpu].pop_front() {
                        let t = &mut self.tasks[i];
                        t.st = St::Running(cpu);
                        t.cpu = cpu;
                        t.start_ts = self.now;
                        t.nr_starts += 1;
                        t.max_wait_ns = t.max_wait_ns.max(self.now - t.runnable_since);
                        self.running[cpu] = Some((i, self.now + slice));
                    }
                }
            }
        }
    }
}

fn shadow(spec: &str, cpus: u32, now: Ns) -> Shadow {
    let policy = schedlab_policies::create(spec).unwrap();
    Shadow::new(policy, Topology::flat(cpus), 250, now)
}

#[test]
fn cfs_gives_two_hogs_cpu_in_the_ratio_of_their_weights() {
    let mut k = Kernel::new(1);
    let a = k.spawn(0, Ns::MAX, 0, None);
    let b = k.spawn(5, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 1, 0);
    k.run(&mut s, 3 * NSEC_PER_SEC);
    // sched_prio_to_weight: nice 0 is 1024, nice 5 is 335.
    let ratio = k.tasks[a].run_ns as f64 / k.tasks[b].run_ns as f64;
    let want = 1024.0 / 335.0;
    assert!((ratio - want).abs() / want < 0.10, "ratio {ratio:.3}, want {want:.3}");
    assert!(s.stats().nr_ticks > 600, "{:?}", s.stats());
}

#[test]
fn the_nice_level_comes_from_the_kernel_weight_when_it_cannot_be_read() {
    let mut k = Kernel::new(1);
    k.weight_only = true;
    let a = k.spawn(0, Ns::MAX, 0, None);
    let b = k.spawn(5, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 1, 0);
    k.run(&mut s, 2 * NSEC_PER_SEC);
    let ratio = k.tasks[a].run_ns as f64 / k.tasks[b].run_ns as f64;
    assert!((ratio - 1024.0 / 335.0).abs() < 0.3, "ratio {ratio:.3}");
}

#[test]
fn a_waking_sleeper_preempts_a_hog_at_once_under_cfs() {
    let mut k = Kernel::new(1);
    k.spawn(0, Ns::MAX, 0, None);
    let sleeper = k.spawn(0, 100_000, 10 * NSEC_PER_MSEC, None);
    let mut s = shadow("cfs", 1, 0);
    k.run(&mut s, NSEC_PER_SEC);
    // Without wakeup preemption the sleeper would wait for the hog's tick (up to 4 ms at HZ 250);
    // with it, at most the scheduler's own sleep after a round that left the hog queued.
    assert!(
        k.tasks[sleeper].max_wait_ns <= schedlab_scx_adapter::OVERLOAD_SLEEP_NS + 2 * DT,
        "waited {} ns",
        k.tasks[sleeper].max_wait_ns
    );
    assert!(s.stats().nr_preempt_dispatches > 50, "{:?}", s.stats());
}

#[test]
fn fifo_lets_a_hog_keep_its_cpu_so_the_sleeper_waits_on_one_cpu() {
    // The same workload under fifo (run to block, no preemption among equals): the sleeper waits
    // for the hog's... forever on one CPU; on two CPUs it gets the other one.
    let mut k = Kernel::new(2);
    k.spawn(0, Ns::MAX, 0, None);
    let sleeper = k.spawn(0, 100_000, 10 * NSEC_PER_MSEC, None);
    let mut s = shadow("fifo", 2, 0);
    k.run(&mut s, NSEC_PER_SEC);
    assert!(k.tasks[sleeper].run_ns >= 80 * 100_000, "sleeper ran {} ns", k.tasks[sleeper].run_ns);
}

#[test]
fn every_policy_keeps_an_overloaded_machine_busy_and_every_task_running() {
    for p in schedlab_policies::policies() {
        let mut k = Kernel::new(2);
        for i in 0..6 {
            k.spawn((i % 3) as i8 * 3 - 3, 2 * NSEC_PER_MSEC, NSEC_PER_MSEC, None);
        }
        let mut s = shadow(p.name, 2, 0);
        let dur = 2 * NSEC_PER_SEC;
        k.run(&mut s, dur);
        let total: Ns = k.tasks.iter().map(|t| t.run_ns).sum();
        // Six tasks wanting 2 of every 3 ms need 4 CPUs: both CPUs should stay busy.
        eprintln!("{}: busy {:.1} %, {:?}", p.name, total as f64 * 50.0 / dur as f64, s.stats());
        assert!(
            total * 100 >= 2 * dur * 95,
            "{}: CPUs busy {:.1} %",
            p.name,
            total as f64 * 50.0 / dur as f64
        );
        // O(1) and RSDL start all six tasks on CPU 0 (2.6.22 balances at fork only across NUMA
        // nodes) and leave the spreading to their balancer, which this model calls only at the ticks
        // it replays when a task comes back and when a CPU runs dry: a nice-3 task stays queued behind
        // the others there (issue 31, tick placement). crates/sim/tests/o1.rs runs the same six tasks
        // in the engine, which ticks every jiffy, and checks that every one of them runs.
        if matches!(p.name, "o1" | "rsdl") {
            continue;
        }
        // HTFS enforces its slices to the nanosecond (docs/policies/htfs.md); the kernel ends a
        // sched_ext slice only at a tick, so its 2^17 ns interactive slices last to the next
        // tick, and the nice-0 and nice-3 tasks here wait up to 1.4 s (the engine's model of
        // sched_ext shows waits of 0.1-0.5 s with round trips; natively at most 13 ms): a
        // difference of the real path (docs/real-kernel.md), not checked here.
        if p.name == "htfs" {
            continue;
        }
        for t in &k.tasks {
            assert!(t.run_ns > 0, "{}: task {} never ran", p.name, t.pid);
            assert!(t.max_wait_ns < NSEC_PER_SEC, "{}: task {} waited {} ns", p.name, t.pid, t.max_wait_ns);
        }
    }
}

#[test]
fn tasks_that_exit_leave_the_policy() {
    let mut k = Kernel::new(2);
    for _ in 0..4 {
        k.spawn(0, NSEC_PER_MSEC, NSEC_PER_MSEC, Some(5));
    }
    k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 2, 0);
    k.run(&mut s, 3 * NSEC_PER_SEC);
    assert!(k.tasks[..4].iter().all(|t| t.st == St::Done && t.run_ns >= 5 * NSEC_PER_MSEC));
    assert_eq!(s.stats().nr_exits, 4, "{:?}", s.stats());
    assert_eq!(s.nr_tasks(), 1);
}

#[test]
fn a_hog_per_cpu_runs_without_a_context_switch_between_ticks() {
    let mut k = Kernel::new(2);
    k.spawn(0, Ns::MAX, 0, None);
    k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 2, 0);
    k.run(&mut s, NSEC_PER_SEC);
    let st = s.stats();
    // Each tick re-dispatches the running task: about 250 per CPU per second.
    assert!(st.nr_continues > 400, "{st:?}");
    assert!(k.tasks.iter().all(|t| t.run_ns > NSEC_PER_SEC * 9 / 10));
}

#[test]
fn the_round_trip_of_a_continue_and_of_a_switch_is_measured_from_the_kernel_timestamps() {
    // A hog per CPU: at each tick its kernel slice ends, its message reaches the scheduler 400 us
    // later, and it is sent back at once, so each continue leaves its CPU idle exactly that long.
    let mut k = Kernel::new(2);
    k.msg_latency_ns = 400_000;
    k.spawn(0, Ns::MAX, 0, None);
    k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 2, 0);
    k.run(&mut s, NSEC_PER_SEC);
    let st = s.stats();
    // A tick every 4 ms of the shadow's clock, each costing 0.4 ms: about 227 per CPU.
    assert!(st.nr_continue_gaps > 400, "{st:?}");
    assert_eq!(st.mean_continue_gap_ns(), 400_000, "{st:?}");
    assert_eq!(st.sd_continue_gap_ns(), 0, "every continue took the same time: {st:?}");
    assert_eq!(st.nr_switch_gaps, 0, "{st:?}");
    // Two hogs on one CPU: CFS switches between them; each switch costs the message's latency,
    // plus at most the scheduler's sleep after a round that left a task queued.
    let mut k = Kernel::new(1);
    k.msg_latency_ns = 400_000;
    k.spawn(0, Ns::MAX, 0, None);
    k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 1, 0);
    k.run(&mut s, NSEC_PER_SEC);
    let st = s.stats();
    assert!(st.nr_switch_gaps > 50, "{st:?}");
    let mean = st.mean_switch_gap_ns();
    assert!((400_000..=400_000 + schedlab_scx_adapter::shadow::MAX_SLEEP_NS).contains(&mean), "{st:?}");
    // Without the latency the model answers a continue within its step: nothing is lost.
    let mut k = Kernel::new(2);
    k.spawn(0, Ns::MAX, 0, None);
    k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 2, 0);
    k.run(&mut s, NSEC_PER_SEC);
    assert_eq!(s.stats().continue_gap_ns + s.stats().switch_gap_ns, 0, "{:?}", s.stats());
}

/// A kernel thread that preempts a task with slice left lets it resume without a message (it goes
/// back to the head of its CPU's queue), so the task's next message carries the start after the
/// kernel thread, not the one that answered the scheduler: from that start, a round trip would be
/// the 400 us latency plus the task's run before the preemption plus the kernel thread's 200 us.
/// The adapter sees from the start count (`nr_starts`) that the task started twice and leaves such
/// gaps out. Round-robin slices of 1 ms, sent as they are (they end before the tick), leave slice
/// for about a quarter of the preemptions to fall in; one with its slice used up goes to user
/// space (a return of its own, measured as any other).
#[test]
fn a_round_trip_is_counted_only_when_the_task_ran_once_since() {
    let mut k = Kernel::new(2);
    k.msg_latency_ns = 400_000;
    // Every 9.9 ms (its phase in the 4 ms tick period moves by 100 us each time, so it falls at
    // every point of a slice).
    k.kthread = Some((9_900_000, 200_000));
    k.spawn(0, Ns::MAX, 0, None);
    k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("rr[slice_ns=1000000]", 2, 0);
    k.run(&mut s, NSEC_PER_SEC);
    let st = s.stats();
    // A preemption every 9.9 ms on each CPU spoils at most the gap it falls in: 202 in a second.
    assert!(st.nr_gaps_unverified > 20 && st.nr_gaps_unverified <= 202, "{st:?}");
    assert!(st.nr_continue_gaps > 200, "{st:?}");
    assert_eq!(st.mean_continue_gap_ns(), 400_000, "{st:?}");
    assert_eq!(st.sd_continue_gap_ns(), 0, "{st:?}");
}

/// The kernel counts a slice from the task's start, a dispatch after the order, and ends it only
/// at a tick. Two round-robin hogs on one CPU (10 ms slices, from a start 650 us after a tick, so
/// each runs three ticks): each order means "to the next tick", and each task comes back at that
/// tick, though it starts 250 us after the order, so user space sees all 249 ticks of the second,
/// two continues and a switch per turn. Sent as the time left to the tick, the slice was 250 us
/// short of used up there and ran on to the tick after: user space saw every second tick.
#[test]
fn a_task_sent_to_the_next_tick_comes_back_at_that_tick_though_it_starts_a_dispatch_later() {
    let mut k = Kernel::new(1);
    k.msg_latency_ns = 400_000;
    k.dispatch_latency_ns = 250_000;
    k.spawn(0, Ns::MAX, 0, None);
    k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("rr", 1, 0);
    k.run(&mut s, NSEC_PER_SEC);
    let st = s.stats();
    assert_eq!(st.nr_ticks, 249, "{st:?}");
    assert_eq!((st.nr_continues, st.nr_tick_resched), (166, 83), "{st:?}");
}

/// The kernel's ticks need not fall on multiples of the period on the scheduler's clock (in the VM
/// they fell 0.05-0.2 ms after them). A task runs 400 us from 50 us after each multiple of 4 ms
/// and sleeps the rest (3.6 ms); the kernel ticks 300 us after each multiple, in the middle of its
/// run, so the kernel's tick charges it all 249 ticks of the second. With the kernel's ticks
/// reported (`ops.tick`, `Shadow::kernel_tick`) the policy's ticks fall on the kernel's grid and it
/// charges the task the same; on the shadow's own grid of multiples of 4 ms, every tick fell in
/// the task's sleep and it was charged none (ULE then scores it a pure sleeper).
#[test]
fn the_policy_ticks_on_the_kernels_grid_where_the_kernel_reports_its_ticks() {
    let run = |report: bool| {
        let mut k = Kernel::new(1);
        k.tick_phase_ns = 300_000;
        k.report_ticks = report;
        k.spawn(0, 400_000, 3_600_000, None);
        let mut s = shadow("ule", 1, 0);
        k.run(&mut s, NSEC_PER_SEC);
        assert!(k.tasks[0].run_ns >= 99 * NSEC_PER_MSEC, "ran {} ns", k.tasks[0].run_ns);
        s.stats().nr_ticks
    };
    assert_eq!(run(true), 249);
    assert_eq!(run(false), 0);
}

/// A round trip is a request half (the message's way to the scheduler: 400 us here) and a dispatch
/// half (the order's way to the CPU: 250 us). The adapter tells them apart by the started task's
/// start on its own clock and the time of the order: two hogs on one CPU under CFS switch at every
/// tick (the granularity lets neither keep the CPU for two), each round trip 650 us with a 250 us
/// dispatch half. Messages without the start on the
/// shadow's clock (`start_mono_ns` 0) leave the halves unmeasured.
#[test]
fn a_round_trip_splits_into_its_request_and_dispatch_halves() {
    let run = |mono: bool| {
        let mut k = Kernel::new(1);
        k.msg_latency_ns = 400_000;
        k.dispatch_latency_ns = 250_000;
        k.spawn(0, Ns::MAX, 0, None);
        k.spawn(0, Ns::MAX, 0, None);
        k.send_start_mono = mono;
        let mut s = shadow("cfs", 1, 0);
        k.run(&mut s, NSEC_PER_SEC);
        s.stats()
    };
    let st = run(true);
    assert!(st.nr_switch_gaps > 200, "{st:?}");
    assert_eq!(st.mean_switch_gap_ns(), 650_000, "{st:?}");
    assert_eq!(st.nr_switch_dispatches, st.nr_switch_gaps);
    assert_eq!(st.mean_switch_dispatch_ns(), 250_000, "{st:?}");
    assert_eq!(st.dispatch_share_permille(), Some(250 * 1000 / 650));
    let st = run(false);
    assert!(st.nr_switch_gaps > 200, "{st:?}");
    assert_eq!(
        (st.nr_continue_dispatches, st.nr_switch_dispatches, st.dispatch_share_permille()),
        (0, 0, None)
    );
}

/// Three tasks on one CPU that each run 1 ms and sleep 1 ms: when one blocks, another is queued,
/// and the scheduler sees the CPU free only 300 us later (the kernel's idle path and the kick to
/// the scheduler's CPU). The round trip after a block runs from the blocked task's stop, which only
/// its next message tells, to the start of the task picked: 300 us, plus at most the scheduler's
/// sleep after a round that left tasks queued.
#[test]
fn the_round_trip_after_a_block_runs_from_the_blocked_tasks_stop() {
    let mut k = Kernel::new(1);
    k.idle_latency_ns = 300_000;
    // A hog's returns teach the adapter the clock offset (0 here: messages arrive at once).
    k.spawn(0, Ns::MAX, 0, None);
    for _ in 0..3 {
        k.spawn(0, NSEC_PER_MSEC, NSEC_PER_MSEC, None);
    }
    let mut s = shadow("fifo", 1, 0);
    k.run(&mut s, 20 * NSEC_PER_MSEC);
    // FIFO: the hog, queued first, runs without end; the rest never start.
    assert_eq!(s.stats().nr_block_gaps, 0, "{:?}", s.stats());
    // A 6 ms task, then three that run 1 ms and sleep 1 ms, orders `dispatch_ns` on their way.
    let three = |dispatch_ns: Ns| {
        let mut k = Kernel::new(1);
        k.idle_latency_ns = 300_000;
        k.dispatch_latency_ns = dispatch_ns;
        k.spawn(0, 6 * NSEC_PER_MSEC, 1, Some(1));
        for _ in 0..3 {
            k.spawn(0, NSEC_PER_MSEC, NSEC_PER_MSEC, None);
        }
        let mut s = shadow("cfs", 1, 0);
        k.run(&mut s, NSEC_PER_SEC);
        s.stats()
    };
    let st = three(0);
    assert!(st.nr_block_gaps > 300, "{st:?}");
    // (Now and then a wakeup's message comes first and its order, preempting the task the
    // scheduler still believes runs, reaches the idle CPU sooner: one gap of 250 us here.)
    let mean = st.mean_block_gap_ns();
    assert!((290_000..=300_000 + schedlab_scx_adapter::shadow::MAX_SLEEP_NS).contains(&mean), "{st:?}");
    // Orders reach the CPU at once here: the whole round trip is its request half.
    assert_eq!((st.nr_block_dispatches, st.mean_block_dispatch_ns()), (st.nr_block_gaps, 0), "{st:?}");
    // With orders 200 us on their way, each round trip after a block has a dispatch half of 200 us.
    let st = three(200_000);
    assert!(st.nr_block_gaps > 300, "{st:?}");
    assert_eq!((st.nr_block_dispatches, st.mean_block_dispatch_ns()), (st.nr_block_gaps, 200_000), "{st:?}");
    // The round trip grows by about that much (a round held for another reason sees a CPU free a
    // little sooner now and then: a mean of 499.6 us here).
    let mean = st.mean_block_gap_ns();
    assert!((480_000..=500_000 + schedlab_scx_adapter::shadow::MAX_SLEEP_NS).contains(&mean), "{st:?}");
}

/// A task that sleeps 100 us, less than the 400 us the scheduler takes to see its CPU free, is
/// woken before then: the CPU runs it again after a wait for its wakeup, not for a decision, and
/// that is no round trip (the task was not queued when it stopped).
#[test]
fn a_cpu_that_waited_for_a_wakeup_measures_no_round_trip() {
    let mut k = Kernel::new(1);
    k.idle_latency_ns = 400_000;
    // 6 ms bursts: each ends at a tick first (a return: the clock offset), then blocks.
    k.spawn(0, 6 * NSEC_PER_MSEC, 100_000, None);
    let mut s = shadow("cfs", 1, 0);
    k.run(&mut s, NSEC_PER_SEC);
    let st = s.stats();
    assert!(st.nr_blocked_found_wakeup > 100, "{st:?}");
    assert_eq!(st.nr_block_gaps, 0, "{st:?}");
}

#[test]
fn a_task_pinned_after_it_started_runs_only_where_it_may_and_a_nice_change_takes_effect() {
    // exec pins and renices its threads after they start, as taskset and renice do.
    let mut k = Kernel::new(2);
    let a = k.spawn(0, Ns::MAX, 0, None);
    let b = k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 2, 0);
    k.run(&mut s, 100 * NSEC_PER_MSEC);
    k.set_attrs(a, CpuSet::single(CpuId(1)), 0);
    k.set_attrs(b, CpuSet::single(CpuId(1)), 5);
    let before = (k.tasks[a].run_on.clone(), k.tasks[b].run_on.clone());
    k.run(&mut s, 3 * NSEC_PER_SEC);
    // Nothing more ran on CPU 0 (allow one step in flight when the change landed).
    assert!(k.tasks[a].run_on[0] <= before.0[0] + DT && k.tasks[b].run_on[0] <= before.1[0] + DT);
    let (ra, rb) = (k.tasks[a].run_on[1] - before.0[1], k.tasks[b].run_on[1] - before.1[1]);
    let ratio = ra as f64 / rb as f64;
    assert!((ratio - 1024.0 / 335.0).abs() < 0.3, "ratio {ratio:.3} after renice to 5");
    let st = s.stats();
    // b's nice change reached the policy through `set_nice` (no second creation, its vruntime
    // kept); both tasks' affinity changes were applied.
    assert_eq!((st.nr_affinity_changes, st.nr_nice_changes, st.nr_new), (2, 1, 2), "{st:?}");
    // CPU 0 sat idle for 3 s while b waited for CPU 1: the scheduler backed off instead of
    // running every 50 us (60,000 rounds).
    assert!(st.nr_idle_picks < 10_000, "{st:?}");
}

/// Threads written into cgroups after they started, as `schedlab exec` places a workload's task
/// groups: the policy meets each cgroup once (`group_new`) and moves each thread at a later message
/// (`sched_move_task`), and CFS and EEVDF then divide the CPU between the groups by their weights
/// before dividing each group's share among its threads: with two hogs in a group of weight 100 and
/// one in a group of weight 200 on one CPU, 1/6, 1/6 and 2/3 (a third each without groups).
#[test]
fn threads_moved_into_cgroups_share_the_cpu_by_group_under_cfs_and_eevdf() {
    for spec in ["cfs", "eevdf"] {
        let mut k = Kernel::new(1);
        k.weights.push(("/bench/b".into(), 200));
        let a1 = k.spawn(0, Ns::MAX, 0, None);
        let a2 = k.spawn(0, Ns::MAX, 0, None);
        let b = k.spawn(0, Ns::MAX, 0, None);
        let mut s = shadow(spec, 1, 0);
        k.run(&mut s, 100 * NSEC_PER_MSEC);
        k.tasks[a1].group = "/bench/a".into();
        k.tasks[a2].group = "/bench/a".into();
        k.tasks[b].group = "/bench/b/".into();
        // The simulator's EEVDF needs seconds to settle group shares on one CPU (docs/real-kernel.md).
        k.run(&mut s, 5 * NSEC_PER_SEC);
        let before: Vec<Ns> = k.tasks.iter().map(|t| t.run_ns).collect();
        k.run(&mut s, 3 * NSEC_PER_SEC);
        let got: Vec<f64> = k.tasks.iter().zip(&before).map(|(t, b)| (t.run_ns - b) as f64).collect();
        let total: f64 = got.iter().sum();
        for (i, want) in [(a1, 1.0 / 6.0), (a2, 1.0 / 6.0), (b, 2.0 / 3.0)] {
            let share = got[i] / total;
            assert!(
                (share - want).abs() < 0.03,
                "{spec}: task {i} got {share:.3} of the CPU, want {want:.3}"
            );
        }
        let st = s.stats();
        // /bench, /bench/a and /bench/b; each thread moved once.
        assert_eq!((st.nr_groups, st.nr_group_moves), (3, 3), "{spec}: {st:?}");
    }
}

/// A host that knows one runnable nice-0 thread of pid 1 that may use every CPU.
struct OneThread;

impl Host for OneThread {
    fn task_facts(&mut self, pid: i32) -> Option<TaskFacts> {
        Some(TaskFacts {
            tgid: pid as u32,
            allowed: Topology::flat(1).all(),
            nice: Some(0),
            class: SchedClass::Normal,
            rt_priority: 0,
        })
    }
    fn is_alive(&mut self, _pid: i32) -> bool {
        true
    }
    fn is_runnable(&mut self, _pid: i32) -> Option<bool> {
        Some(true)
    }
}

/// The kernel's tick charges whichever task runs at it, also one that blocks before its kernel
/// slice ends (it comes back only with `SCX_ENQ_WAKEUP`). HZ 250: a thread dispatched at 0 comes
/// back at its slice end (4 ms, reported 0.05 ms later: the clock offset learnt), runs again,
/// blocks at 13.5 ms and wakes at 14 ms. The ticks at 8 and 12 ms fell while it ran: three ticks
/// in all, where the adapter used to count only the first.
#[test]
fn ticks_that_fell_before_a_task_blocked_are_charged_to_it() {
    let ms = NSEC_PER_MSEC;
    let mut s = shadow("cfs", 1, 0);
    let mut orders = Vec::new();
    let msg = |wakeup: bool, start_ts: u64, stop_ts: u64, enq_cnt: u64| KernelTask {
        pid: 1,
        cpu: 0,
        wakeup,
        start_ts,
        stop_ts,
        weight: scx_weight_of_nice(0),
        nr_cpus_allowed: 1,
        enq_cnt,
        nr_starts: enq_cnt - 1,
        start_mono_ns: 0,
        class: Some(SchedClass::Normal),
        rt_priority: 0,
        left_ext: false,
    };
    s.queued(&mut OneThread, 0, &msg(true, 0, 0, 1)).unwrap();
    s.schedule(&mut OneThread, 0, &[CpuId(0)], &mut orders).unwrap();
    assert_eq!(orders.len(), 1, "{orders:?}");
    s.queued(&mut OneThread, 4 * ms + 50_000, &msg(false, 0, 4 * ms, 2)).unwrap();
    assert_eq!(s.stats().nr_ticks, 1);
    s.queued(&mut OneThread, 14 * ms, &msg(true, 4 * ms + 50_000, 13 * ms + 500_000, 3)).unwrap();
    assert_eq!(s.stats().nr_ticks, 3, "{:?}", s.stats());
}

/// Two hogs on one CPU under CFS; `b` makes itself SCHED_FIFO while it runs, for half a second,
/// then SCHED_OTHER again. It leaves sched_ext (`ops.disable`'s message): the policy learns its
/// class, the CPU is the real-time class's, and `a`, still queued in the policy, is neither
/// dispatched nor charged meanwhile, as Linux's fair class charges only its own current task
/// (`update_curr`). Back, `b` is restored with its place (`Restore`, its vruntime kept relative),
/// so the two share the CPU equally at once, as on Linux. Before the message existed the shadow
/// held `b` running through its half second as FIFO and CFS charged it that: `a` then ran alone
/// for half a second after `b`'s return.
#[test]
fn a_task_that_goes_real_time_leaves_the_policy_and_comes_back_with_its_place() {
    let mut k = Kernel::new(1);
    let a = k.spawn(0, Ns::MAX, 0, None);
    let b = k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 1, 0);
    k.run(&mut s, NSEC_PER_SEC);
    // Run on until b is the one running (they alternate every tick).
    while k.tasks[b].st != St::Running(0) {
        k.run(&mut s, DT);
    }
    k.set_class(b, SchedClass::Fifo, 50);
    let before = (k.tasks[a].run_ns, k.tasks[b].run_ns);
    k.run(&mut s, NSEC_PER_SEC / 2);
    assert_eq!(k.tasks[a].run_ns, before.0, "a ran beside a real-time hog on one CPU");
    assert!(k.tasks[b].run_ns - before.1 >= NSEC_PER_SEC / 2 - DT);
    let st = s.stats();
    assert_eq!((st.nr_class_changes, st.nr_left_ext), (1, 1), "{st:?}");
    assert_eq!(k.orders_for_rt, 0, "b was dispatched while the real-time class ran it");
    assert!(s.describe_pid(k.tasks[b].pid).contains("Fifo"), "{}", s.describe_pid(k.tasks[b].pid));
    k.set_class(b, SchedClass::Normal, 0);
    let before = (k.tasks[a].run_ns, k.tasks[b].run_ns);
    k.run(&mut s, NSEC_PER_SEC / 2);
    let (ra, rb) = (k.tasks[a].run_ns - before.0, k.tasks[b].run_ns - before.1);
    let share = rb as f64 / (ra + rb) as f64;
    assert!((share - 0.5).abs() < 0.05, "b got {share:.3} of the half second after its return");
    let st = s.stats();
    assert_eq!((st.nr_class_changes, st.nr_left_ext, st.nr_new), (2, 1, 2), "{st:?}");
}

/// The same class change made to a task waiting in the policy's queue (another process's
/// `sched_setscheduler`): it leaves the queue at once, and no order for it is sent while the
/// real-time class runs it (before, the policy picked it at the next tick, and the kernel dropped
/// the order). The task it preempts on the CPU goes back to the head of the CPU's queue without a
/// message, so the policy keeps counting it as running: the approximation the crate docs name
/// for every preemption by a higher class.
#[test]
fn a_queued_task_made_real_time_is_never_dispatched_while_it_is_out_of_sched_ext() {
    let mut k = Kernel::new(1);
    let a = k.spawn(0, Ns::MAX, 0, None);
    let b = k.spawn(0, Ns::MAX, 0, None);
    let mut s = shadow("cfs", 1, 0);
    k.run(&mut s, NSEC_PER_SEC);
    while k.tasks[a].st != St::Running(0) {
        k.run(&mut s, DT);
    }
    k.set_class(b, SchedClass::Rr, 10);
    k.run(&mut s, NSEC_PER_SEC / 2);
    assert_eq!(k.orders_for_rt, 0, "b was dispatched while the real-time class ran it");
    assert_eq!(s.stats().nr_left_ext, 1);
    k.set_class(b, SchedClass::Normal, 0);
    let before = k.tasks[b].run_ns;
    k.run(&mut s, NSEC_PER_SEC / 2);
    assert!(k.tasks[b].run_ns > before, "b never ran after its return");
    assert!(k.tasks[b].max_wait_ns < NSEC_PER_SEC, "b waited {} ns", k.tasks[b].max_wait_ns);
}

/// A sleeper made SCHED_BATCH while it sleeps stays in sched_ext and changes nothing in its
/// messages but the class schedlab's BPF variant packs into them; CFS then no longer lets its
/// wakeups preempt the hog (`check_preempt_wakeup`: a wakee whose policy is not SCHED_NORMAL
/// does not preempt), so it waits for the hog's tick. Before, the change went unseen and every
/// wakeup preempted.
#[test]
fn a_sleeper_made_sched_batch_no_longer_preempts_the_hog_at_its_wakeups_under_cfs() {
    let mut k = Kernel::new(1);
    k.spawn(0, Ns::MAX, 0, None);
    let sleeper = k.spawn(0, 100_000, 10 * NSEC_PER_MSEC, None);
    let mut s = shadow("cfs", 1, 0);
    k.run(&mut s, NSEC_PER_SEC);
    let preempts = s.stats().nr_preempt_dispatches;
    assert!(preempts > 50, "{:?}", s.stats());
    while !matches!(k.tasks[sleeper].st, St::Sleeping(_)) {
        k.run(&mut s, DT);
    }
    k.set_class(sleeper, SchedClass::Batch, 0);
    k.tasks[sleeper].max_wait_ns = 0;
    k.run(&mut s, NSEC_PER_SEC);
    let st = s.stats();
    assert_eq!(st.nr_class_changes, 1, "{st:?}");
    assert!(st.nr_preempt_dispatches <= preempts + 1, "batch wakeups preempted: {st:?}");
    // It waits for the hog's kernel slice to end at a tick: more than a millisecond at times.
    assert!(
        k.tasks[sleeper].max_wait_ns > NSEC_PER_MSEC,
        "waited at most {} ns",
        k.tasks[sleeper].max_wait_ns
    );
}

/// The kernel's tick falls on a fixed grid (every 4 ms at HZ 250, whatever runs), so a task that
/// runs a fraction of the time is running at about that fraction of the ticks, and a policy that
/// charges by ticks (ULE's run history, 4BSD's `estcpu`, Linux 2.4's counter) sees it run that
/// much. Tasks on one CPU run 300 us, sleep 1.35 ms, and so on, for 4 s: the ticks that reach the
/// policy must be about their run time over the tick. Alone, a task's block is learnt from its
/// wakeup's message (its stop); with a second task queued, the scheduler first finds the CPU free,
/// and the kernel's record of the CPU's last stop tells that the task blocked and where its run
/// ended. The shadow used to restart its tick grid at each dispatch after a missed tick (the next
/// tick 4 ms after the dispatch: with this period that tick fell in a sleep again and again, 0
/// ticks charged of 182), and charged no tick to a task found blocked by its idle CPU (303 of 364
/// with two tasks, as without the record still): ULE then scored the real pipe pair of
/// vm/one-cpu.toml as never running.
#[test]
fn the_ticks_charged_to_short_runners_are_their_share_of_a_fixed_tick_grid() {
    for (n, record_stops) in [(1, true), (2, true), (2, false)] {
        let mut k = Kernel::new(1);
        k.record_stops = record_stops;
        for _ in 0..n {
            k.spawn(0, 300_000, 1_350_000, None);
        }
        let mut s = shadow("ule", 1, 0);
        k.run(&mut s, 4 * NSEC_PER_SEC);
        let tick_ns = NSEC_PER_SEC / 250;
        let run_ns: Ns = k.tasks.iter().map(|t| t.run_ns).sum();
        let expected = run_ns as f64 / tick_ns as f64;
        let ticks = s.stats().nr_ticks as f64;
        assert!(expected > 150.0 * n as f64, "{n} tasks ran {run_ns} ns");
        let within = (ticks - expected).abs() <= 0.1 * expected;
        if n == 2 {
            assert!(s.stats().nr_blocked_found_idle > 1000, "{:?}", s.stats());
        }
        if record_stops {
            assert!(within, "{n} tasks: {ticks} ticks charged, {expected:.0} expected");
        } else {
            // The host is asked instead, and the ticks before each such block are not charged.
            assert!(
                !within && ticks < expected,
                "{ticks} ticks charged without the records, {expected:.0} run"
            );
        }
        // With the records, no CPU found idle costs the scheduler a question to the host.
        let queries = k.runnable_queries.get();
        assert_eq!(queries == 0, record_stops, "{queries} questions whether a task is runnable");
    }
}
