//! Metric expressions of experiment claims, evaluated on a run report (`schedlab.run/1` JSON).
//!
//! ```text
//! expr  := product { ("+" | "-") product }   arithmetic on numbers, e.g. a share of a time window:
//! product := atom { ("*" | "/") atom }          (sum(tasks[fibo*].run_ns) - 7e9) / (duration_ns - 7e9)
//! atom  := number | "(" expr ")"
//!        | path                              summary.work_per_sec, summary.wakeup_latency.p99_ns,
//!                                            duration_ns (letters, digits, `_` and `.`)
//!        | rate(path)                        the value per simulated second
//!        | counter(NAME), counter_rate(NAME) a workload counter's final value, and per second
//!        | stat(NAME)                        a policy statistic (policy_stats[].name)
//!        | AGG(tasks[GLOB].field)            sum mean sd cv min max count over the tasks whose name
//!                                            matches GLOB (`*` matches any run of characters), or
//!                                            with tasks[template=GLOB] whose template matches it
//!        | count_below(tasks[GLOB].field, X) tasks whose field is below X (`zero` fields count)
//!        | spread_at(T)                      max - min runnable tasks per CPU at the first sample >= T
//!        | node_spread_at(T)                 the same between NUMA nodes (tasks per node)
//!        | balanced_after(T, N)              ns from T until the per-CPU spread is at most N
//!        | migrations_between(T0, T1)        migrations in the series between two times
//!        | peak_rate(SERIES, W)              the highest rate a second of a cumulative series
//!                                            (`switches` or `migrations`) over any window of at
//!                                            least W that starts and ends at samples, as a monitor
//!                                            sampling every W sees it at its worst phase
//!        | policy_min(tasks[GLOB], NAME, T0, T1), policy_max(..)
//!                                            the lowest and highest value NAME of the policy's
//!                                            internals (ULE's `ule interactivity score`) over the
//!                                            matching tasks and the samples from T0 to T1 (`end`:
//!                                            the last), from the per-task series (`sample_tasks`)
//!        | share_between(tasks[GLOB], T0, T1) the CPU time the matching tasks got between two times
//!                                            over T1 - T0 (a share of one CPU), from the per-task
//!                                            series (`sample_tasks`, `exec --sample-interval`); T1
//!                                            `end` or past the last sample means the last sample
//! ```
//!
//! Task fields are the report's task keys (dotted for nested ones: `wakeup_latency.p99_ns`) plus
//! `elapsed_ns` (exited_ns - started_ns; tasks still running are left out). Times T are durations
//! (`14.5s`). A value the report cannot give (no such task, no series, never balanced) is `None`, and
//! the claim using it is reported as not measured.

use anyhow::{bail, Result};
use schedlab_workload::parse_duration;
use serde_json::Value;

/// How task values are combined.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Agg {
    Sum,
    Mean,
    Sd,
    Cv,
    Min,
    Max,
    Count,
}

/// One operand.
#[derive(Clone, Debug, PartialEq)]
enum Term {
    Number(f64),
    Path(Vec<String>),
    Rate(Vec<String>),
    Counter(String, bool),
    Stat(String),
    Tasks {
        agg: Agg,
        glob: String,
        field: Vec<String>,
    },
    CountBelow {
        glob: String,
        field: Vec<String>,
        below: f64,
    },
    SpreadAt(u64),
    NodeSpreadAt(u64),
    BalancedAfter(u64, f64),
    MigrationsBetween(u64, u64),
    /// The cumulative series' name and the window length in ns.
    PeakRate(String, u64),
    /// The highest (`max`) or lowest policy value `name` of the tasks matching `glob` at the samples
    /// from `from` to `to` (`None`: the last).
    PolicyExtreme {
        max: bool,
        glob: String,
        name: String,
        from: u64,
        to: Option<u64>,
    },
    /// Tasks, from, to (`None`: the last sample).
    ShareBetween(String, u64, Option<u64>),
}

/// A parsed metric expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Metric {
    /// An operand.
    Leaf(Box<TermBox>),
    /// `+ - * /` of two expressions.
    Op(char, Box<Metric>, Box<Metric>),
}

