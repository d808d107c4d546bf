//! # VTRR: virtual-time round robin, an O(1) proportional-share scheduler
//!
//! Source: J. Nieh, C. Vaill and H. Zhong, *Virtual-Time Round-Robin: An O(1) Proportional Share
//! Scheduler*, USENIX ATC 2001, sec. 2 (the algorithm and its dynamic considerations); seed 000
//! sec. 3.4 summarises it ("fair, but does not give early leaving tasks additional runtime").
//!
//! Every client (task) has a **share** `S`. The run queue is ordered by share, largest first, and the
//! order changes only when a client joins, leaves or changes its share, never at a decision. All
//! clients get the same **time quantum** `q`; proportion comes from how often each is visited:
//!
//! * a **time counter** `TC`, set to `S` at the start of each scheduling cycle and decremented each
//!   time the client is given a quantum, so a cycle gives every client exactly `S` quanta; a cycle ends
//!   (all counters reset to their shares) when the scheduler comes back to the head of the queue and
//!   finds its counter at 0;
//! * a **virtual time** per client, `VT = service / S`, and the **queue virtual time** `QVT`, which
//!   advances by `service / sum(S)` for every piece of service any client receives (the virtual time a
//!   perfectly fair scheduler would have given every client). The client's virtual finishing time is
//!   `VFT = VT + q / S`.
//!
//! After the current client `C` has had its quantum the next one is chosen in constant time: the
//! client `N` after `C` in the queue runs if its counter is larger than `C`'s (`TC_N > TC_C`, which
//! restores the invariant that counters never increase along the queue), or else if it has quanta left
//! in this cycle and satisfies the **VFT inequality** `VFT_N - QVT < q / S_N`, i.e. `VT_N < QVT`: it
//! has not yet had more than its proportional share. Otherwise the scheduler goes back to the head of
//! the queue (the "skip to the head" rule), which favours the large shares at the front.
//!
//! **Dynamic clients.** A client that becomes runnable is inserted after the last client with a share
//! at least its own. Its virtual time becomes `QVT` plus whatever lead it had over `QVT` when it left
//! (a client that was ahead stays ahead), but a client that left while behind gets nothing back: as
//! seed 000 puts it, VTRR gives early leaving tasks no additional runtime. Its time counter becomes the
//! smaller of its share and the counter of the client before it (its share if it joins at the head),
//! which keeps the counters non-increasing along the queue; one that left and returns in the same
//! cycle keeps at most the counter it left with. A client that leaves is unlinked in O(1); if it was
//! the current client, the decision continues from the client before it.
//!
//! **Decisions are O(1):** each looks at the current client, the one after it and the head; the
//! cycle reset touches every client once per cycle of `sum(S)` quanta (amortised O(1)); insertion walks
//! at most the 40 share levels (one per nice level) to find its place.
//!
//! Simplifications, each also in docs/policies/vtrr.md:
//! * **Shares from nice.** The paper gives clients shares through its own interface. Here a task's
//!   share comes from its nice level: `20 - nice` (1..40, as Linux 2.4 scales slices by nice) with
//!   `shares=linear`, or CFS's weight table (`shares=cfs`, 15..88761). Tasks of one nice level form one
//!   group in the queue, in arrival order.
//! * **Multiprocessors.** VTRR is a uniprocessor algorithm (seed 000: "did not introduce multicore"),
//!   as was its Linux 2.4 implementation on a single run queue. Here all CPUs share one queue and one
//!   position in it: a CPU asking for work takes the VTRR choice if it may run it and it is not
//!   running elsewhere, else the next such client in queue order (wrapping to the head once), skipping
//!   clients with no quanta left in the cycle. That walk is O(number of CPUs) in the common case.
//! * **Quantum accounting.** A quantum is a slice of `quantum_ns` given at dispatch (the engine ends it);
//!   the counter is charged when the quantum is given, the virtual times with the service actually
//!   received, so a client that blocks early is charged one visit but only its real run time.
//! * **No wakeup preemption**: a joining client waits for the current quanta to end (an idle CPU takes
//!   it at once). Real-time tasks run in the Linux RT class above VTRR (as the paper's Linux
//!   implementation kept Linux's real-time classes), and SCHED_IDLE/BATCH tasks are clients like any
//!   other.

use crate::params::{parse_u64, ParamInfo, Params};
use schedlab_core::weights::nice_to_weight;
use schedlab_core::{
    CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Ns, PolicyStat, SchedPolicy, SwitchReason, TaskId,
    TaskState, WakeInfo, WakeKind, WorkConservation,
};

/// Fixed-point scale of virtual times: `VT = service_ns x VT_ONE / S`.
pub const VT_ONE: u128 = 1 << 20;
/// Share levels: one per nice level, level 0 (nice -20) the largest share.
const LEVELS: usize = 40;
/// No client (end of a list link).
const NIL: u32 = u32::MAX;

