#!/usr/bin/env bash
# The benchmarks of BENCHMARKS.md against their peers, in one run: the kernel table (W1-W4 and
# compile times) and the VM table (W5-W9).
#
# Builds the criterion benchmarks in release mode, creates benches/.venv with numpy, onnx and
# onnxruntime if missing, then runs ours and the peers alternately, ROUNDS times (default 2):
# - kernels: `cargo bench --bench kernels` (which also measures the Rust peers: plain loops,
#   `matrixmultiply`, direct convolution loops) and the Python peers benches/peers/kernels.py;
# - vm: `cargo bench --bench vm` (whole programs in the VM with one kernel thread, and text to
#   executable; also native Rust fib; W9, loading the W5 MLP's executable file, whose size the
#   benchmark appends to the results through RELAY_BENCH_SIZES) and benches/peers/vm.py (ONNX
#   Runtime, numpy, CPython, and Lua 5.4 when `lua5.4` is on PATH).
# It then prints one table per part: the median over rounds of each implementation, the ratio
# peer time / our time (> 1 means we are faster), GFLOP/s for the contractions, per-step,
# per-iteration and per-call times for W6 and W7, and the target from BENCHMARKS.md (W9's
# from issue 7: load under 20 ms, file within 5% of the raw size of its constants).
#
# A kernel or program that does not compile (or run) yet is skipped by its criterion benchmark
# (the reason is on stderr); its cells show "—". Only estimates written during this run are
# read, never stale ones from an earlier run.
#
# - models (issue 15; not part of `all`, it takes several minutes): the model zoo of
#   benches/models/ (generated into benches/models/out/ by benches/models/generate.py when
#   missing), each network run by `relayc run --params` (release build) and by ONNX Runtime,
#   alternately, at 1 and 2 threads, relayc's outputs checked against ONNX Runtime's (a mismatch
#   fails the run), then the table of ratios and issue 15's targets (benches/models/bench.py).
#   relayc runs once per instruction set this CPU has (avx512, avx2: `RELAYC_ISA`), each with
#   its columns. `--profile` adds each network's top kernels (`relayc run --profile --threads 1`)
#   per instruction set, convolutions and products with their GFLOP/s and the fraction of the
#   measured multiply-add peak (relay-linalg's `peak` example); `--interleave` runs each
#   network in one Python process through the relayc package (built into the venv) and ONNX
#   Runtime, one inference of each in turn (the fair comparison on a host whose speed varies
#   from second to second); names
#   select networks (mnist lstm mobilenetv2 resnet50_b1 resnet50_b8 resnet50_b1_f16 bert_b1
#   bert_b8 bert_b1_f16 gpt2).
#
# - dynamic (issue 31; not part of `all`): shapes that vary, through the relayc Python package
#   (built in release into the venv with maturin): the attention model with a dynamic batch and
#   sequence and a BERT-base encoder layer with a dynamic batch and sequence
#   (benches/dynamic/bert_layer.py), each called at lengths it has not seen (first and warm
#   calls against ONNX Runtime's), resident memory over 10^4 calls at 10^3 lengths, and the
#   growing loop against numpy (benches/dynamic/bench.py; its arguments pass through, e.g.
#   --lengths 1:512 --threads 2 --skip bert).
#
# - generate (issue 32; not part of `all`): GPT-2 small's greedy generation (a 32-token prompt,
#   128 new tokens) by relayc — the zoo's Relay programs (caches grown per step, and
#   preallocated caches written in place) and the ONNX decoder with past in a generation
#   loop — against ONNX Runtime driven by a Python loop with I/O binding, and its
#   beam search of width 4 (the zoo's program against the same decoder on a batch of beams in
#   a Python loop), at 1 and 2 threads: time to first token and tokens per second after it, the
#   ids checked equal, then each greedy loop's time per token beside the bandwidth bound
#   (benches/generate/bench.py; the models are written into benches/generate/out/ by
#   benches/generate/export.py when missing, which installs torch and transformers into the
#   venv; arguments pass through, e.g. --threads 1 --new-tokens 64).
#
# - exported (issue 29; not part of `all`): the exported zoo of benches/exported/ — torchvision
#   and Hugging Face architectures, nn.LSTM/nn.GRU and Loop/Scan/If models exported by both of
#   PyTorch's exporters (TorchScript at opset 17, dynamo at opset 20) from configs with seeded
#   weights, generated into benches/exported/out/ by benches/exported/export.py when missing
#   (this mode alone installs torch, torchvision, transformers and onnxscript into the venv);
#   then benches/exported/run.py: each model by `relayc run` (release build) and ONNX Runtime,
#   alternately, at 1 and 2 threads, checked within 1e-4, the table of ratios and their
#   geometric means. Names select models by prefix (tv_ hf_ rnn_ cf_, hf_bert, ...).
#
# Usage: benches/run.sh [all|kernels|vm]   (from anywhere; default all, both tables;
#        ROUNDS=1 benches/run.sh vm for a quicker run of the VM table only)
#        benches/run.sh models [--profile] [--nchw] [--interleave] [NAME...]   (ROUNDS default 1)
#        benches/run.sh exported [NAME...]             (ROUNDS default 3 here)
#        benches/run.sh dynamic [--lengths LO:HI] [--threads N] ...
#        benches/run.sh generate [--config small|tiny] [--threads N...] ...
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
rounds="${ROUNDS:-2}"
mode="${1:-all}"
case "$mode" in
    all) parts=(kernels vm) ;;
    kernels | vm | models | exported | dynamic | generate) parts=("$mode") ;;
    *)
        echo "usage: benches/run.sh [all|kernels|vm] | benches/run.sh models [--profile] [NAME...]" \
            "| benches/run.sh exported [NAME...] | benches/run.sh dynamic [ARGS...]" \
            "| benches/run.sh generate [ARGS...]" >&2
        exit 2
        ;;
