//! The per-version scheduling-domain parameters, side by side.
//!
//! * Linux 2.6.38: the `SD_SIBLING_INIT`, `SD_MC_INIT` and `SD_CPU_INIT` initialisers of
//!   include/linux/topology.h, `SD_NODE_INIT` of arch/x86/include/asm/topology.h (x86-64 values:
//!   `SD_CACHE_NICE_TRIES` 2, `SD_IDLE_IDX` 2) and `SD_ALLNODES_INIT` of include/linux/topology.h,
//!   with the flags `sd_balance_for_mc_power()` and `sd_balance_for_package_power()` of
//!   include/linux/sched.h return when power-savings balancing is off (the default): both
//!   `SD_PREFER_SIBLING`. `SD_INIT` (kernel/sched.c) starts every domain at `balance_interval` 1 ms
//!   except ALLNODES (64 ms), whatever its `min_interval`.
//! * Linux 2.6.22: the `SD_SIBLING_INIT`, `SD_MC_INIT` and `SD_CPU_INIT` initialisers of
//!   include/linux/topology.h (power-savings balancing off: `BALANCE_FOR_MC_POWER` and
//!   `BALANCE_FOR_PKG_POWER` are 0), `SD_ALLNODES_INIT` of the same header, and x86-64's
//!   `SD_NODE_INIT` (include/asm-x86_64/topology.h; read in its 2.6.16 form, which has no
//!   `SD_SERIALIZE`; that flag only serialises balancing between CPUs and changes no decision of a
//!   simulated balancer). The per-domain `cache_hot_time` of 2.6.22 is measured at boot
//!   (`calibrate_migration_costs`) and kept by the O(1) policy, not here.
//! * Linux 6.6: `sd_init` of kernel/sched/topology.c (read in Debian's linux-source-6.1, whose
//!   `sd_init` 6.6 did not change but for the newidle statistics a later stable backport added),
//!   whose intervals follow the span weight.
//!
//! Every field is listed for every level so a reader can compare a row with the header it cites.

use super::{
    DomainKind, SD_BALANCE_EXEC, SD_BALANCE_FORK, SD_BALANCE_NEWIDLE, SD_LOAD_BALANCE, SD_NUMA,
    SD_PREFER_SIBLING, SD_SERIALIZE, SD_SHARE_CPUPOWER, SD_SHARE_PKG_RESOURCES, SD_WAKE_AFFINE,
    SD_WAKE_BALANCE, SD_WAKE_IDLE,
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

/// `SD_*_INIT` of Linux 2.6.22 for one level (x86-64, power savings off). Unlike 2.6.38 no level
/// below NODE balances at fork (`SD_BALANCE_FORK`), so a child starts on its parent's CPU unless the
/// machine is NUMA.
pub const fn linux_2622(kind: DomainKind) -> SdInit {
    let base = SD_LOAD_BALANCE | SD_BALANCE_NEWIDLE | SD_BALANCE_EXEC | SD_WAKE_AFFINE;
    match kind {
        DomainKind::Sibling => SdInit {
            min_interval_ms: 1,
            max_interval_ms: 2,
            busy_factor: 64,
            imbalance_pct: 110,
            cache_nice_tries: 0,
            busy_idx: 0,
            idle_idx: 0,
            newidle_idx: 1,
            wake_idx: 0,
            forkexec_idx: 0,
            flags: base | SD_WAKE_IDLE | SD_SHARE_CPUPOWER,
            balance_interval_ms: 1,
        },
        DomainKind::Mc => SdInit {
            min_interval_ms: 1,
            max_interval_ms: 4,
            busy_factor: 64,
            imbalance_pct: 125,
            cache_nice_tries: 1,
            busy_idx: 2,
            idle_idx: 1,
            newidle_idx: 2,
            wake_idx: 1,
            forkexec_idx: 1,
            flags: base | SD_SHARE_PKG_RESOURCES,
            balance_interval_ms: 1,
        },
        DomainKind::Cpu => SdInit {
            min_interval_ms: 1,
            max_interval_ms: 4,
            busy_factor: 64,
            imbalance_pct: 125,
            cache_nice_tries: 1,
            busy_idx: 2,
            idle_idx: 1,
            newidle_idx: 2,
            wake_idx: 1,
            forkexec_idx: 1,
            flags: base,
            balance_interval_ms: 1,
        },
        DomainKind::Node => SdInit {
            min_interval_ms: 8,
            max_interval_ms: 32,
            busy_factor: 32,
            imbalance_pct: 125,
            cache_nice_tries: 2,
            busy_idx: 3,
            idle_idx: 2,
            newidle_idx: 0,
            wake_idx: 1,
            forkexec_idx: 1,
            flags: SD_LOAD_BALANCE | SD_BALANCE_FORK | SD_BALANCE_EXEC | SD_WAKE_BALANCE,
            balance_interval_ms: 1,
        },
        // max_interval is 64 x num_online_cpus() (set by the builder).
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
            flags: SD_LOAD_BALANCE | SD_SERIALIZE,
            balance_interval_ms: 64,
        },
    }
}

