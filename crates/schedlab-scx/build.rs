// Generates the BPF side of scx_rustland_core (intf.h, main.bpf.c, src/bpf.rs; not committed),
// writes schedlab's variant of the BPF program (schedlab.bpf.c: main.bpf.c with the changes below)
// and compiles that one with clang (set BPF_CLANG=clang-19 and LIBCLANG_PATH=/usr/lib/llvm-19/lib).
//
// Changes to scx_rustland_core 2.4.15, each applied at an anchor this script checks:
//
// * The sched_ext watchdog timeout (`ops.timeout_ms`, 5 s in main.bpf.c) is taken from
//   `--watchdog-ms` when given, so a policy that starves a task by design (ULE's batch threads behind
//   interactive ones) can be watched for up to the kernel's limit, 30 s (a line in src/bpf.rs).
// * `--scheduler-cpu N` gives the user-space scheduler a CPU of its own: only CPU N takes it from
//   its dispatch queue, and CPU N is kicked whenever there is work for it (a task queued to user
//   space, the scheduler itself made runnable, a CPU finding work pending, the inactivity timer).
//   scx_rustland_core runs the scheduler on whichever CPU asks for it first, which, with the
//   workload on one CPU, is the workload's: measured in the VM (docs/real-kernel.md), it took
//   5-6 s of a 30 s run from the workload's CPU while the CPU meant for it stayed idle. On the
//   other CPUs the running task's kernel slice is then not refilled while user space holds tasks:
//   it goes back to user space at its slice's end (SCX_ENQ_LAST), so the policy sees its tick and
//   can switch tasks, as it does when the scheduler, running on that CPU, preempts it. (Refilled,
//   the task ran on unseen: the policy got 1/6 of its ticks and CFS's nice-10 processes 22-25 % of
//   the CPU instead of 10 %.)
// * Each task's start count (`ops.running` calls) goes to user space in the message's `vtime`
//   field, which scx_rustland_core fills with `dsq_vtime` and schedlab does not use: the adapter
//   measures the user-space round trip from a task's next start after a dispatch, and only the
//   count tells whether the `start_ts` a message carries is that start (a task preempted with
//   slice left, by a kernel thread or a higher class, resumes without a message).
// * Each message carries the task's scheduling policy (`p->policy` + 1, 0 meaning "not sent") in
//   bits 32-39 of `nr_cpus_allowed` and its real-time priority in bits 40-47: a change between
//   SCHED_NORMAL, SCHED_BATCH and SCHED_IDLE keeps the task in sched_ext and changes nothing else in
//   its messages (SCHED_IDLE's weight is the nice level's), so the adapter would not see it.
// * A task that leaves sched_ext alive (`sched_setscheduler` to SCHED_FIFO, SCHED_RR or
//   SCHED_DEADLINE: the kernel's `switched_from_scx` calls `ops.disable`) is reported by a message
//   of its own, marked `SCHEDLAB_LEFT_EXT` in `flags`, carrying its new policy: scx_rustland_core
//   has no `ops.disable`, and without it the adapter kept holding a task the kernel's real-time
//   class was running. On Linux 7.2 `ops.disable` runs before the new policy is written (measured
//   in the VM: the message carries SCHED_NORMAL), so the adapter reads the new class from the
//   host. A task that exits also passes `ops.disable` (`PF_EXITING` set); it sends nothing, as
//   before. Its return (`ops.enable`, then an enqueue) is its next ordinary message.
// * `ops.stopping` records each CPU's last stop (the task's pid, `scx_bpf_now`, and whether it
//   stayed runnable) in arrays user space reads (`BpfScheduler::cpu_last_stop`, a method added to
//   src/bpf.rs): for a CPU the kernel reports idle, the adapter learns from it that the task it
//   held there blocked (it read /proc/PID/stat for that, at every such round) and charges it the
//   ticks that fell before that stop, where the task's own message, which tells the stop, comes
//   only at its next wakeup.
// * `ops.tick` records each CPU's last tick (`bpf_ktime_get_ns`, the user-space scheduler's
//   CLOCK_MONOTONIC) in an array user space reads (`BpfScheduler::cpu_last_tick`): the adapter ticks
//   the policy on the kernel's grid (`Shadow::kernel_tick`), not on multiples of the period on
//   its own clock, where it had put it.
// * `ops.init_task` tries the task's storage up to 8 times before it fails the task with -ENOMEM.
//   `bpf_task_storage_get(.., F_CREATE)` is its only way to fail, and on Linux 7.x each of its
//   failures is transient: the element comes from `kmalloc_nolock()` (kernel/bpf/
//   bpf_local_storage.c, `use_kmalloc_nolock`), which only trylocks the slab's locks and fails
//   rather than waits when another CPU holds one, and the storage's locks are resilient spinlocks
//   that give up after a timeout. One failure while the kernel enables the scheduler ejects it:
//   "ops.init_task() failed (-12) for init[1]" in one of CI's VM runs (2026-11-30), the same
//   binary passing the runs before and after. scx's arena allocator retries the same way
//   (sched-ext/scx pull request 3819); `schedlab vm-test` also loads the scheduler again if the
//   kernel still refuses it (crates/cli/src/vm_test.rs).
fn patch(src: &str, anchor: &str, with: &str, what: &str) -> String {
    assert!(src.contains(anchor), "scx_rustland_core's {what} changed: the schedlab patch needs a new place");
    src.replacen(anchor, with, 1)
}

