//! The registry: every policy by name, with its parameters, and creation from a spec string.

use crate::params::{apply, ParamError, ParamInfo, Params};
use crate::{cfs, fifo};
use schedlab_core::SchedPolicy;

/// Builds a policy from key/value parameters.
pub type MakeFn = fn(&[(String, String)]) -> Result<Box<dyn SchedPolicy>, ParamError>;

/// What the registry knows about a policy.
#[derive(Clone, Copy)]
pub struct PolicyInfo {
    /// Name used in specs.
    pub name: &'static str,
    /// One line: what it is and which source it follows.
    pub summary: &'static str,
    /// Its parameters.
    pub params: fn() -> &'static [ParamInfo],
    make: MakeFn,
}

impl PolicyInfo {
    /// A policy's entry, for [`register`]: its name in specs, a one-line summary naming its source,
    /// its parameters (with defaults and help) and how to build it from `key=value` pairs (usually
    /// `|pairs| Ok(Box::new(Mine::new(schedlab_policies::apply("mine", pairs)?)))`).
    pub const fn new(
        name: &'static str,
        summary: &'static str,
        params: fn() -> &'static [ParamInfo],
        make: MakeFn,
    ) -> PolicyInfo {
        PolicyInfo { name, summary, params, make }
    }
}

/// Policies registered at run time by code outside this crate, after the built-ins.
static REGISTERED: std::sync::Mutex<Vec<PolicyInfo>> = std::sync::Mutex::new(Vec::new());

/// Registers a policy defined outside this crate, so that specs naming it work wherever specs are
/// read (the command line, the Python package, sweeps, experiments) in this process. Registering the
/// same entry again does nothing; another policy with a taken name is an error.
pub fn register(info: PolicyInfo) -> Result<(), String> {
    let mut extra = REGISTERED.lock().expect("registry lock");
    if let Some(old) = builtins().iter().chain(extra.iter()).find(|p| p.name == info.name) {
        if old.make as usize == info.make as usize && old.summary == info.summary {
            return Ok(());
        }
        return Err(format!("a policy named `{}` is already registered", info.name));
    }
    if info.name.is_empty()
        || info.name.contains(['[', ']', ',', '='])
        || info.name.contains(char::is_whitespace)
    {
        return Err(format!("`{}` is not a policy name (no spaces, brackets, commas or `=`)", info.name));
    }
    extra.push(info);
    Ok(())
}

/// Every registered policy, the built-ins first, in the order `schedlab list policies` shows them.
pub fn policies() -> Vec<PolicyInfo> {
    let mut all = builtins();
    all.extend(REGISTERED.lock().expect("registry lock").iter().copied());
    all
}

