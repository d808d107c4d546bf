//! sched_ext's task weight and the nice level it comes from.
//!
//! sched_ext gives BPF schedulers `p->scx.weight`: the CFS load weight of the task's nice level
//! (`sched_prio_to_weight`, kernel/sched/core.c) mapped onto the cgroup weight scale, where nice 0
//! is 100: `clamp(DIV_ROUND_CLOSEST(weight * 100, 1024), 1, 10000)` (`sched_weight_to_cgroup`,
//! kernel/sched/sched.h, used by `set_task_scx_weight` in kernel/sched/ext.c). The mapping loses
//! precision at the low end (nice 14 and 15 both give 4, nice 17 and 18 both 2), so the host reads the nice level
//! itself where it can and uses [`nice_of_weight`] only as the fallback.

use schedlab_core::weights::PRIO_TO_WEIGHT;

/// The sched_ext weight of a nice level (-20..=19), as the kernel computes it.
pub fn scx_weight_of_nice(nice: i8) -> u64 {
    let w = PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize];
    ((w * 100 + 512) / 1024).clamp(1, 10_000)
}

/// The nice level whose sched_ext weight is nearest to `weight` (the lowest such nice level on a
/// tie, so the default weight 100 gives nice 0).
pub fn nice_of_weight(weight: u64) -> i8 {
    (-20..=19i8).min_by_key(|&n| scx_weight_of_nice(n).abs_diff(weight)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_weights_of_nice_levels() {
        // Values of DIV_ROUND_CLOSEST(sched_prio_to_weight[i] * 100, 1024), computed by hand from the
        // table: nice -20 is 88761 -> 8668.0, nice 0 is 1024 -> 100, nice 5 is 335 -> 32.7 -> 33,
        // nice 19 is 15 -> 1.46 -> 1.
        assert_eq!(scx_weight_of_nice(-20), 8668);
        assert_eq!(scx_weight_of_nice(0), 100);
        assert_eq!(scx_weight_of_nice(5), 33);
        assert_eq!(scx_weight_of_nice(19), 1);
    }

    #[test]
    fn weights_map_back_to_their_nice_level_where_the_kernel_keeps_them_apart() {
        for nice in (-20..=13i8).chain([16, 17, 19]) {
            assert_eq!(nice_of_weight(scx_weight_of_nice(nice)), nice, "nice {nice}");
        }
        assert_eq!(nice_of_weight(100), 0);
        // 14 and 15 both give 4, 17 and 18 both 2: the lower nice level wins the tie.
        assert_eq!(nice_of_weight(4), 14);
        assert_eq!(nice_of_weight(2), 17);
        assert_eq!(nice_of_weight(90), 0);
        assert_eq!(nice_of_weight(20_000), -20);
    }
}
