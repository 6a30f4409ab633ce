#!/usr/bin/env bash
# The kernel benchmarks (BENCHMARKS.md W1, W2) against their peers, in one run.
#
# Builds the criterion benchmarks in release mode, creates benches/.venv with numpy, onnx and
# onnxruntime if missing, then runs ours (`cargo bench --bench kernels`, which also measures the
# plain Rust loops) and the Python peers (benches/peers/kernels.py) alternately, ROUNDS times
# (default 2), and prints one table: the median over rounds of each implementation, the ratio
# peer time / our time (> 1 means we are faster) and the target from BENCHMARKS.md.
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
trap 'rm -f "$results"' EXIT

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
    cargo bench -p relay-benches --bench kernels -- --noplot >&2
    for entry in W1_2e20/ours W1_2e20/rust_loop W1_2e24/ours W1_2e24/rust_loop \
        W2_2e20/ours W2_2e20/rust_fused compile/W1 compile/W2; do
        file="$target_dir/criterion/$entry/new/estimates.json"
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

def fmt(seconds):
    if seconds is None:
        return "—"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"

def cell(workload, peer):
    ours, theirs = t.get((workload, "ours")), t.get((workload, peer))
    if ours is None or theirs is None:
        return "—", None
    ratio = theirs / ours
    return f"{fmt(theirs)} ({ratio:.2f}×)", ratio

rows = [
    ("W1 add 2^20", "W1_2e20", "rust_loop", "≥ 0.9× Rust loop", lambda r: r["rust"] >= 0.9),
    ("W1 add 2^24", "W1_2e24", "rust_loop", "≥ 0.9× Rust loop", lambda r: r["rust"] >= 0.9),
    ("W2 relu(a*b+c) 2^20", "W2_2e20", "rust_fused",
     "≥ 0.9× Rust fused; ≥ 1.5× numpy, ORT",
     lambda r: r["rust"] >= 0.9 and r["numpy"] >= 1.5 and r["onnxruntime"] >= 1.5),
]
print()
print("| workload | ours | Rust loop (ratio) | numpy (ratio) | ONNX Runtime (ratio) | target | met |")
print("|---|---|---|---|---|---|---|")
for label, workload, rust, target, met in rows:
    ratios = {}
    cells = []
    for key, peer in (("rust", rust), ("numpy", "numpy"), ("onnxruntime", "onnxruntime")):
        text, ratio = cell(workload, peer)
        cells.append(text)
        ratios[key] = ratio
    ok = "—" if None in ratios.values() else ("yes" if met(ratios) else "no")
    print(f"| {label} | {fmt(t.get((workload, 'ours')))} | {' | '.join(cells)} | {target} | {ok} |")
for name in ("W1", "W2"):
    value = t.get(("compile", name))
    ok = "—" if value is None else ("yes" if value < 5e-3 else "no")
    print(f"| compile {name} kernel | {fmt(value)} | | | | < 5 ms | {ok} |")
print()
print("Ratios are peer time / our time (> 1: we are faster); medians over rounds, one thread.")
PY
