//! # CFS, the Completely Fair Scheduler, as in Linux 2.6.38
//!
//! Source: Linux 2.6.38 kernel/sched_fair.c, kernel/sched.c, kernel/sched_features.h,
//! include/linux/topology.h; seed 000 (HTFS thesis) sec. 2.5-2.8 and 3.1, seed 002 sec. 2.1.
//!
//! Each CPU has a runqueue of *scheduling entities* ordered by virtual run time: an entity's
//! `vruntime` grows by its real run time scaled by `1024 / weight`, so over time every entity receives
//! CPU time in proportion to its weight (the nice-to-weight table, 1.25x per nice level). The CPU runs
//! the entity with the smallest vruntime (the leftmost of the timeline); `min_vruntime` is a monotonic
//! floor that new and waking entities are placed against:
//!
//! * a new task starts one virtual slice after `min_vruntime` (`START_DEBIT`), so forking does not buy
//!   CPU time; a waking task is placed at most half a latency period behind (`GENTLE_FAIR_SLEEPERS`:
//!   `min_vruntime - sched_latency/2`), so sleepers get a bounded bonus;
//! * the tick preempts the running task when it has run longer than its *slice*, its weight's share of
//!   the period (`sched_latency` for up to `nr_latency` tasks, `n * min_granularity` beyond), or when
//!   it is more than a slice ahead of the leftmost; a waking task preempts when it is more than the
//!   wakeup granularity behind (`WAKEUP_PREEMPT`);
//! * buddies bias the pick: `last` returns the CPU to a task preempted by a wakeup (`LAST_BUDDY`),
//!   `next` (off by default) favours the woken task, both only within the wakeup granularity;
//! * task groups (cgroups) nest: a group has an entity on each CPU whose weight is its share of the
//!   group's `shares`, proportional to that CPU's part of the group's load, the other CPUs' parts being
//!   10 ms load averages (seed 000 eq. 5, shares.rs);
//! * across CPUs, the sched-domain load balancer evens out weighted load: periodically per domain
//!   (intervals backing off while balanced), when a CPU goes idle, and for tickless idle CPUs; plus
//!   placement at fork (`find_idlest_group`) and wakeup (`wake_affine`, `select_idle_sibling`).
//!
//! Tunables scale with the number of CPUs like the kernel's `SCHED_TUNABLESCALING_LOG`: factor
//! `1 + ilog2(min(ncpus, 8))`, so 6 ms latency becomes 24 ms on 8 or more CPUs.
//!
//! Files hold the kernel's functions under their names and in its order: fair.rs (the runqueue),
//! shares.rs (group shares), select.rs (placement), lb_stats.rs and lb2638.rs (balancing, generic
//! over `lb_host::LbHost` so that HTFS runs the same code), balance.rs (CFS's task moves),
//! cpu_load.rs (sched.c's load averages); the domains are [`crate::domains`]. Where this port
//! simplifies (said again at the spot and in docs/policies/cfs.md): the rbtree is an indexed heap
//! with the same ordering and tie-breaks ([`timeline`]); a tickless idle CPU's `cpu_load[]` is caught
//! up when read; the nohz idle balancer is the engine's; RT tasks are not counted in the fair class's
//! `nr_running`.
//!
//! Towards Linux 4.9 (seed 002's CFS), in stages: `load_tracking=4.9` makes the balancer and the
//! placement read 4.9's per-entity load averages ([`load49`], [`pelt49`]) and `placement=4.9` makes
//! wakeups and forks go where 4.9's `select_task_rq_fair` sends them ([`select49`]); the domains'
//! parameters, the balancer's group statistics and the group shares stay 2.6.38's for now.

pub(crate) mod asym;
pub mod avec;
pub(crate) mod balance;
mod cpu_load;
mod deadline_tree;
mod eevdf;
mod fair;
pub(crate) mod lb2638;
mod lb66;
pub(crate) mod lb_host;
mod lb_stats;
mod load49;
mod load_avg;
pub mod math;
mod newidle66;
mod pelt;
mod pelt49;
mod renice;
pub(crate) mod select;
mod select49;
mod select66;
mod shares;
mod timeline;
mod util_est;

use crate::domains;
use crate::params::{parse_bool, parse_u64, ParamInfo, Params};
use crate::prandom::{splitmix, RndState};
use balance::{CpuState, IdleType};
pub(crate) use cpu_load::{fold_cpu_load, CPU_LOAD_IDX_MAX};
use fair::{CfsRq, Se, SeId};
use lb2638::Balance2638;
use schedlab_core::{
    BalanceKind, CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat, SchedClass,
    SchedPolicy, SwitchReason, TaskId, WakeInfo, WakeKind, NSEC_PER_MSEC,
};
use select::Select2638;

/// How the tunables scale with the CPU count (`sysctl_sched_tunable_scaling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunableScaling {
    /// Unscaled.
    None,
    /// `1 + ilog2(min(ncpus, 8))` (the kernel's default).
    Log,
    /// `min(ncpus, 8)`.
    Linear,
}

/// CFS parameters, with the 2.6.38 defaults (before scaling by CPU count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CfsParams {
    /// `sysctl_sched_latency`: targeted preemption latency, ns. Default 6 ms.
    pub sched_latency_ns: Ns,
    /// `sysctl_sched_min_granularity`: minimal slice, ns. Default 0.75 ms.
    pub sched_min_granularity_ns: Ns,
    /// `sysctl_sched_wakeup_granularity`: how far behind a wakee must be to preempt, ns. Default 1 ms.
    pub sched_wakeup_granularity_ns: Ns,
    /// `sysctl_sched_migration_cost`: a task that ran this recently is cache hot, ns. Default 0.5 ms.
    pub sched_migration_cost_ns: Ns,
    /// `sysctl_sched_nr_migrate`: tasks examined per balancing pass. Default 32.
    pub sched_nr_migrate: u32,
    /// Scaling of the three granularities with the CPU count. Default log.
    pub tunable_scaling: TunableScaling,
    /// Feature START_DEBIT. Default on.
    pub start_debit: bool,
    /// Feature GENTLE_FAIR_SLEEPERS. Default on.
    pub gentle_fair_sleepers: bool,
    /// Feature WAKEUP_PREEMPT. Default on.
    pub wakeup_preempt: bool,
    /// Feature LAST_BUDDY. Default on.
    pub last_buddy: bool,
    /// Feature NEXT_BUDDY. Default off.
    pub next_buddy: bool,
    /// Feature CACHE_HOT_BUDDY. Default on.
    pub cache_hot_buddy: bool,
    /// Feature AFFINE_WAKEUPS. Default on.
    pub affine_wakeups: bool,
    /// `sysctl_sched_compat_yield`: yield moves the task to the far right. Default off.
    pub compat_yield: bool,
    /// Run the load balancer at all (off: tasks stay where placed). Default on.
    pub load_balance: bool,
    /// EEVDF: `sysctl_sched_base_slice`, the request size before CPU scaling, ns. Default (`None`):
    /// the kernel's, 0.7 ms for 6.12 (Debian 6.12.117 fair.c; 6.6's 0.75 ms was lowered "to avoid
    /// tasks getting an extra tick") and 0.75 ms for 6.6.
    pub sched_base_slice_ns: Option<Ns>,
    /// EEVDF feature PLACE_LAG. Default on.
    pub place_lag: bool,
    /// EEVDF feature PLACE_DEADLINE_INITIAL. Default on.
    pub place_deadline_initial: bool,
    /// EEVDF feature RUN_TO_PARITY. Default on.
    pub run_to_parity: bool,
    /// EEVDF: which kernel's fair class (6.6, 6.12 or 6.18). Default 6.18.
    pub eevdf_kernel: EevdfKernel,
    /// EEVDF features of 6.12 and later (`None`: as the kernel ships them, on; 6.6 has none).
    pub f612: Features612<Option<bool>>,
    /// EEVDF feature UTIL_EST: the balancer reads utilisation estimates kept across sleeps
    /// ([`util_est`]). Default on.
    pub util_est: bool,
    /// CFS: the balancer and wakeup placement read Linux 4.9's per-entity load tracking (a CPU's
    /// `runnable_load_avg`, a task's `load_avg`) instead of 2.6.38's runqueue weights
    /// ([`load49`]). Default off.
    pub load_tracking_49: bool,
    /// CFS: wakeup and fork placement as in Linux 4.9 (`wake_wide`, 4.9's `wake_affine` and
    /// `select_idle_sibling`, `find_idlest_cpu` preferring idle CPUs; [`select49`]), which read
    /// 4.9's load tracking, so this turns that on too. Default off.
    pub placement_49: bool,
}

