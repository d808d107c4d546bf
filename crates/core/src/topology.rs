//! The machine topology: sockets > NUMA nodes > last-level-cache (LLC) domains > cores > SMT threads.
//!
//! Every logical CPU records which core, LLC, node and socket it belongs to. The topology answers the
//! two questions schedulers ask of hardware: how far apart two CPUs are ([`Level`], which sets the cost
//! of moving a task between them) and which CPUs share a level with a given CPU (the spans that Linux
//! scheduling domains and ULE's cache groups are built from).
//!
//! CPU numbering: [`Topology::symmetric`] numbers CPUs depth-first, so SMT siblings are adjacent
//! (CPU 0 and 1 are the two threads of core 0 on a machine with SMT). Linux often numbers siblings
//! `ncores` apart; the numbering changes no behaviour here because every policy looks at spans.

use crate::{CpuId, CpuSet};
use serde::{Deserialize, Serialize};

/// How close two CPUs are, from nearest to farthest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// The same logical CPU.
    Same,
    /// SMT siblings: two hardware threads of one core.
    Smt,
    /// Different cores sharing a last-level cache.
    Llc,
    /// Different LLCs in one NUMA node.
    Node,
    /// Different NUMA nodes in one socket (e.g. AMD Magny-Cours: two nodes per package).
    Socket,
    /// Different sockets.
    Machine,
}

impl Level {
    /// All levels from nearest to farthest.
    pub const ALL: [Level; 6] =
        [Level::Same, Level::Smt, Level::Llc, Level::Node, Level::Socket, Level::Machine];

    /// A short lower-case name (`smt`, `llc`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Level::Same => "same",
            Level::Smt => "smt",
            Level::Llc => "llc",
            Level::Node => "node",
            Level::Socket => "socket",
            Level::Machine => "machine",
        }
    }
}

/// Where one logical CPU sits in the hierarchy. All indices are machine-wide and dense from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlace {
    /// Physical core.
    pub core: u32,
    /// Last-level-cache domain.
    pub llc: u32,
    /// NUMA node.
    pub node: u32,
    /// Socket (physical package).
    pub socket: u32,
}

/// A topology that cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopologyError {
    /// No CPUs, or more than [`CpuSet::MAX_CPUS`].
    #[error("a machine needs 1 to {max} logical CPUs, this one has {got}")]
    CpuCount {
        /// CPUs asked for.
        got: usize,
        /// The limit.
        max: usize,
    },
    /// A core, LLC or node that straddles its parent level.
    #[error("cpu {cpu}: {what} {index} spans more than one {parent}")]
    NotNested {
        /// The offending CPU.
        cpu: u32,
        /// The level that is not nested.
        what: &'static str,
        /// Its index.
        index: u32,
        /// The level it should sit inside.
        parent: &'static str,
    },
    /// Indices that are not dense from 0.
    #[error("{what} indices must be dense from 0 (found {found} but only {count} distinct)")]
    NotDense {
        /// Which level.
        what: &'static str,
        /// The largest index.
        found: u32,
        /// How many distinct values.
        count: u32,
    },
}

/// The topology of a machine.
#[derive(Clone, Debug)]
pub struct Topology {
    places: Vec<CpuPlace>,
    core_span: Vec<CpuSet>,
    llc_span: Vec<CpuSet>,
    node_span: Vec<CpuSet>,
    socket_span: Vec<CpuSet>,
    all: CpuSet,
}

impl Topology {
    /// A regular machine: `sockets` x `nodes_per_socket` x `llcs_per_node` x `cores_per_llc` x
    /// `threads_per_core` logical CPUs, numbered depth-first.
    pub fn symmetric(
        sockets: u32,
        nodes_per_socket: u32,
        llcs_per_node: u32,
        cores_per_llc: u32,
        threads_per_core: u32,
    ) -> Result<Topology, TopologyError> {
        let mut places = Vec::new();
        let (mut core, mut llc, mut node) = (0, 0, 0);
        for socket in 0..sockets {
            for _ in 0..nodes_per_socket {
                for _ in 0..llcs_per_node {
                    for _ in 0..cores_per_llc {
                        for _ in 0..threads_per_core {
                            places.push(CpuPlace { core, llc, node, socket });
                        }
                        core += 1;
                    }
                    llc += 1;
                }
                node += 1;
            }
        }
        Topology::from_places(places)
    }