/// The policies of this crate.
fn builtins() -> Vec<PolicyInfo> {
    vec![
        PolicyInfo {
            name: "cfs",
            summary: "Linux CFS as in 2.6.38 (kernel/sched_fair.c): vruntime, buddies, group shares, sched-domain balancing; SCHED_FIFO/RR tasks run in the Linux RT class above it",
            params: cfs::CfsParams::info,
            make: |pairs| {
                let fair = cfs::Cfs::new(apply::<cfs::CfsParams>("cfs", pairs)?);
                Ok(Box::new(crate::linux_rt::LinuxClasses::new(fair)))
            },
        },
                PolicyInfo {
            name: "eevdf",
            summary: "Linux EEVDF as in 6.18 (default: 6.12 with 6.17's slice protection), 6.12 (kernel=6.12; Debian 6.12.117: delayed dequeue, relative deadlines, PREEMPT_SHORT) or 6.6 (kernel=6.6), kernel/sched/fair.c: eligibility against the weighted average vruntime, virtual deadlines, lag placement, RUN_TO_PARITY; the Linux RT class above it",
            params: cfs::EevdfParams::info,
            make: |pairs| {
                let p = apply::<cfs::EevdfParams>("eevdf", pairs)?;
                let kernel = pairs.iter().rev().find(|(k, _)| k == "kernel").map_or("6.12", |(_, v)| v.as_str());
                let fair = cfs::Cfs::new_eevdf(p).map_err(|msg| ParamError::BadValue {
                    policy: "eevdf".into(),
                    key: "kernel".into(),
                    value: kernel.into(),
                    msg,
                })?;
                Ok(Box::new(crate::linux_rt::LinuxClasses::new(fair)))
            },
        },
                PolicyInfo {
            name: "avec",
            summary: "activity-vector scheduling (seed 004) on CFS 2.6.38: the most dissimilar of the AVEC_RANGE fairest tasks to the co-runners, by counter-based activity vectors, with starvation protection and AVEC-aware migration",
            params: crate::cfs::avec::AvecPolicyParams::info,
            make: |pairs| {
                let fair = cfs::Cfs::new_avec(apply::<crate::cfs::avec::AvecPolicyParams>("avec", pairs)?);
                Ok(Box::new(crate::linux_rt::LinuxClasses::new(fair)))
            },
        },
        PolicyInfo {
            name: "linux24",
            summary: "Linux 2.4 goodness() scheduler (kernel/sched.c 2.4.27, or seed 001's 2.3.99-pre4 with kernel=2.3.99): one run list scanned at every decision, counters and recalculation",
            params: crate::linux24::Linux24Params::info,
            make: |pairs| Ok(Box::new(crate::linux24::Goodness::new(apply("linux24", pairs)?))),
        },
        PolicyInfo {
            name: "elsc",
            summary: "ELSC (seed 001 sec. 5): 2.3.99-pre4 (or 2.4.27) with a 30-list table by static goodness and a search limited to nr_cpus/2 + 5 tasks",
            params: crate::elsc::ElscParams::info,
            make: |pairs| Ok(Box::new(crate::elsc::Elsc::new(apply("elsc", pairs)?))),
        },
        PolicyInfo {
            name: "pmqs",
            summary: "MQS / PMQS (Kravetz, Franke et al., IBM, OLS and ALS 2001): Linux 2.4 goodness on per-CPU run queues, stealing by max_na_goodness within CPU pools, a load balancer between pools",
            params: crate::pmqs::PmqsParams::info,
            make: |pairs| Ok(Box::new(crate::pmqs::Pmqs::new(apply("pmqs", pairs)?))),
        },
                        PolicyInfo {
            name: "o1",
            summary: "Linux O(1) scheduler (kernel/sched.c 2.6.22): active/expired priority arrays, sleep_avg interactivity, expired_starving, sched-domain balancing",
            params: crate::linux24::NoParams::info,
            make: |pairs| Ok(Box::new(crate::o1::O1::new(apply("o1", pairs)?))),
        },
        PolicyInfo {
            name: "bfs",
            summary: "BFS of the Linux 3.0 series (Con Kolivas, sched_bfs.c): one global queue, earliest virtual deadline first, sticky tasks, SCHED_ISO, no balancer",
            params: crate::bfs::BfsParams::info,
            make: |pairs| Ok(Box::new(crate::bfs::Bfs::new(apply("bfs", pairs)?))),
        },
        PolicyInfo {
            name: "htfs",
            summary: "HTFS (seed 000 sec. 4): dual runqueue of 50 boosted-weight priority queues, balance/runcost picking, virtual time, adaptive slices; the Linux RT class above it",
            params: crate::htfs::HtfsParams::info,
            make: |pairs| {
                let fair = crate::htfs::Htfs::new(apply::<crate::htfs::HtfsParams>("htfs", pairs)?);
                Ok(Box::new(crate::linux_rt::LinuxClasses::new(fair)))
            },
        },
        PolicyInfo {
            name: "ule",
            summary: "FreeBSD ULE (sys/kern/sched_ule.c, 10.4/11.1; seed 002): interactivity score, interactive threads before batch, calendar queue, no user preemption, thread-count balancing",
            params: crate::ule::UleParams::info,
            make: |pairs| Ok(Box::new(crate::ule::Ule::new(apply("ule", pairs)?))),
        },
        PolicyInfo {
            name: "4bsd",
            summary: "FreeBSD 4BSD (sys/kern/sched_4bsd.c, 10.4): one global queue of 64 priority lists, estcpu decayed by the load average, priority from estcpu and nice, 100 ms round robin",
            params: crate::bsd4::Bsd4Params::info,
            make: |pairs| Ok(Box::new(crate::bsd4::Bsd4::new(apply("4bsd", pairs)?))),
        },
        PolicyInfo {
            name: "rsdl",
            summary: "RSDL (Con Kolivas, 2007; 2.6.20 patch): the rotating staircase deadline scheduler, per-level quotas, minor and major rotations on O(1)'s arrays and balancer",
            params: crate::rsdl::RsdlParams::info,
            make: |pairs| Ok(Box::new(crate::rsdl::Rsdl::new(apply("rsdl", pairs)?))),
        },
        PolicyInfo {
            name: "vtrr",
            summary: "VTRR (Nieh, Vaill, Zhong, USENIX 2001): virtual-time round robin, O(1) proportional share: a queue ordered by share, time counters, the VFT inequality and the skip to the head; the Linux RT class above it",
            params: crate::vtrr::VtrrParams::info,
            make: |pairs| {
                let fair = crate::vtrr::Vtrr::new(apply::<crate::vtrr::VtrrParams>("vtrr", pairs)?);
                Ok(Box::new(crate::linux_rt::LinuxClasses::new(fair)))
            },
        },
        PolicyInfo {
            name: "fifo",
            summary: "one global FIFO queue, run to block, no priorities (the simplest policy; an example of the trait)",
            params: fifo::FifoParams::info,
            make: |pairs| Ok(Box::new(fifo::Fifo::new("fifo", apply::<fifo::FifoParams>("fifo", pairs)?))),
        },
        PolicyInfo {
            name: "rr",
            summary: "one global round-robin queue with a fixed slice (slice_ns, default 10 ms)",
            params: fifo::FifoParams::info,
            make: |pairs| {
                let mut p = apply::<fifo::FifoParams>("rr", pairs)?;
                if !pairs.iter().any(|(k, _)| k == "slice_ns") {
                    p.slice_ns = fifo::RR_DEFAULT_SLICE_NS;
                }
                Ok(Box::new(fifo::Fifo::new("rr", p)))
            },
        },
    ]
}

