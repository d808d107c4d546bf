//! Shared by the suites that run every registered policy (conformance, properties).

/// One `#[test]` per registered policy, each calling `$check(spec)`, and a test that fails when a
/// policy is registered but missing from the list (so a new policy cannot skip the suite).
macro_rules! every_policy {
    ($check:ident) => {
        every_policy!(@list $check;
            cfs => "cfs", eevdf => "eevdf", avec => "avec", linux24 => "linux24", elsc => "elsc",
            bfs => "bfs", o1 => "o1", ule => "ule", htfs => "htfs", bsd4 => "4bsd", vtrr => "vtrr", rsdl => "rsdl", pmqs => "pmqs",
            fifo => "fifo",
            rr => "rr",
            // Variants whose code paths the defaults do not take: seed 001's 2.3.99-pre4 baseline, ELSC
            // on 2.4.27's counters, HTFS on CFS 2.6.38's balancer with weight loads.
            linux24_2399 => "linux24[kernel=2.3.99]", elsc_2427 => "elsc[kernel=2.4.27]",
            htfs_std => "htfs[balance=std]", eevdf_66 => "eevdf[kernel=6.6]");
    };
    (@list $check:ident; $($name:ident => $spec:expr),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $check($spec);
            }
        )*

        #[test]
        fn every_registered_policy_is_covered() {
            let covered: &[&str] = &[$($spec),*];
            for p in schedlab_policies::policies() {
                assert!(covered.contains(&p.name), "policy `{}` is registered but not in every_policy!", p.name);
            }
        }
    };
}
