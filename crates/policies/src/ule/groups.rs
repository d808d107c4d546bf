//! ULE's view of the machine: a tree of CPU groups (`struct cpu_group`, sys/kern/subr_smp.c) and the
//! load searches over it (`cpu_search`, `sched_lowest`, `sched_highest` in sys/kern/sched_ule.c).
//!
//! The tree is built from the topology the way FreeBSD's x86 code shapes it: the root spans the
//! machine with no shared cache (`CG_SHARE_NONE`, level 0); below it socket and NUMA-node groups
//! (level 0), last-level-cache groups (`CG_SHARE_L3`, level 3) and SMT groups (`CG_FLAG_THREAD`). A
//! group with the same CPUs as its parent is not created (FreeBSD collapses such groups; the parent
//! then carries the cache level), nor is a group of one CPU. The level matters to `SCHED_AFFINITY`: a thread stays affine to a level-3 group
//! for 3 x `affinity` hz ticks after it last ran.
//!
//! The searches compare whole paths: at each group the child with the least (or most) total load wins,
//! and within it the search recurses, so the answer is the least loaded CPU on the least loaded path,
//! not necessarily the least loaded CPU. Each CPU's load counts 256 per thread, 64 less for the
//! preferred CPU, and a pseudo-random 0..63 (FreeBSD's per-CPU `randomval` LCG) breaks ties among the
//! candidates of a group.

use schedlab_core::{CpuId, CpuSet, Level, Topology};

/// One CPU group.
#[derive(Clone, Debug)]
pub struct Group {
    /// Its CPUs.
    pub mask: CpuSet,
    /// `cg_level`: 0 (no shared cache), 2 (SMT core) or 3 (shared last-level cache).
    pub level: i64,
    /// `CG_FLAG_THREAD`: SMT siblings.
    pub thread: bool,
    /// The enclosing group.
    pub parent: Option<usize>,
    children: Vec<usize>,
    /// CPUs of this group in none of its children, ascending.
    own: Vec<CpuId>,
}

/// The group tree, root first.
#[derive(Clone, Debug)]
pub struct Groups {
    /// All groups; index 0 is the root (`cpu_top`).
    pub groups: Vec<Group>,
    /// `tdq_cg`: the smallest group holding each CPU.
    pub leaf: Vec<usize>,
}

/// What a search reads of each CPU's queue.
#[derive(Clone, Copy)]
pub struct Loads<'a> {
    /// `tdq_load`: threads running or queued.
    pub load: &'a [i64],
    /// `tdq_transferable`: threads queued (not running).
    pub xfer: &'a [i64],
    /// `tdq_lowpri`: the best priority on the CPU (255 when idle).
    pub lowpri: &'a [u8],
}

/// `sched_lowest` arguments.
#[derive(Clone, Copy, Debug)]
pub struct LowQuery {
    /// Allowed CPUs.
    pub mask: CpuSet,
    /// Only CPUs whose `lowpri` is worse (greater) than this; -1 accepts any.
    pub pri: i32,
    /// Only CPUs with at most this load.
    pub max_load: i64,
    /// The CPU to favour (64 off its load).
    pub prefer: CpuId,
}

/// The per-CPU `randomval` step: `x = x * 69069 + 5`, then the top 6 bits.
fn next_rnd(x: &mut u32) -> i64 {
    *x = x.wrapping_mul(69069).wrapping_add(5);
    (*x >> 26) as i64
}

impl Groups {
    /// Builds the tree for `topo`.
    pub fn build(topo: &Topology) -> Groups {
        let all = topo.all();
        let mut groups =
            vec![Group { mask: all, level: 0, thread: false, parent: None, children: vec![], own: vec![] }];
        let mut leaf = vec![0usize; topo.nr_cpus()];
        for level in [Level::Socket, Level::Node, Level::Llc, Level::Smt] {
            for cpu in topo.cpus() {
                let span = topo.span(level, cpu);
                let parent = leaf[cpu.idx()];
                if span.count() <= 1 {
                    continue;
                }
                if span == groups[parent].mask {
                    // The same CPUs: no new group, but the existing one shares this cache too.
                    if level == Level::Llc {
                        groups[parent].level = 3;
                    }
                    continue;
                }
                let g = groups.len();
                groups.push(Group {
                    mask: span,
                    level: match level {
                        Level::Llc => 3,
                        Level::Smt => 2,
                        _ => 0,
                    },
                    thread: level == Level::Smt,
                    parent: Some(parent),
                    children: vec![],
                    own: vec![],
                });
                groups[parent].children.push(g);
                for c in span.iter() {
                    leaf[c.idx()] = g;
                }
            }
        }
        for g in 0..groups.len() {
            let mut rest = groups[g].mask;
            for &ch in &groups[g].children.clone() {
                for c in groups[ch].mask.iter() {
                    rest.remove(c);
                }
            }
            groups[g].own = rest.iter().collect();
        }
        Groups { groups, leaf }
    }