/// The Linux version whose EEVDF `eevdf` models (ordered by release).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum EevdfKernel {
    /// Linux 6.6 (the first EEVDF release).
    V6_6,
    /// Linux 6.12 LTS, as Debian's linux-source-6.12 (6.12.117) ships it.
    V6_12,
    /// Linux 6.18 (the default, the newest modelled): 6.12 with 6.17's slice protection
    /// (`se->vprot`, the shortest queued slice, a reschedule at the end of every protected period;
    /// see [`eevdf`]).
    #[default]
    V6_18,
}

impl EevdfKernel {
    /// `normalized_sysctl_sched_base_slice` of the version, ns.
    pub fn base_slice_ns(self) -> Ns {
        match self {
            EevdfKernel::V6_6 => 750_000,
            EevdfKernel::V6_12 | EevdfKernel::V6_18 => 700_000,
        }
    }

    fn parse(v: &str) -> Result<EevdfKernel, String> {
        match v {
            "6.6" => Ok(EevdfKernel::V6_6),
            "6.12" => Ok(EevdfKernel::V6_12),
            "6.18" => Ok(EevdfKernel::V6_18),
            _ => Err("expected 6.6, 6.12 or 6.18 (the versions modelled)".into()),
        }
    }
}

/// The scheduler features 6.12's kernel/sched/features.h adds over 6.6 that change decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Features612<T> {
    /// PLACE_REL_DEADLINE: a task moved between runqueues keeps its deadline relative to vruntime.
    pub place_rel_deadline: T,
    /// PREEMPT_SHORT: a wakee with a shorter slice cancels the running task's protection, and the
    /// running task loses the CPU once ineligible after its protection ends (`did_preempt_short`).
    pub preempt_short: T,
    /// DELAY_DEQUEUE: a task that sleeps while ineligible stays queued until it is picked or wakes.
    pub delay_dequeue: T,
    /// DELAY_ZERO: a delayed task leaves (or is requeued) with no positive lag.
    pub delay_zero: T,
    /// PICK_BUDDY: the `next` buddy is picked when eligible.
    pub pick_buddy: T,
    /// NI_RANDOM: a newly idle balance of a domain runs with a chance that follows its recent
    /// success rate (upstream 33cf66d88306 "sched/fair: Proportional newidle balance", 6.18, in
    /// Debian's 6.12.117 by the stable backport).
    pub ni_random: T,
}

impl Features612<Option<bool>> {
    /// The features as the chosen kernel runs them: 6.12's defaults (all on, as in 6.18) unless set;
    /// 6.6 has none.
    pub fn resolve(&self, kernel: EevdfKernel) -> Result<Features612<bool>, String> {
        let on = kernel >= EevdfKernel::V6_12;
        let pick = |v: Option<bool>, name: &str| -> Result<bool, String> {
            match (on, v) {
                (false, Some(true)) => {
                    Err(format!("{name} is a 6.12 feature; Linux 6.6 has no such feature"))
                }
                (_, v) => Ok(on && v.unwrap_or(true)),
            }
        };
        Ok(Features612 {
            place_rel_deadline: pick(self.place_rel_deadline, "place_rel_deadline")?,
            preempt_short: pick(self.preempt_short, "preempt_short")?,
            delay_dequeue: pick(self.delay_dequeue, "delay_dequeue")?,
            delay_zero: pick(self.delay_zero, "delay_zero")?,
            pick_buddy: pick(self.pick_buddy, "pick_buddy")?,
            ni_random: pick(self.ni_random, "ni_random")?,
        })
    }
}

impl Default for CfsParams {
    fn default() -> Self {
        CfsParams {
            sched_latency_ns: 6 * NSEC_PER_MSEC,
            sched_min_granularity_ns: 750_000,
            sched_wakeup_granularity_ns: NSEC_PER_MSEC,
            sched_migration_cost_ns: 500_000,
            sched_nr_migrate: 32,
            tunable_scaling: TunableScaling::Log,
            start_debit: true,
            gentle_fair_sleepers: true,
            wakeup_preempt: true,
            last_buddy: true,
            next_buddy: false,
            cache_hot_buddy: true,
            affine_wakeups: true,
            compat_yield: false,
            load_balance: true,
            sched_base_slice_ns: None,
            place_lag: true,
            place_deadline_initial: true,
            run_to_parity: true,
            eevdf_kernel: EevdfKernel::default(),
            f612: Features612::default(),
            util_est: true,
            load_tracking_49: false,
            placement_49: false,
        }
    }
}

