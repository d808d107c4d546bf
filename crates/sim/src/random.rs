//! The run's random numbers: one ChaCha8 generator seeded from the run's seed, and the distributions
//! workload durations are drawn from. Draws happen in event order, so a run stays a pure function of
//! its inputs and seed. The samplers are written out here (inverse transform, Box-Muller) rather than
//! taken from a crate, so their output cannot change under a dependency update.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use schedlab_core::Ns;
use schedlab_workload::Dist;

/// The run's generator.
pub struct RunRng(ChaCha8Rng);

impl RunRng {
    /// Seeded from the run's seed.
    pub fn new(seed: u64) -> RunRng {
        RunRng(ChaCha8Rng::seed_from_u64(seed))
    }

    /// A uniform value in `[mean - half_width, mean + half_width]` (the width clipped to `mean`).
    pub fn around(&mut self, mean: Ns, half_width: Ns) -> Ns {
        let h = half_width.min(mean);
        self.draw(Dist::Uniform { lo: mean - h, hi: mean + h })
    }

    /// A uniform value in [0, 1) with 53 bits of precision.
    fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal value (Box-Muller).
    fn std_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A draw from `d`, rounded to whole nanoseconds, never negative.
    pub fn draw(&mut self, d: Dist) -> Ns {
        let x = match d {
            Dist::Fixed(v) => return v,
            Dist::Uniform { lo, hi } => {
                let span = hi - lo + 1;
                // Multiply-shift: unbiased enough for spans far below 2^64.
                return lo + ((self.0.next_u64() as u128 * span as u128) >> 64) as u64;
            }
            Dist::Exponential { mean } => -(mean as f64) * (1.0 - self.unit()).ln(),
            Dist::Normal { mean, stddev } => mean as f64 + stddev as f64 * self.std_normal(),
            Dist::LogNormal { mean, stddev } => {
                let (m, s) = (mean as f64, stddev as f64);
                let sigma2 = (1.0 + (s * s) / (m * m)).ln();
                let mu = m.ln() - sigma2 / 2.0;
                (mu + sigma2.sqrt() * self.std_normal()).exp()
            }
        };
        if x.is_finite() && x > 0.0 {
            // Tails are cut at the longest time a workload may name.
            x.round().min(schedlab_workload::MAX_TIME_NS as f64) as Ns
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(d: Dist, n: usize) -> (f64, f64) {
        let mut r = RunRng::new(42);
        let v: Vec<f64> = (0..n).map(|_| r.draw(d) as f64).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        (mean, var.sqrt())
    }

    #[test]
    fn distributions_have_their_moments() {
        let n = 200_000;
        let close = |got: f64, want: f64, tol: f64| (got - want).abs() <= want * tol;
        let (m, s) = moments(Dist::Uniform { lo: 1_000, hi: 3_000 }, n);
        assert!(close(m, 2_000.0, 0.01) && close(s, 2_000.0 / 12f64.sqrt(), 0.02), "uniform {m} {s}");
        let (m, s) = moments(Dist::Exponential { mean: 5_000 }, n);
        assert!(close(m, 5_000.0, 0.02) && close(s, 5_000.0, 0.03), "exponential {m} {s}");
        let (m, s) = moments(Dist::Normal { mean: 10_000, stddev: 1_000 }, n);
        assert!(close(m, 10_000.0, 0.01) && close(s, 1_000.0, 0.02), "normal {m} {s}");
        let (m, s) = moments(Dist::LogNormal { mean: 4_000, stddev: 2_000 }, n);
        assert!(close(m, 4_000.0, 0.02) && close(s, 2_000.0, 0.05), "lognormal {m} {s}");
        let mut r = RunRng::new(1);
        assert!((0..10_000).all(|_| (5..=7).contains(&r.draw(Dist::Uniform { lo: 5, hi: 7 }))));
        assert_eq!(r.draw(Dist::Fixed(9)), 9);
    }

    #[test]
    fn same_seed_same_draws() {
        let (mut a, mut b, mut c) = (RunRng::new(3), RunRng::new(3), RunRng::new(4));
        let d = Dist::Exponential { mean: 1_000_000 };
        let va: Vec<Ns> = (0..100).map(|_| a.draw(d)).collect();
        let vb: Vec<Ns> = (0..100).map(|_| b.draw(d)).collect();
        let vc: Vec<Ns> = (0..100).map(|_| c.draw(d)).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }
}
