//! The per-CPU timeline of a run (who ran where), downsampled per column and bounded in size, for
//! the report's Gantt chart (issue 33).
//!
//! The engine tells the timeline every stretch a task held a CPU, from its switch-in to its
//! switch-out (scheduling overhead included). The run's time is cut into equal columns; a column of
//! a CPU keeps the task that held it longest there (exactly, while the column is at its first width)
//! and the application whose tasks together held it longest ([`application_of`]: many threads of a
//! few percent each can hold a CPU longer together than the one task that held it longest), how
//! long each and all tasks held it, and how many tasks left the CPU in it and how many of those were
//! still runnable (preempted, slice expired or yielded) rather than blocked or exited.
//! Nothing is dropped: a column shorter than a pixel still says how busy it was and how many
//! switches it saw, where a list of events cut to a size would lose them.
//!
//! The run's length is not known in advance (a run may end when its tasks do), so columns start at
//! [`FIRST_COLUMN_NS`] and double in width whenever the run outgrows the column budget: neighbouring
//! columns merge. A finished column keeps its [`TOP`] longest-held tasks and applications with their
//! times, and merging adds up the holders two columns share, so a merged column's longest holder
//! and its time are exact whenever it was among the [`TOP`] longest of both halves: always for
//! applications and tasks when no more than [`TOP`] share a CPU. Otherwise a holder's time in a
//! half where [`TOP`] others held more is left out, so a CPU shared by many tasks of small shares
//! can name one of them that was not the longest-held; busy time and switch counts add up exactly.

use schedlab_core::{Ns, TaskId};
use serde::Serialize;

/// The application a task belongs to, from its template's name (else its own): the name up to the
/// first `.` (a generator merged into a workload prefixes its tasks' names with its own, and
/// `tasks[template=...]` selectors name them so), without the digits that tell instances apart,
/// and without `-` or `_` left at either end. `system-noise.noise3` is `system-noise`, hackbench's
/// `g0-receiver3` is `g-receiver`, a traced `sysbench-4242` is `sysbench`. A name of digits only
/// stays as it is.
pub fn application_of(name: &str) -> String {
    let head = name.split('.').next().unwrap_or(name);
    let app: String = head.chars().filter(|c| !c.is_ascii_digit()).collect();
    let app = app.trim_matches(|c| c == '-' || c == '_');
    if app.is_empty() {
        head.to_string()
    } else {
        app.to_string()
    }
}

/// Adds `ns` to `id`'s share in a column's list of shares.
fn add_share(shares: &mut Vec<(u32, Ns)>, id: u32, ns: Ns) {
    match shares.iter_mut().find(|(s, _)| *s == id) {
        Some((_, have)) => *have += ns,
        None => shares.push((id, ns)),
    }
}

/// How many holders a finished column keeps, longest-held first: merging two columns adds up the
/// holders they share, so the longest-held of a merged column is exact whenever it was among the
/// [`TOP`] longest-held of both halves (always, with no more than [`TOP`] tasks or applications
/// on the CPU).
pub const TOP: usize = 4;

/// A finished column's longest holders (task ids or application indices) and their times, longest
/// first, ties in order of first appearance; unused places have `ns` 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Top([(u32, Ns); TOP]);

impl Top {
    /// The [`TOP`] longest of a list of shares (`shares` in order of first appearance).
    fn of(shares: &[(u32, Ns)]) -> Top {
        let mut sorted: Vec<(u32, Ns)> = shares.iter().copied().filter(|s| s.1 > 0).collect();
        // Stable: equals keep their order of appearance.
        sorted.sort_by_key(|s| std::cmp::Reverse(s.1));
        let mut top = Top::default();
        for (slot, s) in top.0.iter_mut().zip(sorted) {
            *slot = s;
        }
        top
    }

    fn entries(&self) -> impl Iterator<Item = (u32, Ns)> + '_ {
        self.0.iter().copied().filter(|s| s.1 > 0)
    }

    /// Two neighbouring columns' holders as one column's: times of a holder in both add up.
    fn merge(&self, b: &Top) -> Top {
        let mut all: Vec<(u32, Ns)> = Vec::with_capacity(2 * TOP);
        for (id, ns) in self.entries().chain(b.entries()) {
            add_share(&mut all, id, ns);
        }
        Top::of(&all)
    }

    /// The longest holder and its time.
    fn first(&self) -> Option<(u32, Ns)> {
        self.entries().next()
    }
}

