//! Times importing an ONNX model read into memory (decode, initializers, conversion, type
//! check):
//! `cargo run --release -p relay-onnx --example import_time -- MODEL.onnx [RUNS]`.

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: import_time MODEL.onnx [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(5);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let options = relay_onnx::ImportOptions::default();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        // The file's bytes as relayc holds them (read into a buffer the import then owns).
        let owned = bytes.clone();
        let start = Instant::now();
        match relay_onnx::import_owned(owned, &options) {
            Ok(m) => std::hint::black_box(m),
            Err(e) => {
                eprintln!("{:?}", miette::Report::new(e));
                std::process::exit(1);
            }
        };
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{path}: {} bytes, import median {:.1} ms, min {:.1} ms ({runs} runs)",
        bytes.len(),
        times[runs / 2],
        times[0]
    );
}