impl Params for CfsParams {
    fn info() -> &'static [ParamInfo] {
        &[
            ParamInfo {
                key: "sched_latency_ns",
                default: "6000000",
                help: "targeted preemption latency (before CPU scaling)",
            },
            ParamInfo {
                key: "sched_min_granularity_ns",
                default: "750000",
                help: "minimal preemption granularity (before CPU scaling)",
            },
            ParamInfo {
                key: "sched_wakeup_granularity_ns",
                default: "1000000",
                help: "wakeup preemption granularity (before CPU scaling)",
            },
            ParamInfo {
                key: "sched_migration_cost_ns",
                default: "500000",
                help: "tasks that ran within this are cache hot; idle balancing needs this much average idle",
            },
            ParamInfo { key: "sched_nr_migrate", default: "32", help: "tasks examined per balancing pass" },
            ParamInfo {
                key: "tunable_scaling",
                default: "log",
                help: "none | log | linear scaling of granularities with the CPU count (max 8)",
            },
            ParamInfo { key: "start_debit", default: "true", help: "new tasks start one virtual slice late" },
            ParamInfo {
                key: "gentle_fair_sleepers",
                default: "true",
                help: "sleeper credit is half a latency period",
            },
            ParamInfo { key: "wakeup_preempt", default: "true", help: "wakeups may preempt" },
            ParamInfo {
                key: "last_buddy",
                default: "true",
                help: "prefer returning to a task preempted by a wakeup",
            },
            ParamInfo { key: "next_buddy", default: "false", help: "prefer the task just woken" },
            ParamInfo {
                key: "cache_hot_buddy",
                default: "true",
                help: "buddies count as cache hot for balancing",
            },
            ParamInfo {
                key: "affine_wakeups",
                default: "true",
                help: "wake_affine may pull a wakee to the waker's CPU",
            },
            ParamInfo {
                key: "compat_yield",
                default: "false",
                help: "sched_yield moves the task behind all others",
            },
            ParamInfo { key: "load_balance", default: "true", help: "run the sched-domain load balancer" },
            ParamInfo {
                key: "tunables",
                default: "2.6.38",
                help: "whose defaults the three granularities take: 2.6.38 (6 ms, 0.75 ms, 1 ms) or 2.6.32 (5 ms, 1 ms, 1 ms; RHEL 6); the code stays 2.6.38's",
            },
            ParamInfo {
                key: "load_tracking",
                default: "2.6.38",
                help: "what the balancer and wakeup placement read as loads: 2.6.38 (runqueue weights, cpu_load[] of them) or 4.9 (per-entity load tracking: runnable_load_avg, task load_avg; the first stage of a 4.9 port, the rest stays 2.6.38's)",
            },
            ParamInfo {
                key: "placement",
                default: "2.6.38",
                help: "where a waking or new task goes: 2.6.38 or 4.9 (wake_wide, 4.9's wake_affine and select_idle_sibling, idle CPUs first at fork; brings load_tracking=4.9 with it)",
            },
        ]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        const S: u64 = 1_000_000_000;
        match key {
            // 2.6.32 kernel/sched_fair.c: sysctl_sched_latency 5 ms, sysctl_sched_min_granularity
            // 1 ms (sched_nr_latency 5), sysctl_sched_wakeup_granularity 1 ms, each scaled by
            // 1 + ilog2(ncpus) as in 2.6.38; 2.6.35 raised the latency to 6 ms and lowered the
            // granularity to 0.75 ms.
            "tunables" => {
                let (latency, min_gran, wakeup) = match value {
                    "2.6.38" => (6 * NSEC_PER_MSEC, 750_000, NSEC_PER_MSEC),
                    "2.6.32" => (5 * NSEC_PER_MSEC, NSEC_PER_MSEC, NSEC_PER_MSEC),
                    _ => return Err("expected 2.6.38 or 2.6.32".into()),
                };
                self.sched_latency_ns = latency;
                self.sched_min_granularity_ns = min_gran;
                self.sched_wakeup_granularity_ns = wakeup;
            }
            "sched_latency_ns" => self.sched_latency_ns = parse_u64(value, 100_000..=S)?,
            "sched_min_granularity_ns" => self.sched_min_granularity_ns = parse_u64(value, 100_000..=S)?,
            "sched_wakeup_granularity_ns" => self.sched_wakeup_granularity_ns = parse_u64(value, 0..=S)?,
            "sched_migration_cost_ns" => self.sched_migration_cost_ns = parse_u64(value, 0..=S)?,
            "sched_nr_migrate" => self.sched_nr_migrate = parse_u64(value, 1..=100_000)? as u32,
            "tunable_scaling" => {
                self.tunable_scaling = match value {
                    "none" | "0" => TunableScaling::None,
                    "log" | "1" => TunableScaling::Log,
                    "linear" | "2" => TunableScaling::Linear,
                    _ => return Err("expected none, log or linear".into()),
                }
            }
            "start_debit" => self.start_debit = parse_bool(value)?,
            "gentle_fair_sleepers" => self.gentle_fair_sleepers = parse_bool(value)?,
            "wakeup_preempt" => self.wakeup_preempt = parse_bool(value)?,
            "last_buddy" => self.last_buddy = parse_bool(value)?,
            "next_buddy" => self.next_buddy = parse_bool(value)?,
            "cache_hot_buddy" => self.cache_hot_buddy = parse_bool(value)?,
            "affine_wakeups" => self.affine_wakeups = parse_bool(value)?,
            "compat_yield" => self.compat_yield = parse_bool(value)?,
            "load_balance" => self.load_balance = parse_bool(value)?,
            "sched_base_slice_ns" => {
                self.sched_base_slice_ns = Some(parse_u64(value, 100_000..=eevdf::MAX_SLICE_NS)?)
            }
            "place_lag" => self.place_lag = parse_bool(value)?,
            "place_deadline_initial" => self.place_deadline_initial = parse_bool(value)?,
            "run_to_parity" => self.run_to_parity = parse_bool(value)?,
            "kernel" => self.eevdf_kernel = EevdfKernel::parse(value)?,
            "place_rel_deadline" => self.f612.place_rel_deadline = Some(parse_bool(value)?),
            "preempt_short" => self.f612.preempt_short = Some(parse_bool(value)?),
            "delay_dequeue" => self.f612.delay_dequeue = Some(parse_bool(value)?),
            "delay_zero" => self.f612.delay_zero = Some(parse_bool(value)?),
            "pick_buddy" => self.f612.pick_buddy = Some(parse_bool(value)?),
            "util_est" => self.util_est = parse_bool(value)?,
            "placement" => {
                self.placement_49 = match value {
                    "2.6.38" => false,
                    "4.9" => true,
                    _ => return Err("expected 2.6.38 or 4.9".into()),
                }
            }
            "load_tracking" => {
                self.load_tracking_49 = match value {
                    "2.6.38" => false,
                    "4.9" => true,
                    _ => return Err("expected 2.6.38 or 4.9".into()),
                }
            }
            "ni_random" => self.f612.ni_random = Some(parse_bool(value)?),
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// EEVDF's parameters: the CFS parameter set with EEVDF's own keys exposed instead of the CFS-only ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EevdfParams(pub CfsParams);

impl Params for EevdfParams {
    fn info() -> &'static [ParamInfo] {
        &[
            ParamInfo {
                key: "kernel",
                default: "6.18",
                help: "6.12 (Debian's 6.12.117: delayed dequeue, relative deadlines, PREEMPT_SHORT), 6.18 (6.12 with 6.17's slice protection) or 6.6",
            },
            ParamInfo {
                key: "sched_base_slice_ns",
                default: "700000 (kernel=6.12, 6.18), 750000 (kernel=6.6)",
                help: "request size (before CPU scaling)",
            },
            ParamInfo {
                key: "sched_migration_cost_ns",
                default: "500000",
                help: "tasks that ran within this are cache hot",
            },
            ParamInfo { key: "sched_nr_migrate", default: "32", help: "tasks examined per balancing pass" },
            ParamInfo {
                key: "tunable_scaling",
                default: "log",
                help: "none | log | linear scaling with the CPU count (max 8)",
            },
            ParamInfo {
                key: "place_lag",
                default: "true",
                help: "keep a task's lag across sleep and migration",
            },
            ParamInfo {
                key: "place_deadline_initial",
                default: "true",
                help: "new tasks start with half a request (inert in 6.6: its wake_up_new_task passes no ENQUEUE_INITIAL)",
            },
            ParamInfo {
                key: "run_to_parity",
                default: "true",
                help: "the running task keeps the CPU until its request ends (6.18: or it ran the shortest queued slice) or it is no longer eligible",
            },
            ParamInfo {
                key: "place_rel_deadline",
                default: "true (6.12, 6.18)",
                help: "a migrating task keeps its deadline relative to its vruntime",
            },
            ParamInfo {
                key: "preempt_short",
                default: "true (6.12, 6.18)",
                help: "shorter slices cancel slice protection; an unprotected ineligible task is rescheduled",
            },
            ParamInfo {
                key: "delay_dequeue",
                default: "true (6.12, 6.18)",
                help: "a task sleeping while ineligible stays queued until picked or woken",
            },
            ParamInfo {
                key: "delay_zero",
                default: "true (6.12, 6.18)",
                help: "a delayed task's positive lag is dropped",
            },
            ParamInfo {
                key: "pick_buddy",
                default: "true (6.12, 6.18)",
                help: "an eligible next buddy is picked first",
            },
            ParamInfo {
                key: "ni_random",
                default: "true (6.12, 6.18)",
                help: "a newly idle balance runs with a chance that follows its recent success rate",
            },
            ParamInfo {
                key: "util_est",
                default: "true",
                help: "utilisation estimates kept across sleeps feed the balancer's utilisation (UTIL_EST)",
            },
            ParamInfo { key: "wakeup_preempt", default: "true", help: "wakeups may preempt" },
            ParamInfo { key: "next_buddy", default: "false", help: "prefer the task just woken" },
            ParamInfo {
                key: "cache_hot_buddy",
                default: "true",
                help: "buddies count as cache hot for balancing",
            },
            ParamInfo {
                key: "affine_wakeups",
                default: "true",
                help: "wake_affine may pull a wakee to the waker's CPU",
            },
            ParamInfo { key: "load_balance", default: "true", help: "run the sched-domain load balancer" },
        ]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.0.set(key, value)
    }
}

/// The CFS policy (and, with [`Cfs::new_eevdf`], EEVDF).
pub struct Cfs {
    p: CfsParams,
    /// Linux 6.6 EEVDF instead of 2.6.38 CFS.
    eevdf: bool,
    /// EEVDF: the scaled base slice, ns.
    base_slice_ns: u64,
    /// EEVDF: the 6.12 features as resolved for the chosen kernel (all off for 6.6).
    f612: Features612<bool>,
    /// EEVDF: the task each CPU last put back still runnable, until its next pick: when the pick
    /// returns it again, `pick_next_task_fair` (`prev == p`) does not call `set_next_entity`, so
    /// its slice protection is not renewed.
    prev_runnable: Vec<Option<TaskId>>,
    /// EEVDF: a reschedule asked for by `update_deadline` outside a tick, per CPU.
    resched: Vec<bool>,
    /// EEVDF 6.12+: some task has its own slice, so a runqueue's shortest slice
    /// (`cfs_rq_min_slice`) must be looked for; otherwise every slice is the base slice.
    any_custom_slice: bool,
    /// EEVDF: the nodes of every runqueue's deadline-augmented timeline.
    dl_tree: deadline_tree::DeadlineTree,
    latency_ns: u64,
    min_gran_ns: u64,
    wakeup_gran_ns: u64,
    nr_latency: u64,
    ncpus: usize,
    ngroups: usize,
    tick_ns: Ns,
    /// Where the ticks fall ([`Ctx::tick_phase_ns`]).
    tick_phase_ns: Ns,
    ses: Vec<Se>,
    rqs: Vec<CfsRq>,
    task_se: Vec<SeId>,
    group_se: Vec<SeId>,
    group_parent: Vec<Option<u32>>,
    group_shares: Vec<u64>,
    /// EEVDF: each group's instantaneous load (sum of its runqueues' loads).
    group_load: Vec<u64>,
    /// `tg->load_weight`: each group's sum of its runqueues' `load_contribution`s (2.6.38).
    tg_load_weight: Vec<i64>,
    /// Each CPU's leaf runqueue list (`rq->leaf_cfs_rq_list`), in list order.
    leaf: Vec<Vec<fair::RqId>>,
    cpus: Vec<CpuState>,
    cpu_tasks: Vec<u64>,
    /// `rq->cfs.idle_h_nr_running`: the SCHED_IDLE tasks among each CPU's `cpu_tasks`.
    cpu_idle_tasks: Vec<u64>,
    /// Whether each task was counted in `cpu_idle_tasks` when it was counted in (so a class change
    /// while queued cannot unbalance the count).
    idle_counted: Vec<bool>,
    seq: u64,
    /// Reused buffer for the balancer's task lists (no allocation per balancing pass).
    scratch: Vec<SeId>,
    /// Tasks a balancing pass already moved in the policy's runqueues (`pull_task`), whose
    /// `dequeue`/`enqueue` by the engine are then no-ops.
    premoved: Vec<bool>,
    /// Active balances kicked by the current pass: (busiest CPU, CPU that asked, domain level).
    pending_active: Vec<(CpuId, CpuId, usize)>,
    nr_running_total: usize,
    /// EEVDF 6.12: tasks queued with a delayed dequeue (blocked for the engine, queued here).
    nr_delayed: usize,
    nr_examined: u64,
    nr_wake_affine: u64,
    nr_wakeup_preempt: u64,
    nr_tick_preempt: u64,
    nr_lb_calls: u64,
    nr_lb_moved: u64,
    nr_active_balance: u64,
    /// EEVDF only: each CPU's PELT load signal.
    pelt_cpu: Vec<pelt::Avg>,
    /// EEVDF only: each task's PELT load signal.
    pelt_task: Vec<pelt::Avg>,
    /// EEVDF only: the CPU whose signal holds each task's load (`u32::MAX`: none).
    pelt_attached: Vec<u32>,
    /// EEVDF only: each task's utilisation estimate ([`util_est`]).
    ue_task: Vec<util_est::TaskUtilEst>,
    /// EEVDF only: `rq->cfs.avg.util_est` of each CPU.
    ue_cpu: Vec<u64>,
    /// EEVDF only: each CPU's PELT clock and the real time it was last brought to
    /// ([`Cfs::pelt_clock_at`]).
    pelt_clock: Vec<(Ns, Ns)>,
    /// Each CPU's capacity ([`Ctx::capacity_of`]).
    cap: Vec<u64>,
    /// `sched_asym_cpucap_active()`: some domain spans CPUs of different capacities.
    asym: bool,
    /// EEVDF only: the 6.6 balancer's and wakeup placement's own state.
    v66: select66::State66,
    /// AVEC scheduling (seed 004) on top of CFS, when enabled.
    avec: Option<avec::Avec>,
    /// Reused buffer for AVEC's candidates.
    avec_scratch: Vec<SeId>,
    /// `load_tracking=4.9`: each CPU's root runqueue signal ([`load49`]).
    l49_cpu: Vec<pelt49::Avg49>,
    /// `load_tracking=4.9`: each task's signal.
    l49_task: Vec<pelt49::Avg49>,
    /// `load_tracking=4.9`: the CPU each task's signal is attached to (or none, [`load49`]).
    l49_attached: Vec<u32>,
    /// `placement=4.9`: `sd_llc->avg_scan_cost` of each LLC (by its first CPU), ns.
    l49_scan_cost: Vec<u64>,
}

impl Cfs {
    /// A CFS instance (sized in `init`).
    pub fn new(p: CfsParams) -> Cfs {
        Cfs {
            p,
            eevdf: false,
            base_slice_ns: 0,
            f612: Features612::default(),
            prev_runnable: Vec::new(),
            resched: Vec::new(),
            any_custom_slice: false,
            dl_tree: deadline_tree::DeadlineTree::default(),
            latency_ns: 0,
            min_gran_ns: 0,
            wakeup_gran_ns: 0,
            nr_latency: 8,
            ncpus: 0,
            ngroups: 0,
            tick_ns: 1,
            tick_phase_ns: 0,
            ses: Vec::new(),
            rqs: Vec::new(),
            task_se: Vec::new(),
            group_se: Vec::new(),
            group_parent: Vec::new(),
            group_shares: Vec::new(),
            group_load: Vec::new(),
            tg_load_weight: Vec::new(),
            leaf: Vec::new(),
            cpus: Vec::new(),
            cpu_tasks: Vec::new(),
            cpu_idle_tasks: Vec::new(),
            idle_counted: Vec::new(),
            seq: 0,
            scratch: Vec::new(),
            premoved: Vec::new(),
            pending_active: Vec::new(),
            nr_running_total: 0,
            nr_delayed: 0,
            nr_examined: 0,
            nr_wake_affine: 0,
            nr_wakeup_preempt: 0,
            nr_tick_preempt: 0,
            nr_lb_calls: 0,
            nr_lb_moved: 0,
            nr_active_balance: 0,
            pelt_cpu: Vec::new(),
            pelt_task: Vec::new(),
            pelt_attached: Vec::new(),
            ue_task: Vec::new(),
            ue_cpu: Vec::new(),
            pelt_clock: Vec::new(),
            cap: Vec::new(),
            asym: false,
            v66: select66::State66::default(),
            avec: None,
            avec_scratch: Vec::new(),
            l49_cpu: Vec::new(),
            l49_task: Vec::new(),
            l49_attached: Vec::new(),
            l49_scan_cost: Vec::new(),
        }
    }

