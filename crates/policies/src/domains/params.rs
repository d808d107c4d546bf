//! The per-version scheduling-domain parameters, side by side.
//!
//! * Linux 2.6.38: the `SD_SIBLING_INIT`, `SD_MC_INIT` and `SD_CPU_INIT` initialisers of
//!   include/linux/topology.h, `SD_NODE_INIT` of arch/x86/include/asm/topology.h (x86-64 values:
//!   `SD_CACHE_NICE_TRIES` 2, `SD_IDLE_IDX` 2) and `SD_ALLNODES_INIT` of include/linux/topology.h,
//!   with the flags `sd_balance_for_mc_power()` and `sd_balance_for_package_power()` of
//!   include/linux/sched.h return when power-savings balancing is off (the default): both
//!   `SD_PREFER_SIBLING`. `SD_INIT` (kernel/sched.c) starts every domain at `balance_interval` 1 ms
//!   except ALLNODES (64 ms), whatever its `min_interval`.
//! * Linux 6.6: `sd_init` of kernel/sched/topology.c, whose intervals follow the span weight.
//!
//! Every field is listed for every level so a reader can compare a row with the header it cites.

use super::{
    DomainKind, SD_BALANCE_EXEC, SD_BALANCE_FORK, SD_BALANCE_NEWIDLE, SD_LOAD_BALANCE, SD_PREFER_SIBLING,
    SD_SERIALIZE, SD_SHARE_CPUPOWER, SD_SHARE_PKG_RESOURCES, SD_WAKE_AFFINE,
};

/// The initial values of one `struct sched_domain` (an `SD_*_INIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdInit {
    /// `min_interval`, ms.
    pub min_interval_ms: u64,
    /// `max_interval`, ms.
    pub max_interval_ms: u64,
    /// `busy_factor`.
    pub busy_factor: u64,
    /// `imbalance_pct`.
    pub imbalance_pct: u64,
    /// `cache_nice_tries`.
    pub cache_nice_tries: u32,
    /// `busy_idx`.
    pub busy_idx: usize,
    /// `idle_idx`.
    pub idle_idx: usize,
    /// `newidle_idx`.
    pub newidle_idx: usize,
    /// `wake_idx`.
    pub wake_idx: usize,
    /// `forkexec_idx`.
    pub forkexec_idx: usize,
    /// `flags` (`SD_*`).
    pub flags: u32,
    /// `balance_interval` at build time, ms.
    pub balance_interval_ms: u64,
}

/// The balancing flags every 2.6.38 level except ALLNODES sets.
const BALANCE_2638: u32 =
    SD_LOAD_BALANCE | SD_BALANCE_NEWIDLE | SD_BALANCE_EXEC | SD_BALANCE_FORK | SD_WAKE_AFFINE;

/// `SD_*_INIT` of Linux 2.6.38 for one level (x86-64, power savings off).
pub const fn linux_2638(kind: DomainKind) -> SdInit {
    match kind {
        // SD_SIBLING_INIT: idx fields and cache_nice_tries are left 0 by the initialiser.
        DomainKind::Sibling => SdInit {
            min_interval_ms: 1,
            max_interval_ms: 2,
            busy_factor: 64,
            imbalance_pct: 110,
            cache_nice_tries: 0,
            busy_idx: 0,
            idle_idx: 0,
            newidle_idx: 0,
            wake_idx: 0,
            forkexec_idx: 0,
            flags: BALANCE_2638 | SD_SHARE_CPUPOWER | SD_SHARE_PKG_RESOURCES,
            balance_interval_ms: 1,
        },
        // SD_MC_INIT: idle_idx and newidle_idx left 0; sd_balance_for_mc_power() = SD_PREFER_SIBLING.
        DomainKind::Mc => SdInit {
            min_interval_ms: 1,
            max_interval_ms: 4,
            busy_factor: 64,
            imbalance_pct: 125,
            cache_nice_tries: 1,
            busy_idx: 2,
            idle_idx: 0,
            newidle_idx: 0,
            wake_idx: 0,
            forkexec_idx: 0,
            flags: BALANCE_2638 | SD_SHARE_PKG_RESOURCES | SD_PREFER_SIBLING,
            balance_interval_ms: 1,
        },
        // SD_CPU_INIT: sd_balance_for_package_power() = SD_PREFER_SIBLING.
        DomainKind::Cpu => SdInit {
            min_interval_ms: 1,
            max_interval_ms: 4,
            busy_factor: 64,
            imbalance_pct: 125,
            cache_nice_tries: 1,
            busy_idx: 2,
            idle_idx: 1,
            newidle_idx: 0,
            wake_idx: 0,
            forkexec_idx: 0,
            flags: BALANCE_2638 | SD_PREFER_SIBLING,
            balance_interval_ms: 1,
        },
        // SD_NODE_INIT (arch/x86/include/asm/topology.h, CONFIG_X86_64).
        DomainKind::Node => SdInit {
            min_interval_ms: 8,
            max_interval_ms: 32,
            busy_factor: 32,
            imbalance_pct: 125,
            cache_nice_tries: 2,
            busy_idx: 3,
            idle_idx: 2,
            newidle_idx: 0,
            wake_idx: 0,
            forkexec_idx: 0,
            flags: BALANCE_2638 | SD_SERIALIZE,
            balance_interval_ms: 1,
        },
        // SD_ALLNODES_INIT: max_interval is 64 x num_online_cpus() (set by the builder).
        DomainKind::AllNodes => SdInit {
            min_interval_ms: 64,
            max_interval_ms: 64,
            busy_factor: 128,
            imbalance_pct: 133,
            cache_nice_tries: 1,
            busy_idx: 3,
            idle_idx: 3,
            newidle_idx: 0,
            wake_idx: 0,
            forkexec_idx: 0,
            flags: SD_LOAD_BALANCE | SD_BALANCE_NEWIDLE | SD_SERIALIZE,
            balance_interval_ms: 64,
        },
    }
}

/// `sd_init` of Linux 6.6 for a level spanning `span_weight` CPUs, as the EEVDF model uses it today:
/// intervals span..2 x span ms, busy_factor 16, imbalance_pct 117 (110 between SMT siblings),
/// cache_nice_tries 1 in an LLC, 2 across nodes; no `cpu_load[]`, so every index is 0. The flags are
/// still 2.6.38's without `SD_PREFER_SIBLING` on MC: 6.6's own flag set (PREFER_SIBLING on every
/// non-NUMA level, none of FORK/EXEC/WAKE_AFFINE beyond `node_reclaim_distance`) comes with 6.6's
/// balancer (issue 28, EEVDF part).
pub fn linux_66(kind: DomainKind, span_weight: u64) -> SdInit {
    let flags = match kind {
        DomainKind::Mc => BALANCE_2638 | SD_SHARE_PKG_RESOURCES,
        _ => linux_2638(kind).flags,
    };
    SdInit {
        min_interval_ms: span_weight,
        max_interval_ms: 2 * span_weight,
        busy_factor: 16,
        imbalance_pct: if kind == DomainKind::Sibling { 110 } else { 117 },
        cache_nice_tries: match kind {
            DomainKind::Sibling | DomainKind::Cpu => 0,
            DomainKind::Mc => 1,
            DomainKind::Node | DomainKind::AllNodes => 2,
        },
        busy_idx: 0,
        idle_idx: 0,
        newidle_idx: 0,
        wake_idx: 0,
        forkexec_idx: 0,
        flags,
        balance_interval_ms: span_weight,
    }
}
