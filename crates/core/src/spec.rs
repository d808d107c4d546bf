//! Specs such as `cfs[sched_latency_ns=6000000]` or `hackbench[groups=4,loops=10]`: a name and
//! `key=value` parameters, the one syntax policies and built-in workloads are named with.

/// A spec split into its name and `(key, value)` pairs, in the order given.
pub type Spec = (String, Vec<(String, String)>);

/// Splits `name[k=v,k=v]`. The name is letters, digits, `_` and `-`; values may be empty strings but
/// keys may not.
pub fn split_spec(spec: &str) -> Result<Spec, String> {
    let spec = spec.trim();
    let (name, rest) = match spec.find('[') {
        None => (spec, None),
        Some(i) => {
            let inner = spec[i + 1..].strip_suffix(']').ok_or("missing closing `]`")?;
            (&spec[..i], Some(inner))
        }
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err("a name is letters, digits, `_` or `-`".into());
    }
    let mut pairs = Vec::new();
    for part in rest.unwrap_or("").split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => pairs.push((k.trim().to_string(), v.trim().to_string())),
            _ => return Err(format!("`{part}` is not key=value")),
        }
    }
    Ok((name.to_string(), pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_names_and_pairs() {
        assert_eq!(split_spec("cfs").unwrap(), ("cfs".into(), vec![]));
        assert_eq!(
            split_spec(" hackbench[groups=4, pipe=true] ").unwrap(),
            ("hackbench".into(), vec![("groups".into(), "4".into()), ("pipe".into(), "true".into())])
        );
        assert!(split_spec("cfs[x=1").unwrap_err().contains("closing"));
        assert!(split_spec("cfs[x]").unwrap_err().contains("key=value"));
        assert!(split_spec("cfs[=3]").unwrap_err().contains("key=value"));
        assert!(split_spec("c f s").is_err());
    }
}
