//! Scheduling domains and groups, built from the machine topology as Linux 2.6.38 builds them
//! (kernel/sched.c `build_sched_domains`, include/linux/topology.h and arch/x86/include/asm/topology.h
//! for the `SD_*_INIT` parameters).
//!
//! Mapping from schedlab's topology levels to Linux domain types: SMT siblings -> SIBLING, CPUs sharing
//! an LLC -> MC, a node with several LLCs -> CPU (package), and above the node: NODE on a NUMA machine,
//! CPU on a UMA SMP (4 x Pentium II). Where a socket holds several NUMA nodes (Opteron 6172) the socket
//! and machine levels both become NODE domains; 2.6.38 would build one NODE level spanning all nodes
//! (fewer than 16), later kernels build one per NUMA distance as here. Degenerate levels (span equal to
//! the child's) are dropped, as `sd_degenerate` does.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use schedlab_core::{CpuId, CpuSet, Level, Topology};

/// `SD_LOAD_BALANCE`.
pub const SD_LOAD_BALANCE: u32 = 0x0001;
/// `SD_BALANCE_NEWIDLE`.
pub const SD_BALANCE_NEWIDLE: u32 = 0x0002;
/// `SD_BALANCE_EXEC`.
pub const SD_BALANCE_EXEC: u32 = 0x0004;
/// `SD_BALANCE_FORK`.
pub const SD_BALANCE_FORK: u32 = 0x0008;
/// `SD_BALANCE_WAKE`.
pub const SD_BALANCE_WAKE: u32 = 0x0010;
/// `SD_WAKE_AFFINE`.
pub const SD_WAKE_AFFINE: u32 = 0x0020;
/// `SD_SHARE_CPUPOWER`.
pub const SD_SHARE_CPUPOWER: u32 = 0x0080;
/// `SD_SHARE_PKG_RESOURCES`.
pub const SD_SHARE_PKG_RESOURCES: u32 = 0x0200;
/// `SD_SERIALIZE`.
pub const SD_SERIALIZE: u32 = 0x0400;
/// `SD_PREFER_SIBLING`.
pub const SD_PREFER_SIBLING: u32 = 0x1000;

/// `SCHED_LOAD_SCALE`, also the power of one full CPU.
pub const SCHED_LOAD_SCALE: u64 = 1024;
/// `smt_gain` of SIBLING domains: two threads are worth 1178/1024 of a core.
pub const SMT_GAIN: u64 = 1178;

/// Which kernel's domain parameters to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// include/linux/topology.h `SD_*_INIT` of 2.6.38.
    Linux2638,
    /// kernel/sched/topology.c `sd_init` of 6.6: intervals span..2 x span ms, busy_factor 16,
    /// imbalance_pct 117 (110 between SMT siblings), cache_nice_tries 1 in an LLC, 2 across nodes.
    Linux66,
}

/// The Linux domain types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DomainKind {
    /// SMT siblings.
    Sibling,
    /// Multi-core: CPUs sharing a last-level cache.
    Mc,
    /// Physical package / SMP.
    Cpu,
    /// NUMA nodes.
    Node,
}

/// A scheduling group: a set of CPUs balanced as one unit within a domain.
#[derive(Clone, Debug)]
pub struct Group {
    /// Its CPUs.
    pub cpus: CpuSet,
    /// The same CPUs as a list, in ascending order: the balancing loops walk it instead of the
    /// 1,024-bit set.
    pub members: Box<[CpuId]>,
    /// Its first CPU (`members[0]`, kept inline for the balancing scans of one-CPU groups).
    pub first: CpuId,
    /// `cpu_power`: sum of its CPUs' power.
    pub power: u64,
}

impl Group {
    /// Whether any of its CPUs is in `allowed`: a look at each member for a small group, a word-wise
    /// intersection of the sets for a large one.
    pub fn allows_any(&self, allowed: &CpuSet) -> bool {
        if self.members.len() <= 8 {
            self.members.iter().any(|&c| allowed.contains(c))
        } else {
            self.cpus.intersects(allowed)
        }
    }
}

/// The groups of one domain as one CPU sees them: the kernel's circular list of `sched_group`s
/// starting at the group that holds the CPU (`sd->groups`). The groups themselves are shared by
/// every CPU whose domain at this level has the same span, as the kernel shares them (on 1,024 flat
/// CPUs one copy of 1,024 groups instead of one per CPU); each CPU keeps only where its walk starts.
#[derive(Clone, Debug)]
pub struct GroupList {
    all: Arc<[Group]>,
    first: usize,
    /// Every group is a single CPU.
    single: bool,
}

impl GroupList {
    /// Number of groups.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Whether there are none (never, for a built domain).
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// The groups in walk order: the CPU's own group first, then on in CPU order, wrapping around.
    pub fn iter(&self) -> impl Iterator<Item = &Group> + '_ {
        self.all[self.first..].iter().chain(self.all[..self.first].iter())
    }

    /// The walk order as two plain slices (the CPU's own group starts the first).
    pub fn halves(&self) -> [&[Group]; 2] {
        [&self.all[self.first..], &self.all[..self.first]]
    }

    /// Whether every group is a single CPU (the lowest level of a flat machine, SMT siblings).
    pub fn all_single(&self) -> bool {
        self.single
    }
}