/// `RECLAIM_DISTANCE` (include/linux/topology.h): `sd_init` takes FORK, EXEC and WAKE_AFFINE off a
/// NUMA level whose nodes are farther apart than this.
pub const RECLAIM_DISTANCE: u32 = 30;

/// `sd_init` of Linux 6.6 (kernel/sched/topology.c) for a level spanning `span_weight` CPUs, with
/// the x86 topology flags of its level (`cpu_smt_flags`: SHARE_CPUCAPACITY | SHARE_PKG_RESOURCES on
/// SMT; `cpu_core_flags`: SHARE_PKG_RESOURCES on MC; none on DIE; SD_NUMA on the NUMA levels, which
/// `numa_distance` reaches):
///
/// * every level starts with NEWIDLE, EXEC, FORK, WAKE_AFFINE and PREFER_SIBLING (no
///   `SD_LOAD_BALANCE` flag any more: since 5.10 every domain balances; schedlab keeps the bit set so
///   the walks shared with 2.6.38 read alike), intervals span..2 x span ms, `balance_interval`
///   span ms, busy_factor 16, imbalance_pct 117;
/// * SMT (SHARE_CPUCAPACITY): imbalance_pct 110, cache_nice_tries 0; MC (SHARE_PKG_RESOURCES):
///   imbalance_pct 117, cache_nice_tries 1; NUMA: cache_nice_tries 2, no PREFER_SIBLING, SERIALIZE,
///   and beyond `RECLAIM_DISTANCE` no FORK/EXEC/WAKE_AFFINE; DIE and anything else:
///   cache_nice_tries 1;
/// * no `cpu_load[]` any more, so every index is 0.
pub fn linux_66(kind: DomainKind, span_weight: u64, numa_distance: u32) -> SdInit {
    let base = SD_LOAD_BALANCE
        | SD_BALANCE_NEWIDLE
        | SD_BALANCE_EXEC
        | SD_BALANCE_FORK
        | SD_WAKE_AFFINE
        | SD_PREFER_SIBLING;
    let topology_flags = match kind {
        DomainKind::Sibling => SD_SHARE_CPUPOWER | SD_SHARE_PKG_RESOURCES,
        DomainKind::Mc => SD_SHARE_PKG_RESOURCES,
        DomainKind::Cpu => 0,
        DomainKind::Node | DomainKind::AllNodes => SD_NUMA,
    };
    let mut flags = base | topology_flags;
    let (imbalance_pct, cache_nice_tries) = if flags & SD_SHARE_CPUPOWER != 0 {
        (110, 0)
    } else if flags & SD_SHARE_PKG_RESOURCES != 0 {
        (117, 1)
    } else if flags & SD_NUMA != 0 {
        flags &= !SD_PREFER_SIBLING;
        flags |= SD_SERIALIZE;
        if numa_distance > RECLAIM_DISTANCE {
            flags &= !(SD_BALANCE_EXEC | SD_BALANCE_FORK | SD_WAKE_AFFINE);
        }
        (117, 2)
    } else {
        (117, 1)
    };
    SdInit {
        min_interval_ms: span_weight,
        max_interval_ms: 2 * span_weight,
        busy_factor: 16,
        imbalance_pct,
        cache_nice_tries,
        busy_idx: 0,
        idle_idx: 0,
        newidle_idx: 0,
        wake_idx: 0,
        forkexec_idx: 0,
        flags,
        balance_interval_ms: span_weight,
    }
}
