//! What Linux 2.6.38's domain balancer ([`super::lb_stats`], [`super::balance`]) and task placement
//! ([`super::select`]) read from the fair class they work for: [`LbHost`]. CFS implements it with its
//! runqueues' weights; HTFS implements it too, because the thesis ran HTFS on this code ("all
//! balancing algorithms are done by the CFS code", seed 000 sec. 4.10), with the loads of its
//! balancing method and its own choice of the tasks that move.

use crate::domains::Domain;
use schedlab_core::{CpuId, Ns};

/// The per-CPU loads and domains the 2.6.38 balancer and placement read.
pub(crate) trait LbHost {
    /// The sched domains of `cpu`, bottom-up.
    fn domains(&self, cpu: CpuId) -> &[Domain];
    /// The same, to update their balancing state (intervals, failure counts, last balance).
    fn domains_mut(&mut self, cpu: CpuId) -> &mut [Domain];
    /// `cpu_power` of `cpu` (`SCHED_LOAD_SCALE` for a whole CPU).
    fn cpu_power(&self, cpu: CpuId) -> u64;
    /// `rq->nr_running`: tasks queued or running on `cpu` in this class.
    fn nr_tasks(&self, cpu: CpuId) -> u64;
    /// `weighted_cpuload(cpu)`: the CPU's load now.
    fn weighted_cpuload(&self, cpu: CpuId, now: Ns) -> u64;
    /// `source_load(cpu, idx)`: a low guess of the load, to migrate from.
    fn source_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64;
    /// `target_load(cpu, idx)`: a high guess of the load, to migrate to.
    fn target_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64;
    /// Counts CPUs or runqueue entries examined (the scheduler-overhead metric).
    fn add_examined(&mut self, n: u64);
    /// `cpu_avg_load_per_task`.
    fn cpu_avg_load_per_task(&self, cpu: CpuId, now: Ns) -> u64 {
        self.weighted_cpuload(cpu, now).checked_div(self.nr_tasks(cpu)).unwrap_or(0)
    }
}
