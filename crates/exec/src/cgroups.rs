//! A workload's task groups as real cgroups with CPU weights, so the kernel's group scheduling divides
//! the CPU among them as the simulator's group scheduling does.
//!
//! * **cgroup v2** (where the `cpu` controller is on the unified hierarchy): a threaded subtree.
//!   `schedlab-<pid>` is made under the nearest ancestor of the process's cgroup that enables `cpu`
//!   for its children (a process's own cgroup usually holds processes and so cannot), gets `+cpu` in
//!   its `cgroup.subtree_control`, and becomes the threaded root the process moves into; each group is a child directory of type `threaded` with `cpu.weight`
//!   converted from the workload's shares by the kernel's own ratio (weight 100 is 1024 shares,
//!   `sched_weight_from_cgroup`), rounded to the nearest integer weight, and each thread is written to its group's `cgroup.threads`. At the
//!   end the process moves back and the directories are removed.
//! * **cgroup v1** (the `cpu` controller mounted on its own hierarchy, as on this project's machine):
//!   `<mount>/schedlab-<pid>/<group...>` directories with `cpu.shares`, threads written to `tasks`
//!   (v1 places threads individually).
//! * Neither (no `cpu` controller, not root): the groups are not made and a warning says so; the
//!   threads share the CPU as one group.

use std::fs;
use std::path::{Path, PathBuf};

/// cgroup v2 `cpu.weight` for v1-style shares: the kernel's ratio (`sched_weight_from_cgroup`:
/// weight 100 is 1024 shares) inverted and rounded to the nearest weight, within 1..=10000. (Not the
/// `1 + (shares - 2) * 9999 / 262142` of container runtimes, which maps 1024 shares to 39.)
pub fn weight_from_shares(shares: u64) -> u64 {
    ((shares * 100 + 512) / 1024).clamp(1, 10_000)
}

/// Which cgroup hierarchy carries the `cpu` controller, from `/proc/self/mounts` and
/// `/proc/self/cgroup`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuHierarchy {
    /// cgroup v2: the mount point and this process's cgroup directory under it.
    V2 {
        /// Where cgroup2 is mounted.
        mount: PathBuf,
        /// This process's cgroup directory.
        own: PathBuf,
    },
    /// cgroup v1: the `cpu` hierarchy's mount point joined with this process's cgroup in it.
    V1(PathBuf),
}

/// Finds the hierarchy with the `cpu` controller; the error says why there is none.
pub fn find_cpu_hierarchy(mounts: &str, own: &str) -> Result<CpuHierarchy, String> {
    let own_path = |select: &dyn Fn(&str) -> bool| {
        own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
            select(ctrls).then(|| path.trim_start_matches('/').to_string())
        })
    };
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let (dir, fstype, opts) = (f[1], f[2], f[3]);
        if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") {
            let rel = own_path(&|c| c.split(',').any(|x| x == "cpu")).unwrap_or_default();
            return Ok(CpuHierarchy::V1(Path::new(dir).join(rel)));
        }
        if fstype == "cgroup2" {
            let rel = own_path(&|c| c.is_empty()).unwrap_or_default();
            let controllers =
                fs::read_to_string(Path::new(dir).join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "cpu") {
                return Ok(CpuHierarchy::V2 { mount: dir.into(), own: Path::new(dir).join(rel) });
            }
        }
    }
    Err("no cgroup hierarchy has the cpu controller (cgroup v2 without `cpu` in cgroup.controllers, \
         and no cgroup v1 `cpu` mount)"
        .into())
}

/// The real groups of one run; removed when dropped (after every thread has ended).
pub struct TaskGroups {
    /// The directory of each workload group (index 0, the root group, is `base`).
    dirs: Vec<PathBuf>,
    base: PathBuf,
    v2_home: Option<PathBuf>,
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("cannot write `{value}` to {}: {e}", path.display()))
}