/// Width of a column when a run starts: 1 us.
pub const FIRST_COLUMN_NS: Ns = 1_000;

/// Most cells (CPUs x columns) a timeline keeps: the column budget per CPU is this over the CPUs,
/// between [`MIN_COLUMNS`] and [`MAX_COLUMNS`]. A 2,048-column timeline of 64 CPUs is about 5.5 MB of
/// report.
pub const MAX_CELLS: usize = 1 << 17;

/// Most columns per CPU: about the pixels across a wide screen.
pub const MAX_COLUMNS: usize = 2_048;

/// Fewest columns per CPU, however many CPUs.
pub const MIN_COLUMNS: usize = 128;

/// One column of one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cell {
    /// The tasks that held the CPU longest in the column (none: idle throughout).
    tasks: Top,
    /// The applications whose tasks held it longest (indices in `Timeline::apps`).
    apps: Top,
    /// How long any task held it, ns.
    busy_ns: Ns,
    /// Tasks that left the CPU in the column.
    switches: u32,
    /// Of those, how many were still runnable.
    preempted: u32,
}

impl Cell {
    /// Two neighbouring columns as one.
    fn merge(self, b: Cell) -> Cell {
        Cell {
            tasks: self.tasks.merge(&b.tasks),
            apps: self.apps.merge(&b.apps),
            busy_ns: self.busy_ns + b.busy_ns,
            switches: self.switches + b.switches,
            preempted: self.preempted + b.preempted,
        }
    }
}

/// The column being filled on one CPU: each task's and each application's time in it so far.
#[derive(Clone, Debug, Default)]
struct Open {
    shares: Vec<(u32, Ns)>,
    app_shares: Vec<(u32, Ns)>,
    busy_ns: Ns,
    switches: u32,
    preempted: u32,
}

impl Open {
    fn add(&mut self, t: TaskId, app: u32, ns: Ns) {
        add_share(&mut self.shares, t.0, ns);
        add_share(&mut self.app_shares, app, ns);
        self.busy_ns += ns;
    }

    /// Takes in a finished column (when columns merge and it pairs with this one).
    fn absorb(&mut self, c: Cell) {
        for (t, ns) in c.tasks.entries() {
            add_share(&mut self.shares, t, ns);
        }
        for (a, ns) in c.apps.entries() {
            add_share(&mut self.app_shares, a, ns);
        }
        self.busy_ns += c.busy_ns;
        self.switches += c.switches;
        self.preempted += c.preempted;
    }

    /// The finished column, leaving this one empty.
    fn close(&mut self) -> Cell {
        let cell = Cell {
            tasks: Top::of(&self.shares),
            apps: Top::of(&self.app_shares),
            busy_ns: self.busy_ns,
            switches: self.switches,
            preempted: self.preempted,
        };
        // Cleared, not replaced: the lists keep their room, so a run allocates nothing per column.
        self.shares.clear();
        self.app_shares.clear();
        (self.busy_ns, self.switches, self.preempted) = (0, 0, 0);
        cell
    }
}

#[derive(Clone, Debug, Default)]
struct Lane {
    cells: Vec<Cell>,
    open: Open,
    /// The task holding the CPU now, and since when.
    occupant: Option<(TaskId, Ns)>,
}

impl Lane {
    /// Closes columns until the open one is `col`.
    fn advance(&mut self, col: usize) {
        while self.cells.len() < col {
            let c = self.open.close();
            self.cells.push(c);
        }
    }
}

/// The timeline of every CPU of a run.
#[derive(Clone, Debug)]
pub struct Timeline {
    column_ns: Ns,
    max_columns: usize,
    lanes: Vec<Lane>,
    /// Application names, in order of first appearance.
    apps: Vec<String>,
    /// Each task's application (index in `apps`), by task id, once seen.
    app_of_task: Vec<Option<u32>>,
}

impl Timeline {
    /// An empty timeline of `ncpus` CPUs.
    pub fn new(ncpus: usize) -> Timeline {
        let max_columns = (MAX_CELLS / ncpus.max(1)).clamp(MIN_COLUMNS, MAX_COLUMNS);
        Timeline {
            column_ns: FIRST_COLUMN_NS,
            max_columns,
            lanes: vec![Lane::default(); ncpus],
            apps: Vec::new(),
            app_of_task: Vec::new(),
        }
    }

