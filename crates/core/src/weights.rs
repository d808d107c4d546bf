//! The Linux nice-to-weight table (kernel/sched.c `prio_to_weight`, 2.6.23 to 6.x, unchanged; seed 000
//! table 1) and its inverse `prio_to_wmult`.
//!
//! How the tables are made: `prio_to_weight` is the kernel's hand-rounded table of 1024 / 1.25^nice
//! (each nice level is about 10 % of CPU share, weights differ by a factor of about 1.25). The kernel
//! computed `prio_to_wmult` as 2^32 / weight but rounded some entries up (nice 5: 12820798, where
//! the floor is 12820797), so both tables are kept here verbatim, as the kernel ships them; a test
//! checks every inverse is within one of 2^32 / weight.

/// Weight of a nice-0 task (`NICE_0_LOAD`, `SCHED_LOAD_SCALE` in 2.6.38).
pub const NICE_0_LOAD: u64 = 1024;

/// Weight of a SCHED_IDLE task (`WEIGHT_IDLEPRIO`).
pub const WEIGHT_IDLEPRIO: u64 = 3;

/// `prio_to_weight`, indexed by `nice + 20`.
pub const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, // -20 .. -16
    29154, 23254, 18705, 14949, 11916, // -15 .. -11
    9548, 7620, 6100, 4904, 3906, // -10 .. -6
    3121, 2501, 1991, 1586, 1277, // -5 .. -1
    1024, 820, 655, 526, 423, // 0 .. 4
    335, 272, 215, 172, 137, // 5 .. 9
    110, 87, 70, 56, 45, // 10 .. 14
    36, 29, 23, 18, 15, // 15 .. 19
];

/// Weight of a task at `nice` (clamped to -20..=19).
pub fn nice_to_weight(nice: i8) -> u64 {
    PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// `prio_to_wmult`, indexed by `nice + 20`: 2^32 / weight, as rounded in the kernel's table.
pub const PRIO_TO_WMULT: [u64; 40] = [
    48388, 59856, 76040, 92818, 118348, // -20 .. -16
    147320, 184698, 229616, 287308, 360437, // -15 .. -11
    449829, 563644, 704093, 875809, 1099582, // -10 .. -6
    1376151, 1717300, 2157191, 2708050, 3363326, // -5 .. -1
    4194304, 5237765, 6557202, 8165337, 10153587, // 0 .. 4
    12820798, 15790321, 19976592, 24970740, 31350126, // 5 .. 9
    39045157, 49367440, 61356676, 76695844, 95443717, // 10 .. 14
    119304647, 148102320, 186737708, 238609294, 286331153, // 15 .. 19
];

/// The inverse weight (2^32 / weight) at `nice` (clamped to -20..=19).
pub fn nice_to_wmult(nice: i8) -> u64 {
    PRIO_TO_WMULT[(nice.clamp(-20, 19) + 20) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_table_is_two_to_the_32_over_weight() {
        for n in -20..=19i8 {
            let exact = (1u64 << 32) / nice_to_weight(n);
            assert!(nice_to_wmult(n).abs_diff(exact) <= 1, "nice {n}");
        }
        assert_eq!(nice_to_wmult(0), 1 << 22);
    }

    #[test]
    fn neighbouring_levels_differ_by_about_a_quarter() {
        for n in -20..19i8 {
            let r = nice_to_weight(n) as f64 / nice_to_weight(n + 1) as f64;
            assert!((1.15..1.35).contains(&r), "nice {n}: ratio {r}");
        }
    }
}
