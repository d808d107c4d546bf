//! Activity-vector (AVEC) scheduling on CFS (seed 004 sec. 3: Hoh, *Vector-Based Scheduling for the
//! Core2-Architecture*, 2009, on Linux 2.6.26; here on the 2.6.38 CFS of this module).
//!
//! Each task's *activity vector* says which functional units it keeps busy: instructions, L2-busy and
//! bus-busy cycles, MMX, SSE, x87, branch and integer instructions per 10,000 cycles, estimated from
//! the performance counters the engine keeps (`TaskInfo::pmc`, rotating as on a Core2) as a running
//! average over the task's slices. At a pick, instead of the leftmost task CFS considers the
//! `range` fairest tasks (the leftmost ones of the timeline, all tasks of one runqueue) and takes the
//! one most dissimilar to the task that ran before it there and the tasks running on the other CPUs of
//! the package, by the distance
//! `d = sum_i |avec[i]^2 - avg[i]^2|` (eq. 3.1), so co-running tasks use different units.
//!
//! * **Hard starvation protection**: if the fairest candidate is behind the most advanced candidate
//!   by more than `deficit_limit_ns` of virtual runtime, it runs (a limit of 0 is plain CFS).
//! * **Soft protection**: a candidate replaces the best so far only if its distance exceeds the best
//!   one's by the factor `soft_threshold_permille / 1000` (fig. 3.2).
//! * **Statistics**: `avec_boosted` (the leftmost task -1 and the chosen one +1 at each pick: positive
//!   means scheduled more often than CFS would have) and the scheduling positions (how often a task was
//!   chosen at each rank of the fairness order).
//! * **Migration** (sec. 3.4.3): the CFS balancer decides where from and where to; AVEC chooses which
//!   tasks move: the most displaced (lowest `avec_boosted`, which is then reset) with `boosted`, or the
//!   one most dissimilar to the destination runqueue's average vector with `rqavec`.
//!
//! The "average AVEC" is the mean vector of the task that ran last on this CPU and the tasks running
//! on the other CPUs of the package (sec. 1.4: the scheduler "considers the previously running task on
//! the same core and the currently running tasks on the other cores"; sec. 3.4.1: "the arithmetic
//! average of all running tasks' AVECs"), so neither a co-runner nor the previous task is repeated;
//! with none of them (a CPU leaving idle with no co-runner) the pick is plain CFS.
//!
//! Choices where the thesis is silent: The deficit of the hard protection is measured against the most advanced
//! candidate (the thesis compares `entity_key`, whose sign convention the text garbles), which keeps
//! its documented property that a limit of 0 gives CFS's choice. A task's vector is averaged with weight
//! 1/8 per slice for each event counted in that slice. Defaults for the deficit limit (20 ms) and the soft
//! threshold (1.1) are not in the thesis; its range default is 10.

use crate::params::{parse_u64, ParamInfo, Params};
use schedlab_core::{ActivityVector, Ns, Pmc, TaskId};

/// Elements of an activity vector (per 10,000 cycles): schedlab_core's, shared with the engine's AVEC
/// governor.
pub const NR_ELEMS: usize = schedlab_core::NR_AVEC_ELEMS;
/// Names of the elements, in order.
pub const ELEMS: [&str; NR_ELEMS] = schedlab_core::AVEC_ELEMS;

/// How the balancer chooses tasks to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AvecMigration {
    /// The most displaced tasks (lowest `avec_boosted`) first.
    Boosted,
    /// The task most dissimilar to the destination runqueue's average vector first.
    RqAvec,
}

/// AVEC tunables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AvecParams {
    /// `AVEC_RANGE`: fairest tasks considered at a pick. Default 10.
    pub range: usize,
    /// `runtime_deficit_limit`, ns of virtual runtime. Default 20 ms.
    pub deficit_limit_ns: Ns,
    /// `soft_protection_threshold`, permille. Default 1100.
    pub soft_threshold_permille: u64,
    /// The migration method. Default `boosted`.
    pub migration: AvecMigration,
}

impl Default for AvecParams {
    fn default() -> Self {
        AvecParams {
            range: 10,
            deficit_limit_ns: 20_000_000,
            soft_threshold_permille: 1100,
            migration: AvecMigration::Boosted,
        }
    }
}

/// Parameters of the `avec` policy: CFS's and AVEC's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AvecPolicyParams {
    /// CFS's parameters.
    pub cfs: super::CfsParams,
    /// AVEC's.
    pub avec: AvecParams,
}

const AVEC_INFO: [ParamInfo; 4] = [
    ParamInfo { key: "avec_range", default: "10", help: "AVEC_RANGE: fairest tasks considered at each pick" },
    ParamInfo {
        key: "deficit_limit_ns",
        default: "20000000",
        help: "runtime_deficit_limit: the fairest task runs once this far behind (virtual ns); 0 = plain CFS",
    },
    ParamInfo {
        key: "soft_threshold_permille",
        default: "1100",
        help: "soft_protection_threshold: a less fair task must be this much more distant to win",
    },
    ParamInfo {
        key: "migration",
        default: "boosted",
        help: "which tasks the balancer moves: boosted or rqavec",
    },
];