    /// CFS with activity-vector scheduling (seed 004, see [`avec`]).
    pub fn new_avec(p: avec::AvecPolicyParams) -> Cfs {
        let mut c = Cfs::new(p.cfs);
        c.avec = Some(avec::Avec::new(p.avec));
        c
    }

    /// The AVEC state, when AVEC scheduling is on.
    pub fn avec(&self) -> Option<&avec::Avec> {
        self.avec.as_ref()
    }

    /// An EEVDF instance (Linux 6.12 or 6.6, `p.0.eevdf_kernel`); an error when a 6.12 feature is
    /// switched on for 6.6.
    pub fn new_eevdf(p: EevdfParams) -> Result<Cfs, String> {
        let f612 = p.0.f612.resolve(p.0.eevdf_kernel)?;
        let mut c = Cfs::new(p.0);
        c.eevdf = true;
        c.f612 = f612;
        Ok(c)
    }

    /// Whether this is EEVDF as in 6.12 or later.
    fn is_612(&self) -> bool {
        self.eevdf && self.p.eevdf_kernel >= EevdfKernel::V6_12
    }

    /// Whether this is EEVDF with 6.17's slice protection (`se->vprot`): 6.18.
    pub(crate) fn has_vprot(&self) -> bool {
        self.eevdf && self.p.eevdf_kernel >= EevdfKernel::V6_18
    }

