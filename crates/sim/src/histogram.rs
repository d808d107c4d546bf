//! A latency histogram with bounded memory and bounded relative error (HDR-style log-linear buckets).
//!
//! Values below 64 ns are counted exactly; above, each power of two is split into 32 linear
//! sub-buckets, so a recorded value is known to within 1/32 (about 3 %). The bucket vector grows only
//! to the end of the largest value's power of two (at most 1,920 buckets for any u64), so a task that
//! only ever waits microseconds costs a few hundred bytes.

use serde::Serialize;

const SUB_BITS: u32 = 5; // 32 sub-buckets per power of two
const LINEAR: u64 = 64; // exact below this

/// A histogram of nanosecond values (serialisable whole, so a real run's task process can send its
/// histogram to the controlling process).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Histogram {
    counts: Vec<u32>,
    total: u64,
    sum: u128,
    min: u64,
    max: u64,
}

fn bucket_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= 6
    let shift = exp - SUB_BITS;
    let sub = (v >> shift) - (1 << SUB_BITS); // 0..32
    (LINEAR as usize) + ((exp - 6) as usize) * (1 << SUB_BITS) + sub as usize
}

/// The lowest value that falls in bucket `b`.
fn bucket_low(b: usize) -> u64 {
    if b < LINEAR as usize {
        return b as u64;
    }
    let k = b - LINEAR as usize;
    let exp = (k >> SUB_BITS) as u32 + 6;
    let sub = (k & ((1 << SUB_BITS) - 1)) as u64;
    ((1 << SUB_BITS) + sub) << (exp - SUB_BITS)
}

/// One bucket of a distribution: `count` recorded values lay in `[low_ns, high_ns)` (below 64 ns a
/// bucket holds one value; above, each is about 1/32 of its value wide).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Lowest value of the bucket.
    pub low_ns: u64,
    /// First value above it (`u64::MAX` for the last bucket).
    pub high_ns: u64,
    /// Values recorded in it.
    pub count: u64,
}

