//! Durations written with a unit: `250ns`, `10us`, `5ms`, `1.5s`.

use schedlab_core::{Ns, NSEC_PER_MSEC, NSEC_PER_SEC, NSEC_PER_USEC};

/// The longest time a workload, a run or any of their durations may name: 100 days. Beyond it a
/// duration is refused, which keeps every sum and product of times in the simulator within 64 bits.
pub const MAX_TIME_NS: Ns = 100 * 86_400 * NSEC_PER_SEC;

/// Parses a duration such as `"5ms"`, `"100us"`, `"1.5s"` or `"250ns"` into nanoseconds. A bare
/// number is rejected: the unit is always required, so `sleep = "10"` cannot be misread.
pub fn parse_duration(s: &str) -> Result<Ns, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1,
        "us" => NSEC_PER_USEC,
        "ms" => NSEC_PER_MSEC,
        "s" => NSEC_PER_SEC,
        "" => return Err(format!("duration `{s}` needs a unit (ns, us, ms or s)")),
        u => return Err(format!("unknown unit `{u}` in duration `{s}` (use ns, us, ms or s)")),
    };
    if num.is_empty() {
        return Err(format!("duration `{s}` has no number"));
    }
    // Exact decimal arithmetic: integer part and up to 9 fractional digits, no floating point.
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if frac.contains('.') || frac.len() > 9 {
        return Err(format!("malformed number in duration `{s}`"));
    }
    let int: u64 = if int.is_empty() {
        0
    } else if int.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for 64 bits is too long, not malformed.
        int.parse().unwrap_or(u64::MAX)
    } else {
        return Err(format!("malformed number in duration `{s}`"));
    };
    let mut frac_ns = 0u64;
    if !frac.is_empty() {
        let digits: u64 = frac.parse().map_err(|_| format!("malformed number in duration `{s}`"))?;
        frac_ns = digits * scale / 10u64.pow(frac.len() as u32);
    }
    match int.checked_mul(scale).and_then(|v| v.checked_add(frac_ns)) {
        Some(v) if v <= MAX_TIME_NS => Ok(v),
        _ => Err(format!(
            "duration `{s}` is longer than 100 days ({}s), the longest schedlab handles",
            MAX_TIME_NS / NSEC_PER_SEC
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_fractions() {
        assert_eq!(parse_duration("250ns"), Ok(250));
        assert_eq!(parse_duration("10us"), Ok(10_000));
        assert_eq!(parse_duration("5ms"), Ok(5_000_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("0.75ms"), Ok(750_000));
        assert!(parse_duration("10").unwrap_err().contains("needs a unit"));
        assert!(parse_duration("10 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("-5ms").is_err());
        assert!(parse_duration("1.2.3ms").is_err());
        assert_eq!(parse_duration("8640000s"), Ok(MAX_TIME_NS));
        assert!(parse_duration("8640000.000000001s").unwrap_err().contains("longer than 100 days"));
        assert!(parse_duration("99999999999999999999s").unwrap_err().contains("longer than 100 days"));
    }
}