    /// The effective (scaled) EEVDF base slice, ns.
    pub fn base_slice_ns(&self) -> u64 {
        self.base_slice_ns
    }

    /// The effective (scaled) `sched_latency`, ns.
    pub fn latency_ns(&self) -> u64 {
        self.latency_ns
    }

    /// The effective (scaled) `sched_min_granularity`, ns.
    pub fn min_granularity_ns(&self) -> u64 {
        self.min_gran_ns
    }

    /// The effective (scaled) wakeup granularity, ns.
    pub fn wakeup_granularity_ns(&self) -> u64 {
        self.wakeup_gran_ns
    }

    /// `sched_slice` of task `t` as it is queued now (for tests and reports).
    pub fn slice_of(&self, t: TaskId) -> u64 {
        self.sched_slice(self.task_se[t.idx()])
    }

    /// The load weight of task `t`'s entity.
    pub fn weight_of(&self, t: TaskId) -> u64 {
        self.ses[self.task_se[t.idx()] as usize].weight
    }

    /// The vruntime of task `t` (absolute while queued or running).
    pub fn vruntime_of(&self, t: TaskId) -> u64 {
        self.ses[self.task_se[t.idx()] as usize].vruntime
    }

    /// `min_vruntime` of the root runqueue of `cpu`.
    pub fn min_vruntime(&self, cpu: CpuId) -> u64 {
        self.rqs[cpu.idx()].min_vruntime
    }

    fn group_of(ctx: &Ctx, t: TaskId) -> u32 {
        ctx.task(t).group.0
    }

    /// Takes the queued (not running) task `t` off `cpu` (`deactivate_task(rq, p, 0)`).
    fn dequeue_queued(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        if self.eevdf {
            self.util_est_dequeue(t);
            self.pelt_before_dequeue(cpu, t, now);
        }
        if self.load49() {
            self.l49_before_dequeue(cpu, t, now);
        }
        self.dequeue_task(t, false, now);
        self.count_out(cpu, t);
    }

    /// Puts `t`, moved from another CPU, on `cpu` (`set_task_cpu`, `activate_task(rq, p, 0)`).
    fn enqueue_migrated(&mut self, cpu: CpuId, t: TaskId, group: u32, now: Ns) {
        self.set_task_rq(t, cpu, group);
        if self.eevdf {
            self.util_est_enqueue(cpu, t);
            self.pelt_before_enqueue(cpu, t, now);
        }
        if self.load49() {
            self.l49_before_enqueue(cpu, t, now);
        }
        self.enqueue_task(t, false, false, now);
        self.count_in(cpu, t);
        if self.eevdf && self.cpu_tasks[cpu.idx()] >= 2 {
            self.v66.rd_overload = true;
        }
    }

