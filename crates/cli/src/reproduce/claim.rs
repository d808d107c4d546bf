//! Claims: a paper's statement, the metric it concerns and a machine-checkable expectation.
//!
//! A claim's value is the metric's mean over the seeds for one policy in one case, or, with `vs` or
//! `vs_case`, the ratio of that mean to the mean of another policy or case. With `base_case` each side
//! is first divided by the same policy's mean in that case (a scaling factor, such as 20-room over
//! 5-room throughput), so `vs` then compares two policies' scaling. The expectation is a bound
//! (`< 0.1`, `>= 1.5`) or a band (`in [0.9, 1.1]`).

use super::metric::Metric;
use anyhow::{bail, Result};

/// A machine-checkable expectation on a number.
#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    /// Below the bound (`<`), or at most (`<=`).
    Below(f64, bool),
    /// Above the bound (`>`), or at least (`>=`).
    Above(f64, bool),
    /// Inside the closed band.
    In(f64, f64),
}

impl Expect {
    /// Parses `< x`, `<= x`, `> x`, `>= x` or `in [a, b]`.
    pub fn parse(text: &str) -> Result<Expect> {
        let t = text.trim();
        let num = |s: &str| -> Result<f64> {
            s.trim().parse::<f64>().map_err(|_| anyhow::anyhow!("`{}` is not a number", s.trim()))
        };
        if let Some(rest) = t.strip_prefix("in") {
            let inner = rest
                .trim()
                .strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .ok_or_else(|| anyhow::anyhow!("`{t}`: expected `in [a, b]`"))?;
            let Some((a, b)) = inner.split_once(',') else { bail!("`{t}`: expected `in [a, b]`") };
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                bail!("`{t}`: the band is empty");
            }
            return Ok(Expect::In(a, b));
        }
        for (op, make) in [
            ("<=", (|v| Expect::Below(v, true)) as fn(f64) -> Expect),
            (">=", |v| Expect::Above(v, true)),
            ("<", |v| Expect::Below(v, false)),
            (">", |v| Expect::Above(v, false)),
        ] {
            if let Some(rest) = t.strip_prefix(op) {
                return Ok(make(num(rest)?));
            }
        }
        bail!("`{t}`: expected `< x`, `<= x`, `> x`, `>= x` or `in [a, b]`")
    }

    /// Whether `v` meets the expectation.
    pub fn holds(&self, v: f64) -> bool {
        match *self {
            Expect::Below(b, eq) => v < b || (eq && v == b),
            Expect::Above(b, eq) => v > b || (eq && v == b),
            Expect::In(a, b) => (a..=b).contains(&v),
        }
    }
}

/// How a claim's numbers are shown.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unit {
    /// The number as it is.
    Plain,
    /// Nanoseconds shown in seconds.
    Seconds,
    /// Nanoseconds shown in milliseconds.
    Millis,
    /// Nanoseconds shown in microseconds.
    Micros,
    /// A fraction shown in percent.
    Percent,
}

impl Unit {
    /// Parses `s`, `ms`, `us`, `%` or an empty string.
    pub fn parse(text: &str) -> Result<Unit> {
        Ok(match text {
            "" => Unit::Plain,
            "s" => Unit::Seconds,
            "ms" => Unit::Millis,
            "us" => Unit::Micros,
            "%" => Unit::Percent,
            _ => bail!("`{text}`: expected s, ms, us, % or nothing"),
        })
    }

    /// `v` in this unit, four significant digits.
    pub fn show(self, v: f64) -> String {
        let (v, suffix) = match self {
            Unit::Plain => (v, ""),
            Unit::Seconds => (v / 1e9, " s"),
            Unit::Millis => (v / 1e6, " ms"),
            Unit::Micros => (v / 1e3, " us"),
            Unit::Percent => (v * 100.0, " %"),
        };
        format!("{}{suffix}", sig4(v))
    }
}

/// Four significant digits, without an exponent for everyday magnitudes.
pub fn sig4(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-4..=8).contains(&mag) {
        return format!("{v:.3e}");
    }
    let decimals = (3 - mag).max(0) as usize;
    format!("{v:.decimals$}")
}