    /// Names task `t`'s application after `name` (its template's, see [`application_of`]), once:
    /// before its first run is added. A task never named belongs to the application `task`.
    pub fn name_task(&mut self, t: TaskId, name: &str) {
        let i = t.idx();
        if self.app_of_task.get(i).is_some_and(Option::is_some) {
            return;
        }
        let app = application_of(name);
        let id = match self.apps.iter().position(|a| *a == app) {
            Some(id) => id,
            None => {
                self.apps.push(app);
                self.apps.len() - 1
            }
        };
        if self.app_of_task.len() <= i {
            self.app_of_task.resize(i + 1, None);
        }
        self.app_of_task[i] = Some(id as u32);
    }

    /// Task `t`'s application (`task` if it was never named).
    fn app(&mut self, t: TaskId) -> u32 {
        match self.app_of_task.get(t.idx()).copied().flatten() {
            Some(a) => a,
            None => {
                self.name_task(t, "task");
                self.app_of_task[t.idx()].unwrap_or(0)
            }
        }
    }

    /// Task `next` (or none: idle) takes CPU `cpu` at `now`; the task it replaces, if any, held it
    /// since its own switch-in and leaves `still_runnable` or not.
    pub fn switch(&mut self, cpu: usize, now: Ns, next: Option<TaskId>, still_runnable: bool) {
        if let Some((t, since)) = self.lanes[cpu].occupant.take() {
            self.add_run(cpu, t, since, now, Some(still_runnable));
        }
        self.lanes[cpu].occupant = next.map(|t| (t, now));
    }

    /// Records that `t` held `cpu` over `[from, to)`, leaving at `to` (`left`: whether still
    /// runnable) or not leaving (`None`: still there, or not known). A CPU's runs come in time
    /// order; different CPUs' runs may come in any order (a recorded trace gives them per thread).
    pub fn add_run(&mut self, cpu: usize, t: TaskId, from: Ns, to: Ns, left: Option<bool>) {
        while to >= self.column_ns * self.max_columns as Ns {
            self.coarsen();
        }
        let app = self.app(t);
        let w = self.column_ns;
        let lane = &mut self.lanes[cpu];
        let mut at = from;
        while at < to {
            let col = (at / w) as usize;
            lane.advance(col);
            let end = to.min((col as Ns + 1) * w);
            lane.open.add(t, app, end - at);
            at = end;
        }
        if let Some(runnable) = left {
            lane.advance((to.saturating_sub(1).max(from) / w) as usize);
            lane.open.switches += 1;
            lane.open.preempted += u32::from(runnable);
        }
    }

    /// Doubles the columns' width, merging neighbours.
    fn coarsen(&mut self) {
        self.column_ns *= 2;
        for lane in &mut self.lanes {
            let n = lane.cells.len();
            let merged: Vec<Cell> = lane.cells.chunks_exact(2).map(|p| p[0].merge(p[1])).collect();
            if n % 2 == 1 {
                // The last finished column and the open one are the new open column.
                let last = lane.cells[n - 1];
                lane.open.absorb(last);
            }
            lane.cells = merged;
        }
    }

    /// The finished timeline of a run that ended at `end`: the tasks still on their CPUs held them
    /// to the end, and every CPU has the same columns, covering `[0, end)`.
    pub fn report(&self, end: Ns) -> TimelineReport {
        let mut tl = self.clone();
        for cpu in 0..tl.lanes.len() {
            if let Some((t, since)) = tl.lanes[cpu].occupant.take() {
                tl.add_run(cpu, t, since, end, None);
            }
        }
        while end >= tl.column_ns * tl.max_columns as Ns {
            tl.coarsen();
        }
        let columns = end.div_ceil(tl.column_ns) as usize;
        let cpus = tl
            .lanes
            .iter_mut()
            .map(|lane| {
                lane.advance(columns);
                lane.cells.truncate(columns);
                LaneReport {
                    task: lane.cells.iter().map(|c| c.tasks.first().map(|f| f.0)).collect(),
                    task_ns: lane.cells.iter().map(|c| c.tasks.first().map_or(0, |f| f.1)).collect(),
                    app: lane.cells.iter().map(|c| c.apps.first().map(|f| f.0)).collect(),
                    app_ns: lane.cells.iter().map(|c| c.apps.first().map_or(0, |f| f.1)).collect(),
                    busy_ns: lane.cells.iter().map(|c| c.busy_ns).collect(),
                    switches: lane.cells.iter().map(|c| c.switches).collect(),
                    preempted: lane.cells.iter().map(|c| c.preempted).collect(),
                }
            })
            .collect();
        TimelineReport { column_ns: tl.column_ns, columns, applications: tl.apps.clone(), cpus }
    }
}

