//! Free parameters (`[[free]]` in an experiment file): the costs and sizes an experiment chose itself
//! where the paper and the real sources are silent, each with the value the experiment runs and a
//! plausible range. `schedlab reproduce --sensitivity` re-runs the claims at the ends of each range
//! (`super::sensitivity`).
//!
//! A free parameter is a machine cost, `costs.<field>` (a [`CostModel`] field, durations for the
//! `_ns` ones), the machine's timer frequency, `machine.hz`, or a workload generator's parameter, `<generator>.<param>`, which every use of
//! that generator in the experiment's workloads takes, included ones in workload files too. When a
//! file is read, each declaration is checked against what the experiment really runs: `chosen` must
//! leave every case as it is (so the file cannot state one value and run another), and one of the
//! range's ends must change at least one case (so a parameter nothing uses cannot pass as robust).

use super::spec::{build_workload, Case};
use schedlab_sim::CostModel;
use schedlab_workload::generators::ParamOverride;
use schedlab_workload::parse_duration;

/// What a free parameter sets.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// A field of the machine's cost model.
    Cost(String),
    /// The machine's timer frequency (`machine.hz`).
    Hz,
    /// A parameter of a workload generator, wherever the experiment builds it.
    Generator(String, String),
}

/// One free parameter: what it sets, the value the experiment runs, its plausible range and why the
/// experiment chose it.
#[derive(Clone, Debug)]
pub struct FreeParam {
    /// As written: `costs.context_switch_ns` or `hackbench.msg_cost`.
    pub param: String,
    /// The value the experiment runs with.
    pub chosen: String,
    /// The low end of the plausible range.
    pub low: String,
    /// The high end.
    pub high: String,
    /// Why it is free and why this range (the file's words).
    pub why: String,
    target: Target,
}

/// An error at one key of the `[[free]]` table.
type KeyError = (&'static str, String);

impl FreeParam {
    /// Reads one declaration and checks its form and order (`low <= chosen <= high`, `low < high`).
    pub fn new(param: &str, chosen: &str, low: &str, high: &str, why: &str) -> Result<FreeParam, KeyError> {
        if why.trim().is_empty() {
            return Err(("why", "say why the value is free and where its range comes from".into()));
        }
        let target = match param.split_once('.') {
            Some(("machine", "hz")) => {
                parse_hz(chosen).map_err(|m| ("chosen", m))?;
                Target::Hz
            }
            Some(("machine", other)) => {
                return Err(("param", format!("`machine.{other}`: of the machine only `hz` can be free")))
            }
            Some(("costs", field)) => {
                set_cost(&CostModel::default(), field, chosen).map_err(|m| ("param", m))?;
                Target::Cost(field.to_string())
            }
            Some((generator, p)) => {
                ParamOverride::known(generator, p).map_err(|m| ("param", m))?;
                Target::Generator(generator.to_string(), p.to_string())
            }
            None => {
                return Err((
                    "param",
                    format!("`{param}`: expected costs.<field> or <generator>.<parameter>"),
                ))
            }
        };
        let magnitude = |key: &'static str, v: &str| -> Result<f64, KeyError> {
            parse_duration(v)
                .map(|ns| ns as f64)
                .or_else(|_| v.parse::<f64>().map_err(|_| ()))
                .map_err(|_| (key, format!("`{v}`: expected a duration (`2us`) or a number")))
        };
        let (c, l, h) = (magnitude("chosen", chosen)?, magnitude("range", low)?, magnitude("range", high)?);
        if l >= h || l.is_nan() || h.is_nan() {
            return Err(("range", format!("[{low}, {high}]: the low end must be below the high end")));
        }
        if !(l <= c && c <= h) {
            return Err(("chosen", format!("`{chosen}` lies outside its range [{low}, {high}]")));
        }
        Ok(FreeParam {
            param: param.to_string(),
            chosen: chosen.to_string(),
            low: low.to_string(),
            high: high.to_string(),
            why: why.to_string(),
            target,
        })
    }

    /// The range's ends that differ from the chosen value (one end may be the chosen value itself).
    pub fn ends(&self) -> Vec<&str> {
        [self.low.as_str(), self.high.as_str()].into_iter().filter(|v| *v != self.chosen).collect()
    }

    /// `case` with this parameter set to `value`, or `None` when that changes nothing in it.
    pub fn case_at(&self, file: &str, case: &Case, value: &str) -> anyhow::Result<Option<Case>> {
        let mut out = case.clone();
        match &self.target {
            Target::Cost(field) => {
                out.machine.costs =
                    set_cost(&case.machine.costs, field, value).map_err(anyhow::Error::msg)?;
                if out.machine.costs == case.machine.costs {
                    return Ok(None);
                }
            }
            Target::Hz => {
                out.machine.hz = parse_hz(value).map_err(anyhow::Error::msg)?;
                if out.machine.hz == case.machine.hz {
                    return Ok(None);
                }
            }
            Target::Generator(generator, param) => {
                let o =
                    ParamOverride { generator: generator.clone(), param: param.clone(), value: value.into() };
                out.workload = build_workload(file, &case.specs, &[o], case.taskset.as_deref())?;
                if out.workload == case.workload {
                    return Ok(None);
                }
            }
        }
        out.workload_spec = format!("{} with {}={value}", case.workload_spec, self.param);
        Ok(Some(out))
    }

    /// Checks the declaration against the cases the experiment runs: `chosen` changes none of them and
    /// some end of the range changes at least one.
    pub fn check_against(&self, file: &str, cases: &[Case]) -> Result<(), KeyError> {
        let mut changes_any = false;
        for case in cases {
            let at = |v: &str| self.case_at(file, case, v).map_err(|e| ("range", format!("{e:#}")));
            if at(&self.chosen)?.is_some() {
                let msg = format!("`{}` is not what case `{}` runs with", self.chosen, case.name);
                return Err(("chosen", msg));
            }
            for end in self.ends() {
                changes_any |= at(end)?.is_some();
            }
        }
        if !changes_any {
            return Err((
                "param",
                format!("`{}` changes nothing in any case of this experiment", self.param),
            ));
        }
        Ok(())
    }
}

