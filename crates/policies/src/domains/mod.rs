//! Scheduling domains and groups: the structure every sched-domain balancer in schedlab walks (CFS
//! and EEVDF, AVEC on CFS, HTFS, and the O(1) scheduler), built from the machine topology as the
//! kernel builds it, with each kernel version's parameters ([`params`], side by side).
//!
//! **Linux 2.6.38** (kernel/sched.c `__build_sched_domains`, `cpu_attach_domain`): every CPU gets,
//! bottom-up, a SIBLING domain over its SMT siblings (groups: single CPUs), an MC domain over the CPUs
//! sharing its last-level cache (`cpu_coregroup_mask`; groups: SMT cores), a CPU domain over its NUMA
//! node (`cpumask_of_node`; the whole machine without NUMA; groups: LLCs), on a NUMA machine a NODE
//! domain over its node and the nearest nodes up to 16 (`sched_domain_node_span`; groups: nodes), and
//! an ALLNODES domain over everything when the machine has more than 16 times this node's CPUs (groups:
//! nodes). Then `sd_degenerate` and `sd_parent_degenerate` remove the levels that add nothing (a
//! single-CPU span, a parent with the child's span and only flags the child has once the group flags of
//! a one-group parent are discounted). A machine with several nodes per socket (Opteron 6172) thus gets
//! one NODE level over all its nodes, as 2.6.38 built it.
//!
//! **Linux 6.6** (kernel/sched/topology.c `build_sched_domains`, x86's `x86_topology`): one level per
//! topology level that grows the span (SMT -> SIBLING, LLC -> MC, node -> CPU/"DIE", each further
//! NUMA distance -> NODE), with `sd_init`'s parameters ([`linux_66`]); a NUMA level keeps FORK, EXEC
//! and WAKE_AFFINE while its distance is within `RECLAIM_DISTANCE` (always, with the distances
//! schedlab's topologies give: 16 within a socket, 20 across). A group's flags are those of the
//! domain below it (`sg->flags = child->flags`; 0 for a single CPU), and `imb_numa_nr` is set on
//! each NUMA level as `build_sched_domains` sets it ([`imb_numa_nr`]).

mod params;
pub use params::{linux_2622, linux_2638, linux_66, SdInit};

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
/// `SD_POWERSAVINGS_BALANCE` (never set: power-savings balancing is off by default).
pub const SD_POWERSAVINGS_BALANCE: u32 = 0x0100;
/// `SD_SHARE_PKG_RESOURCES`.
pub const SD_SHARE_PKG_RESOURCES: u32 = 0x0200;
/// `SD_SERIALIZE`.
pub const SD_SERIALIZE: u32 = 0x0400;
/// `SD_PREFER_SIBLING`.
pub const SD_PREFER_SIBLING: u32 = 0x1000;
/// `SD_ASYM_CPUCAPACITY` (6.x): the domain spans CPUs of different capacities.
pub const SD_ASYM_CPUCAPACITY: u32 = 0x40000;
/// `SD_ASYM_CPUCAPACITY_FULL` (6.x): ... and every capacity the machine has.
pub const SD_ASYM_CPUCAPACITY_FULL: u32 = 0x80000;
/// `SD_NUMA` (6.6: a level that crosses NUMA nodes).
pub const SD_NUMA: u32 = 0x4000;
/// 2.6.22's `SD_WAKE_IDLE`: a wakeup on a busy CPU goes to an idle CPU of this domain (`wake_idle`).
/// (2.6.22 numbered its flags differently; schedlab gives the two flags 2.6.38 dropped bits of their
/// own.)
pub const SD_WAKE_IDLE: u32 = 0x10000;
/// 2.6.22's `SD_WAKE_BALANCE`: passive balancing at wakeup (`try_to_wake_up`).
pub const SD_WAKE_BALANCE: u32 = 0x20000;

/// `SCHED_LOAD_SCALE`, also the power of one full CPU.
pub const SCHED_LOAD_SCALE: u64 = 1024;
/// `SCHED_LOAD_SCALE` of Linux 2.6.22 (`smpnice`: a nice-0 task's load weight and one CPU's power).
pub const SCHED_LOAD_SCALE_2622: u64 = 128;
/// `smt_gain` of SIBLING domains: two threads are worth 1178/1024 of a core.
pub const SMT_GAIN: u64 = 1178;