/// An operand, boxed to keep [`Metric`] small.
#[derive(Clone, Debug, PartialEq)]
pub struct TermBox(Term);

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.rest().chars().next()
    }

    fn expr(&mut self) -> Result<Metric> {
        let mut left = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            left = Metric::Op(op, Box::new(left), Box::new(self.product()?));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Metric> {
        let mut left = self.atom()?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            self.pos += 1;
            left = Metric::Op(op, Box::new(left), Box::new(self.atom()?));
        }
        Ok(left)
    }

    fn atom(&mut self) -> Result<Metric> {
        match self.peek() {
            None => bail!("`{}`: an operand is missing at the end", self.text),
            Some('(') => {
                self.pos += 1;
                let e = self.expr()?;
                if self.peek() != Some(')') {
                    bail!("`{}`: missing `)`", self.text);
                }
                self.pos += 1;
                Ok(e)
            }
            Some(_) => {
                // A word (number, path or function name), then a call's parenthesised arguments.
                let rest = self.rest();
                let len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                    .unwrap_or(rest.len());
                let mut word = rest[..len].to_string();
                // An exponent's sign belongs to the number (7e-3).
                if word.ends_with(['e', 'E']) && word.starts_with(|c: char| c.is_ascii_digit()) {
                    if let Some(sign @ ('-' | '+')) = rest[len..].chars().next() {
                        let more = rest[len + 1..]
                            .find(|c: char| !c.is_ascii_digit())
                            .unwrap_or(rest.len() - len - 1);
                        word = rest[..len + 1 + more].to_string();
                        let _ = sign;
                    }
                }
                if word.is_empty() {
                    bail!("`{}`: unexpected `{}`", self.text, rest.chars().next().unwrap_or(' '));
                }
                self.pos += word.len();
                if self.rest().starts_with('(') {
                    let mut depth = 0;
                    let mut end = None;
                    for (i, ch) in self.rest().char_indices() {
                        match ch {
                            '(' | '[' => depth += 1,
                            ')' | ']' => {
                                depth -= 1;
                                if depth == 0 {
                                    end = Some(i);
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    let end = end.ok_or_else(|| anyhow::anyhow!("`{}`: missing `)`", self.text))?;
                    let call = format!("{word}{}", &self.rest()[..=end]);
                    self.pos += end + 1;
                    return Ok(Metric::Leaf(Box::new(TermBox(term(&call)?))));
                }
                Ok(Metric::Leaf(Box::new(TermBox(term(&word)?))))
            }
        }
    }
}

impl Metric {
    /// Parses `text`; the error says what is wrong (the caller adds file, line and key).
    pub fn parse(text: &str) -> Result<Metric> {
        let mut p = Parser { text, pos: 0 };
        let m = p.expr()?;
        if let Some(c) = p.peek() {
            bail!("`{text}`: unexpected `{c}` after a complete expression");
        }
        Ok(m)
    }

    /// The top-level keys of the run report the metric reads (`summary`, `tasks`, `series`, ...):
    /// [`Metric::eval`] gives the same value on a report holding only these, so a caller that keeps
    /// reports only to evaluate metrics can leave the rest out (a report's tasks and series are most
    /// of its size).
    pub fn report_keys(&self, out: &mut std::collections::BTreeSet<String>) {
        match self {
            Metric::Leaf(t) => {
                let keys: &[&str] = match &t.0 {
                    Term::Number(_) => &[],
                    Term::Path(p) => {
                        out.extend(p.first().cloned());
                        &[]
                    }
                    Term::Rate(p) => {
                        out.extend(p.first().cloned());
                        &["duration_ns"]
                    }
                    Term::Counter(..) => &["counters", "duration_ns"],
                    Term::Stat(_) => &["policy_stats"],
                    Term::Tasks { .. } | Term::CountBelow { .. } => &["tasks"],
                    Term::SpreadAt(_)
                    | Term::BalancedAfter(..)
                    | Term::MigrationsBetween(..)
                    | Term::PeakRate(..) => &["series"],
                    Term::NodeSpreadAt(_) => &["series", "cpus"],
                    Term::ShareBetween(..) | Term::PolicyExtreme { .. } => &["series", "tasks"],
                };
                out.extend(keys.iter().map(|k| k.to_string()));
            }
            Metric::Op(_, a, b) => {
                a.report_keys(out);
                b.report_keys(out);
            }
        }
    }

    /// The value of the metric on one run report.
    pub fn eval(&self, r: &Value) -> Option<f64> {
        match self {
            Metric::Leaf(t) => eval_term(&t.0, r),
            Metric::Op(op, a, b) => {
                let (a, b) = (a.eval(r)?, b.eval(r)?);
                match op {
                    '+' => Some(a + b),
                    '-' => Some(a - b),
                    '*' => Some(a * b),
                    _ => (b != 0.0).then_some(a / b),
                }
            }
        }
    }
}

/// Splits at `sep` outside brackets and parentheses.
fn split_top(text: &str, sep: char) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for ch in text.chars() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    out.push(cur);
    out
}

fn path(text: &str) -> Result<Vec<String>> {
    let parts: Vec<String> = text.split('.').map(|s| s.trim().to_string()).collect();
    if parts.iter().any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c)))
    {
        bail!("`{text}` is not a dotted path of report keys");
    }
    Ok(parts)
}

