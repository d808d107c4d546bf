//! # Lottery scheduling, as a policy written outside schedlab
//!
//! Source: C. A. Waldspurger and W. E. Weihl, *Lottery Scheduling: Flexible Proportional-Share
//! Resource Management*, OSDI 1994, sec. 2 and 4. Every runnable task holds tickets; each time a CPU
//! needs work it draws a winning ticket uniformly among the tickets of the tasks it may run, and the
//! holder runs for one quantum. A task's expected share of the CPU is its share of the tickets, and
//! its error grows only as the square root of the number of draws.
//!
//! Here tickets come from nice levels through CFS's weight table (nice 0 holds 1,024 tickets,
//! nice 5 holds 335), the quantum is `quantum_ns` (default 10 ms, the paper's 100 ms on a slower
//! machine scaled down), all CPUs draw from one global queue, and the random numbers come from a
//! generator seeded with the run's seed, so runs stay reproducible. A draw walks the queue (O(n));
//! the paper's tree of partial ticket sums would make it O(log n). There are no ticket transfers,
//! currencies or compensation tickets.
//!
//! This crate is the example of docs/guide/your-policy.md: it implements
//! [`schedlab_core::SchedPolicy`], declares its parameters with [`schedlab_policies::Params`], and
//! [`register`]s itself through [`schedlab_policies::register`], after which the spec `lottery`
//! works wherever specs are read.

use schedlab_core::weights::nice_to_weight;
use schedlab_core::{
    CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Ns, PolicyStat, SchedPolicy, SwitchReason, TaskId,
    TaskState, WakeInfo, WakeKind, WorkConservation,
};
use schedlab_policies::placement::idle_first;
use schedlab_policies::{apply, parse_u64, ParamInfo, Params, PolicyInfo};

/// The policy's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LotteryParams {
    /// The quantum a winner runs for, ns.
    pub quantum_ns: Ns,
}

impl Default for LotteryParams {
    fn default() -> Self {
        LotteryParams { quantum_ns: 10_000_000 }
    }
}

impl Params for LotteryParams {
    fn info() -> &'static [ParamInfo] {
        &[ParamInfo {
            key: "quantum_ns",
            default: "10000000",
            help: "the quantum a winner runs for, ns (100 us to 1 s)",
        }]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "quantum_ns" => self.quantum_ns = parse_u64(value, 100_000..=1_000_000_000)?,
            _ => unreachable!("apply checks the keys"),
        }
        Ok(())
    }
}

/// Lottery scheduling.
pub struct Lottery {
    p: LotteryParams,
    /// Waiting tasks (runnable, not running), in arrival order.
    queue: Vec<TaskId>,
    rng: u64,
    nr_running: usize,
    nr_draws: u64,
    nr_examined: u64,
}

impl Lottery {
    /// A new instance.
    pub fn new(p: LotteryParams) -> Lottery {
        Lottery { p, queue: Vec::new(), rng: 0, nr_running: 0, nr_draws: 0, nr_examined: 0 }
    }

    /// A task's tickets: its nice level's CFS weight.
    pub fn tickets(ctx: &Ctx, t: TaskId) -> u64 {
        nice_to_weight(ctx.task(t).nice)
    }

    /// SplitMix64: the next random number of this run.
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl SchedPolicy for Lottery {
    fn name(&self) -> &str {
        "lottery"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.rng = ctx.seed;
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        idle_first(ctx, t)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, _wake: &WakeInfo) -> CpuId {
        idle_first(ctx, t)
    }

    fn enqueue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, why: EnqueueReason) {
        // One global queue: a task moved between CPUs, or whose class changed, keeps its place.
        if !why.was_runnable() {
            self.nr_running += 1;
            self.queue.push(t);
        }
    }

    fn dequeue(&mut self, _ctx: &Ctx, _cpu: CpuId, _t: TaskId, _why: DequeueReason) {}

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        let eligible =
            |t: TaskId| ctx.task(t).allowed.contains(cpu) && ctx.task(t).state != TaskState::Running;
        let total: u64 = self.queue.iter().filter(|&&t| eligible(t)).map(|&t| Self::tickets(ctx, t)).sum();
        if total == 0 {
            return None;
        }
        self.nr_draws += 1;
        let mut winning = self.next_random() % total;
        let mut at = None;
        for (i, &t) in self.queue.iter().enumerate() {
            self.nr_examined += 1;
            if !eligible(t) {
                continue;
            }
            let tickets = Self::tickets(ctx, t);
            if winning < tickets {
                at = Some(i);
                break;
            }
            winning -= tickets;
        }
        let t = self.queue.remove(at.expect("the winning ticket is held by a queued task"));
        Some(Dispatch { task: t, slice_ns: Some(self.p.quantum_ns) })
    }

    fn put_prev(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, why: SwitchReason) {
        if why.still_runnable() {
            self.queue.push(t);
        } else {
            self.nr_running -= 1;
        }
    }

    fn tick(&mut self, _ctx: &Ctx, _cpu: CpuId, _curr: TaskId) -> bool {
        false
    }

    fn check_preempt(&mut self, _: &Ctx, _: CpuId, _: TaskId, _: TaskId, _: WakeKind) -> bool {
        false
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![PolicyStat { name: "nr_draws", value: self.nr_draws, help: "lotteries held" }]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::Global
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }
}

/// The registry entry of `lottery`.
pub fn info() -> PolicyInfo {
    PolicyInfo::new(
        "lottery",
        "example: lottery scheduling (Waldspurger & Weihl, OSDI 1994), tickets from CFS weights, one global queue; an external crate registered through the public API (docs/guide/your-policy.md)",
        LotteryParams::info,
        |pairs| Ok(Box::new(Lottery::new(apply("lottery", pairs)?))),
    )
}

/// Registers `lottery` (once per process; again is harmless).
pub fn register() {
    schedlab_policies::register(info()).expect("`lottery` is free");
}