/// Splits `name[k=v,k=v]` into the name and its pairs.
pub fn parse_spec(spec: &str) -> Result<(String, Vec<(String, String)>), ParamError> {
    schedlab_core::spec::split_spec(spec).map_err(|msg| ParamError::Syntax { spec: spec.trim().into(), msg })
}

/// Creates a policy from a spec such as `cfs[sched_latency_ns=6000000]`.
pub fn create(spec: &str) -> Result<Box<dyn SchedPolicy>, ParamError> {
    let (name, pairs) = parse_spec(spec)?;
    create_with(&name, &pairs)
}

/// Creates a policy from a name and key/value pairs (e.g. read from a TOML table).
pub fn create_with(name: &str, pairs: &[(String, String)]) -> Result<Box<dyn SchedPolicy>, ParamError> {
    let info = policies()
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| ParamError::UnknownPolicy(name.into()))?;
    (info.make)(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_errors_are_clear() {
        assert_eq!(parse_spec("cfs").unwrap(), ("cfs".into(), vec![]));
        let (n, p) = parse_spec("cfs[sched_latency_ns=6000000, start_debit=false]").unwrap();
        assert_eq!(n, "cfs");
        assert_eq!(
            p,
            vec![("sched_latency_ns".into(), "6000000".into()), ("start_debit".into(), "false".into())]
        );
        assert!(matches!(parse_spec("cfs[x=1"), Err(ParamError::Syntax { .. })));
        assert!(matches!(parse_spec("cfs[x]"), Err(ParamError::Syntax { .. })));
        let e = create("nosuch").err().unwrap();
        assert!(e.to_string().contains("unknown policy `nosuch`") && e.to_string().contains("cfs"), "{e}");
        let e = create("cfs[latency=3]").err().unwrap();
        assert!(e.to_string().contains("no parameter `latency`"), "{e}");
        let e = create("cfs[sched_latency_ns=abc]").err().unwrap();
        assert!(e.to_string().contains("expected a whole number"), "{e}");
        assert_eq!(create("rr").unwrap().name(), "rr");
    }

    #[test]
    fn registered_policies_are_created_by_spec_and_names_stay_unique() {
        let info = PolicyInfo::new(
            "test-rr-alias",
            "rr under another name (a test)",
            fifo::FifoParams::info,
            |pairs| Ok(Box::new(fifo::Fifo::new("rr", apply::<fifo::FifoParams>("test-rr-alias", pairs)?))),
        );
        register(info).unwrap();
        register(info).unwrap(); // the same entry again: nothing happens
        assert!(policies().iter().any(|p| p.name == "test-rr-alias"));
        assert_eq!(create("test-rr-alias[slice_ns=20000]").unwrap().name(), "rr");
        let e = create("test-rr-alias[nope=1]").err().unwrap().to_string();
        assert!(e.contains("policy `test-rr-alias` has no parameter `nope`"), "{e}");
        let clash = PolicyInfo::new("cfs", "another cfs", fifo::FifoParams::info, |_| unreachable!());
        assert_eq!(register(clash).unwrap_err(), "a policy named `cfs` is already registered");
        let bad = PolicyInfo::new("a b", "bad", fifo::FifoParams::info, |_| unreachable!());
        assert!(register(bad).unwrap_err().contains("not a policy name"));
    }
}

