//! Simulated time: integer nanoseconds, never floating point.
//!
//! `Ns` is a plain `u64` count of nanoseconds since the start of a run (2^64 ns is about 584 years, so
//! it never wraps in a run). Policies that keep *virtual* times (vruntime, deadlines) may let those
//! wrap and compare them as the kernel does, with `(a.wrapping_sub(b) as i64) < 0`.

/// Nanoseconds. Absolute times count from the start of the run; durations are differences.
pub type Ns = u64;

/// Nanoseconds in a microsecond.
pub const NSEC_PER_USEC: Ns = 1_000;
/// Nanoseconds in a millisecond.
pub const NSEC_PER_MSEC: Ns = 1_000_000;
/// Nanoseconds in a second.
pub const NSEC_PER_SEC: Ns = 1_000_000_000;

/// `floor(a * b / c)` without overflow: in 64-bit arithmetic when the product fits (the usual case,
/// and a constant `c` then becomes a multiplication), else in 128-bit. The result must fit in 64
/// bits. Panics when `c` is 0.
#[inline]
pub fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    match a.checked_mul(b) {
        Some(p) => p / c,
        None => (a as u128 * b as u128 / c as u128) as u64,
    }
}

/// Formats a duration with the largest unit that keeps it readable (`1.500ms`, `12.000s`, `250ns`).
pub fn fmt_ns(ns: Ns) -> String {
    if ns >= NSEC_PER_SEC {
        format!("{}.{:03}s", ns / NSEC_PER_SEC, (ns % NSEC_PER_SEC) / NSEC_PER_MSEC)
    } else if ns >= NSEC_PER_MSEC {
        format!("{}.{:03}ms", ns / NSEC_PER_MSEC, (ns % NSEC_PER_MSEC) / NSEC_PER_USEC)
    } else if ns >= NSEC_PER_USEC {
        format!("{}.{:03}us", ns / NSEC_PER_USEC, ns % NSEC_PER_USEC)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mul_div_is_exact_on_both_paths() {
        assert_eq!(mul_div(7, 3, 2), 10);
        assert_eq!(mul_div(u64::MAX, 1000, 1000), u64::MAX);
        assert_eq!(mul_div(u64::MAX / 3, 6, 4), (u64::MAX as u128 / 3 * 6 / 4) as u64);
        assert_eq!(mul_div(1 << 40, 1 << 40, 1 << 50), 1 << 30);
    }

    #[test]
    fn formats_each_unit() {
        assert_eq!(fmt_ns(250), "250ns");
        assert_eq!(fmt_ns(1_500), "1.500us");
        assert_eq!(fmt_ns(1_500_000), "1.500ms");
        assert_eq!(fmt_ns(12 * NSEC_PER_SEC + 7 * NSEC_PER_MSEC), "12.007s");
    }
}
