//! The float32 multiply-add peak of one core per instruction set this CPU runs
//! (`relay_linalg::peak`), as one JSON object `{"avx2": GFLOP/s, ...}` on stdout: what the
//! benchmarks state kernel speeds against (`benches/models/bench.py --profile`).
//!
//! `cargo run --release -p relay-linalg --example peak [RUNS]` (the best of `RUNS` timed loops,
//! default 5).

use relay_linalg::Isa;
use relay_linalg::peak::fma_peak;

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let mut fields = Vec::new();
    for isa in Isa::available() {
        match fma_peak(isa, runs) {
            Ok(gflops) => fields.push(format!("\"{}\": {gflops:.1}", isa.name())),
            Err(e) => {
                eprintln!("{}: {e}", isa.name());
                std::process::exit(1);
            }
        }
    }
    println!("{{{}}}", fields.join(", "));
}
