//! The kernel's fixed-point weight arithmetic (kernel/sched.c, 2.6.38, 64-bit build), kept bit-exact:
//! `calc_delta_mine` multiplies by an inverse weight (2^32 / weight) instead of dividing, rounding with
//! `SRR` and splitting the shift when the product would overflow 64 bits.

use schedlab_core::weights::NICE_0_LOAD;

/// `WMULT_CONST` on 64-bit kernels.
pub const WMULT_CONST: u64 = 1 << 32;
/// `WMULT_SHIFT`.
pub const WMULT_SHIFT: u32 = 32;

/// `SRR(x, y)`: shift right and round.
#[inline]
fn srr(x: u64, y: u32) -> u64 {
    x.wrapping_add(1 << (y - 1)) >> y
}

/// The inverse weight the kernel computes on demand for a load with no precomputed inverse
/// (`lw->inv_weight == 0`, e.g. a runqueue's summed load).
#[inline]
pub fn inv_weight_of(weight: u64) -> u64 {
    if weight >= WMULT_CONST {
        1
    } else {
        1 + (WMULT_CONST - weight / 2) / (weight + 1)
    }
}

/// `calc_delta_mine(delta_exec, weight, lw)`: `delta_exec * weight / lw.weight`, the kernel's way.
/// `lw_inv` is `lw.inv_weight` (pass `inv_weight_of(lw.weight)` when the kernel would compute it).
#[inline]
pub fn calc_delta_mine(delta_exec: u64, weight: u64, lw_inv: u64) -> u64 {
    let mut tmp = delta_exec.wrapping_mul(weight);
    if tmp > WMULT_CONST {
        tmp = srr(srr(tmp, WMULT_SHIFT / 2).wrapping_mul(lw_inv), WMULT_SHIFT / 2);
    } else {
        tmp = srr(tmp.wrapping_mul(lw_inv), WMULT_SHIFT);
    }
    tmp.min(i64::MAX as u64)
}

/// `calc_delta_fair(delta, se)`: real time to virtual time for an entity of `weight` (inverse
/// `inv`): unchanged at nice 0, else `delta * 1024 / weight`.
#[inline]
pub fn calc_delta_fair(delta: u64, weight: u64, inv: u64) -> u64 {
    if weight != NICE_0_LOAD {
        calc_delta_mine(delta, NICE_0_LOAD, inv)
    } else {
        delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::weights::{nice_to_weight, nice_to_wmult};

    #[test]
    fn matches_exact_division_closely() {
        for nice in -20..=19i8 {
            let (w, inv) = (nice_to_weight(nice), nice_to_wmult(nice));
            for delta in [1_000u64, 999_999, 4_000_000, 123_456_789, 10_000_000_000] {
                let exact = delta as u128 * 1024 / w as u128;
                let got = calc_delta_fair(delta, w, inv) as u128;
                let err = exact.abs_diff(got);
                assert!(err <= exact / 10_000 + 2, "nice {nice} delta {delta}: {got} vs {exact}");
            }
        }
        // A slice share with the on-demand inverse 1 + (2^32 - 679) / 1360 = 3158064:
        // SRR(SRR(6e6 * 1024, 16) * 3158064, 16) = 4517647 (exact share 4520971; the kernel's
        // inverse is a little low).
        assert_eq!(inv_weight_of(1359), 3158064);
        assert_eq!(calc_delta_mine(6_000_000, 1024, inv_weight_of(1359)), 4517647);
    }
}