/// Who ran where over a run, per column of time (docs/metrics.md, "Timeline").
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct TimelineReport {
    /// Width of a column, ns (column `i` covers `[i * column_ns, (i + 1) * column_ns)`).
    pub column_ns: Ns,
    /// Columns per CPU.
    pub columns: usize,
    /// Application names ([`application_of`] of the tasks' templates); `app` values index it.
    pub applications: Vec<String>,
    /// One lane per CPU, by id.
    pub cpus: Vec<LaneReport>,
}

/// One CPU's columns (parallel arrays, one value per column).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LaneReport {
    /// Id of the task that held the CPU longest in the column; null when idle throughout.
    pub task: Vec<Option<u32>>,
    /// How long that task held it, ns.
    pub task_ns: Vec<Ns>,
    /// The application (index in `applications`) whose tasks together held the CPU longest in the
    /// column; null when idle throughout.
    pub app: Vec<Option<u32>>,
    /// How long its tasks held it, ns.
    pub app_ns: Vec<Ns>,
    /// How long any task held it, ns (the rest of the column the CPU was idle).
    pub busy_ns: Vec<Ns>,
    /// Tasks that left the CPU in the column (context switches away from a task).
    pub switches: Vec<u32>,
    /// Of those, how many left still runnable (preempted, slice expired, yielded) rather than
    /// blocked or exited.
    pub preempted: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: TaskId = TaskId(0);
    const B: TaskId = TaskId(1);
    const C: TaskId = TaskId(2);

    #[test]
    fn applications_are_names_without_instance_numbers() {
        let apps: Vec<String> =
            ["system-noise.noise3", "g0-receiver3", "sysbench-4242", "pi.pi", "worker_12", "42"]
                .map(application_of)
                .to_vec();
        assert_eq!(apps, ["system-noise", "g-receiver", "sysbench", "pi", "worker", "42"]);
    }

    #[test]
    fn many_short_tasks_of_one_application_outweigh_the_longest_single_task() {
        let mut tl = Timeline::new(1);
        tl.name_task(A, "fibo.fibo");
        tl.name_task(B, "sysbench.client-1");
        tl.name_task(C, "sysbench.client-2");
        // One column: fibo 400 ns, then two sysbench threads 300 ns each.
        tl.switch(0, 0, Some(A), false);
        tl.switch(0, 400, Some(B), true);
        tl.switch(0, 700, Some(C), false);
        tl.switch(0, 1_000, None, false);
        let r = tl.report(1_000);
        assert_eq!(r.applications, ["fibo", "sysbench"]);
        let c = &r.cpus[0];
        assert_eq!((c.task[0], c.task_ns[0]), (Some(0), 400), "fibo is the longest single task");
        assert_eq!((c.app[0], c.app_ns[0]), (Some(1), 600), "sysbench's threads together held it longer");
        // A task never named belongs to `task`.
        let mut tl = Timeline::new(1);
        tl.switch(0, 0, Some(C), false);
        assert_eq!(tl.report(10).applications, ["task"]);
    }

    #[test]
    fn a_column_keeps_its_longest_held_task_and_counts_switches() {
        let mut tl = Timeline::new(2);
        // CPU 0: A for 300 ns (preempted by B), B for 600 ns (blocks at 900), idle to 1000; then A
        // from 1000 to the end.
        tl.switch(0, 0, Some(A), false);
        tl.switch(0, 300, Some(B), true);
        tl.switch(0, 900, None, false);
        tl.switch(0, 1_000, Some(A), false);
        let r = tl.report(2_500);
        assert_eq!((r.column_ns, r.columns), (1_000, 3));
        let c0 = &r.cpus[0];
        assert_eq!(c0.task, [Some(1), Some(0), Some(0)]);
        assert_eq!(c0.task_ns, [600, 1_000, 500]);
        assert_eq!(c0.busy_ns, [900, 1_000, 500]);
        assert_eq!(c0.switches, [2, 0, 0]);
        assert_eq!(c0.preempted, [1, 0, 0], "A left runnable, B blocked");
        assert_eq!(r.cpus[1].task, [None, None, None], "an idle CPU has the same columns");
        assert_eq!(r.cpus[1].busy_ns, [0, 0, 0]);
    }

    #[test]
    fn a_long_run_merges_columns_and_stays_within_the_budget() {
        let mut tl = Timeline::new(1);
        let max = tl.max_columns as Ns;
        assert_eq!(max, MAX_COLUMNS as Ns);
        // A holds the first half of every 1 us, B the second, over 3 x the first budget.
        let end = 3 * max * FIRST_COLUMN_NS;
        let mut t = 0;
        while t < end {
            tl.switch(0, t, Some(A), false);
            tl.switch(0, t + 400, Some(B), false);
            t += 1_000;
        }
        let r = tl.report(end);
        // Doubled twice: 4 us columns, 1,536 of them.
        assert_eq!((r.column_ns, r.columns), (4_000, 1_536));
        let c = &r.cpus[0];
        // Each merged column: B's 600 ns per us won each first-width column, so B, 4 x 600 ns.
        assert!(c.task.iter().all(|t| *t == Some(1)));
        assert!(c.task_ns.iter().all(|ns| *ns == 2_400));
        assert!(c.busy_ns.iter().all(|ns| *ns == 4_000));
        // Every us: A leaves (runnable), B leaves (runnable) except B still there at the very end.
        assert_eq!(c.switches.iter().map(|&s| s as u64).sum::<u64>(), 2 * (end / 1_000) - 1);
        assert_eq!(c.switches[0], 8);
        // Busy time is conserved by merging.
        assert_eq!(c.busy_ns.iter().sum::<Ns>(), end);
    }

    #[test]
    fn merged_columns_keep_exact_shares_of_a_few_alternating_tasks() {
        // A runs 550 ns and B 450 ns of every microsecond for 10 ms: the columns double 3 times
        // (8 us each), and each holds A for exactly 4,400 ns, whichever halves merged.
        let mut tl = Timeline::new(1);
        let end: Ns = 10_000_000;
        for us in 0..end / 1_000 {
            tl.switch(0, us * 1_000, Some(A), false);
            tl.switch(0, us * 1_000 + 550, Some(B), true);
        }
        let r = tl.report(end);
        assert_eq!((r.column_ns, r.columns), (8_000, 1_250));
        let c = &r.cpus[0];
        assert!(c.task.iter().all(|t| *t == Some(0)));
        assert!(c.task_ns.iter().all(|ns| *ns == 4_400), "{:?}", &c.task_ns[..8]);
        // Six tasks in turns of 100 ns, task 5 running 150: it leads every 1 us column (150 of
        // 650) and every merged one, as it leads each half.
        let mut tl = Timeline::new(1);
        let mut t = 0;
        while t < end {
            let mut at = t;
            for k in 0..6u32 {
                tl.switch(0, at, Some(TaskId(k)), true);
                at += if k == 5 { 150 } else { 100 };
            }
            tl.switch(0, at, None, false);
            t += 1_000;
        }
        let c = &tl.report(end).cpus[0];
        assert!(c.task.iter().all(|t| *t == Some(5)));
        assert!(c.task_ns.iter().all(|ns| *ns == 8 * 150));
        assert!(c.busy_ns.iter().all(|ns| *ns == 8 * 650));
    }

    #[test]
    fn an_odd_column_merges_into_the_open_one() {
        let mut tl = Timeline::new(1);
        tl.max_columns = 4;
        tl.switch(0, 0, Some(A), false);
        tl.switch(0, 2_500, Some(B), true);
        // B's run to 5 000 passes the budget of 4 x 1 us: columns double to 2 us while old column 2
        // is open (A's last 500 ns and A's preemption), so the finished columns 0 and 1 merge.
        tl.switch(0, 5_000, None, false);
        let r = tl.report(5_000);
        assert_eq!((r.column_ns, r.columns), (2_000, 3));
        let c = &r.cpus[0];
        assert_eq!(c.task, [Some(0), Some(1), Some(1)]);
        assert_eq!(c.task_ns, [2_000, 1_500, 1_000]);
        assert_eq!(c.busy_ns, [2_000, 2_000, 1_000]);
        assert_eq!(c.switches, [0, 1, 1]);
        assert_eq!(c.preempted, [0, 1, 0]);
    }
}