    /// Counts `t` in on `cpu` (`add_nr_running`, and `idle_h_nr_running` for a SCHED_IDLE task,
    /// known by its weight: `WEIGHT_IDLEPRIO` is no nice level's).
    fn count_in(&mut self, cpu: CpuId, t: TaskId) {
        self.cpu_tasks[cpu.idx()] += 1;
        let idle = self.ses[self.task_se[t.idx()] as usize].weight == schedlab_core::weights::WEIGHT_IDLEPRIO;
        if self.idle_counted.len() <= t.idx() {
            self.idle_counted.resize(t.idx() + 1, false);
        }
        self.idle_counted[t.idx()] = idle;
        if idle {
            self.cpu_idle_tasks[cpu.idx()] += 1;
        }
    }

    /// Counts `t` out of `cpu` (`sub_nr_running`).
    pub(crate) fn count_out(&mut self, cpu: CpuId, t: TaskId) {
        self.cpu_tasks[cpu.idx()] -= 1;
        if self.idle_counted.get(t.idx()).copied().unwrap_or(false) {
            self.idle_counted[t.idx()] = false;
            self.cpu_idle_tasks[cpu.idx()] -= 1;
        }
    }

    /// `sched_idle_cpu` (5.4+): `cpu` has tasks and every one of them is SCHED_IDLE (an RT task
    /// there would be running). Wakeup placement takes such a CPU as idle; the balancer as not busy.
    pub(crate) fn sched_idle_cpu(&self, ctx: &Ctx, cpu: CpuId) -> bool {
        let n = self.cpu_tasks[cpu.idx()];
        n > 0
            && n == self.cpu_idle_tasks[cpu.idx()]
            && !ctx.cpu(cpu).curr.is_some_and(|c| ctx.task(c).class.is_rt())
    }

    /// `add_nr_running` (6.6): a CPU that gets its second task sets `rd->overload` at once.
    fn note_overload(&mut self, ctx: &Ctx, cpu: CpuId) {
        if self.eevdf && (self.cpu_tasks[cpu.idx()] >= 2 || ctx.cpu(cpu).nr_running >= 2) {
            self.v66.rd_overload = true;
        }
    }
}

impl SchedPolicy for Cfs {
    fn name(&self) -> &str {
        if self.eevdf {
            "eevdf"
        } else {
            "cfs"
        }
    }

    fn counts_fork_placement(&self) -> bool {
        // 2.6.38's wake_up_new_task moves the child with set_task_cpu; today's uses __set_task_cpu.
        !self.eevdf
    }

    fn exec_cpu(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) -> Option<CpuId> {
        // sched_exec: select_task_rq(p, task_cpu(p), SD_BALANCE_EXEC / WF_EXEC).
        if self.eevdf {
            return Some(self.select_task_rq_fair_66(ctx, t, cpu, select66::Placement::Exec, None, false));
        }
        Some(self.select_exec_cpu(ctx, t, cpu))
    }