    /// A machine with one socket, node and LLC and `n` single-threaded cores.
    pub fn flat(n: u32) -> Topology {
        Topology::symmetric(1, 1, 1, n, 1).expect("flat topology within limits")
    }

    /// Any topology, from the place of each CPU (CPU `i` is `places[i]`). Checks that every level
    /// nests in the one above it and that indices are dense.
    pub fn from_places(places: Vec<CpuPlace>) -> Result<Topology, TopologyError> {
        let n = places.len();
        if n == 0 || n > CpuSet::MAX_CPUS {
            return Err(TopologyError::CpuCount { got: n, max: CpuSet::MAX_CPUS });
        }
        fn dense(vals: impl Iterator<Item = u32>, what: &'static str) -> Result<usize, TopologyError> {
            let mut v: Vec<u32> = vals.collect();
            v.sort_unstable();
            v.dedup();
            let max = *v.last().unwrap_or(&0);
            if max as usize + 1 != v.len() {
                return Err(TopologyError::NotDense { what, found: max, count: v.len() as u32 });
            }
            Ok(v.len())
        }
        let ncores = dense(places.iter().map(|p| p.core), "core")?;
        let nllcs = dense(places.iter().map(|p| p.llc), "llc")?;
        let nnodes = dense(places.iter().map(|p| p.node), "node")?;
        let nsockets = dense(places.iter().map(|p| p.socket), "socket")?;
        // Nesting: each core lies in one LLC, each LLC in one node, each node in one socket.
        let mut core_parent = vec![None; ncores];
        let mut llc_parent = vec![None; nllcs];
        let mut node_parent = vec![None; nnodes];
        // (child index, parent index, child level, parent level, parents seen so far)
        type Nesting<'a> = (u32, u32, &'static str, &'static str, &'a mut Vec<Option<u32>>);
        for (i, p) in places.iter().enumerate() {
            let checks: [Nesting; 3] = [
                (p.core, p.llc, "core", "llc", &mut core_parent),
                (p.llc, p.node, "llc", "node", &mut llc_parent),
                (p.node, p.socket, "node", "socket", &mut node_parent),
            ];
            for (child, parent, what, pname, parents) in checks {
                match parents[child as usize] {
                    None => parents[child as usize] = Some(parent),
                    Some(q) if q == parent => {}
                    Some(_) => {
                        return Err(TopologyError::NotNested {
                            cpu: i as u32,
                            what,
                            index: child,
                            parent: pname,
                        })
                    }
                }
            }
        }
        let mut t = Topology {
            core_span: vec![CpuSet::empty(); ncores],
            llc_span: vec![CpuSet::empty(); nllcs],
            node_span: vec![CpuSet::empty(); nnodes],
            socket_span: vec![CpuSet::empty(); nsockets],
            all: CpuSet::first_n(n),
            places,
        };
        for (i, p) in t.places.iter().enumerate() {
            let c = CpuId(i as u32);
            t.core_span[p.core as usize].insert(c);
            t.llc_span[p.llc as usize].insert(c);
            t.node_span[p.node as usize].insert(c);
            t.socket_span[p.socket as usize].insert(c);
        }
        Ok(t)
    }

    /// Number of logical CPUs.
    #[inline]
    pub fn nr_cpus(&self) -> usize {
        self.places.len()
    }

    /// All CPU ids.
    pub fn cpus(&self) -> impl Iterator<Item = CpuId> {
        (0..self.places.len() as u32).map(CpuId)
    }

    /// The set of all CPUs.
    pub fn all(&self) -> CpuSet {
        self.all
    }

    /// Where `cpu` sits.
    #[inline]
    pub fn place(&self, cpu: CpuId) -> CpuPlace {
        self.places[cpu.idx()]
    }

    /// Number of cores, LLCs, nodes and sockets.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (self.core_span.len(), self.llc_span.len(), self.node_span.len(), self.socket_span.len())
    }

    /// The nearest level at which `a` and `b` meet.
    #[inline]
    pub fn level(&self, a: CpuId, b: CpuId) -> Level {
        if a == b {
            return Level::Same;
        }
        let (pa, pb) = (self.places[a.idx()], self.places[b.idx()]);
        if pa.core == pb.core {
            Level::Smt
        } else if pa.llc == pb.llc {
            Level::Llc
        } else if pa.node == pb.node {
            Level::Node
        } else if pa.socket == pb.socket {
            Level::Socket
        } else {
            Level::Machine
        }
    }

    /// The CPUs that share `level` with `cpu` (for [`Level::Same`], just `cpu`).
    pub fn span(&self, level: Level, cpu: CpuId) -> CpuSet {
        let p = self.places[cpu.idx()];
        match level {
            Level::Same => CpuSet::single(cpu),
            Level::Smt => self.core_span[p.core as usize],
            Level::Llc => self.llc_span[p.llc as usize],
            Level::Node => self.node_span[p.node as usize],
            Level::Socket => self.socket_span[p.socket as usize],
            Level::Machine => self.all,
        }
    }

    /// The levels above [`Level::Same`] that add CPUs over the level below them somewhere on the
    /// machine, nearest first. These are the non-degenerate scheduling-domain levels (Linux drops a
    /// domain whose span equals its child's; so does this).
    pub fn domain_levels(&self) -> Vec<Level> {
        let mut out = Vec::new();
        let mut prev = Level::Same;
        for level in Level::ALL.into_iter().skip(1) {
            let grows = self.cpus().any(|c| self.span(level, c).count() > self.span(prev, c).count());
            if grows {
                out.push(level);
                prev = level;
            }
        }
        out
    }

    /// Number of SMT siblings of `cpu`, itself included.
    pub fn smt_width(&self, cpu: CpuId) -> usize {
        self.span(Level::Smt, cpu).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xeon_e5520_pair_has_smt_llc_and_socket_levels() {
        // 2 sockets x 4 cores x 2 threads; one node and one LLC per socket.
        let t = Topology::symmetric(2, 1, 1, 4, 2).unwrap();
        assert_eq!(t.nr_cpus(), 16);
        assert_eq!(t.level(CpuId(0), CpuId(1)), Level::Smt);
        assert_eq!(t.level(CpuId(0), CpuId(2)), Level::Llc);
        assert_eq!(t.level(CpuId(0), CpuId(8)), Level::Machine);
        assert_eq!(t.domain_levels(), vec![Level::Smt, Level::Llc, Level::Machine]);
        assert_eq!(t.span(Level::Llc, CpuId(9)).count(), 8);
    }

    #[test]
    fn opteron_nodes_nest_in_sockets() {
        // 2 sockets x 2 nodes x 1 LLC x 8 cores (Opteron 6172 in a 2-socket box = 32 cores... 4 nodes).
        let t = Topology::symmetric(2, 2, 1, 8, 1).unwrap();
        assert_eq!(t.counts(), (32, 4, 4, 2));
        assert_eq!(t.level(CpuId(0), CpuId(8)), Level::Socket);
        assert_eq!(t.level(CpuId(0), CpuId(16)), Level::Machine);
        assert_eq!(t.domain_levels(), vec![Level::Llc, Level::Socket, Level::Machine]);
    }

    #[test]
    fn rejects_straddling_core() {
        let p = |core, llc| CpuPlace { core, llc, node: 0, socket: 0 };
        let err = Topology::from_places(vec![p(0, 0), p(0, 1)]).unwrap_err();
        assert!(matches!(err, TopologyError::NotNested { what: "core", .. }));
        assert!(Topology::from_places(vec![]).is_err());
    }

    #[test]
    fn uniprocessor_has_no_domains() {
        assert!(Topology::flat(1).domain_levels().is_empty());
    }
}