fn main() {
    scx_rustland_core::RustLandBuilder::new()
        .expect("scx_rustland_core builder")
        .build()
        .expect("building the BPF scheduler (needs clang: BPF_CLANG=clang-19)");

    // The loader: the watchdog and the scheduler's CPU, from the command line.
    let path = std::path::Path::new("src/bpf.rs");
    let src = std::fs::read_to_string(path).expect("reading the generated src/bpf.rs");
    let mut out = src.clone();
    let watchdog =
        "if let Some(ms) = crate::watchdog_ms() { skel.struct_ops.rustland_mut().timeout_ms = ms; }";
    if !out.contains(watchdog) {
        let anchor = "skel.struct_ops.rustland_mut().exit_dump_len = exit_dump_len;";
        out = patch(&out, anchor, &format!("{anchor}\n        {watchdog}"), "loader (exit_dump_len)");
    }
    let cpu = "skel.maps.rodata_data.as_mut().unwrap().usersched_cpu = crate::scheduler_cpu();";
    if !out.contains(cpu) {
        let anchor = "skel.maps.rodata_data.as_mut().unwrap().usersched_pid = std::process::id();";
        out = patch(&out, anchor, &format!("{anchor}\n        {cpu}"), "loader (usersched_pid)");
    }
    let accessor = "pub fn cpu_last_stop(";
    if !out.contains(accessor) {
        let anchor = "    // Counter of user dispatch events.\n";
        let method = "    /// schedlab: the last task to stop on `cpu` and when (pid, `scx_bpf_now` ns), as the BPF\n\
                      \x20   /// program's `ops.stopping` recorded it, and whether it stayed runnable; `None`\n\
                      \x20   /// before any stop there (or for a record caught half written).\n\
                      \x20   pub fn cpu_last_stop(&self, cpu: usize) -> Option<(i32, u64, bool)> {\n\
                      \x20       let bss = self.skel.maps.bss_data.as_ref()?;\n\
                      \x20       let pid = bss.schedlab_cpu_stop_pid.get(cpu)?;\n\
                      \x20       // SAFETY: reads of the BPF program's memory-mapped globals, which it writes meanwhile.\n\
                      \x20       let (p0, ts, runnable, p1) = unsafe {\n\
                      \x20           let p0 = std::ptr::read_volatile(pid);\n\
                      \x20           let ts = std::ptr::read_volatile(&bss.schedlab_cpu_stop_ts[cpu]);\n\
                      \x20           let runnable = std::ptr::read_volatile(&bss.schedlab_cpu_stop_runnable[cpu]);\n\
                      \x20           (p0, ts, runnable != 0, std::ptr::read_volatile(pid))\n\
                      \x20       };\n\
                      \x20       (p0 > 0 && p0 == p1).then_some((p0, ts, runnable))\n\
                      \x20   }\n\n";
        out = patch(&out, anchor, &format!("{method}{anchor}"), "src/bpf.rs (the user dispatch counter)");
    }
    let accessor = "pub fn cpu_last_tick(";
    if !out.contains(accessor) {
        let anchor = "    // Counter of user dispatch events.\n";
        let method = "    /// schedlab: when the kernel's tick last ran `ops.tick` on `cpu` (CLOCK_MONOTONIC ns), as\n\
                      \x20   /// the BPF program recorded it; `None` before the first.\n\
                      \x20   pub fn cpu_last_tick(&self, cpu: usize) -> Option<u64> {\n\
                      \x20       let bss = self.skel.maps.bss_data.as_ref()?;\n\
                      \x20       let at = bss.schedlab_cpu_tick_mono.get(cpu)?;\n\
                      \x20       // SAFETY: a read of the BPF program's memory-mapped global, which it writes meanwhile.\n\
                      \x20       let at = unsafe { std::ptr::read_volatile(at) };\n\
                      \x20       (at > 0).then_some(at)\n\
                      \x20   }\n\n";
        out = patch(&out, anchor, &format!("{method}{anchor}"), "src/bpf.rs (the user dispatch counter)");
    }
    if out != src {
        std::fs::write(path, out).expect("writing src/bpf.rs");
    }

    // The BPF program.
    let c = std::fs::read_to_string("main.bpf.c").expect("reading the generated main.bpf.c");
    let mut c = patch(
        &c,
        "const volatile u32 usersched_pid; /* User-space scheduler PID */\n",
        "const volatile u32 usersched_pid; /* User-space scheduler PID */\n\
         /* schedlab: the CPU the user-space scheduler runs on (-1: wherever it is asked for). */\n\
         const volatile s32 usersched_cpu = -1;\n\
         /* schedlab: each CPU's last stop (pid, scx_bpf_now), read by user space. */\n\
         u64 schedlab_cpu_stop_ts[MAX_CPUS];\n\
         s32 schedlab_cpu_stop_pid[MAX_CPUS];\n\
         u32 schedlab_cpu_stop_runnable[MAX_CPUS];\n\
         /* schedlab: each CPU's last tick (ops.tick, CLOCK_MONOTONIC), read by user space. */\n\
         u64 schedlab_cpu_tick_mono[MAX_CPUS];\n",
        "usersched_pid declaration",
    );
    c = patch(
        &c,
        "\tif (usersched_has_pending_tasks() &&\n\t    scx_bpf_dsq_move_to_local(SCHED_DSQ, 0))\n\t\treturn;\n",
        "\tif (usersched_cpu >= 0 && cpu != usersched_cpu) {\n\
         \t\t/* schedlab: not the scheduler's CPU; wake that one if there is work for it. */\n\
         \t\tif (usersched_needed || nr_scheduled ||\n\
         \t\t    bpf_ringbuf_query(&queued, BPF_RB_AVAIL_DATA) > 0)\n\
         \t\t\tscx_bpf_kick_cpu(usersched_cpu, SCX_KICK_IDLE);\n\
         \t} else if (usersched_has_pending_tasks() &&\n\
         \t    scx_bpf_dsq_move_to_local(SCHED_DSQ, 0))\n\t\treturn;\n",
        "dispatch of the user-space scheduler",
    );
    c = patch(
        &c,
        "\tbpf_ringbuf_submit(task, 0);\n\t__sync_fetch_and_add(&nr_queued, 1);\n",
        "\tbpf_ringbuf_submit(task, 0);\n\t__sync_fetch_and_add(&nr_queued, 1);\n\
         \tif (usersched_cpu >= 0)\n\t\tscx_bpf_kick_cpu(usersched_cpu, SCX_KICK_IDLE);\n",
        "queue_task_to_userspace",
    );
    c = patch(
        &c,
        "\t\tscx_bpf_dsq_insert(p, SCHED_DSQ, slice_ns, enq_flags);\n\t\tgoto out_kick;\n",
        "\t\tscx_bpf_dsq_insert(p, SCHED_DSQ, slice_ns, enq_flags);\n\
         \t\tif (usersched_cpu >= 0)\n\t\t\tscx_bpf_kick_cpu(usersched_cpu, SCX_KICK_IDLE);\n\
         \t\tgoto out_kick;\n",
        "enqueue of the user-space scheduler",
    );
    c = patch(
        &c,
        "\t\t\tscx_bpf_kick_cpu(scx_bpf_task_cpu(p), SCX_KICK_IDLE);\n",
        "\t\t\tscx_bpf_kick_cpu(usersched_cpu >= 0 ? usersched_cpu : scx_bpf_task_cpu(p),\n\
         \t\t\t\t\t SCX_KICK_IDLE);\n",
        "inactivity timer",
    );
    c = patch(
        &c,
        "\tif (prev && is_queued(prev) &&\n\t    (!is_usersched_task(prev) || usersched_has_pending_tasks()))\n\t\tscx_bpf_task_set_slice(prev, slice_ns);\n",
        "\tif (prev && is_queued(prev) &&\n\t    (!is_usersched_task(prev) || usersched_has_pending_tasks()) &&\n\
         \t    !(usersched_cpu >= 0 && cpu != usersched_cpu &&\n\
         \t      (usersched_needed || nr_scheduled ||\n\
         \t       bpf_ringbuf_query(&queued, BPF_RB_AVAIL_DATA) > 0)))\n\
         \t\tscx_bpf_task_set_slice(prev, slice_ns);\n",
        "slice refill of the running task",
    );
    c = patch(
        &c,
        "\tu64 enq_cnt;\n};\n",
        "\tu64 enq_cnt;\n\n\t/* schedlab: how many times the task has started running (ops.running). */\n\tu64 nr_starts;\n\n\t/* schedlab: when it last started, CLOCK_MONOTONIC (the user-space scheduler's clock). */\n\tu64 start_mono;\n};\n",
        "struct task_ctx",
    );
    c = patch(
        &c,
        "\ttctx->start_ts = scx_bpf_now();\n",
        "\ttctx->start_ts = scx_bpf_now();\n\ttctx->nr_starts++;\n\ttctx->start_mono = bpf_ktime_get_ns();\n",
        "start timestamp in ops.running",
    );
    c = patch(
        &c,
        "\ttask->vtime = p->scx.dsq_vtime;\n",
        "\t/* schedlab: the start count, in the vtime field schedlab does not use. */\n\ttask->vtime = tctx->nr_starts;\n",
        "vtime of a queued task's message",
    );
    c = patch(
        &c,
        "\ttask->exec_runtime = tctx->exec_runtime;\n",
        "\t/* schedlab: the start on CLOCK_MONOTONIC, in the exec_runtime field schedlab does not use. */\n\ttask->exec_runtime = tctx->start_mono;\n",
        "exec_runtime of a queued task's message",
    );
    c = patch(
        &c,
        "\ttask->nr_cpus_allowed = p->nr_cpus_allowed;\n",
        "\t/* schedlab: the policy (+1) in bits 32-39, the real-time priority in bits 40-47. */\n\
         \ttask->nr_cpus_allowed = p->nr_cpus_allowed | ((u64)(p->policy + 1) << 32) |\n\
         \t\t\t\t((u64)(p->rt_priority & 0xff) << 40);\n",
        "nr_cpus_allowed of a queued task's message",
    );
    c = patch(
        &c,
        "/*\n * A task joins the sched_ext scheduler.\n */\n",
        "/*\n * schedlab: a task leaves the sched_ext scheduler alive (a class change to a real-time or\n\
         * deadline policy): tell user space, so its policy stops holding the task. Exits pass here\n\
         * too (PF_EXITING) and send nothing.\n */\n\
         #define SCHEDLAB_PF_EXITING 0x00000004\n\
         #define SCHEDLAB_LEFT_EXT (1ULL << 62)\n\
         void BPF_STRUCT_OPS(rustland_disable, struct task_struct *p)\n\
         {\n\
         \tstruct queued_task_ctx *task;\n\
         \tstruct task_ctx *tctx;\n\n\
         \tif ((p->flags & SCHEDLAB_PF_EXITING) || is_usersched_task(p))\n\
         \t\treturn;\n\
         \ttctx = try_lookup_task_ctx(p);\n\
         \tif (!tctx)\n\
         \t\treturn;\n\
         \ttask = bpf_ringbuf_reserve(&queued, sizeof(*task), 0);\n\
         \tif (!task)\n\
         \t\treturn;\n\
         \tget_task_info(task, p, tctx, SCHEDLAB_LEFT_EXT, scx_bpf_task_cpu(p));\n\
         \ttask->vtime = tctx->nr_starts;\n\
         \tbpf_ringbuf_submit(task, 0);\n\
         \t__sync_fetch_and_add(&nr_queued, 1);\n\
         \tif (usersched_cpu >= 0)\n\
         \t\tscx_bpf_kick_cpu(usersched_cpu, SCX_KICK_IDLE);\n\
         }\n\n\
         /*\n * schedlab: the kernel's tick, on the CPU it ticks (task_tick_scx, for a sched_ext task\n\
         * running there): its time, so that user space ticks the policy on the kernel's grid.\n */\n\
         void BPF_STRUCT_OPS(rustland_tick, struct task_struct *p)\n\
         {\n\
         \tu32 cpu = bpf_get_smp_processor_id();\n\n\
         \tif (cpu < MAX_CPUS)\n\
         \t\tschedlab_cpu_tick_mono[cpu] = bpf_ktime_get_ns();\n\
         }\n\n\
         /*\n * A task joins the sched_ext scheduler.\n */\n",
        "ops.enable",
    );
    c = patch(
        &c,
        "\t       .enable\t\t\t= (void *)rustland_enable,\n",
        "\t       .enable\t\t\t= (void *)rustland_enable,\n\t       .disable\t\t= (void *)rustland_disable,\n\
         \t       .tick\t\t\t= (void *)rustland_tick,\n",
        "SCX_OPS_DEFINE (.enable)",
    );
    c = patch(
        &c,
        "\ttctx->stop_ts = now;\n",
        "\ttctx->stop_ts = now;\n\
         \t/* schedlab: the CPU's last stop, for user space finding the CPU idle. */\n\
         \tif (cpu >= 0 && cpu < MAX_CPUS) {\n\
         \t\tschedlab_cpu_stop_pid[cpu] = 0;\n\
         \t\tschedlab_cpu_stop_ts[cpu] = now;\n\
         \t\tschedlab_cpu_stop_runnable[cpu] = runnable;\n\
         \t\tschedlab_cpu_stop_pid[cpu] = p->pid;\n\
         \t}\n",
        "ops.stopping (stop_ts)",
    );
    c = patch(
        &c,
        "\ttctx = bpf_task_storage_get(&task_ctx_stor, p, 0,\n\t\t\t\t    BPF_LOCAL_STORAGE_GET_F_CREATE);\n\tif (!tctx)\n\t\treturn -ENOMEM;\n",
        "\t/* schedlab: task storage comes from kmalloc_nolock(), which fails on a contended lock; try again. */\n\
         \tfor (int i = 0; i < SCHEDLAB_INIT_TASK_TRIES && !tctx; i++)\n\
         \t\ttctx = bpf_task_storage_get(&task_ctx_stor, p, 0,\n\
         \t\t\t\t\t    BPF_LOCAL_STORAGE_GET_F_CREATE);\n\
         \tif (!tctx)\n\t\treturn -ENOMEM;\n",
        "ops.init_task (task storage)",
    );
    c = patch(
        &c,
        "s32 BPF_STRUCT_OPS(rustland_init_task, struct task_struct *p,\n\t\t   struct scx_init_task_args *args)\n{\n\tstruct task_ctx *tctx;\n",
        "#define SCHEDLAB_INIT_TASK_TRIES 8\n\n\
         s32 BPF_STRUCT_OPS(rustland_init_task, struct task_struct *p,\n\t\t   struct scx_init_task_args *args)\n{\n\
         \tstruct task_ctx *tctx = NULL;\n",
        "ops.init_task (declaration)",
    );
    if std::fs::read_to_string("schedlab.bpf.c").ok().as_deref() != Some(c.as_str()) {
        std::fs::write("schedlab.bpf.c", &c).expect("writing schedlab.bpf.c");
    }
    // Compiled after the original, so its skeleton (same name, same OUT_DIR file) is the one used.
    let mut b = scx_cargo::BpfBuilder::new().expect("scx_cargo builder");
    b.enable_intf("intf.h", "bpf_intf.rs");
    b.enable_skel("schedlab.bpf.c", "bpf");
    b.build().expect("building schedlab.bpf.c (needs clang: BPF_CLANG=clang-19)");
}