    fn init(&mut self, ctx: &Ctx) {
        self.ncpus = ctx.nr_cpus();
        self.tick_ns = ctx.tick_ns;
        self.tick_phase_ns = ctx.tick_phase_ns;
        let n = self.ncpus.min(8) as u64;
        let factor = match self.p.tunable_scaling {
            TunableScaling::None => 1,
            TunableScaling::Log => 1 + n.ilog2() as u64,
            TunableScaling::Linear => n,
        };
        self.latency_ns = self.p.sched_latency_ns * factor;
        self.min_gran_ns = self.p.sched_min_granularity_ns * factor;
        self.wakeup_gran_ns = self.p.sched_wakeup_granularity_ns * factor;
        self.nr_latency = self.latency_ns.div_ceil(self.min_gran_ns);
        self.base_slice_ns =
            self.p.sched_base_slice_ns.unwrap_or(self.p.eevdf_kernel.base_slice_ns()) * factor;
        self.resched = vec![false; self.ncpus];
        self.prev_runnable = vec![None; self.ncpus];
        let style = if self.eevdf { domains::Style::Linux66 } else { domains::Style::Linux2638 };
        self.build_groups(ctx);
        let mut doms = domains::build_all(ctx.topo, ctx.numa, style).into_iter();
        self.cpus = ctx
            .topo
            .cpus()
            .map(|c| CpuState {
                cpu_load: [0; CPU_LOAD_IDX_MAX],
                last_load_update_tick: 0,
                avg_idle: 2 * self.p.sched_migration_cost_ns,
                idle_stamp: 0,
                max_idle_balance_cost: self.p.sched_migration_cost_ns,
                misfit_task_load: 0,
                power: domains::cpu_power(ctx.topo, c),
                domains: doms.next().expect("domains of every CPU"),
                next_balance_j: [0; 2],
            })
            .collect();
        self.cpu_tasks = vec![0; self.ncpus];
        self.cpu_idle_tasks = vec![0; self.ncpus];
        self.pelt_cpu = vec![pelt::Avg::starting(ctx.now, 0, 0); self.ncpus];
        self.l49_cpu = vec![pelt49::Avg49::runqueue(ctx.now); self.ncpus];
        self.l49_scan_cost = vec![0; self.ncpus];
        self.ue_cpu = vec![0; self.ncpus];
        self.pelt_clock = vec![(ctx.now, ctx.now); self.ncpus];
        self.cap = ctx.topo.cpus().map(|c| ctx.capacity_of(c)).collect();
        if self.eevdf {
            let ndomains = self.cpus.iter().map(|c| c.domains.len()).max().unwrap_or(0);
            let smt_active = ctx.topo.cpus().any(|c| ctx.topo.smt_width(c) > 1);
            self.v66 = select66::State66::new(self.ncpus, ndomains, smt_active);
            self.classify_asym_domains();
            self.v66.rng = (0..self.ncpus as u64)
                .map(|c| RndState::seeded(splitmix(ctx.seed ^ (c << 32) ^ 0x6e69_6465)))
                .collect();
        }
        if self.placement49() {
            // 4.9's wakee records and idle-core notes (kept in the 6.6 state, which has the same).
            let ndomains = self.cpus.iter().map(|c| c.domains.len()).max().unwrap_or(0);
            let smt_active = ctx.topo.cpus().any(|c| ctx.topo.smt_width(c) > 1);
            self.v66 = select66::State66::new(self.ncpus, ndomains, smt_active);
        }
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        let se = self.new_task_se(ctx, t);
        // task_fork_fair: place against the forking CPU's runqueue, then make vruntime relative.
        let this_cpu = ctx.task(t).cpu;
        let rq = self.rq_id(Self::group_of(ctx, t), this_cpu);
        self.update_curr(rq, ctx.now);
        if self.eevdf {
            // 6.6: sched_fork zeroes the lag; the placement (with PLACE_DEADLINE_INITIAL) happens at
            // enqueue on the chosen CPU.
            self.ses[se as usize].vlag = 0;
            self.pelt_task_new(t, ctx.now);
            return self.select_task_rq_fair_66(ctx, t, this_cpu, select66::Placement::Fork, None, false);
        }
        if self.load49() {
            self.l49_task_new(t);
        }
        if let Some(curr) = self.rqs[rq as usize].curr {
            self.ses[se as usize].vruntime = self.ses[curr as usize].vruntime;
        }
        self.place_entity(rq, se, true);
        let mv = self.rqs[rq as usize].min_vruntime;
        let s = &mut self.ses[se as usize];
        s.vruntime = s.vruntime.wrapping_sub(mv);
        self.select_fork_cpu(ctx, t, this_cpu)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        if self.eevdf {
            if self.is_delayed(t) {
                let cpu = ctx.task(t).cpu;
                if ctx.task(t).allowed.contains(cpu) {
                    // ttwu_runnable (6.12): still queued, it wakes where it is, with no placement.
                    return cpu;
                }
                // Its CPU was taken from it while it slept: the kernel's affinity change dequeues
                // it first (here: finishes the delayed dequeue), then it is placed as any wakeup.
                self.finish_delayed_dequeue(cpu, t, ctx.now);
            }
            // 6.6 keeps no relative vruntime: the lag saved at dequeue places the task anywhere.
            return self.select_task_rq_fair_66(
                ctx,
                t,
                wake.waker_cpu,
                select66::Placement::Wake,
                wake.waker,
                wake.sync,
            );
        }
        // task_waking_fair: vruntime relative to the old runqueue while the task moves.
        let se = self.task_se[t.idx()];
        let mv = self.rqs[self.ses[se as usize].cfs_rq as usize].min_vruntime;
        let s = &mut self.ses[se as usize];
        s.vruntime = s.vruntime.wrapping_sub(mv);
        if self.placement49() {
            return self.select_task_rq_fair_49(ctx, t, wake.waker_cpu, wake.waker, wake.sync);
        }
        self.select_wake_cpu(ctx, t, wake.waker_cpu, wake.waker, wake.sync)
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if why == EnqueueReason::Restore {
            // ENQUEUE_RESTORE after a class change: as a migration to the same CPU (2.6.38 makes
            // the vruntime absolute again; 6.6 places the entity at its saved lag).
            return self.enqueue_migrated(cpu, t, Self::group_of(ctx, t), ctx.now);
        }
        if why == EnqueueReason::Migrated {
            if self.premoved.get(t.idx()).copied().unwrap_or(false) {
                // pull_task moved it already.
                self.premoved[t.idx()] = false;
                return;
            }
            return self.enqueue_migrated(cpu, t, Self::group_of(ctx, t), ctx.now);
        }
        let wakeup = why == EnqueueReason::Wakeup;
        if wakeup && self.is_delayed(t) {
            // ttwu_runnable -> enqueue_task(ENQUEUE_DELAYED) -> requeue_delayed_entity (6.12): the
            // task never left this CPU's runqueue or its load.
            self.util_est_enqueue(cpu, t);
            self.requeue_delayed(t, ctx.now);
            self.note_overload(ctx, cpu);
            return;
        }
        self.set_task_rq(t, cpu, Self::group_of(ctx, t));
        if self.eevdf {
            self.util_est_enqueue(cpu, t);
            self.pelt_before_enqueue(cpu, t, ctx.now);
            // 6.6's wake_up_new_task activates a new task without ENQUEUE_INITIAL: its enqueue
            // places it with a whole request, overwriting task_fork_fair's half-request placement
            // (so PLACE_DEADLINE_INITIAL has no effect on a new task in 6.6 as shipped); 6.12 passes
            // ENQUEUE_INITIAL (core.c wake_up_new_task), so a new task starts with half a request.
            let initial = self.is_612() && why == EnqueueReason::New;
            self.enqueue_task(t, false, initial, ctx.now);
        } else {
            if self.load49() {
                self.l49_before_enqueue(cpu, t, ctx.now);
            }
            self.enqueue_task(t, wakeup, wakeup, ctx.now);
        }
        self.count_in(cpu, t);
        self.note_overload(ctx, cpu);
        if wakeup && self.eevdf && self.cpus[cpu.idx()].idle_stamp != 0 {
            // ttwu_do_activate (6.6): update_avg, then the cap of twice max_idle_balance_cost.
            let st = &mut self.cpus[cpu.idx()];
            let delta = ctx.now.saturating_sub(st.idle_stamp) as i64;
            let diff = delta - st.avg_idle as i64;
            st.avg_idle = ((st.avg_idle as i64 + diff / 8) as u64).min(2 * st.max_idle_balance_cost);
            st.idle_stamp = 0;
            return;
        }
        if wakeup {
            let st = &mut self.cpus[cpu.idx()];
            lb2638::fold_avg_idle(
                &mut st.avg_idle,
                &mut st.idle_stamp,
                ctx.now,
                self.p.sched_migration_cost_ns,
            );
        }
    }

    fn dequeue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, _why: DequeueReason) {
        if self.premoved.get(t.idx()).copied().unwrap_or(false) {
            return; // pull_task moved it already; `enqueue(.., Migrated)` follows.
        }
        self.dequeue_queued(cpu, t, ctx.now);
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        if self.eevdf {
            self.resched[cpu.idx()] = false;
            // set_next_entity's update_load_avg: the CPU's signal up to now without a running task.
            self.pelt_update_cpu(cpu, ctx.now);
            let picked = self.pick_next_task(cpu, ctx.now);
            match picked {
                Some(t) => {
                    self.pelt_picked(t, ctx.now);
                    // set_next_task_fair's update_misfit_status.
                    self.update_misfit_status(ctx, cpu, Some(t));
                }
                None => self.update_idle_core(ctx, cpu),
            }
            return picked.map(Dispatch::task);
        }
        if let Some(av) = self.avec.as_mut() {
            // The task that ran last here and the tasks running on the other CPUs of the package: the
            // choice should differ from them (seed 004 sec. 1.4).
            let span = ctx.topo.span(schedlab_core::Level::Socket, cpu);
            let co = span.iter().filter(|&c| c != cpu).filter_map(|c| ctx.cpu(c).curr);
            let prev = av.take_prev(cpu.idx());
            let vectors: Vec<avec::Vector> =
                prev.into_iter().chain(co).filter_map(|t| av.vector(t)).collect();
            av.set_corunners(vectors.into_iter());
        }
        let picked = self.pick_next_task(cpu, ctx.now);
        if let Some(t) = picked.filter(|_| self.load49()) {
            // set_next_entity's update_load_avg, before the entity becomes the runqueue's current:
            // the task's wait accrues as runnable, not running.
            self.l49_touch(cpu, t, ctx.now);
        }
        if picked.is_none() && self.placement49() {
            // pick_next_task_idle's update_idle_core.
            self.update_idle_core(ctx, cpu);
        }
        picked.map(Dispatch::task)
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        if let Some(av) = self.avec.as_mut() {
            av.update(t, &ctx.task(t).pmc);
            av.note_prev(cpu.idx(), t);
        }
        if self.eevdf && why.still_runnable() {
            self.pelt_before_switch(cpu, t, ctx.now);
            self.prev_runnable[cpu.idx()] = Some(t);
        }
        if self.load49() && why.still_runnable() {
            // put_prev_entity: update_load_avg of the still-queued entity, still current.
            self.l49_touch(cpu, t, ctx.now);
        }
        if self.eevdf && !why.still_runnable() {
            // dequeue_task_fair(DEQUEUE_SLEEP): the estimate leaves the CPU and takes a sample
            // before dequeue_entities (which may delay the dequeue).
            self.util_est_dequeue(t);
            self.util_est_update(t, cpu, true);
        }
        if why == SwitchReason::Blocked && self.eevdf && self.try_delay_dequeue(t, ctx.now) {
            // 6.12 DELAY_DEQUEUE: it stays queued (and in nr_running, load and PELT) until picked.
            self.pelt_before_switch(cpu, t, ctx.now);
            self.put_prev_task(t, ctx.now);
            return;
        }
        if !why.still_runnable() {
            // deactivate_task(DEQUEUE_SLEEP) runs before put_prev_task in schedule().
            if self.eevdf {
                self.pelt_before_dequeue(cpu, t, ctx.now);
            }
            if self.load49() {
                self.l49_before_dequeue(cpu, t, ctx.now);
            }
            self.dequeue_task(t, true, ctx.now);
            self.count_out(cpu, t);
        }
        self.put_prev_task(t, ctx.now);
    }

