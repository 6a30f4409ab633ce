//! Printer throughput: printing a parsed ~1 MB module in TVM printer style, in bytes of
//! printed text per second.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use relay_benches::{bench_mode, tvm_style_module};
use relay_ir::{PrintOptions, print_module};

fn print(c: &mut Criterion) {
    let size = if bench_mode() { 1 << 20 } else { 16 << 10 };
    let text = tvm_style_module(size);
    let module = match relay_syntax::parse(&text, "generated.relay") {
        Ok(module) => module,
        Err(errors) => panic!(
            "the generated module does not parse:\n{}",
            relay_syntax::render_plain(&errors)
        ),
    };
    let options = PrintOptions::default();
    let printed = print_module(&module, &options);

    let mut group = c.benchmark_group("print");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Bytes(printed.len() as u64));
    group.bench_function("tvm_style_module", |b| {
        b.iter(|| print_module(black_box(&module), &options))
    });
    group.finish();
}

criterion_group!(benches, print);
criterion_main!(benches);