/// Which kernel's domains to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Linux 2.6.22: the 2.6.38 hierarchy with the 2.6.22 `SD_*_INIT` parameters ([`linux_2622`])
    /// and `init_sched_groups_power`'s group powers: one CPU's worth (128) for a group at a level
    /// whose child domain shares CPU power or package resources (an SMT core, an LLC) or is the
    /// lowest level, so a package holds one task before its neighbour is asked to; a NUMA node group
    /// sums its packages.
    Linux2622,
    /// Linux 2.6.38: `__build_sched_domains` with the `SD_*_INIT` parameters ([`linux_2638`]).
    Linux2638,
    /// Linux 6.6: one level per topology level, `sd_init` parameters ([`linux_66`]).
    Linux66,
}

/// The Linux domain types (`enum sched_domain_level` of 2.6.38).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DomainKind {
    /// SMT siblings.
    Sibling,
    /// Multi-core: CPUs sharing a last-level cache.
    Mc,
    /// Physical package / SMP: a NUMA node (the whole machine without NUMA).
    Cpu,
    /// NUMA nodes.
    Node,
    /// All nodes, above NODE on machines with more than 16 nodes' worth of CPUs (2.6.38).
    AllNodes,
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
    /// Its parameters (an `SD_*_INIT`, or 6.6's `sd_init`).
    pub p: SdInit,
    /// `balance_interval`, ms (backs off exponentially while balanced).
    pub balance_interval_ms: u64,
    /// `last_balance`, in jiffies.
    pub last_balance: u64,
    /// `nr_balance_failed`.
    pub nr_balance_failed: u32,
    /// `imb_numa_nr` (6.6; 0 for 2.6.38 and below the first level above the LLC).
    pub imb_numa_nr: u64,
    /// `max_newidle_lb_cost` (6.6+): the longest newly idle balance of this domain lately, ns
    /// (decays by 253/256 a second).
    pub max_newidle_lb_cost: u64,
    /// `last_decay_max_lb_cost`, in jiffies.
    pub last_decay_max_lb_cost: u64,
    /// `newidle_call` (NI_RANDOM): newly idle balances considered, halved at 1024.
    pub newidle_call: u32,
    /// `newidle_success`: their successes, each weighted by the inverse of its chance to run.
    pub newidle_success: u32,
    /// `newidle_ratio`: successes per 1024 considered, as of the last halving.
    pub newidle_ratio: u32,
}

