//! Parse throughput on a generated ~10 MB module in TVM printer style (bytes per second).
//!
//! `cargo bench -p relay-benches --bench parse` measures; under `cargo test` (criterion's test
//! mode) the module is 64 KB so the single test-mode iteration stays fast in debug builds.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use relay_benches::{bench_mode, tvm_style_module};

fn parse(c: &mut Criterion) {
    let size = if bench_mode() { 10 << 20 } else { 64 << 10 };
    let text = tvm_style_module(size);
    // Benchmarking the error path would measure nothing useful: make sure the input parses.
    if let Err(errors) = relay_syntax::parse(&text, "generated.relay") {
        panic!(
            "the generated module does not parse:\n{}",
            relay_syntax::render_plain(&errors)
        );
    }

    let mut group = c.benchmark_group("parse");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("tvm_style_module", |b| {
        // Dropping the module is not parsing: it happens after the timed section.
        b.iter_with_large_drop(|| relay_syntax::parse(black_box(&text), "generated.relay"))
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