/// One claim of an experiment file.
#[derive(Clone, Debug)]
pub struct Claim {
    /// Short id, unique in the file.
    pub id: String,
    /// The paper's statement, quoted.
    pub quote: String,
    /// Where in the paper (section, table, figure).
    pub source: String,
    /// The case the metric is taken from.
    pub case: String,
    /// The metric's text.
    pub metric_text: String,
    /// The metric.
    pub metric: Metric,
    /// The policy measured.
    pub policy: String,
    /// The reference policy of a ratio.
    pub vs: Option<String>,
    /// The reference case of a ratio (default: the same case).
    pub vs_case: Option<String>,
    /// Each side is divided by its policy's value in this case.
    pub base_case: Option<String>,
    /// The expectation's text.
    pub expect_text: String,
    /// The expectation on the value (or on the ratio).
    pub expect: Expect,
    /// The paper's own numbers, for reference.
    pub paper: String,
    /// How to show values.
    pub unit: Unit,
    /// The paper's own number for the checked value and the relative band around it the value must
    /// also lie in (`paper_value`, `band`), when the paper gives one.
    pub magnitude: Option<Magnitude>,
    /// The paper gives only a figure: the expectation is the direction it shows.
    pub figure_only: bool,
    /// Why the expectation reads as it does, or why it was changed.
    pub note: String,
}

/// A magnitude check: the checked value within `band` (relative) of the paper's `value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Magnitude {
    /// The paper's number.
    pub value: f64,
    /// The relative band, 0.25 for +-25 %.
    pub band: f64,
    /// Why this band (the paper's run-to-run spread, or why a fixed band).
    pub why: String,
}

impl Magnitude {
    /// Whether `v` lies within the band.
    pub fn holds(&self, v: f64) -> bool {
        (v - self.value).abs() <= self.band * self.value.abs()
    }

    /// `within 25 % of 1.83` (the paper's number shown in `unit`: `within 25 % of 9.480 s`).
    pub fn text(&self, unit: Unit) -> String {
        format!(
            "within {} % of {}",
            sig4(self.band * 100.0).trim_end_matches('0').trim_end_matches('.'),
            unit.show(self.value)
        )
    }
}

impl Claim {
    /// The expectation as shown in tables: the bound or band, and the magnitude or figure-only mark.
    pub fn expected_text(&self) -> String {
        let kind = if self.is_ratio() { "ratio" } else { "value" };
        match (&self.magnitude, self.figure_only) {
            (Some(m), _) => format!("{kind} {} and {}", self.expect_text, m.text(self.checked_unit())),
            (None, true) => format!("{kind} {} (direction: figure only)", self.expect_text),
            (None, false) => format!("{kind} {}", self.expect_text),
        }
    }

    /// Whether the claim compares two measurements.
    pub fn is_ratio(&self) -> bool {
        self.vs.is_some() || self.vs_case.is_some()
    }

    /// The unit of the checked number: the claim's own for a value, none for a ratio or a value
    /// divided by its base case.
    pub fn checked_unit(&self) -> Unit {
        if self.is_ratio() || self.base_case.is_some() {
            Unit::Plain
        } else {
            self.unit
        }
    }
}

/// The outcome of checking one claim.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// Claim id.
    pub id: String,
    /// The measured value (mean over seeds) of the policy.
    pub value: Option<f64>,
    /// The reference value of a ratio claim.
    pub reference: Option<f64>,
    /// The number the expectation is checked on (the value, or value / reference).
    pub checked: Option<f64>,
    /// `Some(true)` holds, `Some(false)` does not hold, `None` not measured.
    pub holds: Option<bool>,
    /// The claim's numbers for a reader: `ule 0.3 % vs cfs 49.9 % = 0.006`.
    pub shown: String,
    /// The lowest and highest checked number over the seeds taken one at a time (with more than one
    /// seed, and where every seed measured it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_range: Option<[f64; 2]>,
}

impl Outcome {
    /// The seed range as text in `unit` (`0.95 to 1.02`, `7.886 s to 7.902 s`), empty without one.
    pub fn seed_range_text(&self, unit: Unit) -> String {
        self.seed_range.map_or(String::new(), |[a, b]| format!("{} to {}", unit.show(a), unit.show(b)))
    }
}