esac
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="$here/.venv"
results="$(mktemp "${TMPDIR:-/tmp}/relay-bench.XXXXXX")"
stamp="$(mktemp "${TMPDIR:-/tmp}/relay-bench-stamp.XXXXXX")"
trap 'rm -f "$results" "$stamp"' EXIT

# The criterion benchmarks each table reads, as group/bench.
kernels_entries=(
    W1_2e20/ours W1_2e20/rust_loop W1_2e24/ours W1_2e24/rust_loop W1_2e20_threads2/ours
    W2_2e20/ours W2_2e20/rust_fused
    W3_dense/ours W3_dense/matrixmultiply W3_matmul/ours W3_matmul/matrixmultiply
    W4_conv2d/ours W4_conv2d/rust_direct
    compile/W1 compile/W2 compile/W3 compile/W4 compile/W8_mlp compile/W8_conv
)
vm_entries=(
    W5_b1/ours W5_b64/ours W6/ours W7_sum_to/ours W7_fib/ours W7_fib/rust_native
    W8/mlp_text_to_exe W8/conv_text_to_exe
    W9_load/mlp_ro_file W9_load/mlp_ro W9_load/mlp_ro_decode
)

setup_venv() {
    if ! "$venv/bin/python" -c "import numpy, onnx, onnxruntime" 2>/dev/null; then
        echo "== setting up $venv (numpy, onnx, onnxruntime)" >&2
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --upgrade pip >&2
        "$venv/bin/pip" install --quiet numpy onnx onnxruntime >&2
    fi
}

if [ "$mode" = exported ]; then
    shift
    echo "== building relayc (release)" >&2
    cargo build --release -p relayc >&2
    setup_venv
    if ! "$venv/bin/python" -c "import torch, torchvision, transformers, onnxscript" 2>/dev/null; then
        echo "== installing torch, torchvision, transformers, onnxscript into $venv" >&2
        "$venv/bin/pip" install --quiet torch torchvision transformers onnxscript onnx onnxruntime >&2
    fi
    # Exports what is missing (a model that fails to export is recorded, not fatal).
    "$venv/bin/python" "$here/exported/export.py" "$@" >&2
    exec "$venv/bin/python" "$here/exported/run.py" --relayc "$target_dir/release/relayc" \
        --rounds "${ROUNDS:-3}" "$@"
fi

if [ "$mode" = dynamic ]; then
    shift
    setup_venv
    echo "== building the relayc Python package (release) into $venv" >&2
    "$venv/bin/pip" install --quiet 'maturin>=1.7,<2' psutil >&2
    (cd "$root/crates/relay-python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
        maturin develop --release >&2)
    exec "$venv/bin/python" "$here/dynamic/bench.py" "$@"
fi