/// How shares are derived from nice levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMap {
    /// `20 - nice`: nice -20 -> 40, 0 -> 20, 19 -> 1.
    Linear,
    /// CFS's `prio_to_weight`: nice -20 -> 88761, 0 -> 1024, 19 -> 15.
    Cfs,
}

impl ShareMap {
    /// The share of a task of nice level `nice`.
    pub fn share(self, nice: i8) -> u32 {
        let nice = nice.clamp(-20, 19);
        match self {
            ShareMap::Linear => (20 - nice as i32) as u32,
            ShareMap::Cfs => nice_to_weight(nice) as u32,
        }
    }
}

/// VTRR's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VtrrParams {
    /// The time quantum every client gets, ns.
    pub quantum_ns: Ns,
    /// How nice levels map to shares.
    pub shares: ShareMap,
}

impl Default for VtrrParams {
    fn default() -> Self {
        VtrrParams { quantum_ns: 10_000_000, shares: ShareMap::Linear }
    }
}

impl Params for VtrrParams {
    fn info() -> &'static [ParamInfo] {
        &[
            ParamInfo {
                key: "quantum_ns",
                default: "10000000",
                help:
                    "the time quantum of every client, ns (100 us to 1 s; 10 ms, Linux 2.4's tick at HZ=100)",
            },
            ParamInfo {
                key: "shares",
                default: "linear",
                help: "shares from nice: `linear` (20 - nice, 1..40) or `cfs` (CFS weights, 15..88761)",
            },
        ]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "quantum_ns" => self.quantum_ns = parse_u64(value, 100_000..=1_000_000_000)?,
            "shares" => {
                self.shares = match value {
                    "linear" => ShareMap::Linear,
                    "cfs" => ShareMap::Cfs,
                    _ => return Err(format!("expected `linear` or `cfs`, not `{value}`")),
                }
            }
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// One client.
#[derive(Clone, Copy, Debug)]
struct Client {
    share: u32,
    /// Share level (nice + 20): the queue is ordered by level.
    level: u8,
    /// Time counter: quanta left in this cycle.
    tc: u32,
    /// Virtual time, `service x VT_ONE / share`.
    vt: u128,
    prev: u32,
    next: u32,
    queued: bool,
    /// When its current quantum started (meaningful while it runs).
    run_start: Ns,
    /// The cycle it left the queue in, its counter and its lead over `QVT` then.
    left_cycle: u64,
    left_tc: u32,
    left_lead: u128,
}

impl Default for Client {
    fn default() -> Self {
        Client {
            share: 1,
            level: 0,
            tc: 0,
            vt: 0,
            prev: NIL,
            next: NIL,
            queued: false,
            run_start: 0,
            left_cycle: u64::MAX,
            left_tc: 0,
            left_lead: 0,
        }
    }
}

/// The VTRR scheduler (SCHED_OTHER clients; wrap it in [`crate::linux_rt::LinuxClasses`] for RT).
pub struct Vtrr {
    p: VtrrParams,
    clients: Vec<Client>,
    head: u32,
    /// Last client of each share level in the queue.
    level_tail: [u32; LEVELS],
    /// The client given the last quantum (the position in the queue), `NIL` before the first.
    cur: u32,
    /// Queue virtual time.
    qvt: u128,
    /// Sum of the queued clients' shares.
    total_shares: u64,
    cycle: u64,
    nr_queued: usize,
    nr_examined: u64,
    nr_cycles: u64,
    nr_counter_rule: u64,
    nr_vft_rule: u64,
    nr_to_head: u64,
    nr_skipped: u64,
}

impl Vtrr {
    /// A new instance.
    pub fn new(p: VtrrParams) -> Vtrr {
        Vtrr {
            p,
            clients: Vec::new(),
            head: NIL,
            level_tail: [NIL; LEVELS],
            cur: NIL,
            qvt: 0,
            total_shares: 0,
            cycle: 0,
            nr_queued: 0,
            nr_examined: 0,
            nr_cycles: 0,
            nr_counter_rule: 0,
            nr_vft_rule: 0,
            nr_to_head: 0,
            nr_skipped: 0,
        }
    }

    /// The queue from head to tail (tests).
    pub fn queue(&self) -> Vec<TaskId> {
        let mut v = Vec::new();
        let mut i = self.head;
        while i != NIL {
            v.push(TaskId(i));
            i = self.clients[i as usize].next;
        }
        v
    }

    /// A client's time counter (tests).
    pub fn time_counter(&self, t: TaskId) -> u32 {
        self.clients[t.idx()].tc
    }

    /// A client's virtual time in `VT_ONE` units per ns of service per share (tests).
    pub fn virtual_time(&self, t: TaskId) -> u128 {
        self.clients[t.idx()].vt
    }

