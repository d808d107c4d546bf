//! The machine costs an experiment's runs charged that nothing varies: costs at the engine's default
//! (`CostModel::default`, which has no source for any seed's machine: docs/hardware-model.md), not
//! set by the case's machine and not declared `[[free]]`. `--sensitivity` lists them per experiment
//! with their weight in the runs the claims read, so a verdict's untested dependence on an unsourced
//! machine cost is visible rather than silent.

use super::spec::Experiment;
use schedlab_sim::CostModel;
use serde_json::Value;

/// What one run charged: `(cost, ns)` per machine cost (`summary.machine_costs`) and the CPU time the
/// costs are weighed against (busy plus overhead, ns).
#[derive(Clone, Debug, Default)]
pub struct Charged {
    costs: Vec<(String, u64)>,
    cpu_ns: u64,
}

impl Charged {
    /// From a run report (the `summary` key is enough).
    pub fn of(report: &Value) -> Charged {
        let s = &report["summary"];
        let costs = s["machine_costs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| Some((c["cost"].as_str()?.to_string(), c["ns"].as_u64()?)))
            .collect();
        let cpu_ns = s["busy_ns"].as_u64().unwrap_or(0) + s["overhead_ns"].as_u64().unwrap_or(0);
        Charged { costs, cpu_ns }
    }
}

/// One unvaried cost: its `CostModel` field and what the runs charged of it over their CPU time.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Unvaried {
    /// The `[costs]` key.
    pub cost: String,
    /// Charged ns over the runs' busy plus overhead time: CPU time for the decision, switch and tick
    /// costs; the wakeup latency or cold time added, for IPIs, idle exits and refills.
    pub share: f64,
}

/// The machine costs `runs` (`(case index, what the run charged)`, the chosen point's runs the
/// claims read) charged with a nonzero total, whose case machine leaves them at the engine's
/// default and that `exp` does not declare free, most charged first.
pub fn unvaried(exp: &Experiment, runs: &[(usize, &Charged)]) -> Vec<Unvaried> {
    let default = serde_json::to_value(CostModel::default()).unwrap_or_default();
    let declared = |cost: &str| exp.free.iter().any(|f| f.param == format!("costs.{cost}"));
    let mut totals: Vec<(String, u64)> = Vec::new();
    let mut cpu_ns = 0u64;
    for &(ci, run) in runs {
        cpu_ns += run.cpu_ns;
        let Some(case) = exp.cases.get(ci) else { continue };
        let machine = serde_json::to_value(&case.machine.costs).unwrap_or_default();
        for (cost, ns) in &run.costs {
            if *ns == 0 || declared(cost) || machine[cost.as_str()] != default[cost.as_str()] {
                continue;
            }
            match totals.iter_mut().find(|(c, _)| c == cost) {
                Some(t) => t.1 += ns,
                None => totals.push((cost.clone(), *ns)),
            }
        }
    }
    totals.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    totals
        .into_iter()
        .map(|(cost, ns)| Unvaried { cost, share: if cpu_ns == 0 { 0.0 } else { ns as f64 / cpu_ns as f64 } })
        .collect()
}

/// `context_switch_ns 1.2 %, refill_llc_ns 0.03 %`, or `none`.
pub fn show(list: &[Unvaried]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter().map(|u| format!("`{}` {}", u.cost, percent(u.share))).collect::<Vec<_>>().join(", ")
}

/// A share as a percentage with two significant digits (at least 0.01 %).
fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p >= 10.0 {
        format!("{p:.0} %")
    } else if p >= 1.0 {
        format!("{p:.1} %")
    } else if p >= 0.01 {
        format!("{p:.2} %")
    } else {
        "< 0.01 %".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_formatted_to_two_digits() {
        assert_eq!(percent(0.25), "25 %");
        assert_eq!(percent(0.0123), "1.2 %");
        assert_eq!(percent(0.000345), "0.03 %");
        assert_eq!(percent(0.0000001), "< 0.01 %");
        assert_eq!(show(&[]), "none");
    }

    #[test]
    fn a_run_report_gives_its_charges_and_cpu_time() {
        let r = serde_json::json!({"summary": {"busy_ns": 900, "overhead_ns": 100, "machine_costs": [
            {"cost": "context_switch_ns", "count": 2, "ns": 40},
            {"cost": "wakeup_ipi_ns", "count": 1, "ns": 0},
        ]}});
        let c = Charged::of(&r);
        assert_eq!(c.cpu_ns, 1_000);
        assert_eq!(c.costs, vec![("context_switch_ns".to_string(), 40), ("wakeup_ipi_ns".to_string(), 0)]);
    }
}
