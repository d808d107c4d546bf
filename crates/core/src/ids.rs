//! Typed ids for tasks, CPUs and task groups, so that one can never be passed where another is meant.

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as an index into the vector that holds the objects it names.
            #[inline]
            pub fn idx(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// A task (a Linux thread). Ids are dense, assigned in creation order from 0, never reused.
    TaskId
);
id_type!(
    /// A logical CPU (one hardware thread), numbered from 0 as the topology lists them.
    CpuId
);
id_type!(
    /// A task group (cgroup). Group 0 is the root group every task belongs to by default.
    GroupId
);

impl GroupId {
    /// The root task group.
    pub const ROOT: GroupId = GroupId(0);
}