    /// The queue virtual time (tests).
    pub fn queue_virtual_time(&self) -> u128 {
        self.qvt
    }

    /// Links `t` (not queued) into the queue after the last client of a share at least its own.
    fn insert(&mut self, t: u32) {
        let level = self.clients[t as usize].level as usize;
        let after = (0..=level).rev().map(|l| self.level_tail[l]).find(|&x| x != NIL).unwrap_or(NIL);
        self.nr_examined += (level + 1) as u64;
        let next = if after == NIL { self.head } else { self.clients[after as usize].next };
        {
            let c = &mut self.clients[t as usize];
            c.prev = after;
            c.next = next;
            c.queued = true;
        }
        if after == NIL {
            self.head = t;
        } else {
            self.clients[after as usize].next = t;
        }
        if next != NIL {
            self.clients[next as usize].prev = t;
        }
        self.level_tail[level] = t;
        self.total_shares += self.clients[t as usize].share as u64;
        self.nr_queued += 1;
    }

    /// Unlinks `t`.
    fn unlink(&mut self, t: u32) {
        let c = self.clients[t as usize];
        if c.prev == NIL {
            self.head = c.next;
        } else {
            self.clients[c.prev as usize].next = c.next;
        }
        if c.next != NIL {
            self.clients[c.next as usize].prev = c.prev;
        }
        let level = c.level as usize;
        if self.level_tail[level] == t {
            self.level_tail[level] = if c.prev != NIL && self.clients[c.prev as usize].level as usize == level
            {
                c.prev
            } else {
                NIL
            };
        }
        if self.cur == t {
            self.cur = c.prev;
        }
        let c = &mut self.clients[t as usize];
        c.queued = false;
        c.prev = NIL;
        c.next = NIL;
        self.total_shares -= c.share as u64;
        self.nr_queued -= 1;
    }

    /// A client becomes runnable: its share from its nice level, its virtual time and counter as a
    /// joining client, then its place in the queue.
    fn join(&mut self, ctx: &Ctx, t: TaskId) {
        let nice = ctx.task(t).nice;
        let share = self.p.shares.share(nice);
        let level = (nice.clamp(-20, 19) as i32 + 20) as u8;
        let (qvt, cycle) = (self.qvt, self.cycle);
        let c = &mut self.clients[t.idx()];
        c.share = share;
        c.level = level;
        c.vt = qvt + c.left_lead;
        self.insert(t.0);
        let c = self.clients[t.idx()];
        let before = if c.prev == NIL { share } else { self.clients[c.prev as usize].tc };
        let mut tc = share.min(before);
        if c.left_cycle == cycle {
            tc = tc.min(c.left_tc);
        }
        self.clients[t.idx()].tc = tc;
    }

    /// A client leaves the queue: remember its counter and lead for a return.
    fn leave(&mut self, t: TaskId) {
        let c = &mut self.clients[t.idx()];
        c.left_cycle = self.cycle;
        c.left_tc = c.tc;
        c.left_lead = c.vt.saturating_sub(self.qvt);
        self.unlink(t.0);
    }

    /// Charges `t` for the service it received since its quantum started.
    fn charge(&mut self, now: Ns, t: TaskId) {
        let c = &mut self.clients[t.idx()];
        let service = now.saturating_sub(c.run_start) as u128;
        c.run_start = now;
        c.vt += service * VT_ONE / c.share as u128;
        if self.total_shares > 0 {
            self.qvt += service * VT_ONE / self.total_shares as u128;
        }
    }

    /// Starts a new cycle: every queued counter back to its share.
    fn new_cycle(&mut self) {
        self.cycle += 1;
        self.nr_cycles += 1;
        let mut i = self.head;
        while i != NIL {
            let c = &mut self.clients[i as usize];
            c.tc = c.share;
            i = c.next;
            self.nr_examined += 1;
        }
    }

    /// The VTRR rule: the client after the current one if its counter is larger or it satisfies the
    /// VFT inequality, else the head (starting a new cycle if the head's counter is 0).
    fn rule_choice(&mut self) -> u32 {
        let cur = self.cur;
        if cur != NIL {
            let (ctc, next) = (self.clients[cur as usize].tc, self.clients[cur as usize].next);
            self.nr_examined += 1;
            if next != NIL {
                let n = self.clients[next as usize];
                self.nr_examined += 1;
                if n.tc > ctc {
                    self.nr_counter_rule += 1;
                    return next;
                }
                if n.tc > 0 && n.vt < self.qvt {
                    self.nr_vft_rule += 1;
                    return next;
                }
            }
            self.nr_to_head += 1;
        }
        if self.clients[self.head as usize].tc == 0 {
            self.new_cycle();
        }
        self.head
    }