#[cfg(test)]
mod doc_tests {
    use super::*;

    /// The page of each policy in docs/policies/.
    fn page(name: &str) -> Option<&'static str> {
        Some(match name {
            "cfs" => include_str!("../../../docs/policies/cfs.md"),
            "eevdf" => include_str!("../../../docs/policies/eevdf.md"),
            "avec" => include_str!("../../../docs/policies/avec.md"),
            "linux24" => include_str!("../../../docs/policies/linux24.md"),
            "elsc" => include_str!("../../../docs/policies/elsc.md"),
            "bfs" => include_str!("../../../docs/policies/bfs.md"),
            "o1" => include_str!("../../../docs/policies/o1.md"),
            "ule" => include_str!("../../../docs/policies/ule.md"),
            "4bsd" => include_str!("../../../docs/policies/4bsd.md"),
            "vtrr" => include_str!("../../../docs/policies/vtrr.md"),
            "rsdl" => include_str!("../../../docs/policies/rsdl.md"),
            "pmqs" => include_str!("../../../docs/policies/pmqs.md"),
            "htfs" => include_str!("../../../docs/policies/htfs.md"),
            "fifo" | "rr" => include_str!("../../../docs/policies/fifo.md"),
            _ => return None,
        })
    }

    #[test]
    fn every_policy_has_a_page_listing_its_parameters_and_defaults() {
        let index = include_str!("../../../docs/policies/README.md");
        for p in builtins() {
            let doc =
                page(p.name).unwrap_or_else(|| panic!("policy `{}` has no page in docs/policies/", p.name));
            assert!(
                index.contains(&format!("`{}`", p.name)),
                "docs/policies/README.md does not list `{}`",
                p.name
            );
            for s in ["## Source", "## What is modelled", "## What is simplified, and why", "## Parameters"] {
                assert!(doc.contains(s), "{}: missing section {s}", p.name);
            }
            for i in (p.params)() {
                let row = format!("| `{}` | `{}` |", i.key, i.default);
                assert!(doc.contains(&row), "{}: the page lacks `{row}`", p.name);
            }
        }
    }
}