/// `tasks[GLOB].field` -> (glob, field path).
fn tasks_ref(text: &str) -> Result<(String, Vec<String>)> {
    let rest = text
        .trim()
        .strip_prefix("tasks[")
        .ok_or_else(|| anyhow::anyhow!("`{text}`: expected tasks[GLOB].field"))?;
    let close = rest.find(']').ok_or_else(|| anyhow::anyhow!("`{text}`: missing `]`"))?;
    let glob = rest[..close].trim().to_string();
    let field = rest[close + 1..].trim();
    let field = match field.strip_prefix('.') {
        Some(f) => path(f)?,
        None if field.is_empty() => Vec::new(),
        None => bail!("`{text}`: expected `.field` after tasks[...]"),
    };
    Ok((glob, field))
}

fn time_arg(text: &str) -> Result<u64> {
    parse_duration(text.trim()).map_err(|e| anyhow::anyhow!("`{}`: {e}", text.trim()))
}

fn number_arg(text: &str) -> Result<f64> {
    let t = text.trim();
    if let Ok(v) = t.parse::<f64>() {
        return Ok(v);
    }
    time_arg(t).map(|ns| ns as f64).map_err(|_| anyhow::anyhow!("`{t}`: expected a number or a duration"))
}

fn term(text: &str) -> Result<Term> {
    if text.is_empty() {
        bail!("empty metric");
    }
    if let Ok(v) = text.parse::<f64>() {
        return Ok(Term::Number(v));
    }
    let Some(open) = text.find('(') else { return Ok(Term::Path(path(text)?)) };
    let name = text[..open].trim();
    let inner = text[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| anyhow::anyhow!("`{text}`: missing `)` at the end"))?;
    let args = split_top(inner, ',');
    let want = |n: usize| -> Result<()> {
        if args.len() != n {
            bail!("`{name}` takes {n} argument(s), got {}", args.len());
        }
        Ok(())
    };
    let agg = match name {
        "sum" => Some(Agg::Sum),
        "mean" => Some(Agg::Mean),
        "sd" => Some(Agg::Sd),
        "cv" => Some(Agg::Cv),
        "min" => Some(Agg::Min),
        "max" => Some(Agg::Max),
        "count" => Some(Agg::Count),
        _ => None,
    };
    if let Some(agg) = agg {
        want(1)?;
        let (glob, field) = tasks_ref(&args[0])?;
        if field.is_empty() && agg != Agg::Count {
            bail!("`{text}`: {name} needs a field (tasks[GLOB].field)");
        }
        return Ok(Term::Tasks { agg, glob, field });
    }
    Ok(match name {
        "rate" => {
            want(1)?;
            Term::Rate(path(&args[0])?)
        }
        "counter" | "counter_rate" => {
            want(1)?;
            let name = args[0].trim();
            if name.is_empty() {
                bail!("`{text}`: a counter name is needed");
            }
            Term::Counter(name.to_string(), name_is_rate(name, text))
        }
        "count_below" => {
            want(2)?;
            let (glob, field) = tasks_ref(&args[0])?;
            if field.is_empty() {
                bail!("`{text}`: count_below needs a field");
            }
            Term::CountBelow { glob, field, below: number_arg(&args[1])? }
        }
        "stat" => {
            want(1)?;
            Term::Stat(args[0].trim().to_string())
        }
        "spread_at" => {
            want(1)?;
            Term::SpreadAt(time_arg(&args[0])?)
        }
        "node_spread_at" => {
            want(1)?;
            Term::NodeSpreadAt(time_arg(&args[0])?)
        }
        "balanced_after" => {
            want(2)?;
            Term::BalancedAfter(time_arg(&args[0])?, number_arg(&args[1])?)
        }
        "policy_min" | "policy_max" => {
            want(4)?;
            let (glob, field) = tasks_ref(&args[0])?;
            if !field.is_empty() {
                bail!("`{text}`: {name} takes tasks[GLOB] without a field, then the value's name");
            }
            let value = args[1].trim();
            if value.is_empty() {
                bail!("`{text}`: the name of a policy value is needed (as in the report's tasks[].policy)");
            }
            let from = time_arg(&args[2])?;
            let to = match args[3].trim() {
                "end" => None,
                t => Some(time_arg(t)?),
            };
            if to.is_some_and(|to| to < from) {
                bail!("`{text}`: the window must not end before it starts");
            }
            Term::PolicyExtreme { max: name == "policy_max", glob, name: value.to_string(), from, to }
        }
        "share_between" => {
            want(3)?;
            let (glob, field) = tasks_ref(&args[0])?;
            if !field.is_empty() {
                bail!("`{text}`: share_between takes tasks[GLOB] without a field");
            }
            let to = match args[2].trim() {
                "end" => None,
                t => Some(time_arg(t)?),
            };
            if to.is_some_and(|to| to <= time_arg(&args[1]).unwrap_or(u64::MAX)) {
                bail!("`{text}`: the window must end after it starts");
            }
            Term::ShareBetween(glob, time_arg(&args[1])?, to)
        }
        "migrations_between" => {
            want(2)?;
            Term::MigrationsBetween(time_arg(&args[0])?, time_arg(&args[1])?)
        }
        "peak_rate" => {
            want(2)?;
            let series = args[0].trim();
            if !CUMULATIVE_SERIES.contains(&series) {
                bail!("`{text}`: the series is one of {}, not `{series}`", CUMULATIVE_SERIES.join(", "));
            }
            let window = time_arg(&args[1])?;
            if window == 0 {
                bail!("`{text}`: the window must be longer than zero");
            }
            Term::PeakRate(series.to_string(), window)
        }
        _ => bail!(
            "unknown function `{name}` (known: sum, mean, sd, cv, min, max, count, count_below, rate, counter, counter_rate, stat, \
             spread_at, node_spread_at, balanced_after, migrations_between, peak_rate, policy_min, policy_max, share_between)"
        ),
    })
}

