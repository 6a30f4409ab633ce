#!/usr/bin/env bash
# The kernel benchmarks (BENCHMARKS.md W1-W4, W8) against their peers, in one run.
#
# Builds the criterion benchmarks in release mode, creates benches/.venv with numpy, onnx and
# onnxruntime if missing, then runs ours (`cargo bench --bench kernels`, which also measures the
# Rust peers: plain loops, `matrixmultiply`, direct convolution loops) and the Python peers
# (benches/peers/kernels.py) alternately, ROUNDS times (default 2), and prints one table: the
# median over rounds of each implementation, the ratio peer time / our time (> 1 means we are
# faster), GFLOP/s for the contractions, and the target from BENCHMARKS.md.
#
# A kernel that does not compile yet is skipped by the criterion benchmark (the reason is on
# stderr); its cells show "—". Only estimates written during this run are read, never stale
# ones from an earlier run.
#
# Usage: benches/run.sh            (from anywhere; ROUNDS=1 benches/run.sh for a quicker run)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
rounds="${ROUNDS:-2}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="$here/.venv"
results="$(mktemp "${TMPDIR:-/tmp}/relay-kernels.XXXXXX")"
stamp="$(mktemp "${TMPDIR:-/tmp}/relay-kernels-stamp.XXXXXX")"
trap 'rm -f "$results" "$stamp"' EXIT

# The criterion benchmarks the table reads, as group/bench.
entries=(
    W1_2e20/ours W1_2e20/rust_loop W1_2e24/ours W1_2e24/rust_loop W1_2e20_threads2/ours
    W2_2e20/ours W2_2e20/rust_fused
    W3_dense/ours W3_dense/matrixmultiply W3_matmul/ours W3_matmul/matrixmultiply
    W4_conv2d/ours W4_conv2d/rust_direct
    compile/W1 compile/W2 compile/W3 compile/W4 compile/W8_mlp compile/W8_conv
)

echo "== building the benchmarks (release)" >&2
cargo bench -p relay-benches --bench kernels --no-run >&2

if ! "$venv/bin/python" -c "import numpy, onnx, onnxruntime" 2>/dev/null; then
    echo "== setting up $venv (numpy, onnx, onnxruntime)" >&2
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip >&2
    "$venv/bin/pip" install --quiet numpy onnx onnxruntime >&2
fi

for round in $(seq 1 "$rounds"); do
    echo "== round $round/$rounds: ours (criterion)" >&2
    touch "$stamp"
    cargo bench -p relay-benches --bench kernels -- --noplot >&2
    for entry in "${entries[@]}"; do
        file="$target_dir/criterion/$entry/new/estimates.json"
        # A benchmark skipped in this round (its kernel does not compile) left no new file.
        [ "$file" -nt "$stamp" ] || continue
        "$venv/bin/python" - "$file" "$entry" >>"$results" <<'PY'
import json, sys
path, entry = sys.argv[1], sys.argv[2]
group, bench = entry.split("/")
with open(path) as f:
    median_ns = json.load(f)["median"]["point_estimate"]
print(f"PEER {group} {bench} {median_ns * 1e-9:.9e}")
PY
    done
    echo "== round $round/$rounds: peers (numpy, ONNX Runtime)" >&2
    "$venv/bin/python" "$here/peers/kernels.py" | tee -a "$results" >&2
done

"$venv/bin/python" - "$results" <<'PY'
import statistics, sys
from collections import defaultdict

samples = defaultdict(list)
with open(sys.argv[1]) as f:
    for line in f:
        parts = line.split()
        if len(parts) == 4 and parts[0] == "PEER":
            samples[(parts[1], parts[2])].append(float(parts[3]))
t = {key: statistics.median(v) for key, v in samples.items()}

# Floating-point operations per call: 2·M·N·K for the GEMMs, 2·N·O·OH·OW·C·KH·KW for W4.
flops = {
    "W3_dense": 2 * 128 * 512 * 512,
    "W3_matmul": 2 * 512 * 512 * 512,
    "W4_conv2d": 2 * 1 * 64 * 56 * 56 * 64 * 3 * 3,
}

def fmt(seconds):
    if seconds is None:
        return "—"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"