    /// Whether `cpu` may take client `i` now.
    fn eligible(ctx: &Ctx, i: u32, cpu: CpuId) -> bool {
        let info = ctx.task(TaskId(i));
        info.state != TaskState::Running && info.allowed.contains(cpu)
    }

    /// The client `cpu` runs next: the VTRR choice, or on a multiprocessor the first client from it
    /// in queue order that `cpu` may run and that has quanta left.
    fn choose(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<u32> {
        if self.head == NIL {
            return None;
        }
        // Cyclically from the VTRR choice: each queued client at most once.
        let mut i = self.rule_choice();
        for _ in 0..self.nr_queued {
            self.nr_examined += 1;
            let c = self.clients[i as usize];
            if c.tc > 0 && Self::eligible(ctx, i, cpu) {
                return Some(i);
            }
            self.nr_skipped += 1;
            i = if c.next == NIL { self.head } else { c.next };
        }
        // Everyone this CPU may run has used the cycle's quanta: a new cycle, from the head.
        let mut i = self.head;
        while i != NIL {
            self.nr_examined += 1;
            if Self::eligible(ctx, i, cpu) {
                self.new_cycle();
                return Some(i);
            }
            i = self.clients[i as usize].next;
        }
        None
    }
}

impl SchedPolicy for Vtrr {
    fn name(&self) -> &str {
        "vtrr"
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.clients.len() <= t.idx() {
            self.clients.resize(t.idx() + 1, Client::default());
        }
        self.clients[t.idx()] = Client::default();
        crate::placement::idle_first(ctx, t)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, _wake: &WakeInfo) -> CpuId {
        crate::placement::idle_first(ctx, t)
    }

    fn enqueue(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId, why: EnqueueReason) {
        // One global queue: a migration (an idle CPU taking a queued client) keeps its place.
        if why != EnqueueReason::Migrated && !self.clients[t.idx()].queued {
            self.join(ctx, t);
        }
    }

    /// A share change, built from the paper's two dynamic operations: a queued client leaves and
    /// joins again with the share of its new nice level, keeping its lead and counter as a client
    /// that left and returned; a running client is charged at its old share first. A sleeping
    /// client takes its new share when it joins. (The paper's own interface for changing a share
    /// is not modelled; docs/policies/vtrr.md.)
    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, _old_nice: i8) -> Option<CpuId> {
        if !self.clients[t.idx()].queued {
            return None;
        }
        if ctx.task(t).state == schedlab_core::TaskState::Running {
            self.charge(ctx.now, t);
        }
        self.leave(t);
        self.join(ctx, t);
        None
    }

    fn dequeue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, why: DequeueReason) {
        // A migration keeps the client's place in the global queue; a class change (to the RT
        // class above VTRR, or between SCHED_OTHER, BATCH and IDLE) makes it leave, and
        // `enqueue(.., Restore)` joins it again as a client that left and returned (as `set_nice`).
        if why == DequeueReason::Save && self.clients[t.idx()].queued {
            self.leave(t);
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        let i = self.choose(ctx, cpu)?;
        self.cur = i;
        let c = &mut self.clients[i as usize];
        c.tc -= 1;
        c.run_start = ctx.now;
        Some(Dispatch { task: TaskId(i), slice_ns: Some(self.p.quantum_ns) })
    }

    fn put_prev(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId, why: SwitchReason) {
        self.charge(ctx.now, t);
        if !why.still_runnable() {
            self.leave(t);
        }
    }

    fn tick(&mut self, ctx: &Ctx, _cpu: CpuId, curr: TaskId) -> bool {
        // Virtual times follow service as it is received, so the VFT test at the next decision
        // sees the other CPUs' service too.
        self.charge(ctx.now, curr);
        false
    }

    fn check_preempt(&mut self, _: &Ctx, _: CpuId, _: TaskId, _: TaskId, _: WakeKind) -> bool {
        false
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_cycles",
                value: self.nr_cycles,
                help: "scheduling cycles (time counters reset)",
            },
            PolicyStat {
                name: "nr_counter_rule",
                value: self.nr_counter_rule,
                help: "decisions that ran the next client because its time counter was larger",
            },
            PolicyStat {
                name: "nr_vft_rule",
                value: self.nr_vft_rule,
                help: "decisions that ran the next client because it met the VFT inequality",
            },
            PolicyStat {
                name: "nr_to_head",
                value: self.nr_to_head,
                help: "decisions that went back to the head of the queue",
            },
            PolicyStat {
                name: "nr_skipped",
                value: self.nr_skipped,
                help:
                    "clients passed over because they ran elsewhere, were not allowed or had no quanta left",
            },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::Global
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_queued)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        if let Some(c) = self.clients.get(t.idx()) {
            out.push(("vtrr time counter", c.tc as i64));
            out.push(("vtrr share", c.share as i64));
        }
    }
}

#[cfg(test)]
mod tests;
