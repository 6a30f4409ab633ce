#!/usr/bin/env bash
# The soak test: one executable file per workload, shared by 8 threads with a VM each, 10^5
# runs of `@main` on seeded random inputs (benches/src/bin/soak.rs). Every run must succeed
# with the first run's result; the resident memory is sampled as the runs go and its first
# (after the warm-up) and last values printed. Workloads: the MNIST CNN (the ONNX importer's
# test model), the LSTM over a list and the tree-RNN with a reference (examples/).
#
#   benches/soak.sh [RUNS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-100000}
threads=${2:-8}
cargo build --release -p relayc -p relay-benches --bin relayc --bin soak
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
target/release/relayc build crates/relay-onnx/tests/data/mnist.onnx -o "$out/mnist.ro" 2>/dev/null
target/release/relayc build examples/lstm.relay -o "$out/lstm.ro" 2>/dev/null
target/release/relayc build examples/tree.relay -o "$out/tree.ro" 2>/dev/null
for exe in mnist lstm tree; do
  target/release/soak "$out/$exe.ro" --threads "$threads" --runs "$runs" --samples 10
done
