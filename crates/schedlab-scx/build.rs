// Generates the BPF side of scx_rustland_core (intf.h, main.bpf.c, src/bpf.rs; not committed) and
// compiles it with clang (set BPF_CLANG=clang-19 and LIBCLANG_PATH=/usr/lib/llvm-19/lib).
fn main() {
    scx_rustland_core::RustLandBuilder::new()
        .expect("scx_rustland_core builder")
        .build()
        .expect("building the BPF scheduler (needs clang: BPF_CLANG=clang-19)");
}