impl Domain {
    /// A domain of `kind` over `span` with `groups`, set up from `init`.
    fn new(kind: DomainKind, span: CpuSet, groups: GroupList, init: SdInit) -> Domain {
        Domain {
            kind,
            span,
            groups,
            p: init,
            balance_interval_ms: init.balance_interval_ms,
            last_balance: 0,
            nr_balance_failed: 0,
            imb_numa_nr: 0,
            max_newidle_lb_cost: 0,
            last_decay_max_lb_cost: 0,
            // sd_init: "50% success rate".
            newidle_call: 512,
            newidle_success: 256,
            newidle_ratio: 512,
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

/// The domains of every CPU, bottom-up, indexed by CPU. Groups are built once per distinct level and
/// span and shared (see [`GroupList`]).
pub fn build_all(topo: &Topology, numa: bool, style: Style) -> Vec<Vec<Domain>> {
    match style {
        Style::Linux2638 => {
            build_2638(topo, numa, linux_2638, |_, g| g.iter().map(|c| cpu_power(topo, c)).sum())
        }
        Style::Linux2622 => build_2638(topo, numa, linux_2622, |kind, g| power_2622(topo, kind, g)),
        Style::Linux66 => build_66(topo, numa),
    }
}

/// The groups of one level: shared between CPUs whose domain at that level has the same span.
#[derive(Default)]
struct GroupCache(HashMap<(DomainKind, CpuSet), Arc<[Group]>>);

impl GroupCache {
    /// The walk of `cpu` over the groups of a `kind` domain spanning `span`, each group being the
    /// `child` span of its CPUs.
    fn list(
        &mut self,
        kind: DomainKind,
        span: CpuSet,
        cpu: CpuId,
        child: impl Fn(CpuId) -> CpuSet,
        power: &dyn Fn(DomainKind, &CpuSet) -> u64,
    ) -> GroupList {
        let all =
            self.0.entry((kind, span)).or_insert_with(|| groups_of(&span, child, |g| power(kind, g))).clone();
        let first = all.iter().position(|g| g.cpus.contains(cpu)).expect("cpu in its own span");
        let single = all.iter().all(|g| g.members.len() == 1);
        GroupList { all, first, single }
    }
}

/// `SD_NODES_PER_DOMAIN`: a 2.6.38 NODE domain spans at most this many nodes.
const SD_NODES_PER_DOMAIN: usize = 16;

/// `node_distance` as far as the topology tells it: 10 within a node, then farther for a node of
/// the same socket than for one of another socket (only the order matters to the builder).
fn node_distance(topo: &Topology, firsts: &[CpuId], a: usize, b: usize) -> u32 {
    match topo.level(firsts[a], firsts[b]) {
        Level::Same | Level::Smt | Level::Llc | Level::Node => 10,
        Level::Socket => 16,
        Level::Machine => 20,
    }
}

/// `sched_domain_node_span(node)`: the node and the `SD_NODES_PER_DOMAIN - 1` nodes nearest to it,
/// each next one found by `find_next_best_node` (the first of the nearest in index order from `node`).
fn node_span_2638(topo: &Topology, node_cpus: &[CpuSet], firsts: &[CpuId], node: usize) -> CpuSet {
    let n = node_cpus.len();
    let mut used = vec![false; n];
    used[node] = true;
    let mut span = node_cpus[node];
    for _ in 1..SD_NODES_PER_DOMAIN.min(n) {
        let mut best = None;
        let mut min = u32::MAX;
        for i in 0..n {
            let cand = (node + i) % n;
            if used[cand] {
                continue;
            }
            let d = node_distance(topo, firsts, node, cand);
            if d < min {
                min = d;
                best = Some(cand);
            }
        }
        let Some(b) = best else { break };
        used[b] = true;
        span = span.iter().chain(node_cpus[b].iter()).collect();
    }
    span
}

/// `sd_degenerate`: a single-CPU domain, or one whose group-using flags have only one group and that
/// does not wake affine.
fn sd_degenerate(d: &Domain) -> bool {
    const NEED_GROUPS: u32 = SD_LOAD_BALANCE
        | SD_BALANCE_NEWIDLE
        | SD_BALANCE_FORK
        | SD_BALANCE_EXEC
        | SD_SHARE_CPUPOWER
        | SD_SHARE_PKG_RESOURCES;
    if d.span.count() == 1 {
        return true;
    }
    if d.p.flags & NEED_GROUPS != 0 && d.groups.len() > 1 {
        return false;
    }
    d.p.flags & SD_WAKE_AFFINE == 0
}

/// `sd_parent_degenerate(sd, parent)`: the parent adds nothing over its child.
fn sd_parent_degenerate(child: &Domain, parent: &Domain, nr_nodes: usize) -> bool {
    if sd_degenerate(parent) {
        return true;
    }
    if child.span != parent.span {
        return false;
    }
    let mut pflags = parent.p.flags;
    if parent.groups.len() == 1 {
        pflags &= !(SD_LOAD_BALANCE
            | SD_BALANCE_NEWIDLE
            | SD_BALANCE_FORK
            | SD_BALANCE_EXEC
            | SD_SHARE_CPUPOWER
            | SD_SHARE_PKG_RESOURCES);
        if nr_nodes == 1 {
            pflags &= !SD_SERIALIZE;
        }
    }
    !child.p.flags & pflags == 0
}

/// `cpu_attach_domain`'s pruning: drops every parent that `sd_parent_degenerate` finds degenerate,
/// then the base domain if it is degenerate itself.
fn prune_degenerate(mut doms: Vec<Domain>, nr_nodes: usize) -> Vec<Domain> {
    let mut i = 0;
    while i + 1 < doms.len() {
        if sd_parent_degenerate(&doms[i], &doms[i + 1], nr_nodes) {
            doms.remove(i + 1);
        } else {
            i += 1;
        }
    }
    if doms.first().is_some_and(sd_degenerate) {
        doms.remove(0);
    }
    doms
}

/// Linux 2.6.38's `__build_sched_domains` (2.6.22's `build_sched_domains` builds the same levels)
/// followed by `cpu_attach_domain` for every CPU, with the version's parameters and group power.
fn build_2638(
    topo: &Topology,
    numa: bool,
    init_of: fn(DomainKind) -> SdInit,
    power: impl Fn(DomainKind, &CpuSet) -> u64,
) -> Vec<Vec<Domain>> {
    let power = &power;
    let ncpus = topo.nr_cpus();
    // Nodes in index order; without NUMA the whole machine is one node.
    let node_of = |c: CpuId| if numa { topo.place(c).node as usize } else { 0 };
    let nr_nodes = if numa { topo.counts().2 } else { 1 };
    let mut node_cpus = vec![CpuSet::empty(); nr_nodes];
    for c in topo.cpus() {
        node_cpus[node_of(c)].insert(c);
    }
    let firsts: Vec<CpuId> = node_cpus.iter().map(|s| s.first().expect("a node has CPUs")).collect();
    let node_spans: Vec<CpuSet> =
        (0..nr_nodes).map(|n| node_span_2638(topo, &node_cpus, &firsts, n)).collect();
    let mut cache = GroupCache::default();
    let mut out = Vec::with_capacity(ncpus);
    for cpu in topo.cpus() {
        let node = node_of(cpu);
        let nodemask = node_cpus[node];
        let mut doms = Vec::with_capacity(5);
        let smt = topo.span(Level::Smt, cpu);
        let groups = cache.list(DomainKind::Sibling, smt, cpu, CpuSet::single, power);
        doms.push(Domain::new(DomainKind::Sibling, smt, groups, init_of(DomainKind::Sibling)));
        let llc = topo.span(Level::Llc, cpu);
        let groups = cache.list(DomainKind::Mc, llc, cpu, |c| topo.span(Level::Smt, c), power);
        doms.push(Domain::new(DomainKind::Mc, llc, groups, init_of(DomainKind::Mc)));
        let groups = cache.list(DomainKind::Cpu, nodemask, cpu, |c| topo.span(Level::Llc, c), power);
        doms.push(Domain::new(DomainKind::Cpu, nodemask, groups, init_of(DomainKind::Cpu)));
        if numa {
            let node_group = |c: CpuId| node_cpus[node_of(c)];
            let span = node_spans[node];
            let groups = cache.list(DomainKind::Node, span, cpu, node_group, power);
            doms.push(Domain::new(DomainKind::Node, span, groups, init_of(DomainKind::Node)));
            if ncpus > SD_NODES_PER_DOMAIN * nodemask.count() {
                let all = topo.all();
                let groups = cache.list(DomainKind::AllNodes, all, cpu, node_group, power);
                let mut init = init_of(DomainKind::AllNodes);
                init.max_interval_ms = 64 * ncpus as u64;
                doms.push(Domain::new(DomainKind::AllNodes, all, groups, init));
            }
        }
        out.push(prune_degenerate(doms, nr_nodes));
    }
    out
}

/// The Linux 6.6 domains: one per topology level that grows the span, with `sd_init` parameters.
fn build_66(topo: &Topology, numa: bool) -> Vec<Vec<Domain>> {
    let power_2638 = |_: DomainKind, g: &CpuSet| g.iter().map(|c| cpu_power(topo, c)).sum();
    let levels = topo.domain_levels();
    let mut out: Vec<Vec<Domain>> = topo.cpus().map(|_| Vec::with_capacity(levels.len())).collect();
    let mut cache = GroupCache::default();
    let mut child = Level::Same;
    for level in levels {
        let kind = match level {
            Level::Smt => DomainKind::Sibling,
            Level::Llc => DomainKind::Mc,
            Level::Node => DomainKind::Cpu,
            Level::Socket | Level::Machine if numa => DomainKind::Node,
            _ => DomainKind::Cpu,
        };
        for cpu in topo.cpus() {
            let span = topo.span(level, cpu);
            let groups = cache.list(kind, span, cpu, |c| topo.span(child, c), &power_2638);
            let distance = if kind == DomainKind::Node {
                span.iter().map(|c| distance_66(topo, cpu, c)).max().unwrap_or(10)
            } else {
                10
            };
            let init = linux_66(kind, span.count() as u64, distance);
            out[cpu.idx()].push(Domain::new(kind, span, groups, init));
        }
        child = level;
    }
    for doms in &mut out {
        let imbs = imb_numa_nr(doms);
        for (d, imb) in doms.iter_mut().zip(imbs) {
            d.imb_numa_nr = imb;
        }
    }
    out
}

/// `init_sched_groups_power` of 2.6.22 for a group of a `kind` domain: one CPU's power (128) at the lowest level and
/// where the child level shares CPU power or package resources (SIBLING, MC and CPU: the groups of
/// MC are SMT cores, those of CPU are LLCs); a NUMA group (NODE, ALLNODES) adds up its packages
/// (`init_numa_sched_groups_power`: each distinct CPU-level group, an LLC, is worth 128).
fn power_2622(topo: &Topology, kind: DomainKind, group: &CpuSet) -> u64 {
    match kind {
        DomainKind::Sibling | DomainKind::Mc | DomainKind::Cpu => SCHED_LOAD_SCALE_2622,
        DomainKind::Node | DomainKind::AllNodes => {
            let llcs: HashSet<CpuSet> = group.iter().map(|c| topo.span(Level::Llc, c)).collect();
            SCHED_LOAD_SCALE_2622 * llcs.len() as u64
        }
    }
}

/// `node_distance(cpu_to_node(a), cpu_to_node(b))` as schedlab's topologies give it.
fn distance_66(topo: &Topology, a: CpuId, b: CpuId) -> u32 {
    match topo.level(a, b) {
        Level::Same | Level::Smt | Level::Llc | Level::Node => 10,
        Level::Socket => 16,
        Level::Machine => 20,
    }
}

/// `sd->imb_numa_nr` of 6.6 for every domain of one CPU (bottom-up), as `build_sched_domains` sets
/// it: on the first level above the last-level cache (the child shares package resources, it does
/// not), the number of LLCs it spans (a span's eighth when it spans one LLC), at least 1; on the
/// levels above, that number times how many of the first NUMA level's spans they hold. 0 elsewhere.
pub fn imb_numa_nr(doms: &[Domain]) -> Vec<u64> {
    let mut out = vec![0; doms.len()];
    let mut imb = 0u64;
    let mut imb_span = 1u64;
    for i in 0..doms.len() {
        let Some(child) = i.checked_sub(1).map(|c| &doms[c]) else { continue };
        let d = &doms[i];
        if child.p.flags & SD_SHARE_PKG_RESOURCES != 0 && d.p.flags & SD_SHARE_PKG_RESOURCES == 0 {
            let nr_llcs = (d.span_weight() / child.span_weight()) as u64;
            imb = if nr_llcs == 1 { d.span_weight() as u64 >> 3 } else { nr_llcs }.max(1);
            out[i] = imb;
            let top = doms[i + 1..].iter().find(|p| p.p.flags & SD_NUMA != 0);
            imb_span = top.map_or(d.span_weight(), |p| p.span_weight()) as u64;
        } else if imb > 0 {
            let factor = (d.span_weight() as u64 / imb_span).max(1);
            out[i] = imb * factor;
        }
    }
    out
}

/// The groups of a domain spanning `span`: the distinct `child` spans of its CPUs (within `span`),
/// ordered by first CPU.
fn groups_of(span: &CpuSet, child: impl Fn(CpuId) -> CpuSet, power: impl Fn(&CpuSet) -> u64) -> Arc<[Group]> {
    let mut seen: HashSet<CpuSet> = HashSet::new();
    let mut groups: Vec<CpuSet> = Vec::new();
    for c in span.iter() {
        let g = child(c).and(span);
        if seen.insert(g) {
            groups.push(g);
        }
    }
    groups.sort_by_key(|g| g.first().map(|c| c.0));
    groups
        .into_iter()
        .map(|g| Group {
            power: power(&g),
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
    if d.p.flags & SD_LOAD_BALANCE == 0 || (newly && d.p.flags & SD_BALANCE_NEWIDLE == 0) {
        return None;
    }
    if !newly {
        let mut interval = d.balance_interval_ms;
        if !idle {
            interval *= d.p.busy_factor;
        }
        if jiffies < d.last_balance + (interval * hz).div_ceil(1000).max(1) {
            return None;
        }
        d.last_balance = jiffies;
    }
    Some(match (newly, idle) {
        (true, _) => d.p.newidle_idx,
        (false, true) => d.p.idle_idx,
        (false, false) => d.p.busy_idx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(d: &[Domain]) -> Vec<DomainKind> {
        d.iter().map(|x| x.kind).collect()
    }

    /// 2.6.22 (`init_sched_groups_power`): every group below NUMA weighs one CPU (128), whether a
    /// thread, an SMT core or an LLC of four threads; a NUMA node group adds up its LLCs. Only the
    /// NODE level balances at fork.
    #[test]
    fn linux_2622_group_powers_and_fork_balancing() {
        let t = Topology::symmetric(1, 1, 2, 2, 2).unwrap();
        let d = build(&t, false, CpuId(0), Style::Linux2622);
        assert_eq!(kinds(&d), vec![DomainKind::Sibling, DomainKind::Mc, DomainKind::Cpu]);
        for dom in &d {
            assert!(dom.groups.iter().all(|g| g.power == SCHED_LOAD_SCALE_2622), "{:?}", dom.kind);
            assert_eq!(dom.p.flags & SD_BALANCE_FORK, 0);
        }
        assert_eq!(d[2].groups.len(), 2);
        assert_eq!((d[1].p.newidle_idx, d[1].p.wake_idx, d[0].p.flags & SD_WAKE_IDLE), (2, 1, SD_WAKE_IDLE));
        let t = Topology::symmetric(2, 1, 2, 2, 1).unwrap();
        let d = build(&t, true, CpuId(0), Style::Linux2622);
        assert_eq!(kinds(&d), vec![DomainKind::Mc, DomainKind::Cpu, DomainKind::Node]);
        let powers: Vec<u64> = d[2].groups.iter().map(|g| g.power).collect();
        assert_eq!(powers, vec![256, 256]);
        assert_ne!(d[2].p.flags & SD_BALANCE_FORK, 0);
        // 2.6.38 on the same machine: each core is worth 1024, so a node of four is 4096.
        let e = build(&t, true, CpuId(0), Style::Linux2638);
        assert_eq!(e[2].groups.iter().map(|g| g.power).collect::<Vec<_>>(), vec![4096, 4096]);
    }

    #[test]
    fn xeon_domains() {
        // 2 sockets = 2 nodes x 4 cores x 2 threads: SIBLING, MC over the socket's LLC, then NODE.
        // The CPU domain (the node) has the MC span and one group: sd_parent_degenerate drops it.
        let t = Topology::symmetric(2, 1, 1, 4, 2).unwrap();
        let d = build(&t, true, CpuId(3), Style::Linux2638);
        assert_eq!(kinds(&d), vec![DomainKind::Sibling, DomainKind::Mc, DomainKind::Node]);
        assert_eq!(d[0].groups.len(), 2);
        assert_eq!(d[0].groups[0].cpus, CpuSet::single(CpuId(3)));
        assert_eq!(d[0].groups[0].power, 589);
        assert_eq!(d[1].groups.len(), 4);
        assert!(d[1].groups[0].cpus.contains(CpuId(3)));
        assert_eq!(d[2].groups.len(), 2);
        assert_eq!(d[2].groups[0].power, 8 * 589);
        assert_eq!((d[2].p.min_interval_ms, d[2].p.busy_factor, d[2].p.imbalance_pct), (8, 32, 125));
        // SD_MC_INIT carries sd_balance_for_mc_power() = SD_PREFER_SIBLING (include/linux/sched.h
        // with power savings off), which the NODE level's update_sd_lb_stats reads from its child.
        assert_ne!(d[1].p.flags & SD_PREFER_SIBLING, 0);
        // x86-64 SD_NODE_INIT: idle_idx = SD_IDLE_IDX = 2, cache_nice_tries = 2, busy_idx 3.
        assert_eq!(
            (d[2].p.busy_idx, d[2].p.idle_idx, d[2].p.newidle_idx, d[2].p.cache_nice_tries),
            (3, 2, 0, 2)
        );
        // SD_INIT starts every 2.6.38 level at balance_interval 1 ms, NODE included.
        assert!(d.iter().all(|x| x.balance_interval_ms == 1));
    }

    #[test]
    fn smp_without_numa_is_one_cpu_domain() {
        let t = Topology::symmetric(4, 1, 1, 1, 1).unwrap();
        let d = build(&t, false, CpuId(0), Style::Linux2638);
        let e = build(&t, false, CpuId(0), Style::Linux66);
        assert_eq!(
            (e[0].p.min_interval_ms, e[0].p.max_interval_ms, e[0].p.busy_factor, e[0].p.imbalance_pct),
            (4, 8, 16, 117)
        );
        assert_eq!(kinds(&d), vec![DomainKind::Cpu]);
        assert_eq!(d[0].groups.len(), 4);
    }

    #[test]
    fn every_2638_init_field_matches_the_headers() {
        // (min, max, busy_factor, imbalance_pct, cache_nice_tries, busy, idle, newidle, wake, forkexec)
        // from include/linux/topology.h (SIBLING, MC, CPU, ALLNODES) and arch/x86/include/asm/topology.h
        // (NODE, CONFIG_X86_64) of 2.6.38.
        let rows = [
            (DomainKind::Sibling, (1, 2, 64, 110, 0, 0, 0, 0, 0, 0)),
            (DomainKind::Mc, (1, 4, 64, 125, 1, 2, 0, 0, 0, 0)),
            (DomainKind::Cpu, (1, 4, 64, 125, 1, 2, 1, 0, 0, 0)),
            (DomainKind::Node, (8, 32, 32, 125, 2, 3, 2, 0, 0, 0)),
            (DomainKind::AllNodes, (64, 64, 128, 133, 1, 3, 3, 0, 0, 0)),
        ];
        for (kind, want) in rows {
            let i = linux_2638(kind);
            let got = (
                i.min_interval_ms,
                i.max_interval_ms,
                i.busy_factor,
                i.imbalance_pct,
                i.cache_nice_tries,
                i.busy_idx,
                i.idle_idx,
                i.newidle_idx,
                i.wake_idx,
                i.forkexec_idx,
            );
            assert_eq!(got, want, "{kind:?}");
        }
        let base = SD_LOAD_BALANCE | SD_BALANCE_NEWIDLE | SD_BALANCE_EXEC | SD_BALANCE_FORK | SD_WAKE_AFFINE;
        assert_eq!(linux_2638(DomainKind::Sibling).flags, base | SD_SHARE_CPUPOWER | SD_SHARE_PKG_RESOURCES);
        assert_eq!(linux_2638(DomainKind::Mc).flags, base | SD_SHARE_PKG_RESOURCES | SD_PREFER_SIBLING);
        assert_eq!(linux_2638(DomainKind::Cpu).flags, base | SD_PREFER_SIBLING);
        assert_eq!(linux_2638(DomainKind::Node).flags, base | SD_SERIALIZE);
        assert_eq!(
            linux_2638(DomainKind::AllNodes).flags,
            SD_LOAD_BALANCE | SD_BALANCE_NEWIDLE | SD_SERIALIZE
        );
    }

    #[test]
    fn nodes_inside_sockets_share_one_2638_node_level() {
        // Opteron 6172-like: 2 sockets x 2 nodes x 1 LLC x 6 cores. sched_domain_node_span takes up to
        // 16 nodes, so one NODE domain spans all four nodes (groups: the nodes), above MC; the CPU
        // domain (the node, one LLC) is degenerate. 6.6 builds one NUMA level per distance instead.
        let t = Topology::symmetric(2, 2, 1, 6, 1).unwrap();
        let d = build(&t, true, CpuId(7), Style::Linux2638);
        assert_eq!(kinds(&d), vec![DomainKind::Mc, DomainKind::Node]);
        assert_eq!(d[1].span, t.all());
        let groups: Vec<CpuSet> = d[1].groups.iter().map(|g| g.cpus).collect();
        assert_eq!(groups.len(), 4);
        assert!(groups[0].contains(CpuId(7)), "walk starts at the CPU's own node");
        assert_eq!(groups[1].first(), Some(CpuId(12)), "then the next node in index order");
        let e = build(&t, true, CpuId(7), Style::Linux66);
        assert_eq!(kinds(&e), vec![DomainKind::Mc, DomainKind::Node, DomainKind::Node]);
    }

    #[test]
    fn more_than_16_nodes_get_nearest_node_spans_and_an_allnodes_level() {
        // 20 nodes of 2 CPUs, 2 per socket. NODE spans this node and the 15 nearest: its socket mate
        // first (distance 16), then the others in index order from the node (distance 20), wrapping.
        // 40 CPUs > 16 x 2, so ALLNODES spans everything, with SD_ALLNODES_INIT's 64 x 40 ms maximum.
        let t = Topology::symmetric(10, 2, 1, 2, 1).unwrap();
        let cpu = CpuId(36); // node 18, socket 9 (mate: node 19)
        let d = build(&t, true, cpu, Style::Linux2638);
        assert_eq!(kinds(&d), vec![DomainKind::Mc, DomainKind::Node, DomainKind::AllNodes]);
        let nodes: Vec<u32> = d[1].groups.iter().map(|g| g.first.0 / 2).collect();
        let mut want = vec![18, 19];
        want.extend([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        let mut got_sorted = nodes.clone();
        got_sorted.sort_unstable();
        want.sort_unstable();
        assert_eq!(got_sorted, want);
        assert_eq!(d[1].span.count(), 32);
        assert_eq!(d[2].span, t.all());
        assert_eq!(d[2].groups.len(), 20);
        assert_eq!(
            (d[2].p.max_interval_ms, d[2].balance_interval_ms, d[2].p.busy_factor),
            (64 * 40, 64, 128)
        );
    }

    #[test]
    fn degenerate_rules_follow_the_flags() {
        // A parent with the child's span is kept when it has a flag the child lacks once its group
        // flags are discounted (one group): here CPU's SD_PREFER_SIBLING over an MC without it.
        let t = Topology::symmetric(1, 1, 1, 4, 1).unwrap();
        let all = t.all();
        let mut cache = GroupCache::default();
        let one = |_: DomainKind, _: &CpuSet| SCHED_LOAD_SCALE;
        let mc_groups = cache.list(DomainKind::Mc, all, CpuId(0), CpuSet::single, &one);
        let cpu_groups = cache.list(DomainKind::Cpu, all, CpuId(0), |_| all, &one);
        let mut mc_init = linux_2638(DomainKind::Mc);
        let cpu = Domain::new(DomainKind::Cpu, all, cpu_groups, linux_2638(DomainKind::Cpu));
        let mc = Domain::new(DomainKind::Mc, all, mc_groups.clone(), mc_init);
        assert!(sd_parent_degenerate(&mc, &cpu, 1));
        mc_init.flags &= !SD_PREFER_SIBLING;
        let mc_plain = Domain::new(DomainKind::Mc, all, mc_groups, mc_init);
        assert!(!sd_parent_degenerate(&mc_plain, &cpu, 1));
        // SD_SERIALIZE counts only on a machine with several nodes.
        let node = Domain::new(DomainKind::Node, all, cpu.groups.clone(), linux_2638(DomainKind::Node));
        assert!(sd_parent_degenerate(&mc, &node, 1));
        assert!(!sd_parent_degenerate(&mc, &node, 2));
    }
}
