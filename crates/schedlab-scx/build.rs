// Generates the BPF side of scx_rustland_core (intf.h, main.bpf.c, src/bpf.rs; not committed) and
// compiles it with clang (set BPF_CLANG=clang-19 and LIBCLANG_PATH=/usr/lib/llvm-19/lib).
//
// One line is added to the generated loader (src/bpf.rs): the sched_ext watchdog timeout
// (`ops.timeout_ms`, 5 s in scx_rustland_core's main.bpf.c) is taken from `--watchdog-ms` when given,
// so a policy that starves a task by design (ULE's batch threads behind interactive ones) can be
// watched for up to the kernel's limit, 30 s.
fn main() {
    scx_rustland_core::RustLandBuilder::new()
        .expect("scx_rustland_core builder")
        .build()
        .expect("building the BPF scheduler (needs clang: BPF_CLANG=clang-19)");
    let path = std::path::Path::new("src/bpf.rs");
    let src = std::fs::read_to_string(path).expect("reading the generated src/bpf.rs");
    let anchor = "skel.struct_ops.rustland_mut().exit_dump_len = exit_dump_len;";
    let line = "if let Some(ms) = crate::watchdog_ms() { skel.struct_ops.rustland_mut().timeout_ms = ms; }";
    if !src.contains(line) {
        assert!(
            src.contains(anchor),
            "the generated src/bpf.rs no longer sets exit_dump_len; the watchdog line needs a new place"
        );
        std::fs::write(path, src.replace(anchor, &format!("{anchor}\n        {line}")))
            .expect("writing src/bpf.rs");
    }
}