    /// The groups from `cpu`'s smallest group up to the root.
    pub fn ancestors(&self, cpu: CpuId) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(self.leaf[cpu.idx()]), |&g| self.groups[g].parent)
    }

    /// `sched_lowest(cg, mask, pri, maxload, prefer)`: the least loaded acceptable CPU on the least
    /// loaded path. `rnd` is the searching CPU's `randomval`.
    pub fn lowest(&self, g: usize, loads: Loads, q: &LowQuery, rnd: &mut u32) -> Option<CpuId> {
        self.search_lowest(g, loads, q, rnd).1.map(|(c, _)| c)
    }

    /// `sched_highest(cg, mask, minload)`: the most loaded CPU with at least `min_load` threads and a
    /// queued one, on the most loaded path.
    pub fn highest(
        &self,
        g: usize,
        loads: Loads,
        mask: CpuSet,
        min_load: i64,
        rnd: &mut u32,
    ) -> Option<CpuId> {
        self.search_highest(g, loads, mask, min_load, rnd).1.map(|(c, _)| c)
    }

    /// Returns the group's total load and the best candidate with its randomised load.
    fn search_lowest(&self, g: usize, l: Loads, q: &LowQuery, rnd: &mut u32) -> (i64, Option<(CpuId, i64)>) {
        let group = &self.groups[g];
        let mut total = 0;
        let mut best: Option<(CpuId, i64)> = None;
        let mut best_path = i64::MAX;
        let mut consider = |path: i64, cand: Option<(CpuId, i64)>, best: &mut Option<(CpuId, i64)>| {
            if let Some((c, cl)) = cand {
                if path < best_path || (path == best_path && best.is_some_and(|(_, bl)| cl < bl)) {
                    best_path = path;
                    *best = Some((c, cl));
                }
            }
        };
        // FreeBSD walks the children last to first, then the remaining CPUs lowest first.
        for &ch in group.children.iter().rev() {
            let (load, cand) = self.search_lowest(ch, l, q, rnd);
            total += load;
            consider(load, cand, &mut best);
        }
        for &cpu in &group.own {
            let i = cpu.idx();
            let mut load = l.load[i] * 256;
            let r = next_rnd(rnd);
            if cpu == q.prefer {
                load -= 64;
            }
            let ok = l.lowpri[i] as i32 > q.pri && l.load[i] <= q.max_load && q.mask.contains(cpu);
            total += load;
            consider(load, ok.then_some((cpu, load - r)), &mut best);
        }
        (total, best)
    }

    fn search_highest(
        &self,
        g: usize,
        l: Loads,
        mask: CpuSet,
        min_load: i64,
        rnd: &mut u32,
    ) -> (i64, Option<(CpuId, i64)>) {
        let group = &self.groups[g];
        let mut total = 0;
        let mut best: Option<(CpuId, i64)> = None;
        let mut best_path = i64::MIN;
        let mut consider = |path: i64, cand: Option<(CpuId, i64)>, best: &mut Option<(CpuId, i64)>| {
            if let Some((c, cl)) = cand {
                if path > best_path || (path == best_path && best.is_some_and(|(_, bl)| cl > bl)) {
                    best_path = path;
                    *best = Some((c, cl));
                }
            }
        };
        for &ch in group.children.iter().rev() {
            let (load, cand) = self.search_highest(ch, l, mask, min_load, rnd);
            total += load;
            consider(load, cand, &mut best);
        }
        for &cpu in &group.own {
            let i = cpu.idx();
            let load = l.load[i] * 256;
            let r = next_rnd(rnd);
            let ok = l.load[i] >= min_load && l.xfer[i] > 0 && mask.contains(cpu);
            total += load;
            consider(load, ok.then_some((cpu, load - r)), &mut best);
        }
        (total, best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_follows_sockets_caches_and_smt() {
        // 2 sockets x 4 cores x 2 threads, one LLC per socket (the Xeon E5520 pair).
        let t = Topology::symmetric(2, 1, 1, 4, 2).unwrap();
        let g = Groups::build(&t);
        // Root, 2 LLC groups (the socket spans equal them and collapse into them), 8 SMT cores.
        assert_eq!(g.groups.len(), 1 + 2 + 8);
        let llc = g.groups[0].children.clone();
        assert_eq!(llc.len(), 2);
        assert!(llc.iter().all(|&x| g.groups[x].level == 3 && g.groups[x].mask.count() == 8));
        let leaf = &g.groups[g.leaf[5]];
        assert!(leaf.thread && leaf.mask.count() == 2 && leaf.mask.contains(CpuId(5)));
        assert_eq!(g.ancestors(CpuId(5)).count(), 3);
        // A flat machine is one group holding every CPU itself.
        let f = Groups::build(&Topology::flat(4));
        assert_eq!(f.groups.len(), 1);
        assert_eq!(f.groups[0].own.len(), 4);
    }

    #[test]
    fn lowest_takes_the_least_loaded_path_then_the_least_loaded_cpu() {
        // Two LLCs of two CPUs: loads [0, 5 | 1, 1]. CPU 0 is the least loaded, but its LLC (5) is
        // busier than the other (2), so the path search answers CPU 2 or 3.
        let t = Topology::symmetric(2, 1, 1, 2, 1).unwrap();
        let g = Groups::build(&t);
        let load = [0, 5, 1, 1];
        let loads = Loads { load: &load, xfer: &[0, 4, 0, 0], lowpri: &[255, 150, 150, 150] };
        let q = LowQuery { mask: t.all(), pri: -1, max_load: i64::MAX, prefer: CpuId(3) };
        let mut rnd = 1;
        assert_eq!(g.lowest(0, loads, &q, &mut rnd), Some(CpuId(3)), "the preferred one wins the tie");
        // Only idle CPUs (lowpri above every timeshare priority): CPU 0.
        let q = LowQuery { pri: 223, ..q };
        assert_eq!(g.lowest(0, loads, &q, &mut rnd), Some(CpuId(0)));
        // The busiest CPU with something queued.
        assert_eq!(g.highest(0, loads, t.all(), 1, &mut rnd), Some(CpuId(1)));
        let mut mask = t.all();
        mask.remove(CpuId(1));
        assert_eq!(g.highest(0, loads, mask, 1, &mut rnd), None, "nothing else is queued");
    }
}