def timing(workload, seconds):
    """A time, with GFLOP/s for the contractions."""
    if seconds is not None and workload in flops:
        return f"{fmt(seconds)}, {flops[workload] / seconds * 1e-9:.3g} GFLOP/s"
    return fmt(seconds)

def cell(workload, peer, ours_workload=None):
    """A peer's time and the ratio peer time / our time (ours from `ours_workload`)."""
    if peer is None:
        return "", None
    theirs = t.get((workload, peer))
    ours = t.get((ours_workload or workload, "ours"))
    if theirs is None:
        return "—", None
    if ours is None:
        return timing(workload, theirs), None
    ratio = theirs / ours
    return f"{timing(workload, theirs)} ({ratio:.2f}×)", ratio

# label, workload, Rust peer id (None: no Rust peer), target, whether the ratios meet it.
rows = [
    ("W1 add 2^20", "W1_2e20", "rust_loop", "≥ 0.9× Rust loop", lambda r: r["rust"] >= 0.9),
    ("W1 add 2^24", "W1_2e24", "rust_loop", "≥ 0.9× Rust loop", lambda r: r["rust"] >= 0.9),
    ("W1 add 2^20, 2 threads", "W1_2e20_threads2", None, "≥ 1.0× ORT (2 threads)",
     lambda r: r["onnxruntime"] >= 1.0),
    ("W2 relu(a*b+c) 2^20", "W2_2e20", "rust_fused",
     "≥ 0.9× Rust fused; ≥ 1.5× numpy, ORT",
     lambda r: r["rust"] >= 0.9 and r["numpy"] >= 1.5 and r["onnxruntime"] >= 1.5),
    ("W3 dense 128×512×512", "W3_dense", "matrixmultiply", "≥ 0.85× ORT",
     lambda r: r["onnxruntime"] >= 0.85),
    ("W3 matmul 512³", "W3_matmul", "matrixmultiply", "≥ 0.85× ORT",
     lambda r: r["onnxruntime"] >= 0.85),
    ("W4 conv2d 3×3 64→64 56²", "W4_conv2d", "rust_direct", "≥ 0.6× ORT; > 1× numpy im2col",
     lambda r: r["onnxruntime"] >= 0.6 and r["numpy"] > 1.0),
]
print()
print("| workload | ours | Rust peer (ratio) | numpy (ratio) | ONNX Runtime (ratio) | target | met |")
print("|---|---|---|---|---|---|---|")
for label, workload, rust, target, met in rows:
    ratios = {}
    cells = []
    # The 2-thread row has one peer, ONNX Runtime with 2 threads.
    numpy = None if workload.endswith("_threads2") else "numpy"
    for key, peer in (("rust", rust), ("numpy", numpy), ("onnxruntime", "onnxruntime")):
        text, ratio = cell(workload, peer)
        if text and text != "—" and key == "rust":
            text = f"{peer}: {text}"
        cells.append(text)
        ratios[key] = ratio
    try:
        ok = "yes" if met(ratios) else "no"
    except TypeError:
        # A ratio the target needs is missing (a kernel that does not compile, a failed peer).
        ok = "—"
    ours = timing(workload, t.get((workload, "ours")))
    print(f"| {label} | {ours} | {' | '.join(cells)} | {target} | {ok} |")
compile_rows = [
    ("compile W1 kernel", "W1", "< 5 ms", 5e-3),
    ("compile W2 kernel", "W2", "< 5 ms", 5e-3),
    ("compile W3 dense kernel", "W3", "< 5 ms", 5e-3),
    ("compile W4 conv2d kernel", "W4", "< 5 ms", 5e-3),
    ("W8 MLP (W5 batch 1): text → kernels", "W8_mlp", "≤ 20 ms", 20e-3),
    ("W8 conv2d (W4): text → kernels", "W8_conv", "", None),
]
for label, name, target, limit in compile_rows:
    value = t.get(("compile", name))
    ok = "—" if value is None or limit is None else ("yes" if value <= limit else "no")
    print(f"| {label} | {fmt(value)} | | | | {target} | {ok} |")
print()
print("Ratios are peer time / our time (> 1: we are faster); medians over rounds; one thread")
print("except the 2-thread W1 row. \"—\": not measured (a kernel that does not compile yet).")
PY