impl std::ops::Index<usize> for GroupList {
    type Output = Group;

    /// The `i`-th group in walk order (0 = the CPU's own group).
    fn index(&self, i: usize) -> &Group {
        let n = self.all.len();
        &self.all[if i < n - self.first { self.first + i } else { i + self.first - n }]
    }
}

/// One `struct sched_domain` of one CPU.
#[derive(Clone, Debug)]
pub struct Domain {
    /// Type.
    pub kind: DomainKind,
    /// CPUs spanned.
    pub span: CpuSet,
    /// Groups, the one holding this CPU first, then in CPU order (the kernel's circular list).
    pub groups: GroupList,
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
    /// `SD_*` flags.
    pub flags: u32,
    /// `balance_interval`, ms (backs off exponentially while balanced).
    pub balance_interval_ms: u64,
    /// `last_balance`, in jiffies.
    pub last_balance: u64,
    /// `nr_balance_failed`.
    pub nr_balance_failed: u32,
}

impl Domain {
    fn new(kind: DomainKind, ncpus: usize) -> Domain {
        // (min, max, busy_factor, imbalance_pct, cache_nice_tries, busy, idle, newidle, wake, forkexec, flags)
        let (min, max, busy, pct, tries, bi, ii, ni, wi, fi, flags) = match kind {
            DomainKind::Sibling => (
                1,
                2,
                64,
                110,
                0,
                0,
                0,
                0,
                0,
                0,
                SD_LOAD_BALANCE
                    | SD_BALANCE_NEWIDLE
                    | SD_BALANCE_EXEC
                    | SD_BALANCE_FORK
                    | SD_WAKE_AFFINE
                    | SD_SHARE_CPUPOWER
                    | SD_SHARE_PKG_RESOURCES,
            ),
            DomainKind::Mc => (
                1,
                4,
                64,
                125,
                1,
                2,
                0,
                0,
                0,
                0,
                SD_LOAD_BALANCE
                    | SD_BALANCE_NEWIDLE
                    | SD_BALANCE_EXEC
                    | SD_BALANCE_FORK
                    | SD_WAKE_AFFINE
                    | SD_SHARE_PKG_RESOURCES,
            ),
            DomainKind::Cpu => (
                1,
                4,
                64,
                125,
                1,
                2,
                1,
                0,
                0,
                0,
                SD_LOAD_BALANCE
                    | SD_BALANCE_NEWIDLE
                    | SD_BALANCE_EXEC
                    | SD_BALANCE_FORK
                    | SD_WAKE_AFFINE
                    | SD_PREFER_SIBLING,
            ),
            DomainKind::Node => (
                8,
                32,
                32,
                125,
                2,
                3,
                0,
                0,
                0,
                0,
                SD_LOAD_BALANCE
                    | SD_BALANCE_NEWIDLE
                    | SD_BALANCE_EXEC
                    | SD_BALANCE_FORK
                    | SD_WAKE_AFFINE
                    | SD_SERIALIZE,
            ),
        };
        let _ = ncpus;
        Domain {
            kind,
            span: CpuSet::empty(),
            groups: GroupList { all: Arc::from(Vec::new()), first: 0, single: false },
            min_interval_ms: min,
            max_interval_ms: max,
            busy_factor: busy,
            imbalance_pct: pct,
            cache_nice_tries: tries,
            busy_idx: bi,
            idle_idx: ii,
            newidle_idx: ni,
            wake_idx: wi,
            forkexec_idx: fi,
            flags,
            balance_interval_ms: min,
            last_balance: 0,
            nr_balance_failed: 0,
        }
    }

    /// Number of CPUs spanned (`span_weight`).
    pub fn span_weight(&self) -> usize {
        self.span.count()
    }
}

/// `power_of(cpu)`: 1024, or `smt_gain / siblings` for an SMT thread.
pub fn cpu_power(topo: &Topology, cpu: CpuId) -> u64 {
    let w = topo.smt_width(cpu) as u64;
    if w > 1 {
        SMT_GAIN / w
    } else {
        SCHED_LOAD_SCALE
    }
}

/// The domains of `cpu`, bottom-up (one CPU's part of [`build_all`]).
pub fn build(topo: &Topology, numa: bool, cpu: CpuId, style: Style) -> Vec<Domain> {
    build_all(topo, numa, style).swap_remove(cpu.idx())
}