impl TaskGroups {
    /// Creates the groups of `w` (`None` when it has only the root group).
    pub fn create(w: &schedlab_workload::Workload) -> Result<Option<TaskGroups>, String> {
        if w.groups.len() <= 1 {
            return Ok(None);
        }
        let mounts =
            fs::read_to_string("/proc/self/mounts").map_err(|e| format!("/proc/self/mounts: {e}"))?;
        let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let hierarchy = find_cpu_hierarchy(&mounts, &own)?;
        let pid = crate::sys::getpid();
        let (parent, home) = match &hierarchy {
            CpuHierarchy::V2 { mount, own } => (v2_parent(mount, own)?, Some(own.clone())),
            CpuHierarchy::V1(own) => (own.clone(), None),
        };
        let v2 = home.is_some();
        let base = parent.join(format!("schedlab-{pid}"));
        fs::create_dir(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
        let mut g = TaskGroups { dirs: vec![base.clone()], base: base.clone(), v2_home: None };
        if v2 {
            // `cpu` for the groups below, enabled while the directory has no process yet.
            write(&base.join("cgroup.subtree_control"), "+cpu")?;
        }
        for (i, spec) in w.groups.iter().enumerate().skip(1) {
            let parent = g
                .dirs
                .get(spec.parent as usize)
                .cloned()
                .ok_or_else(|| format!("group `{}`: its parent is defined after it", spec.name))?;
            let dir = parent.join(sanitize(&spec.name, i));
            fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            g.dirs.push(dir.clone());
            if v2 {
                write(&dir.join("cgroup.type"), "threaded")?;
                write(&dir.join("cpu.weight"), &weight_from_shares(spec.shares).to_string())?;
                if w.groups.iter().any(|c| c.parent as usize == i) {
                    write(&dir.join("cgroup.subtree_control"), "+cpu")?;
                }
            } else {
                write(&dir.join("cpu.shares"), &spec.shares.to_string())?;
            }
        }
        if let Some(home) = home {
            // The groups are threaded, so the base is a threaded root, which may hold the process.
            write(&base.join("cgroup.procs"), &pid.to_string())?;
            g.v2_home = Some(home);
        }
        Ok(Some(g))
    }

    /// Moves thread `tid` into group `group` (the root group: the run's base group).
    pub fn attach(&self, group: u32, tid: i32) -> Result<(), String> {
        let dir = self.dirs.get(group as usize).ok_or_else(|| format!("no group {group}"))?;
        let file = if self.v2_home.is_some() { "cgroup.threads" } else { "tasks" };
        write(&dir.join(file), &tid.to_string())
    }
}

/// The nearest of `own` and its ancestors up to the mount point whose `cgroup.subtree_control` enables
/// `cpu` (the root's usually does).
fn v2_parent(mount: &Path, own: &Path) -> Result<PathBuf, String> {
    let mut dir = own;
    loop {
        let control = fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        if control.split_whitespace().any(|c| c == "cpu") {
            return Ok(dir.to_path_buf());
        }
        if dir == mount {
            return Err(format!("no cgroup from {} up enables cpu in cgroup.subtree_control", own.display()));
        }
        dir = dir.parent().ok_or("the cgroup path left the mount point")?;
    }
}

/// A directory name for a group: its name with anything but letters, digits, `-` and `_` replaced,
/// prefixed by its index so that names cannot collide.
fn sanitize(name: &str, index: usize) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    format!("{index}-{clean}")
}

impl Drop for TaskGroups {
    /// Moves the process back (v2) and removes the directories, deepest first.
    fn drop(&mut self) {
        if let Some(home) = &self.v2_home {
            let _ = fs::write(home.join("cgroup.procs"), crate::sys::getpid().to_string());
        } else if let Some(parent) = self.base.parent() {
            // v1: threads that are still alive (the main thread never moved) go back to the parent.
            for dir in self.dirs.iter().rev() {
                if let Ok(tasks) = fs::read_to_string(dir.join("tasks")) {
                    for tid in tasks.lines() {
                        let _ = fs::write(parent.join("tasks"), tid);
                    }
                }
            }
        }
        for dir in self.dirs.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_convert_to_weights_as_the_kernel_does() {
        assert_eq!(weight_from_shares(1024), 100);
        assert_eq!(weight_from_shares(512), 50);
        assert_eq!(weight_from_shares(2048), 200);
        assert_eq!(weight_from_shares(335), 33, "32.7 rounds to 33");
        assert_eq!(weight_from_shares(2), 1, "clamped to the least weight");
        assert_eq!(weight_from_shares(262_144), 10_000, "clamped to the greatest");
    }

    #[test]
    fn the_cpu_hierarchy_is_found_in_v1_and_v2_layouts() {
        let v1 = "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n\
                  cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                  cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        let own = "4:memory:/a\n1:cpu:/box\n0::/\n";
        assert_eq!(find_cpu_hierarchy(v1, own), Ok(CpuHierarchy::V1("/sys/fs/cgroup/cpu/box".into())));
        // cgroup v2 only, without a readable cgroup.controllers here: no cpu controller.
        let v2 = "cgroup2 /nonexistent/cgroup cgroup2 rw 0 0\n";
        assert!(find_cpu_hierarchy(v2, "0::/user.slice\n").is_err());
    }
}