if [ "$mode" = generate ]; then
    shift
    setup_venv
    echo "== building the relayc Python package (release) into $venv" >&2
    "$venv/bin/pip" install --quiet 'maturin>=1.7,<2' >&2
    (cd "$root/crates/relay-python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
        maturin develop --release >&2)
    if ! "$venv/bin/python" -c "import torch, transformers" 2>/dev/null; then
        echo "== installing torch and transformers into $venv" >&2
        "$venv/bin/pip" install --quiet torch transformers onnx onnxruntime >&2
    fi
    config=small
    for ((i = 1; i <= $#; i++)); do
        if [ "${!i}" = --config ]; then j=$((i + 1)); config="${!j}"; fi
    done
    "$venv/bin/python" "$here/generate/export.py" --config "$config" >&2
    exec "$venv/bin/python" "$here/generate/bench.py" "$@"
fi

if [ "$mode" = models ]; then
    shift
    echo "== building relayc and the multiply-add peak (release)" >&2
    cargo build --release -p relayc >&2
    cargo build --release -p relay-linalg --example peak >&2
    setup_venv
    models=()
    for arg in "$@"; do
        case "$arg" in
            --profile | --nchw) ;;
            --interleave)
                echo "== building the relayc Python package (release) into $venv" >&2
                "$venv/bin/pip" install --quiet 'maturin>=1.7,<2' >&2
                (cd "$root/crates/relay-python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
                    maturin develop --release >&2)
                ;;
            *) models+=("$arg") ;;
        esac
    done
    "$venv/bin/python" "$here/models/generate.py" "${models[@]}" >&2
    exec "$venv/bin/python" "$here/models/bench.py" --relayc "$target_dir/release/relayc" \
        --rounds "${ROUNDS:-1}" "$@"
fi

echo "== building the benchmarks (release)" >&2
bench_args=()
for part in "${parts[@]}"; do
    bench_args+=(--bench "$part")
done
cargo bench -p relay-benches "${bench_args[@]}" --no-run >&2

setup_venv

# Runs criterion benchmark $1 and appends the median of each of its entries (the remaining
# arguments) to the results as `PEER <group> <bench> <seconds>`, skipping those this run did
# not write (a kernel or program that does not compile yet). The benchmark itself appends
# `SIZE <group> <bench> <file bytes> <constant bytes>` lines to the file RELAY_BENCH_SIZES
# names (W9's executable file).
run_ours() {
    local bench="$1"
    shift
    touch "$stamp"
    # A failing benchmark binary leaves the estimates it wrote; the peers and tables still run.
    RELAY_BENCH_SIZES="$results" cargo bench -p relay-benches --bench "$bench" -- --noplot >&2 ||
        echo "== cargo bench --bench $bench failed; its missing entries show \"—\"" >&2
    for entry in "$@"; do
        file="$target_dir/criterion/$entry/new/estimates.json"
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
}

for round in $(seq 1 "$rounds"); do
    for part in "${parts[@]}"; do
        echo "== round $round/$rounds: ours ($part, criterion)" >&2
        if [ "$part" = kernels ]; then
            run_ours kernels "${kernels_entries[@]}"
        else
            run_ours vm "${vm_entries[@]}"
        fi
        echo "== round $round/$rounds: peers ($part)" >&2
        "$venv/bin/python" "$here/peers/$part.py" | tee -a "$results" >&2
    done
done

for part in "${parts[@]}"; do
    if [ "$part" = kernels ]; then
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
    else
        "$venv/bin/python" - "$results" <<'PY'
import shutil, statistics, sys
from collections import defaultdict

samples = defaultdict(list)
# (file bytes, constant bytes) by (group, bench); the same every round.
sizes = {}
with open(sys.argv[1]) as f:
    for line in f:
        parts = line.split()
        if len(parts) == 4 and parts[0] == "PEER":
            samples[(parts[1], parts[2])].append(float(parts[3]))
        elif len(parts) == 5 and parts[0] == "SIZE":
            sizes[(parts[1], parts[2])] = (int(parts[3]), int(parts[4]))
t = {key: statistics.median(v) for key, v in samples.items()}

# The work of one call: W6 runs 100 LSTM steps, W7 sum_to 10^6 iterations, fib(25) makes
# 242,785 calls (2 fib(26) - 1). Every implementation of a workload is divided alike.
units = {"W6": 100, "W7_sum_to": 10**6, "W7_fib": 242_785}
lua_missing = shutil.which("lua5.4") is None

def time_of(workload, impl):
    """The median time of one unit of work, or None when not measured."""
    seconds = t.get((workload, impl))
    return None if seconds is None else seconds / units.get(workload, 1)

def fmt(seconds):
    if seconds is None:
        return "—"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"

def peer_cells(workload, ours_impl, peers):
    """'label: time (ratio)' for each peer, ratio = peer time / our time."""
    ours = time_of(workload, ours_impl)
    cells = []
    for label, impl in peers:
        if impl == "lua" and lua_missing and time_of(workload, impl) is None:
            cells.append(f"{label}: not measured (lua5.4 not on PATH)")
            continue
        theirs = time_of(workload, impl)
        if theirs is None:
            cells.append(f"{label}: —")
        elif ours is None:
            cells.append(f"{label}: {fmt(theirs)}")
        else:
            cells.append(f"{label}: {fmt(theirs)} ({theirs / ours:.2f}×)")
    return "; ".join(cells)

