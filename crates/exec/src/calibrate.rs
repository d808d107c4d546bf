//! The compute loop and its calibration: like rt-app's `calib`, the executor measures how many
//! nanoseconds one loop iteration takes on this machine at start and then turns each `compute` op's
//! nominal work into a loop count, so a compute takes longer when the thread shares its CPU or runs on
//! a slower one, as the simulator's calibrated work does.

use crate::sys::now_ns;
use std::hint::black_box;

/// Iterations of the compute loop per call of [`burn`] between stop checks.
pub const CHUNK: u64 = 4096;

/// One chunk of `n` loop iterations of integer work the compiler cannot remove.
#[inline(never)]
pub fn burn(n: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..n {
        x = black_box(x ^ (x << 13));
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Measures the loop: the least picoseconds per iteration over `rounds` timed runs of about 5 ms
/// (the least, because interruptions only ever make a run slower).
pub fn ps_per_loop(rounds: u32) -> u64 {
    let mut best = u64::MAX;
    let mut n = CHUNK;
    // Grow n until one run takes about 5 ms.
    loop {
        let t0 = now_ns();
        black_box(burn(n, t0));
        let dt = now_ns() - t0;
        if dt >= 5_000_000 || n > 1 << 34 {
            best = best.min(dt * 1000 / n);
            break;
        }
        n *= 2;
    }
    for _ in 1..rounds {
        let t0 = now_ns();
        black_box(burn(n, t0));
        best = best.min((now_ns() - t0) * 1000 / n);
    }
    best.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_loops_take_the_time_asked_for() {
        // 20 ms of work by a fresh calibration, timed: within 25 % on a machine not too busy. The
        // closest of five tries, each calibrating anew: a busy neighbour can slow a try, and this
        // VM's host changes its speed by up to 1.5x within seconds.
        let tries: Vec<(u64, u64)> = (0..5)
            .map(|_| {
                let ps = ps_per_loop(3);
                let loops = 20_000_000_000 / ps;
                let t0 = now_ns();
                black_box(burn(loops, t0));
                (now_ns() - t0, ps)
            })
            .collect();
        let (best, ps) = *tries.iter().min_by_key(|(t, _)| t.abs_diff(20_000_000)).unwrap();
        assert!(
            (15_000_000..25_000_000).contains(&best),
            "20 ms of loops took {best} ns ({ps} ps/loop); {tries:?}"
        );
    }
}
