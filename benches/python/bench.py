"""Calls from Python against the same calls from Rust (issue 18, item 7).

    python benches/python/bench.py --relayc target/release/relayc [--zoo benches/models/out]
                                   [--rounds 3] [NAME...]

For each workload, the median time of one call of `@main` from Python (`relayc.VM(exe)(x)`,
the installed `relayc` package, one kernel thread) and from Rust (`relayc run --repeat N
--threads 1`, which times `relay::Vm::invoke` alone), alternated over rounds; prints the
difference per call and the ratio. Workloads: `add` (one `add` of 4 float32, the fixed cost of
a call), and the networks of the model zoo found under --zoo (`mnist`, `resnet50_b1`: Relay
text with the weights bound from `params.npz`, as `benches/run.sh models` runs them).
Inputs are made with `relayc.empty` (read in place); `--unaligned` passes plain numpy arrays
instead (copied once per call).
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import relayc

UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
ADD = '#[version = "0.0.5"]\ndef @main(%x: Tensor[(4), float32]) { add(%x, %x) }\n'
REPEATS = {"add": 200_000, "mnist": 20_000, "resnet50_b1": 20}


def python_median(vm, feeds, repeat):
    """The median seconds of one call `vm(*inputs)` (by position, in `@main`'s parameter
    order), over `repeat` calls after a warm-up."""
    main = next(f for f in vm.executable.functions if f.name == "main")
    inputs = [feeds[name] for name, _ in main.params]
    for _ in range(min(repeat, 100)):
        vm(*inputs)
    times = []
    clock = time.perf_counter
    for _ in range(repeat):
        start = clock()
        vm(*inputs)
        times.append(clock() - start)
    return statistics.median(times)


def rust_median(relayc_bin, source, params, feeds, repeat, scratch):
    """`relayc run --repeat` on the same program and inputs: its p50."""
    cmd = [str(relayc_bin), "run", str(source), "--threads", "1", "--warmup", "100",
           "--repeat", str(repeat), "--output", str(scratch / "out.npz")]
    if params:
        cmd += ["--params", str(params)]
    for name, array in feeds.items():
        path = scratch / f"{name}.npy"
        np.save(path, array)
        cmd += ["--input", f"{name}={path}"]
    run = subprocess.run(cmd, capture_output=True, text=True, check=True)
    match = re.search(r"p50 ([\d.]+) (ns|µs|us|ms|s)\b", run.stderr + run.stdout)
    if not match:
        sys.exit(f"no p50 in relayc's output:\n{run.stderr}")
    return float(match.group(1)) * UNITS[match.group(2)]


def workloads(zoo, names, scratch):
    """(name, source path, params path or None, exe, feeds) of each workload."""
    if not names or "add" in names:
        source = scratch / "add.relay"
        source.write_text(ADD)
        yield "add", source, None, relayc.compile(ADD, threads=1), {"x": np.ones(4, "float32")}
    for name in ["mnist", "resnet50_b1"]:
        directory = zoo / name
        if (names and name not in names) or not directory.is_dir():
            continue
        params = dict(np.load(directory / "params.npz"))
        exe = relayc.compile(directory / "model.relay", params=params, threads=1)
        feeds = {p.stem[len("input_"):]: np.load(p) for p in directory.glob("input_*.npy")}
        yield name, directory / "model.relay", directory / "params.npz", exe, feeds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relayc", type=Path, required=True)
    parser.add_argument("--zoo", type=Path, default=Path(__file__).parents[1] / "models" / "out")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unaligned", action="store_true")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for name, source, params, exe, feeds in workloads(args.zoo, args.names, scratch):
            vm = relayc.VM(exe, threads=1)
            if not args.unaligned:
                aligned = {}
                for key, value in feeds.items():
                    aligned[key] = relayc.empty(value.shape, str(value.dtype))
                    aligned[key][...] = value
                feeds = aligned
            repeat = REPEATS[name]
            ours, rust = [], []
            for _ in range(args.rounds):
                ours.append(python_median(vm, feeds, repeat))
                rust.append(rust_median(args.relayc, source, params, feeds, repeat, scratch))
            rows.append((name, statistics.median(ours), statistics.median(rust)))
    print("| workload | Python, per call | Rust (`relayc run --repeat`) | Python − Rust | Python / Rust |")
    print("|---|---|---|---|---|")
    for name, py, rs in rows:
        print(f"| {name} | {fmt(py)} | {fmt(rs)} | {fmt(py - rs)} | {py / rs:.3f} |")


def fmt(seconds):
    sign = "−" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds >= 1e-3:
        return f"{sign}{seconds * 1e3:.3g} ms"
    return f"{sign}{seconds * 1e6:.3g} µs"


if __name__ == "__main__":
    main()