    #[inline]
    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        if self.load49() {
            // 4.9's scheduler_tick: task_tick (entity_tick's update_load_avg) before
            // cpu_load_update_active, which folds the updated runnable_load_avg.
            self.l49_touch(cpu, curr, ctx.now);
        }
        self.update_cpu_load(cpu, ctx.now);
        if self.eevdf {
            // entity_tick -> update_load_avg: the CPU's and the running task's signals.
            self.pelt_before_switch(cpu, curr, ctx.now);
            // task_tick_fair's update_misfit_status.
            self.update_misfit_status(ctx, cpu, Some(curr));
        }
        let mut resched = self.task_tick(curr, ctx.now);
        if self.eevdf {
            resched |= std::mem::take(&mut self.resched[cpu.idx()]);
        }
        self.nr_tick_preempt += u64::from(resched);
        resched
    }

    fn check_preempt(&mut self, ctx: &Ctx, _cpu: CpuId, curr: TaskId, woken: TaskId, kind: WakeKind) -> bool {
        if self.eevdf {
            return self.check_preempt_eevdf(ctx, curr, woken, kind == WakeKind::Fork);
        }
        self.check_preempt_wakeup(ctx, curr, woken, kind == WakeKind::Fork)
    }

    fn yield_task(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId) {
        if self.eevdf {
            return self.yield_eevdf(ctx, t);
        }
        // yield_task_fair (2.6.38).
        let se = self.task_se[t.idx()];
        let rq = self.ses[se as usize].cfs_rq;
        if self.rqs[rq as usize].nr_running == 1 {
            return;
        }
        self.clear_buddies(rq, se);
        if !self.p.compat_yield && ctx.task(t).class != SchedClass::Batch {
            self.update_curr(rq, ctx.now);
            return;
        }
        let Some(right) = timeline::last(&self.rqs[rq as usize].timeline, &self.ses) else { return };
        if timeline::before(&self.ses[right as usize], &self.ses[se as usize]) {
            return;
        }
        self.ses[se as usize].vruntime = self.ses[right as usize].vruntime.wrapping_add(1);
    }

    #[inline]
    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        if !self.p.load_balance || self.ncpus < 2 {
            return;
        }
        match kind {
            BalanceKind::Periodic | BalanceKind::NohzIdle => {
                let idle = if kind == BalanceKind::Periodic { IdleType::NotIdle } else { IdleType::Idle };
                // trigger_load_balance: nothing to do before rq->next_balance (most ticks).
                if self.balance_due(ctx, cpu, idle) {
                    if self.eevdf {
                        self.rebalance_domains_66(ctx, cpu, idle, out);
                    } else {
                        if self.load49() {
                            // 4.9's rebalance_domains starts with update_blocked_averages(cpu).
                            self.l49_update_cpu(cpu, ctx.now);
                        }
                        self.rebalance_domains(ctx, cpu, idle, out);
                    }
                }
            }
            BalanceKind::NewlyIdle if self.eevdf => self.newidle_balance_66(ctx, cpu, out),
            BalanceKind::NewlyIdle => self.idle_balance(ctx, cpu, out),
        }
    }

    fn set_class(&mut self, ctx: &Ctx, t: TaskId, _old_class: SchedClass, _old_rt_priority: u8) {
        self.reclass_fair(ctx, t);
    }

    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, old_nice: i8) -> Option<CpuId> {
        self.renice_fair(ctx, t, old_nice).then_some(ctx.task(t).cpu)
    }

    fn group_new(&mut self, ctx: &Ctx, g: schedlab_core::GroupId) {
        // Groups come in order; one this policy already has (or skipped) changes nothing.
        if g.0 as usize == self.ngroups {
            let info = ctx.groups[g.0 as usize];
            self.add_group(info.parent.map(|p| p.0), info.shares);
        }
    }

    fn task_exit(&mut self, ctx: &Ctx, t: TaskId) {
        if self.eevdf {
            self.util_est_dequeue(t);
            self.pelt_exit(t, ctx.now);
        }
        if self.load49() {
            self.l49_exit(t);
        }
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_wakeup_preempt",
                value: self.nr_wakeup_preempt,
                help: "wakeups that preempted the running task",
            },
            PolicyStat {
                name: "nr_tick_preempt",
                value: self.nr_tick_preempt,
                help: "ticks that asked for a reschedule",
            },
            PolicyStat {
                name: "nr_wake_affine",
                value: self.nr_wake_affine,
                help: "wakeups pulled to the waker's CPU by wake_affine",
            },
            PolicyStat {
                name: "nr_lb_calls",
                value: self.nr_lb_calls,
                help: "load_balance calls (all domains)",
            },
            PolicyStat { name: "nr_lb_moved", value: self.nr_lb_moved, help: "tasks moved by load_balance" },
            PolicyStat {
                name: "nr_active_balance",
                value: self.nr_active_balance,
                help: "active balances (stopper pushes)",
            },
        ]
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running_total)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        let Some(&se) = self.task_se.get(t.idx()) else { return };
        let Some(s) = self.ses.get(se as usize) else { return };
        // vruntime against its runqueue's min_vruntime (the kernel's wrap-safe difference), in ns.
        // Tasks outside the fair class (RT) have no runqueue and no values.
        let Some(rq) = self.rqs.get(s.cfs_rq as usize) else { return };
        out.push(("vruntime - min_vruntime ns", s.vruntime.wrapping_sub(rq.min_vruntime) as i64));
        if self.eevdf {
            out.push(("eevdf deadline - min_vruntime ns", s.deadline.wrapping_sub(rq.min_vruntime) as i64));
        }
        if let Some(av) = self.avec.as_ref() {
            out.push(("avec_boosted", av.boosted(t)));
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_2638;
#[cfg(test)]
mod tests_49;
#[cfg(test)]
mod tests_612;
#[cfg(test)]
mod tests_618;
#[cfg(test)]
mod tests_66;
#[cfg(test)]
mod tests_asym;
#[cfg(test)]
mod tests_newidle;
#[cfg(test)]
mod tests_util_est;