/// Sets each outcome's seed range from `per_seed[seed][claim]` (the claims checked one seed at a time).
pub fn set_seed_ranges(outcomes: &mut [Outcome], per_seed: &[Vec<Outcome>]) {
    if per_seed.len() < 2 {
        return;
    }
    for (k, o) in outcomes.iter_mut().enumerate() {
        let vals: Option<Vec<f64>> = per_seed.iter().map(|s| s.get(k).and_then(|x| x.checked)).collect();
        o.seed_range = vals.filter(|v| v.iter().all(|x| x.is_finite())).map(|v| {
            [
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ]
        });
    }
}

impl Claim {
    /// Checks the claim given the measured means.
    pub fn check(&self, value: Option<f64>, reference: Option<f64>) -> Outcome {
        let checked = if self.is_ratio() {
            match (value, reference) {
                (Some(v), Some(r)) if r != 0.0 => Some(v / r),
                _ => None,
            }
        } else {
            value
        };
        let unit = if self.base_case.is_some() { Unit::Plain } else { self.unit };
        let show = |v: Option<f64>| v.map_or("n/a".to_string(), |v| unit.show(v));
        let shown = if self.is_ratio() {
            let who = |p: &str, c: Option<&String>| {
                let at = match c {
                    Some(c) => format!("{p} @{c}"),
                    None => p.to_string(),
                };
                match &self.base_case {
                    Some(b) => format!("{at} / @{b}"),
                    None => at,
                }
            };
            let refp = self.vs.as_deref().unwrap_or(&self.policy);
            format!(
                "{} {} vs {} {} = {}",
                who(&self.policy, self.vs_case.as_ref().map(|_| &self.case)),
                show(value),
                who(refp, self.vs_case.as_ref()),
                show(reference),
                checked.map_or("n/a".into(), sig4)
            )
        } else if let Some(b) = &self.base_case {
            format!("{} @{} / @{b} {}", self.policy, self.case, show(value))
        } else {
            format!("{} {}", self.policy, show(value))
        };
        Outcome {
            id: self.id.clone(),
            value,
            reference,
            checked,
            holds: checked
                .filter(|c| c.is_finite())
                .map(|c| self.expect.holds(c) && self.magnitude.as_ref().is_none_or(|m| m.holds(c))),
            shown,
            seed_range: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations() {
        assert!(Expect::parse("< 0.1").unwrap().holds(0.05));
        assert!(!Expect::parse("< 0.1").unwrap().holds(0.1));
        assert!(Expect::parse("<= 0.1").unwrap().holds(0.1));
        assert!(Expect::parse(">1.5").unwrap().holds(1.6));
        assert!(!Expect::parse(">= 1.5").unwrap().holds(1.4));
        let band = Expect::parse("in [0.9, 1.1]").unwrap();
        assert!(band.holds(0.9) && band.holds(1.1) && !band.holds(1.2));
        for bad in ["about 1", "in [2, 1]", "< x", "in 1, 2"] {
            assert!(Expect::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_magnitude_band_is_relative_to_the_papers_number() {
        let m = Magnitude { value: 1.83, band: 0.25, why: "fixed".into() };
        assert!(m.holds(1.83) && m.holds(1.4) && m.holds(2.28) && !m.holds(2.35) && !m.holds(1.35));
        assert_eq!(m.text(Unit::Plain), "within 25 % of 1.830");
        let secs = Magnitude { value: 9.48e9, band: 0.25, why: "fixed".into() };
        assert_eq!(secs.text(Unit::Seconds), "within 25 % of 9.480 s");
        let neg = Magnitude { value: -4778.0, band: 0.5, why: "x".into() };
        assert!(neg.holds(-3000.0) && !neg.holds(-2000.0) && !neg.holds(4778.0));
    }

    #[test]
    fn significant_digits_and_units() {
        assert_eq!(sig4(0.0062), "0.006200");
        assert_eq!(sig4(49.87), "49.87");
        assert_eq!(sig4(12345.6), "12346");
        assert_eq!(Unit::Percent.show(0.4987), "49.87 %");
        assert_eq!(Unit::Seconds.show(2.5e9), "2.500 s");
        assert_eq!(Unit::Millis.show(7_800_000.0), "7.800 ms");
    }
}