def met(ok):
    return "—" if ok is None else ("yes" if ok else "no")

def within_ratio(workload, peer, factor):
    """Whether our time ≤ factor × the peer's, or None when either is missing."""
    ours, theirs = time_of(workload, "ours"), time_of(workload, peer)
    return None if ours is None or theirs is None else ours <= factor * theirs

def within(workload, impl, limit):
    """Whether our time ≤ limit seconds, or None when not measured."""
    value = time_of(workload, impl)
    return None if value is None else value <= limit

ort = [("ONNX Runtime", "onnxruntime"), ("ORT, weights as inputs", "onnxruntime_inputs")]
interpreters = [("Lua 5.4", "lua"), ("CPython", "cpython")]
# label, workload, our implementation, peers, target, whether it is met.
rows = [
    ("W5 MLP batch 1", "W5_b1", "ours", ort, "≤ 1.0× ORT latency",
     within_ratio("W5_b1", "onnxruntime", 1.0)),
    ("W5 MLP batch 64", "W5_b64", "ours", ort, "≤ 1.2× ORT latency",
     within_ratio("W5_b64", "onnxruntime", 1.2)),
    ("W6 LSTM 128/128, per step", "W6", "ours",
     [("ORT LSTM op", "onnxruntime"), ("ORT LSTM, weights as inputs", "onnxruntime_inputs"),
      ("numpy + Python loop", "numpy")],
     "≤ 10 µs per step", within("W6", "ours", 10e-6)),
    ("W7 sum_to 10^6, per iteration", "W7_sum_to", "ours", interpreters,
     "≤ 50 ns per iteration", within("W7_sum_to", "ours", 50e-9)),
    ("W7 fib(25), per call", "W7_fib", "ours",
     interpreters + [("native Rust", "rust_native")],
     "≤ 60 ns per call", within("W7_fib", "ours", 60e-9)),
    ("W8 MLP (W5 batch 1): text → executable", "W8", "mlp_text_to_exe",
     [("ORT session creation", "onnxruntime_session")], "≤ 20 ms",
     within("W8", "mlp_text_to_exe", 20e-3)),
    ("W8 conv2d (W4): text → executable", "W8", "conv_text_to_exe", [], "", None),
]
print()
print("| workload | ours | peers: time (peer / ours) | target | met |")
print("|---|---|---|---|---|")
for label, workload, impl, peers, target, ok in rows:
    ours = fmt(time_of(workload, impl))
    print(f"| {label} | {ours} | {peer_cells(workload, impl, peers)} | {target} | {met(ok)} |")

# W9: loading the W5 MLP's executable file (our time: `Executable::load`, the read included),
# beside the same load from bytes in memory, decoding and validating without the kernel JIT,
# and ONNX Runtime's session creation from the serialized model (W8's peer, weights included).
load = time_of("W9_load", "mlp_ro_file")
session = time_of("W8", "onnxruntime_session")
cells = [
    f"from bytes in memory: {fmt(time_of('W9_load', 'mlp_ro'))}",
    f"decode + validate only, no JIT: {fmt(time_of('W9_load', 'mlp_ro_decode'))}",
]
if session is None:
    cells.append("ORT session creation: —")
elif load is None:
    cells.append(f"ORT session creation: {fmt(session)}")
else:
    cells.append(f"ORT session creation: {fmt(session)} ({session / load:.2f}×)")
ok = None if load is None else load < 20e-3
print(f"| W9 MLP (W5 batch 1, weights as constants): load the `.ro` file, kernel JIT included "
      f"| {fmt(load)} | {'; '.join(cells)} | < 20 ms | {met(ok)} |")
size = sizes.get(("W9_load", "mlp_ro"))
if size is None:
    print("| W9 MLP `.ro` file size | — | raw constants: — | within 5% of the raw constants | — |")
else:
    file_bytes, constant_bytes = size
    ratio = file_bytes / constant_bytes
    print(f"| W9 MLP `.ro` file size | {file_bytes:,} bytes | raw constants: "
          f"{constant_bytes:,} bytes (file / constants = {ratio:.4f}) "
          f"| within 5% of the raw constants | {met(abs(ratio - 1) <= 0.05)} |")
print()
print("Ratios are peer time / our time (> 1: we are faster); medians over rounds; one thread.")
print("W6 and W7 are divided by the work per call (100 steps, 10^6 iterations, 242,785 calls).")
print("ONNX Runtime holds the weights as initializers (prepacked) unless \"weights as inputs\".")
print("\"—\": not measured (a program that does not compile or run yet).")
PY
    fi
done