/// The report's series that count up from the start (`series.switches`, `series.migrations`).
const CUMULATIVE_SERIES: [&str; 2] = ["switches", "migrations"];

/// The highest `(c[j] - c[i]) / (t[j] - t[i])` a second, with `j` the first sample at least
/// `window` after `i`; `None` when no two samples are that far apart.
fn peak_rate(times: &[f64], counts: &[f64], window: f64) -> Option<f64> {
    let mut best: Option<f64> = None;
    let mut j = 0;
    for i in 0..times.len() {
        j = j.max(i);
        while j < times.len() && times[j] - times[i] < window {
            j += 1;
        }
        let Some(&tj) = times.get(j) else { break };
        let rate = (counts[j] - counts[i]) / (tj - times[i]) * 1e9;
        best = Some(best.map_or(rate, |b: f64| b.max(rate)));
    }
    best
}

fn name_is_rate(_name: &str, call: &str) -> bool {
    call.starts_with("counter_rate")
}

/// `*` matches any run of characters.
pub fn glob_match(glob: &str, name: &str) -> bool {
    match glob.split_once('*') {
        None => glob == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else { return false };
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob_match(rest, &tail[i..]))
        }
    }
}

fn lookup<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k.as_str()))
}

fn report_value(r: &Value, path: &[String]) -> Option<f64> {
    lookup(r, path)?.as_f64()
}

fn task_field(t: &Value, field: &[String]) -> Option<f64> {
    if field.len() == 1 && field[0] == "elapsed_ns" {
        return Some(t["exited_ns"].as_f64()? - t["started_ns"].as_f64()?);
    }
    lookup(t, field)?.as_f64()
}

