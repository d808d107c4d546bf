//! Deterministic generators for policies that draw random numbers: `splitmix` to derive per-CPU
//! seeds from the run's seed, and Linux's `prandom_u32_state` (lib/random32.c: L'Ecuyer's
//! four-component Tausworthe generator, LFSR113), which the kernel's `sched_rng()` draws from.
//! The kernel seeds it at boot from its entropy pool; here it is seeded from the run's seed, so a
//! run stays reproducible.

/// A small deterministic mixer for seeding per-CPU generators from the run's seed.
pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `struct rnd_state`: the four components of LFSR113.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RndState {
    s: [u32; 4],
}

/// One Tausworthe step of a component: `((s & c) << d) ^ (((s << a) ^ s) >> b)`.
fn tausworthe(s: u32, a: u32, b: u32, c: u32, d: u32) -> u32 {
    ((s & c) << d) ^ (((s << a) ^ s) >> b)
}

impl RndState {
    /// `prandom_seed_state`: each component from the folded seed, raised to its minimum (2, 8, 16,
    /// 128) when below it, then ten warm-up draws.
    pub(crate) fn seeded(seed: u64) -> RndState {
        let i = ((seed >> 32) ^ (seed << 10) ^ seed) as u32;
        let raise = |x: u32, m: u32| if x < m { x + m } else { x };
        let mut r = RndState { s: [raise(i, 2), raise(i, 8), raise(i, 16), raise(i, 128)] };
        for _ in 0..10 {
            r.next_u32();
        }
        r
    }

    /// `prandom_u32_state`.
    pub(crate) fn next_u32(&mut self) -> u32 {
        let s = &mut self.s;
        s[0] = tausworthe(s[0], 6, 13, 4_294_967_294, 18);
        s[1] = tausworthe(s[1], 2, 27, 4_294_967_288, 2);
        s[2] = tausworthe(s[2], 13, 21, 4_294_967_280, 7);
        s[3] = tausworthe(s[3], 3, 12, 4_294_967_168, 13);
        s[0] ^ s[1] ^ s[2] ^ s[3]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LFSR113 has period ~2^113 and near-uniform output: over 64 Ki draws each of the 1024
    /// faces of `% 1024` (the kernel's die) comes up 64 times give or take a few standard
    /// deviations (sd = 8), and two seeds give different streams.
    #[test]
    fn draws_are_uniform_over_a_1k_die_and_depend_on_the_seed() {
        let mut r = RndState::seeded(splitmix(1));
        let mut counts = [0u32; 1024];
        for _ in 0..65_536 {
            counts[(r.next_u32() % 1024) as usize] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min >= 30 && *max <= 100, "min {min} max {max}");
        let mut a = RndState::seeded(splitmix(1));
        let mut b = RndState::seeded(splitmix(2));
        assert_ne!(
            (0..4).map(|_| a.next_u32()).collect::<Vec<_>>(),
            (0..4).map(|_| b.next_u32()).collect::<Vec<_>>()
        );
    }

    /// The minimum-value rule of `prandom_seed_state`: a zero seed still gives a working generator
    /// (an all-zero component would stay zero forever).
    #[test]
    fn a_zero_seed_is_raised_to_the_components_minimums() {
        let mut r = RndState::seeded(0);
        assert!((0..8).map(|_| r.next_u32()).any(|x| x != 0));
    }
}