impl Params for AvecPolicyParams {
    fn info() -> &'static [ParamInfo] {
        static ALL: std::sync::OnceLock<Vec<ParamInfo>> = std::sync::OnceLock::new();
        ALL.get_or_init(|| super::CfsParams::info().iter().copied().chain(AVEC_INFO).collect())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "avec_range" => self.avec.range = parse_u64(value, 1..=1000)? as usize,
            "deficit_limit_ns" => self.avec.deficit_limit_ns = parse_u64(value, 0..=10_000_000_000)?,
            "soft_threshold_permille" => {
                self.avec.soft_threshold_permille = parse_u64(value, 1000..=100_000)?
            }
            "migration" => {
                self.avec.migration = match value.trim() {
                    "boosted" => AvecMigration::Boosted,
                    "rqavec" => AvecMigration::RqAvec,
                    other => return Err(format!("expected boosted or rqavec, got `{other}`")),
                }
            }
            _ => self.cfs.set(key, value)?,
        }
        Ok(())
    }
}

/// An activity vector, per 10,000 cycles.
pub type Vector = [u64; NR_ELEMS];

/// `d = sum_i |a[i]^2 - b[i]^2|` (eq. 3.1).
pub fn distance(a: &Vector, b: &Vector) -> u64 {
    a.iter().zip(b).map(|(&x, &y)| (x * x).abs_diff(y * y)).sum()
}

/// AVEC state of the scheduler.
#[derive(Clone, Debug, Default)]
pub struct Avec {
    /// Parameters.
    pub p: AvecParams,
    vec: Vec<ActivityVector>,
    boosted: Vec<i64>,
    positions: Vec<Vec<u64>>,
    /// The co-runners' mean vector for the pick in progress.
    pub(crate) avg: Option<Vector>,
    /// Per CPU, the task that ran there last (`prev` of the next pick), until that pick.
    prev: Vec<Option<TaskId>>,
}

impl Avec {
    /// AVEC with parameters `p`.
    pub fn new(p: AvecParams) -> Avec {
        Avec { p, ..Avec::default() }
    }

    fn grow(&mut self, t: TaskId) {
        let n = t.idx() + 1;
        if self.vec.len() < n {
            self.vec.resize(n, ActivityVector::default());
            self.boosted.resize(n, 0);
            self.positions.resize(n, Vec::new());
        }
    }

    /// Folds the counts since the last update into `t`'s running-average vector.
    pub fn update(&mut self, t: TaskId, pmc: &Pmc) {
        self.grow(t);
        self.vec[t.idx()].update(pmc);
    }

    /// `t`'s vector, if it has one yet.
    pub fn vector(&self, t: TaskId) -> Option<Vector> {
        self.vec.get(t.idx()).and_then(ActivityVector::get)
    }

    /// `t`'s `avec_boosted`.
    pub fn boosted(&self, t: TaskId) -> i64 {
        self.boosted.get(t.idx()).copied().unwrap_or(0)
    }

    /// How often `t` was chosen at each rank of the fairness order.
    pub fn positions(&self, t: TaskId) -> &[u64] {
        self.positions.get(t.idx()).map_or(&[], |v| v.as_slice())
    }

    /// Resets `t`'s `avec_boosted` after a migration.
    pub fn reset_boosted(&mut self, t: TaskId) {
        self.grow(t);
        self.boosted[t.idx()] = 0;
    }

    /// Records that `t` just stopped running on CPU `cpu` (the next pick's previous task there).
    pub fn note_prev(&mut self, cpu: usize, t: TaskId) {
        if self.prev.len() <= cpu {
            self.prev.resize(cpu + 1, None);
        }
        self.prev[cpu] = Some(t);
    }

    /// Sets `t`'s vector directly (tests).
    #[cfg(test)]
    pub(crate) fn set_vector(&mut self, t: TaskId, v: Vector) {
        self.grow(t);
        self.vec[t.idx()].set(v);
    }

    /// The task that ran last on `cpu`, consumed by the pick (after an idle period: none).
    pub fn take_prev(&mut self, cpu: usize) -> Option<TaskId> {
        self.prev.get_mut(cpu).and_then(Option::take)
    }

    /// Sets the co-runners' mean vector for the next pick (`None`: no co-runner with a vector).
    pub fn set_corunners(&mut self, vectors: impl Iterator<Item = Vector>) {
        let mut sum = [0u64; NR_ELEMS];
        let mut n = 0;
        for v in vectors {
            for (s, x) in sum.iter_mut().zip(v) {
                *s += x;
            }
            n += 1;
        }
        self.avg = (n > 0).then(|| sum.map(|s| s / n));
    }