/// The domains of every CPU, bottom-up, indexed by CPU. Groups are built once per distinct span
/// and shared (see [`GroupList`]).
pub fn build_all(topo: &Topology, numa: bool, style: Style) -> Vec<Vec<Domain>> {
    let levels = topo.domain_levels();
    let mut out: Vec<Vec<Domain>> = topo.cpus().map(|_| Vec::with_capacity(levels.len())).collect();
    let mut child = Level::Same;
    for level in levels {
        let kind = match level {
            Level::Smt => DomainKind::Sibling,
            Level::Llc => DomainKind::Mc,
            Level::Node => DomainKind::Cpu,
            Level::Socket | Level::Machine if numa => DomainKind::Node,
            _ => DomainKind::Cpu,
        };
        let mut shared: HashMap<CpuSet, Arc<[Group]>> = HashMap::new();
        for cpu in topo.cpus() {
            let span = topo.span(level, cpu);
            let all = shared.entry(span).or_insert_with(|| groups_of(topo, child, &span)).clone();
            let first = all.iter().position(|g| g.cpus.contains(cpu)).expect("cpu in its own span");
            let mut d = Domain::new(kind, topo.nr_cpus());
            d.span = span;
            let single = all.iter().all(|g| g.members.len() == 1);
            d.groups = GroupList { all, first, single };
            if style == Style::Linux66 {
                let w = span.count() as u64;
                d.min_interval_ms = w;
                d.max_interval_ms = 2 * w;
                d.balance_interval_ms = w;
                d.busy_factor = 16;
                d.imbalance_pct = if kind == DomainKind::Sibling { 110 } else { 117 };
                d.cache_nice_tries = match kind {
                    DomainKind::Sibling => 0,
                    DomainKind::Mc => 1,
                    DomainKind::Cpu => 0,
                    DomainKind::Node => 2,
                };
                // No cpu_load[] in 6.x: every balancing decision reads the current load.
                (d.busy_idx, d.idle_idx, d.newidle_idx, d.wake_idx, d.forkexec_idx) = (0, 0, 0, 0, 0);
            }
            out[cpu.idx()].push(d);
        }
        child = level;
    }
    out
}

/// The groups of a domain spanning `span`: the distinct `child`-level spans of its CPUs, ordered by
/// first CPU.
fn groups_of(topo: &Topology, child: Level, span: &CpuSet) -> Arc<[Group]> {
    let mut seen: HashSet<CpuSet> = HashSet::new();
    let mut groups: Vec<CpuSet> = Vec::new();
    for c in span.iter() {
        let g = topo.span(child, c);
        if seen.insert(g) {
            groups.push(g);
        }
    }
    groups.sort_by_key(|g| g.first().map(|c| c.0));
    groups
        .into_iter()
        .map(|g| Group {
            power: g.iter().map(|c| cpu_power(topo, c)).sum(),
            members: g.iter().collect(),
            first: g.first().expect("a group has CPUs"),
            cpus: g,
        })
        .collect()
}

/// The per-domain gate of `rebalance_domains` as the O(1) and HTFS balancers use it: whether domain `d`
/// of a CPU balances now (it balances at all; newly idle balancing is on for it; its interval, times
/// `busy_factor` on a busy CPU, has passed since its last balance at `jiffies` ticks of `hz`). When it
/// does, its last balance is set to now and the `cpu_load[]` index for this kind of balance returned.
pub(crate) fn due(d: &mut Domain, jiffies: u64, hz: u64, idle: bool, newly: bool) -> Option<usize> {
    if d.flags & SD_LOAD_BALANCE == 0 || (newly && d.flags & SD_BALANCE_NEWIDLE == 0) {
        return None;
    }
    if !newly {
        let mut interval = d.balance_interval_ms;
        if !idle {
            interval *= d.busy_factor;
        }
        if jiffies < d.last_balance + (interval * hz).div_ceil(1000).max(1) {
            return None;
        }
        d.last_balance = jiffies;
    }
    Some(match (newly, idle) {
        (true, _) => d.newidle_idx,
        (false, true) => d.idle_idx,
        (false, false) => d.busy_idx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xeon_domains() {
        let t = Topology::symmetric(2, 1, 1, 4, 2).unwrap();
        let d = build(&t, true, CpuId(3), Style::Linux2638);
        let kinds: Vec<_> = d.iter().map(|x| x.kind).collect();
        assert_eq!(kinds, vec![DomainKind::Sibling, DomainKind::Mc, DomainKind::Node]);
        assert_eq!(d[0].groups.len(), 2);
        assert_eq!(d[0].groups[0].cpus, CpuSet::single(CpuId(3)));
        assert_eq!(d[0].groups[0].power, 589);
        assert_eq!(d[1].groups.len(), 4);
        assert!(d[1].groups[0].cpus.contains(CpuId(3)));
        assert_eq!(d[2].groups.len(), 2);
        assert_eq!(d[2].groups[0].power, 8 * 589);
        assert_eq!((d[2].min_interval_ms, d[2].busy_factor, d[2].imbalance_pct), (8, 32, 125));
    }

    #[test]
    fn smp_without_numa_is_one_cpu_domain() {
        let t = Topology::symmetric(4, 1, 1, 1, 1).unwrap();
        let d = build(&t, false, CpuId(0), Style::Linux2638);
        let e = build(&t, false, CpuId(0), Style::Linux66);
        assert_eq!(
            (e[0].min_interval_ms, e[0].max_interval_ms, e[0].busy_factor, e[0].imbalance_pct),
            (4, 8, 16, 117)
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].kind, DomainKind::Cpu);
        assert_eq!(d[0].groups.len(), 4);
    }
}