fn matching<'a>(r: &'a Value, glob: &'a str) -> impl Iterator<Item = &'a Value> {
    let (key, glob) = match glob.strip_prefix("template=") {
        Some(g) => ("template", g),
        None => ("name", glob),
    };
    r["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |t| glob_match(glob, t[key].as_str().unwrap_or("")))
}

fn aggregate(agg: Agg, v: &[f64]) -> Option<f64> {
    let n = v.len() as f64;
    let mean = || v.iter().sum::<f64>() / n;
    match agg {
        Agg::Count => Some(n),
        _ if v.is_empty() => None,
        Agg::Sum => Some(v.iter().sum()),
        Agg::Mean => Some(mean()),
        Agg::Min => v.iter().copied().reduce(f64::min),
        Agg::Max => v.iter().copied().reduce(f64::max),
        Agg::Sd | Agg::Cv => {
            // Population standard deviation, as the seed papers compute fairness over all threads.
            let m = mean();
            let sd = (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n).sqrt();
            if agg == Agg::Sd {
                Some(sd)
            } else {
                (m != 0.0).then_some(sd / m)
            }
        }
    }
}

/// Index of the first sample at or after `t`.
fn sample_at(r: &Value, t: u64) -> Option<usize> {
    r["series"]["time_ns"].as_array()?.iter().position(|x| x.as_u64().is_some_and(|x| x >= t))
}

fn per_cpu_at(r: &Value, k: usize) -> Option<Vec<f64>> {
    r["series"]["nr_running"].as_array()?.iter().map(|row| row.get(k)?.as_f64()).collect()
}

/// A task's cumulative value at time `t`, linear between samples: `row` covers the newest samples
/// (aligned to the end of `times`; before its first one the task did not exist: 0), and before the
/// first sample the value grows from 0 at time 0.
fn row_value_at(times: &[f64], row: &[f64], t: f64) -> f64 {
    let off = times.len() - row.len().min(times.len());
    let val = |k: usize| if k < off { 0.0 } else { row[k - off] };
    match times.iter().position(|&x| x >= t) {
        None => row.last().copied().unwrap_or(0.0),
        Some(0) if times[0] > 0.0 => val(0) * t / times[0],
        Some(0) => val(0),
        Some(k) => {
            let (a, b) = (times[k - 1], times[k]);
            val(k - 1) + (val(k) - val(k - 1)) * (t - a) / (b - a)
        }
    }
}

fn spread(v: &[f64]) -> Option<f64> {
    let max = v.iter().copied().reduce(f64::max)?;
    let min = v.iter().copied().reduce(f64::min)?;
    Some(max - min)
}

fn eval_term(t: &Term, r: &Value) -> Option<f64> {
    match t {
        Term::Number(v) => Some(*v),
        Term::Path(p) => report_value(r, p),
        Term::Rate(p) => {
            let secs = r["duration_ns"].as_f64()? / 1e9;
            Some(report_value(r, p)? / secs)
        }
        Term::Counter(name, per_sec) => {
            let c = r["counters"].as_array()?.iter().find(|c| c["name"] == name.as_str())?;
            if *per_sec {
                Some(c["value"].as_f64()? / (r["duration_ns"].as_f64()? / 1e9))
            } else {
                c["value"].as_f64()
            }
        }
        Term::Tasks { agg, glob, field } => {
            if *agg == Agg::Count && field.is_empty() {
                return Some(matching(r, glob).count() as f64);
            }
            let v: Vec<f64> = matching(r, glob).filter_map(|t| task_field(t, field)).collect();
            aggregate(*agg, &v)
        }
        Term::CountBelow { glob, field, below } => {
            Some(matching(r, glob).filter(|t| task_field(t, field).is_some_and(|v| v < *below)).count() as f64)
        }
        Term::Stat(name) => {
            r["policy_stats"].as_array()?.iter().find(|s| s["name"] == name.as_str())?["value"].as_f64()
        }
        Term::SpreadAt(t) => spread(&per_cpu_at(r, sample_at(r, *t)?)?),
        Term::NodeSpreadAt(t) => {
            let per_cpu = per_cpu_at(r, sample_at(r, *t)?)?;
            let nodes: Vec<u64> =
                r["cpus"].as_array()?.iter().map(|c| c["node"].as_u64()).collect::<Option<_>>()?;
            let nnodes = nodes.iter().max()? + 1;
            let mut per_node = vec![0.0; nnodes as usize];
            for (c, n) in per_cpu.iter().zip(&nodes) {
                per_node[*n as usize] += c;
            }
            spread(&per_node)
        }
        Term::BalancedAfter(t, tol) => {
            let times = r["series"]["time_ns"].as_array()?;
            let start = sample_at(r, *t)?;
            (start..times.len())
                .find(|&k| per_cpu_at(r, k).and_then(|v| spread(&v)).is_some_and(|s| s <= *tol))
                .and_then(|k| Some(times[k].as_f64()? - *t as f64))
        }
        Term::ShareBetween(glob, from, to) => {
            let times: Vec<f64> =
                r["series"]["time_ns"].as_array()?.iter().map(Value::as_f64).collect::<Option<_>>()?;
            let rows = r["series"]["task_run_ns"].as_array()?;
            let last = *times.last()?;
            let (t0, t1) = (*from as f64, to.map_or(last, |t| (t as f64).min(last)));
            if t1 <= t0 {
                return None;
            }
            let key = if glob.starts_with("template=") { "template" } else { "name" };
            let g = glob.strip_prefix("template=").unwrap_or(glob);
            let mut run = 0.0;
            let mut any = false;
            for (i, t) in r["tasks"].as_array()?.iter().enumerate() {
                if !glob_match(g, t[key].as_str().unwrap_or("")) {
                    continue;
                }
                any = true;
                let row: Vec<f64> =
                    rows.get(i)?.as_array()?.iter().map(Value::as_f64).collect::<Option<_>>()?;
                run += row_value_at(&times, &row, t1) - row_value_at(&times, &row, t0);
            }
            any.then_some(run / (t1 - t0))
        }
        Term::MigrationsBetween(a, b) => {
            let m = r["series"]["migrations"].as_array()?;
            let (i, j) = (sample_at(r, *a)?, sample_at(r, *b)?);
            Some(m.get(j)?.as_f64()? - m.get(i)?.as_f64()?)
        }
        Term::PolicyExtreme { max, glob, name, from, to } => {
            let times: Vec<f64> =
                r["series"]["time_ns"].as_array()?.iter().map(Value::as_f64).collect::<Option<_>>()?;
            let rows = r["series"]["task_policy"][name.as_str()].as_array()?;
            let (t0, t1) = (*from as f64, to.map_or(f64::INFINITY, |t| t as f64));
            let key = if glob.starts_with("template=") { "template" } else { "name" };
            let g = glob.strip_prefix("template=").unwrap_or(glob);
            let mut best: Option<f64> = None;
            for (i, t) in r["tasks"].as_array()?.iter().enumerate() {
                if !glob_match(g, t[key].as_str().unwrap_or("")) {
                    continue;
                }
                // A task's row covers the newest samples (aligned to the end).
                let row = rows.get(i)?.as_array()?;
                let offset = times.len().checked_sub(row.len())?;
                for (k, v) in row.iter().enumerate() {
                    let at = times[offset + k];
                    let Some(v) = v.as_f64().filter(|_| at >= t0 && at <= t1) else { continue };
                    best = Some(best.map_or(v, |b: f64| if *max { b.max(v) } else { b.min(v) }));
                }
            }
            best
        }
        Term::PeakRate(series, window) => {
            let column = |name: &str| -> Option<Vec<f64>> {
                r["series"][name].as_array()?.iter().map(Value::as_f64).collect()
            };
            let (times, counts) = (column("time_ns")?, column(series)?);
            if times.len() != counts.len() {
                return None;
            }
            peak_rate(&times, &counts, *window as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> Value {
        json!({
            "duration_ns": 2_000_000_000u64,
            "summary": { "busy_ns": 1000, "wakeup_latency": { "p99_ns": 50 } },
            "counters": [ { "name": "events", "value": 300 } ],
            "policy_stats": [ { "name": "nr_recalcs", "value": 7 } ],
            "cpus": [ { "node": 0 }, { "node": 0 }, { "node": 1 }, { "node": 1 } ],
            "tasks": [
                { "name": "fibo.fibo", "template": "fibo.fibo", "run_ns": 600, "started_ns": 0, "exited_ns": 10 },
                { "name": "sb.worker-0", "template": "sb.worker", "run_ns": 300, "started_ns": 5, "exited_ns": 35 },
                { "name": "sb.worker-1", "template": "sb.worker", "run_ns": 100, "started_ns": 5, "exited_ns": null },
                { "name": "sb.worker-2", "template": "sb.worker-2", "run_ns": 0, "started_ns": 5, "exited_ns": null },
            ],
            "series": {
                "time_ns": [0, 1_000_000_000u64, 1_500_000_000u64, 2_000_000_000u64],
                "nr_running": [[8, 5, 3, 2], [0, 1, 2, 2], [0, 1, 2, 2], [0, 1, 1, 2]],
                "migrations": [0, 4, 6, 7],
                "switches": [0, 100, 400, 500],
                // fibo's score from the start; worker-0 from 1 s (null: no value yet at 1 s).
                "task_policy": { "score": [[0, 20, 50, 50], [null, 5, 3], [], [40, 41]] },
                // Per task: fibo from the start; worker-0 from 1 s (its row aligned to the end);
                // worker-1 never sampled; worker-2 from 1.5 s.
                "task_run_ns": [[0, 1e9, 1.2e9, 1.4e9], [0, 0.3e9, 0.5e9], [], [0, 0]],
            },
        })
    }

    fn eval(text: &str) -> Option<f64> {
        Metric::parse(text).unwrap().eval(&report())
    }

    #[test]
    fn a_report_cut_to_the_keys_a_metric_reads_gives_the_same_value() {
        // One metric per kind of operand; each must have a value on the example report, and the same
        // value when the report keeps only the keys `report_keys` names (a missing key would give
        // `None` or another value).
        let metrics = [
            "summary.wakeup_latency.p99_ns",
            "rate(summary.busy_ns)",
            "counter(events) + counter_rate(events)",
            "stat(nr_recalcs)",
            "mean(tasks[sb.*].run_ns) + count_below(tasks[*].run_ns, 200)",
            "spread_at(1s) + node_spread_at(1s) + migrations_between(1s, 2s)",
            "balanced_after(0s, 1)",
            "peak_rate(switches, 500ms)",
            "policy_max(tasks[*], score, 0s, end)",
            "share_between(tasks[fibo*], 0s, 2s)",
            "3 * 2",
        ];
        let full = report();
        for text in metrics {
            let m = Metric::parse(text).unwrap();
            let mut keys = std::collections::BTreeSet::new();
            m.report_keys(&mut keys);
            let mut cut = full.clone();
            cut.as_object_mut().unwrap().retain(|k, _| keys.contains(k));
            let whole = m.eval(&full);
            assert!(whole.is_some(), "{text} has no value on the example report");
            assert_eq!(m.eval(&cut), whole, "{text} reads keys beyond {keys:?}");
        }
    }

    #[test]
    fn paths_counters_rates_and_ratios() {
        assert_eq!(eval("summary.wakeup_latency.p99_ns"), Some(50.0));
        assert_eq!(eval("counter(events)"), Some(300.0));
        assert_eq!(eval("counter_rate(events)"), Some(150.0));
        assert_eq!(eval("rate(summary.busy_ns)"), Some(500.0));
        assert_eq!(eval("sum(tasks[fibo*].run_ns) / summary.busy_ns"), Some(0.6));
        assert_eq!(eval("counter(nope)"), None);
        assert_eq!(eval("stat(nr_recalcs)"), Some(7.0));
        assert_eq!(eval("stat(nope)"), None);
        assert_eq!(eval("1 / 0"), None, "a zero denominator is not a value");
        // Precedence and parentheses: (600 - 100) / (1000 - 500) = 1; 2 + 3 * 4 = 14; 1e3 - 1e-3.
        assert_eq!(eval("(sum(tasks[fibo*].run_ns) - 100) / (summary.busy_ns - 500)"), Some(1.0));
        assert_eq!(eval("2 + 3 * 4"), Some(14.0));
        assert_eq!(eval("8 / 2 / 2"), Some(2.0), "left to right");
        assert_eq!(eval("1e3 - 1e-3"), Some(999.999));
    }

    #[test]
    fn task_aggregates_over_a_glob() {
        assert_eq!(eval("count(tasks[sb.*])"), Some(3.0));
        assert_eq!(eval("count(tasks[template=sb.worker])"), Some(2.0), "by template, exactly");
        assert_eq!(eval("sum(tasks[sb.*].run_ns)"), Some(400.0));
        assert_eq!(eval("max(tasks[*].run_ns)"), Some(600.0));
        // Population sd of 300, 100, 0: mean 133.3, variance (166.7^2 + 33.3^2 + 133.3^2) / 3.
        let sd = eval("sd(tasks[sb.*].run_ns)").unwrap();
        assert!((sd - (46666.67f64 / 3.0).sqrt()).abs() < 0.01, "{sd}");
        assert_eq!(eval("mean(tasks[*].elapsed_ns)"), Some(20.0), "only exited tasks have an elapsed time");
        assert_eq!(eval("count_below(tasks[sb.*].run_ns, 100)"), Some(1.0));
        assert_eq!(eval("mean(tasks[nothing*].run_ns)"), None);
    }

    #[test]
    fn series_functions() {
        // Rows are CPUs: at 0 s 8,0,0,0; at 1 s 5,1,1,1; at 1.5 s 3,2,2,1; at 2 s 2,2,2,2.
        assert_eq!(eval("spread_at(0s)"), Some(8.0));
        assert_eq!(eval("spread_at(1s)"), Some(4.0));
        assert_eq!(eval("spread_at(1.2s)"), Some(2.0), "the first sample at or after 1.2 s");
        // Nodes {0,1} and {2,3} at 1.5 s: 5 and 3 tasks.
        assert_eq!(eval("node_spread_at(1.5s)"), Some(2.0));
        assert_eq!(eval("node_spread_at(0s)"), Some(8.0));
        assert_eq!(eval("balanced_after(1s, 1)"), Some(1e9));
        assert_eq!(eval("balanced_after(1s, 2)"), Some(5e8));
        assert_eq!(eval("balanced_after(0s, -1)"), None, "never balanced");
        assert_eq!(eval("migrations_between(1s, 2s)"), Some(3.0));
        // Switches 0, 100, 400, 500 at 0, 1, 1.5, 2 s. Windows of 0.5 s: 100/1 s, 300/0.5 s,
        // 100/0.5 s: the peak 600 a second. Of 1 s: 100/1 s, 400/1 s (1 to 2 s): 400.
        assert_eq!(eval("peak_rate(switches, 0.5s)"), Some(600.0));
        assert_eq!(eval("peak_rate(switches, 1s)"), Some(400.0));
        assert_eq!(eval("peak_rate(switches, 2s)"), Some(250.0), "the whole run");
        assert_eq!(eval("peak_rate(migrations, 1s)"), Some(4.0));
        assert_eq!(eval("peak_rate(switches, 3s)"), None, "no two samples 3 s apart");
        assert!(Metric::parse("peak_rate(wakeups, 1s)")
            .unwrap_err()
            .to_string()
            .contains("switches, migrations"));
        assert!(Metric::parse("peak_rate(switches, 0s)").is_err());
        // Policy values: fibo 0, 20, 50, 50 at 0, 1, 1.5, 2 s; worker-0 -, 5, 3 at 1, 1.5, 2 s;
        // worker-2 40, 41 at 1.5, 2 s.
        assert_eq!(eval("policy_max(tasks[fibo*], score, 0s, end)"), Some(50.0));
        assert_eq!(eval("policy_min(tasks[fibo*], score, 0.5s, end)"), Some(20.0), "from the 1 s sample");
        assert_eq!(eval("policy_min(tasks[fibo*], score, 0s, 1s)"), Some(0.0));
        assert_eq!(eval("policy_max(tasks[sb.*], score, 0s, 1.5s)"), Some(40.0));
        assert_eq!(eval("policy_min(tasks[sb.*], score, 0s, end)"), Some(3.0), "nulls are skipped");
        assert_eq!(eval("policy_max(tasks[template=sb.worker], score, 1.6s, end)"), Some(3.0));
        assert_eq!(eval("policy_max(tasks[sb.worker-1], score, 0s, end)"), None, "no values");
        assert_eq!(eval("policy_max(tasks[fibo*], vruntime, 0s, end)"), None, "no such value");
        assert!(Metric::parse("policy_max(tasks[fibo*].run_ns, score, 0s, end)").is_err());
        assert!(Metric::parse("policy_max(tasks[fibo*], , 0s, end)").is_err());
        assert!(Metric::parse("policy_min(tasks[fibo*], score, 2s, 1s)").is_err());
        // fibo from 1 s to 2 s: 1.4e9 - 1e9 over 1 s.
        assert!((eval("share_between(tasks[fibo*], 1s, 2s)").unwrap() - 0.4).abs() < 1e-12);
        assert!(
            (eval("share_between(tasks[fibo*], 1s, end)").unwrap() - 0.4).abs() < 1e-12,
            "end: the last sample"
        );
        // Linear between samples: at 0.5 s fibo had 0.5e9, at 1.25 s 1.1e9: 0.6e9 over 0.75 s.
        assert!((eval("share_between(tasks[fibo*], 0.5s, 1.25s)").unwrap() - 0.8).abs() < 1e-12);
        // The workers: worker-0 0.3e9 from 1 s to 1.5 s, worker-2 nothing: 0.3e9 over 0.5 s.
        assert!((eval("share_between(tasks[sb.*], 1s, 1.5s)").unwrap() - 0.6).abs() < 1e-12);
        // Before worker-0's row starts (0.5 s) it counts 0: 0.3e9 from 0.5 s to 1.5 s.
        assert!((eval("share_between(tasks[template=sb.worker], 0.5s, 1.5s)").unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(eval("share_between(tasks[nothing], 0s, end)"), None, "no such task");
        assert_eq!(eval("share_between(tasks[fibo*], 3s, end)"), None, "a window past the last sample");
        assert!(Metric::parse("share_between(tasks[fibo*], 2s, 1s)").is_err());
        assert!(Metric::parse("share_between(tasks[fibo*].run_ns, 0s, end)").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob_match("sb.*", "sb.worker-1"));
        assert!(glob_match("*worker*", "sb.worker-1"));
        assert!(glob_match("*-1", "sb.worker-1"));
        assert!(!glob_match("*-2", "sb.worker-1"));
        assert!(glob_match("fibo", "fibo") && !glob_match("fibo", "fibo2"));
    }

    #[test]
    fn bad_expressions_say_why() {
        let err = |t: &str| Metric::parse(t).unwrap_err().to_string();
        assert!(err("median(tasks[*].run_ns)").contains("unknown function `median`"));
        assert!(err("sum(tasks[*])").contains("needs a field"));
        assert!(err("spread_at(soon)").contains("soon"));
        assert!(err("(1 + 2").contains("missing `)`"));
        assert!(err("1 +").contains("missing at the end"));
        assert!(err("1 2").contains("unexpected `2`"));
        assert!(err("summary..x").contains("dotted path"));
        assert!(err("balanced_after(1s)").contains("takes 2"));
    }
}