/// A Linux timer frequency: 100, 250, 300 or 1000.
fn parse_hz(value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(hz) if [100, 250, 300, 1000].contains(&hz) => Ok(hz),
        _ => Err(format!("machine.hz = `{value}`: expected 100, 250, 300 or 1000")),
    }
}

/// `costs` with `field` set to `value` (a duration for the `_ns` fields, else a whole number).
fn set_cost(costs: &CostModel, field: &str, value: &str) -> Result<CostModel, String> {
    let n: u64 = if field.ends_with("_ns") {
        parse_duration(value).map_err(|m| format!("costs.{field} = `{value}`: {m}"))?
    } else {
        value.parse().map_err(|_| format!("costs.{field} = `{value}`: expected a whole number"))?
    };
    let mut v = serde_json::to_value(costs).map_err(|e| e.to_string())?;
    if let Some(obj) = v.as_object_mut() {
        obj.insert(field.to_string(), n.into());
    }
    serde_json::from_value(v).map_err(|e| format!("costs.{field}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_is_set_by_its_name_and_an_unknown_one_is_refused() {
        let c = set_cost(&CostModel::default(), "context_switch_ns", "4us").unwrap();
        assert_eq!(c.context_switch_ns, 4_000);
        assert_eq!(c.sched_per_task_ns, CostModel::default().sched_per_task_ns);
        let e = set_cost(&CostModel::default(), "warp_ns", "1us").unwrap_err();
        assert!(e.contains("warp_ns"), "{e}");
    }

    #[test]
    fn declarations_are_checked_for_form_and_order() {
        let ok = FreeParam::new("hackbench.msg_cost", "2us", "1us", "4us", "no source").unwrap();
        assert_eq!(ok.ends(), vec!["1us", "4us"]);
        let one_sided = FreeParam::new("costs.context_switch_ns", "2us", "2us", "4us", "x").unwrap();
        assert_eq!(one_sided.ends(), vec!["4us"]);
        let bad = |p, c, l, h, w| FreeParam::new(p, c, l, h, w).unwrap_err().0;
        assert_eq!(bad("hackbench.msg_cost", "8us", "1us", "4us", "x"), "chosen");
        assert_eq!(bad("hackbench.msg_cost", "2us", "4us", "1us", "x"), "range");
        assert_eq!(bad("hackbench.msg_cost", "2us", "1us", "4us", " "), "why");
        assert_eq!(bad("hackbench.warp", "2us", "1us", "4us", "x"), "param");
        assert_eq!(bad("msg_cost", "2us", "1us", "4us", "x"), "param");
        assert_eq!(bad("costs.warp_ns", "2us", "1us", "4us", "x"), "param");
        assert_eq!(bad("hackbench.msg_cost", "soon", "1us", "4us", "x"), "chosen");
        assert!(FreeParam::new("machine.hz", "1000", "250", "1000", "x").is_ok());
        assert_eq!(bad("machine.hz", "500", "250", "1000", "x"), "chosen");
        assert_eq!(bad("machine.cpus", "2", "1", "4", "x"), "param");
    }
}
