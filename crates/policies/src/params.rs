//! Policy parameters: set from `name[key=value,...]` strings or TOML tables, with documented defaults.

/// A parameter that could not be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// No such parameter.
    #[error("policy `{policy}` has no parameter `{key}` (it has: {known})")]
    Unknown {
        /// Policy.
        policy: String,
        /// Key given.
        key: String,
        /// Keys it has.
        known: String,
    },
    /// The value does not parse or is out of range.
    #[error("policy `{policy}`: `{key}={value}`: {msg}")]
    BadValue {
        /// Policy.
        policy: String,
        /// Key.
        key: String,
        /// Value given.
        value: String,
        /// What is expected.
        msg: String,
    },
    /// Not a policy name.
    #[error("unknown policy `{0}` (known: {known})", known = crate::registry::policies().iter().map(|p| p.name).collect::<Vec<_>>().join(", "))]
    UnknownPolicy(String),
    /// The spec string is malformed.
    #[error("malformed policy spec `{spec}`: {msg}")]
    Syntax {
        /// The spec.
        spec: String,
        /// What is wrong.
        msg: String,
    },
}

/// Documentation of one parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// Key (carries its unit: `_ns`, `_ms`, `_pct`).
    pub key: &'static str,
    /// Default, as text.
    pub default: &'static str,
    /// What it does.
    pub help: &'static str,
}

/// A policy's parameter set.
pub trait Params: Default {
    /// The parameters with defaults and help.
    fn info() -> &'static [ParamInfo];
    /// Sets `key` from its text form. Errors carry only the message; the caller adds context.
    fn set(&mut self, key: &str, value: &str) -> Result<(), String>;
}

/// Parses an unsigned integer parameter within `range`.
pub fn parse_u64(value: &str, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
    let v: u64 = value
        .trim()
        .replace('_', "")
        .parse()
        .map_err(|_| format!("expected a whole number, got `{value}`"))?;
    if !range.contains(&v) {
        return Err(format!("{v} is outside {}..={}", range.start(), range.end()));
    }
    Ok(v)
}

/// Parses a boolean parameter (`true`/`false`/`1`/`0`).
pub fn parse_bool(value: &str) -> Result<bool, String> {
    match value.trim() {
        "true" | "1" | "on" => Ok(true),
        "false" | "0" | "off" => Ok(false),
        other => Err(format!("expected true or false, got `{other}`")),
    }
}

/// Applies `key=value` pairs to a fresh parameter set.
pub fn apply<P: Params>(policy: &str, pairs: &[(String, String)]) -> Result<P, ParamError> {
    let mut p = P::default();
    // A parameter that selects a version's defaults (`kernel`, `tunables`) applies first wherever
    // it is written, so the other parameters given with it override those defaults.
    let first = |k: &str| !matches!(k, "kernel" | "tunables");
    let mut ordered: Vec<&(String, String)> = pairs.iter().collect();
    ordered.sort_by_key(|(k, _)| first(k));
    for (k, v) in ordered {
        if !P::info().iter().any(|i| i.key == k) {
            return Err(ParamError::Unknown {
                policy: policy.into(),
                key: k.clone(),
                known: P::info().iter().map(|i| i.key).collect::<Vec<_>>().join(", "),
            });
        }
        p.set(k, v).map_err(|msg| ParamError::BadValue {
            policy: policy.into(),
            key: k.clone(),
            value: v.clone(),
            msg,
        })?;
    }
    Ok(p)
}