    /// Chooses among `cands` (tasks in fairness order with their vruntimes): the index to run.
    pub fn choose(&mut self, cands: &[(TaskId, u64)]) -> usize {
        let chosen = self.choose_index(cands);
        let (left, pick) = (cands[0].0, cands[chosen].0);
        self.grow(left);
        self.grow(pick);
        self.boosted[left.idx()] -= 1;
        self.boosted[pick.idx()] += 1;
        let pos = &mut self.positions[pick.idx()];
        if pos.len() < self.p.range {
            pos.resize(self.p.range, 0);
        }
        pos[chosen] += 1;
        chosen
    }

    fn choose_index(&self, cands: &[(TaskId, u64)]) -> usize {
        if cands.len() < 2 {
            return 0;
        }
        // Hard protection: the fairest candidate runs once it is too far behind.
        let ahead = cands.iter().map(|c| c.1.wrapping_sub(cands[0].1) as i64).max().unwrap_or(0);
        if ahead > self.p.deficit_limit_ns as i64 {
            return 0;
        }
        let Some(avg) = self.avg else { return 0 };
        let dist = |i: usize| self.vector(cands[i].0).map_or(0, |v| distance(&v, &avg));
        // Soft protection: a less fair candidate must be clearly more distant.
        let mut best = 0;
        let mut best_d = dist(0);
        for i in 1..cands.len() {
            let d = dist(i);
            if d as u128 * 1000 > best_d as u128 * self.p.soft_threshold_permille as u128 {
                best = i;
                best_d = d;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::PmcEvent;

    #[test]
    fn distance_is_the_sum_of_squared_element_differences() {
        let a = [0, 0, 10, 0, 0, 3, 0, 0];
        let b = [0, 0, 4, 0, 0, 5, 0, 0];
        assert_eq!(distance(&a, &b), (100 - 16) + (25 - 9));
        assert_eq!(distance(&a, &a), 0);
    }

    #[test]
    fn picks_the_most_dissimilar_candidate_within_range_and_protects_the_fairest() {
        let mut av = Avec::new(AvecParams::default());
        let fpu = [6822, 0, 178, 0, 0, 3208, 201, 202];
        let bus = [2, 10000, 10000, 0, 0, 0, 0, 1];
        let mmx = [7891, 10000, 24, 4925, 0, 0, 1316, 0];
        let ids = [TaskId(0), TaskId(1), TaskId(2)];
        for (t, v) in ids.iter().zip([fpu, bus, mmx]) {
            av.set_vector(*t, v);
        }
        // The co-runner is an FPU burner: the bus-bound task is the most distant from it.
        av.set_corunners([fpu].into_iter());
        let cands = [(ids[0], 1000), (ids[2], 2000), (ids[1], 3000)];
        assert_eq!(av.choose(&cands), 2);
        assert_eq!((av.boosted(ids[0]), av.boosted(ids[1])), (-1, 1));
        assert_eq!(av.positions(ids[1])[2], 1);
        // Hard protection: the fairest is 25 ms behind the most advanced candidate: it runs.
        let far = [(ids[0], 0), (ids[2], 1_000_000), (ids[1], 25_000_000)];
        assert_eq!(av.choose(&far), 0);
        // A deficit limit of 0 is plain CFS.
        av.p.deficit_limit_ns = 0;
        assert_eq!(av.choose(&cands), 0);
        // Soft protection: nearly equal distances keep the fairer candidate.
        av.p.deficit_limit_ns = 20_000_000;
        av.set_corunners([[0; NR_ELEMS]].into_iter());
        av.set_vector(ids[0], [100, 0, 0, 0, 0, 0, 0, 0]);
        av.set_vector(ids[1], [104, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            av.choose(&[(ids[0], 0), (ids[1], 10)]),
            0,
            "8 % more distant is under the 10 % threshold"
        );
        av.set_vector(ids[1], [110, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(av.choose(&[(ids[0], 0), (ids[1], 10)]), 1, "21 % more distant wins");
        // No co-runner: plain CFS.
        av.set_corunners(std::iter::empty());
        assert_eq!(av.choose(&cands), 0);
    }

    #[test]
    fn vectors_follow_the_counters_as_a_running_average() {
        let mut av = Avec::new(AvecParams::default());
        let t = TaskId(0);
        let mut pmc = Pmc::default();
        // 10,000 cycles with x87 counted all of them: 3208 per 10k.
        pmc.count[PmcEvent::X87.idx()] = 3208;
        pmc.cycles_counted[PmcEvent::X87.idx()] = 10_000;
        av.update(t, &pmc);
        assert_eq!(av.vector(t).unwrap()[5], 3208);
        // Next slice at 1600 per 10k: (7 x 3208 + 1600) / 8.
        pmc.count[PmcEvent::X87.idx()] += 1600;
        pmc.cycles_counted[PmcEvent::X87.idx()] += 10_000;
        av.update(t, &pmc);
        assert_eq!(av.vector(t).unwrap()[5], (7 * 3208 + 1600) / 8);
    }
}