/// Summary percentiles of a histogram, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Smallest sample (exact).
    pub min_ns: u64,
    /// Mean (exact).
    pub mean_ns: u64,
    /// Median (bucket lower bound, within ~3 %).
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest sample (exact).
    pub max_ns: u64,
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let b = bucket_of(v);
        if b >= self.counts.len() {
            // To the end of the value's power of two: values that creep upwards grow the vector
            // once per doubling, not once per bucket.
            self.counts.resize((b | ((1 << SUB_BITS) - 1)) + 1, 0);
        }
        self.counts[b] = self.counts[b].saturating_add(1);
        if self.total == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.total += 1;
        self.sum += v as u128;
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        if other.total == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
        self.min = if self.total == 0 { other.min } else { self.min.min(other.min) };
        self.max = self.max.max(other.max);
        self.total += other.total;
        self.sum += other.sum;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value at quantile `q` in 0..=1 (the lower bound of its bucket; exact max for q = 1).
    pub fn quantile(&self, q: f64) -> u64 {
        self.quantiles([q])[0]
    }

    /// The values at quantiles `qs` (in increasing order), as [`Histogram::quantile`] gives each, in
    /// one pass over the buckets from the smallest value's.
    fn quantiles<const N: usize>(&self, qs: [f64; N]) -> [u64; N] {
        let mut out = [self.max; N];
        if self.total == 0 {
            return [0; N];
        }
        let first = bucket_of(self.min);
        let mut seen = 0u64;
        let mut b = first;
        for (i, q) in qs.into_iter().enumerate() {
            if q >= 1.0 {
                break;
            }
            let rank = ((q * self.total as f64).ceil() as u64).max(1);
            while b < self.counts.len() {
                if seen + self.counts[b] as u64 >= rank {
                    out[i] = bucket_low(b).max(self.min).min(self.max);
                    break;
                }
                seen += self.counts[b] as u64;
                b += 1;
            }
        }
        out
    }

    /// The buckets that hold values, in increasing order: the whole distribution, at most 1,920
    /// entries whatever the number of values.
    pub fn buckets(&self) -> Vec<Bucket> {
        let last = bucket_of(u64::MAX);
        self.counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(b, &c)| Bucket {
                low_ns: bucket_low(b),
                high_ns: if b == last { u64::MAX } else { bucket_low(b + 1) },
                count: c as u64,
            })
            .collect()
    }

    /// Percentile summary.
    pub fn summary(&self) -> LatencySummary {
        let [p50_ns, p90_ns, p99_ns, p999_ns] = self.quantiles([0.5, 0.9, 0.99, 0.999]);
        LatencySummary {
            count: self.total,
            min_ns: if self.total == 0 { 0 } else { self.min },
            mean_ns: if self.total == 0 { 0 } else { (self.sum / self.total as u128) as u64 },
            p50_ns,
            p90_ns,
            p99_ns,
            p999_ns,
            max_ns: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotone_and_tight() {
        let mut prev = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, u64::MAX / 3, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= prev, "buckets must not decrease: v={v}");
            prev = b;
            let lo = bucket_low(b);
            assert!(lo <= v, "v={v} lo={lo}");
            assert!(v - lo <= v / 32 + 1, "v={v} lo={lo}");
        }
        assert_eq!(bucket_of(u64::MAX), 1919);
    }

    #[test]
    fn buckets_hold_every_value_once_in_order() {
        let mut h = Histogram::new();
        let values = [0u64, 5, 5, 63, 64, 65, 100, 1_000, 1_031, 1_032, 5_000_000, u64::MAX];
        for v in values {
            h.record(v);
        }
        let b = h.buckets();
        assert_eq!(b.iter().map(|x| x.count).sum::<u64>(), values.len() as u64);
        assert_eq!(b[0], Bucket { low_ns: 0, high_ns: 1, count: 1 });
        assert_eq!(b[1], Bucket { low_ns: 5, high_ns: 6, count: 2 }, "exact below 64 ns");
        assert_eq!(b[3], Bucket { low_ns: 64, high_ns: 66, count: 2 }, "64 and 65 share a 2 ns bucket");
        // 1,000 lies in [992, 1008) (2^9..2^10 in 32 steps of 16), 1,031 and 1,032 in [1024, 1056)
        // (2^10..2^11 in steps of 32).
        assert_eq!((b[5].low_ns, b[5].high_ns), (992, 1_008));
        assert_eq!((b[6].low_ns, b[6].high_ns, b[6].count), (1_024, 1_056, 2));
        assert_eq!(b.last().unwrap().high_ns, u64::MAX);
        for v in values {
            assert_eq!(
                b.iter().filter(|x| x.low_ns <= v && (v < x.high_ns || x.high_ns == u64::MAX)).count(),
                1
            );
        }
        for w in b.windows(2) {
            assert!(w[0].high_ns <= w[1].low_ns, "in order, not overlapping: {w:?}");
        }
        assert!(Histogram::new().buckets().is_empty());
    }

    #[test]
    fn percentiles_are_the_bucket_of_the_value_at_each_rank() {
        // Against the sorted values: the quantile q is the ceil(q n)-th smallest value's bucket
        // floor (not below the exact minimum), for spreads that start past zero, hold one value,
        // or share buckets.
        let sets: [Vec<u64>; 4] = [
            (0..1_000u64).map(|i| (i * 7_919) % 100_003 + 5_000).collect(),
            vec![42_000; 9],
            (0..300u64).map(|i| 1 << (i % 40)).collect(),
            (1..=17u64).map(|i| i * i * i).collect(),
        ];
        for values in sets {
            let mut h = Histogram::new();
            values.iter().for_each(|&v| h.record(v));
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let at = |q: f64| {
                let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
                let v = sorted[rank - 1];
                bucket_low(bucket_of(v)).max(sorted[0])
            };
            let s = h.summary();
            assert_eq!(
                [s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns],
                [at(0.5), at(0.9), at(0.99), at(0.999)],
                "{values:?}"
            );
            assert_eq!((h.quantile(0.25), h.quantile(1.0)), (at(0.25), *sorted.last().unwrap()));
        }
        assert_eq!(Histogram::new().summary(), LatencySummary::default());
    }

    #[test]
    fn percentiles_of_uniform_values() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!((s.count, s.min_ns, s.max_ns), (10_000, 1000, 10_000_000));
        assert_eq!(s.mean_ns, 5_000_500);
        for (got, want) in [(s.p50_ns, 5_000_000u64), (s.p90_ns, 9_000_000), (s.p99_ns, 9_900_000)] {
            assert!(got <= want && want - got <= want / 32, "got {got} want {want}");
        }
        let mut m = Histogram::new();
        m.record(7);
        m.merge(&h);
        assert_eq!((m.count(), m.summary().min_ns), (10_001, 7));
    }
}
