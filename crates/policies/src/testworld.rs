//! A minimal stand-in for the engine, for unit tests and benchmarks of policies (yours too): it holds
//! the task and CPU facts a [`Ctx`] shows and lets a test move time, run, block and wake tasks by
//! calling the hooks itself in the documented order. It is deliberately dumb: tests state every step.

use schedlab_core::{
    CpuId, CpuInfo, Ctx, EnqueueReason, GroupId, GroupInfo, Ns, SchedClass, SchedPolicy, SwitchReason,
    TaskId, TaskInfo, TaskState, Topology, WakeInfo,
};

/// Tasks, CPUs and a clock.
pub struct TestWorld {
    /// Topology.
    pub topo: Topology,
    /// Task facts.
    pub tasks: Vec<TaskInfo>,
    /// CPU facts.
    pub cpus: Vec<CpuInfo>,
    /// Groups (root only unless a test adds more).
    pub groups: Vec<GroupInfo>,
    /// Now.
    pub now: Ns,
    /// Tick length.
    pub tick_ns: Ns,
    /// What a decision or balancing pass costs (none unless a test sets it).
    pub decision_cost: schedlab_core::DecisionCost,
    /// Each CPU's capacity (empty: all 1024).
    pub capacity: Vec<u64>,
}

impl TestWorld {
    /// `n` flat CPUs, HZ 1000.
    pub fn new(n: u32) -> TestWorld {
        TestWorld {
            topo: Topology::flat(n),
            tasks: Vec::new(),
            cpus: vec![CpuInfo::default(); n as usize],
            groups: vec![GroupInfo { parent: None, shares: 1024 }],
            now: 0,
            tick_ns: 1_000_000,
            decision_cost: schedlab_core::DecisionCost::default(),
            capacity: Vec::new(),
        }
    }

    /// The context for a hook call.
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            now: self.now,
            topo: &self.topo,
            tasks: &self.tasks,
            cpus: &self.cpus,
            groups: &self.groups,
            tick_ns: self.tick_ns,
            tick_phase_ns: 0,
            numa: false,
            seed: 1,
            decision_cost: self.decision_cost,
            cpu_capacity: &self.capacity,
        }
    }

    /// Adds a task (state New, on CPU 0) and returns its id.
    pub fn add_task(&mut self, nice: i8) -> TaskId {
        let id = TaskId(self.tasks.len() as u32);
        self.tasks.push(TaskInfo {
            id,
            tgid: id.0 + 1,
            parent: None,
            class: SchedClass::Normal,
            nice,
            rt_priority: 0,
            group: GroupId::ROOT,
            allowed: self.topo.all(),
            cpu: CpuId(0),
            state: TaskState::New,
            sum_exec_ns: 0,
            last_ran_ns: 0,
            pmc: Default::default(),
            slice_ns: None,
        });
        id
    }

    /// `task_new` + `enqueue(New)`; returns the CPU chosen.
    pub fn start(&mut self, p: &mut dyn SchedPolicy, t: TaskId) -> CpuId {
        let cpu = p.task_new(&self.ctx(), t);
        self.tasks[t.idx()].cpu = cpu;
        self.tasks[t.idx()].state = TaskState::Runnable;
        self.cpus[cpu.idx()].nr_running += 1;
        p.enqueue(&self.ctx(), cpu, t, EnqueueReason::New);
        cpu
    }

    /// `pick_next` on `cpu`, marking the task running. Returns it.
    pub fn pick(&mut self, p: &mut dyn SchedPolicy, cpu: CpuId) -> Option<TaskId> {
        let d = p.pick_next(&self.ctx(), cpu)?;
        self.tasks[d.task.idx()].state = TaskState::Running;
        self.cpus[cpu.idx()].curr = Some(d.task);
        Some(d.task)
    }

    /// The running task of `cpu` stops for `why` (`put_prev`).
    pub fn stop(&mut self, p: &mut dyn SchedPolicy, cpu: CpuId, why: SwitchReason) -> TaskId {
        let t = self.cpus[cpu.idx()].curr.take().expect("a running task");
        self.tasks[t.idx()].state =
            if why.still_runnable() { TaskState::Runnable } else { TaskState::Blocked };
        if !why.still_runnable() {
            self.cpus[cpu.idx()].nr_running -= 1;
        }
        p.put_prev(&self.ctx(), cpu, t, why);
        t
    }

    /// Wakes a blocked task from `waker_cpu`: `select_cpu` + `enqueue(Wakeup)`; returns its CPU.
    pub fn wake(&mut self, p: &mut dyn SchedPolicy, t: TaskId, waker_cpu: CpuId) -> CpuId {
        let info = WakeInfo { waker_cpu, waker: None, sync: false, wait: schedlab_core::WaitKind::Sleep };
        self.tasks[t.idx()].state = TaskState::Runnable;
        let cpu = p.select_cpu(&self.ctx(), t, &info);
        self.tasks[t.idx()].cpu = cpu;
        self.cpus[cpu.idx()].nr_running += 1;
        p.enqueue(&self.ctx(), cpu, t, EnqueueReason::Wakeup);
        cpu
    }

    /// Changes the nice level of `t` as the engine does (`set_user_nice`): the new level in the
    /// task's facts, then `set_nice`. Returns the CPU the policy asks to reschedule.
    pub fn renice(&mut self, p: &mut dyn SchedPolicy, t: TaskId, nice: i8) -> Option<CpuId> {
        let old = std::mem::replace(&mut self.tasks[t.idx()].nice, nice);
        p.set_nice(&self.ctx(), t, old)
    }

    /// Changes the class of the queued, not running task `t` as the engine does: `dequeue(Save)`,
    /// the new class and RT priority in its facts, `set_class`, `enqueue(Restore)`.
    pub fn set_class(
        &mut self,
        p: &mut dyn SchedPolicy,
        t: TaskId,
        class: schedlab_core::SchedClass,
        rt: u8,
    ) {
        assert_eq!(self.tasks[t.idx()].state, TaskState::Runnable, "a queued task");
        let cpu = self.tasks[t.idx()].cpu;
        p.dequeue(&self.ctx(), cpu, t, schedlab_core::DequeueReason::Save);
        let old = (self.tasks[t.idx()].class, self.tasks[t.idx()].rt_priority);
        self.tasks[t.idx()].class = class;
        self.tasks[t.idx()].rt_priority = rt;
        p.set_class(&self.ctx(), t, old.0, old.1);
        p.enqueue(&self.ctx(), cpu, t, EnqueueReason::Restore);
    }

    /// Advances the clock by `ns`, calling `tick` on every busy CPU at each tick boundary crossed;
    /// returns the CPUs whose tick asked for a reschedule (the test decides what to do).
    pub fn advance(&mut self, p: &mut dyn SchedPolicy, ns: Ns) -> Vec<CpuId> {
        let end = self.now + ns;
        let mut resched = Vec::new();
        loop {
            let next_tick = (self.now / self.tick_ns + 1) * self.tick_ns;
            if next_tick > end {
                break;
            }
            self.now = next_tick;
            for c in 0..self.cpus.len() {
                if let Some(curr) = self.cpus[c].curr {
                    if p.tick(&self.ctx(), CpuId(c as u32), curr) && !resched.contains(&CpuId(c as u32)) {
                        resched.push(CpuId(c as u32));
                    }
                }
            }
        }
        self.now = end;
        resched
    }
}
