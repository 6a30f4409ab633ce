"""Runs the model zoo (benches/models/out/, written by generate.py) on relayc and ONNX Runtime,
alternately, at 1 and 2 threads; checks that relayc's outputs match ONNX Runtime's; prints the
table of benches/run.sh models. Called by benches/run.sh; usable alone:

    python3 benches/models/bench.py --relayc target/release/relayc [--rounds N] [--profile]
                                    [--threads 1,2] [NAME...]

Times are medians per inference: relayc's `relayc run --repeat N` (its own median, compile time
excluded), ONNX Runtime's of N runs after one warm-up run. The result of each relayc run is
compared with ONNX Runtime's: max |relayc - ORT| ≤ tol · max |ORT|, tol 1e-3 for float32 and
3e-2 for float16 (checked against ONNX Runtime's float32 run of the same float16 weights when
its CPU provider has no float16 kernels; ORT's time then shows "—"). A mismatch fails the run
(exit 1) after the table. With --profile, relayc's `--profile` of three runs at one thread follows for
the networks of PROFILED, cut to the top kernels. With --nchw, ONNX Runtime is also timed at its
"extended" optimization level on the convolutional networks (CONVOLUTIONAL), where it keeps
their NCHW layout instead of converting the graph to its blocked NCHWc layout: the table then
has a column "ORT NCHW / relayc" for each thread count.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import ort  # noqa: E402

HERE = Path(__file__).resolve().parent
ORDER = ["mnist", "lstm", "mobilenetv2", "resnet50_b1", "resnet50_b8", "resnet50_b1_f16",
         "densenet121", "bert_b1", "bert_b8", "bert_b1_f16", "gpt2"]
# Runs per measurement: fewer for the big ones.
# relayc's median over N runs includes the first, which packs the constant weights (once per
# executable) and touches its memory first: N >= 3 keeps the median a warm run.
REPEATS = {"mnist": 200, "lstm": 50, "mobilenetv2": 10, "resnet50_b1": 5, "resnet50_b8": 3,
           "resnet50_b1_f16": 3, "densenet121": 5, "bert_b1": 3, "bert_b8": 3, "bert_b1_f16": 3, "gpt2": 3}
# The networks --profile profiles (the float16 and batch 8 ones take minutes at one thread).
PROFILED = ["mnist", "lstm", "mobilenetv2", "resnet50_b1", "bert_b1", "gpt2"]
# The networks whose convolutions ONNX Runtime's "all" level runs in its blocked NCHWc layout.
CONVOLUTIONAL = ["mnist", "mobilenetv2", "resnet50_b1", "resnet50_b8", "densenet121"]
# issue 15's targets: ratio ORT / relayc at 1 and 2 threads.
TARGETS = {
    "mnist": "≥ 1.0× (1 and 2 threads)",
    "lstm": "≤ 8 µs per step (100 steps)",
    "mobilenetv2": "≥ 1.0× (1 and 2 threads)",
    "resnet50_b1": "≥ 1.0×; 2 threads ≥ 1.8× our 1 thread",
    "resnet50_b8": "",
    "resnet50_b1_f16": "≤ 1.5× our float32 time",
    "densenet121": "≥ 0.8× (1 thread; issue 29)",
    "bert_b1": "≥ 1.0× (1 and 2 threads)",
    "bert_b8": "",
    "bert_b1_f16": "≤ 1.5× our float32 time",
    "gpt2": "≥ 1.0× (1 and 2 threads)",
}
UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class Network:
    def __init__(self, name, directory):
        self.name = name
        self.dir = directory
        self.meta = json.loads((directory / "meta.json").read_text())
        self.feeds = {n: np.load(directory / f"input_{n}.npy") for n in self.meta["inputs"]}
        self.tol = 3e-2 if self.meta["dtype"] == "float16" else 1e-3

    def relayc_args(self, relayc, threads, repeat, output):
        args = [str(relayc), "run", str(self.dir / "model.relay"),
                "--params", str(self.dir / "params.npz"), "--threads", str(threads),
                "--repeat", str(repeat), "--output", str(output)]
        for n in self.meta["inputs"]:
            args += ["--input", f"{n}={self.dir / f'input_{n}.npy'}"]
        return args


def run_relayc(net, relayc, threads, repeat, scratch):
    """(median seconds, outputs) of `relayc run --repeat`; raises on failure."""
    suffix = ".npy" if net.meta["outputs"] == 1 else ".npz"
    output = scratch / f"{net.name}{suffix}"
    done = subprocess.run(net.relayc_args(relayc, threads, repeat, output), capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"relayc failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    found = re.search(r"p50 ([0-9.]+) (ns|µs|us|ms|s)\b", done.stderr)
    if not found:
        raise RuntimeError(f"no p50 in relayc's output:\n{done.stderr[-2000:]}")
    seconds = float(found.group(1)) * UNITS[found.group(2)]
    if suffix == ".npy":
        outputs = [np.load(output)]
    else:
        with np.load(output) as z:
            outputs = [z[str(i)] for i in range(len(z.files))]
    return seconds, outputs


def run_ort(sess, net, widened, repeat):
    outputs = ort.run(sess, net.feeds, widened)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        ort.run(sess, net.feeds, widened)
        times.append(time.perf_counter() - start)
    return statistics.median(times), outputs


def mismatch(net, ours, theirs):
    """None if relayc's outputs match ORT's within tolerance, else a description."""
    if len(ours) != len(theirs):
        return f"{len(ours)} outputs, ONNX Runtime has {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return f"output {i}: shape {a.shape}, ONNX Runtime's {b.shape}"
        scale = max(float(np.max(np.abs(b))), 1e-6)
        diff = float(np.max(np.abs(a - b))) if a.size else 0.0
        if not diff <= net.tol * scale:
            worst = np.unravel_index(int(np.argmax(np.abs(a - b))), a.shape)
            return (f"output {i}: max |diff| {diff:.4g} at {worst} (relayc {a[worst]:.6g}, "
                    f"ORT {b[worst]:.6g}), max |ORT| {scale:.4g}, tolerance {net.tol} × max")
    return None


def fmt(seconds):
    if seconds is None:
        return "—"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def profile(net, relayc, scratch, top):
    """Prints the header, the `top` costliest kernels and the totals of relayc's profile of three
    runs at one thread."""
    args = net.relayc_args(relayc, 1, 3, scratch / f"profile-{net.name}.npz")
    args.append("--profile")
    done = subprocess.run(args, capture_output=True, text=True)
    print(f"\n### {net.name}: relayc run --profile --threads 1 --repeat 3, top {top} kernels\n")
    if done.returncode != 0:
        print(f"relayc failed (exit {done.returncode}): {done.stderr[-2000:]}")
        return
    lines = done.stderr.splitlines()
    kernels = [i for i, line in enumerate(lines) if line.startswith("kernel ")]
    print("```")
    if kernels:
        first = kernels[0]
        table = lines[first + 1 :]
        print(lines[first])
        print("\n".join(table[:top]))
        print("\n".join(line for line in table if line.startswith("all kernels")))
    print("\n".join(line for line in lines if line.startswith(("run time", "compile:"))))
    print("```")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relayc", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--nchw", action="store_true")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    names = args.names or ORDER
    thread_counts = [int(t) for t in args.threads.split(",")]
    scratch = Path(subprocess.check_output(["mktemp", "-d"], text=True).strip())
    samples = defaultdict(list)  # (name, impl, threads) -> seconds
    failures = {}
    nets = {n: Network(n, args.out / n) for n in names}
    for rnd in range(1, args.rounds + 1):
        for name, net in nets.items():
            if name in failures:
                continue
            model = onnx.load(str(net.dir / "model.onnx"))
            for threads in thread_counts:
                print(f"== round {rnd}/{args.rounds}: {name}, {threads} thread(s)",
                      file=sys.stderr, flush=True)
                sess, widened = ort.reference_session(model, threads)
                t_ort, want = run_ort(sess, net, widened, REPEATS[name])
                del sess
                if not widened:
                    samples[(name, "ort", threads)].append(t_ort)
                if args.nchw and name in CONVOLUTIONAL:
                    sess = ort.session(model.SerializeToString(), threads, blocked=False)
                    samples[(name, "ort-nchw", threads)].append(
                        run_ort(sess, net, False, REPEATS[name])[0])
                    del sess
                try:
                    t_ours, got = run_relayc(net, args.relayc, threads, REPEATS[name], scratch)
                except RuntimeError as error:
                    failures[name] = str(error)
                    break
                samples[(name, "relayc", threads)].append(t_ours)
                wrong = mismatch(net, got, want)
                if wrong:
                    failures[name] = f"relayc's result differs from ONNX Runtime's: {wrong}"
                    break
    table(names, thread_counts, samples, failures, args.nchw)
    if args.profile:
        for name, net in nets.items():
            if name not in failures and name in PROFILED:
                profile(net, args.relayc, scratch, 5)
    if failures:
        print("\nFAILED:", file=sys.stderr)
        for name, why in failures.items():
            print(f"- {name}: {why}", file=sys.stderr)
        sys.exit(1)


def table(names, thread_counts, samples, failures, nchw):
    t = {key: statistics.median(v) for key, v in samples.items()}
    header = "| network |"
    rule = "|---|"
    for threads in thread_counts:
        header += f" ORT {threads}t | relayc {threads}t | ORT / relayc {threads}t |"
        rule += "---|---|---|"
        if nchw:
            header += f" ORT NCHW {threads}t, / relayc |"
            rule += "---|"
    print()
    print(header + " target | matches ORT |")
    print(rule + "---|---|")
    for name in names:
        cells = []
        for threads in thread_counts:
            theirs = t.get((name, "ort", threads))
            ours = t.get((name, "relayc", threads))
            ratio = f"{theirs / ours:.2f}×" if theirs and ours else "—"
            cells += [fmt(theirs), fmt(ours), ratio]
            if nchw:
                plain = t.get((name, "ort-nchw", threads))
                cells.append(f"{fmt(plain)}, {plain / ours:.2f}×" if plain and ours else "—")
        extra = ""
        ours1 = t.get((name, "relayc", 1))
        ours2 = t.get((name, "relayc", 2))
        if name == "lstm" and ours1:
            extra = f" (relayc {ours1 / 100 * 1e6:.3g} µs per step)"
        if name.endswith("_f16"):
            base = t.get((name[: -len("_f16")], "relayc", 1))
            if base and ours1:
                extra = f" (float16 / float32: {ours1 / base:.2f}×)"
        elif name == "resnet50_b1" and ours1 and ours2:
            extra = f" (2 threads: {ours1 / ours2:.2f}× our 1 thread)"
        ok = "FAIL" if name in failures else ("yes" if (name, "relayc", 1) in t else "—")
        print(f"| {name} | {' | '.join(cells)} | {TARGETS.get(name, '')}{extra} | {ok} |")
    print()
    print("ORT / relayc > 1: relayc faster. Medians per inference over rounds (each a median of")
    print("several runs); ONNX Runtime with sequential execution and intra_op_num_threads = the")
    print("thread count. \"—\" in an ORT column: no float16 CPU kernels in ONNX Runtime (the")
    print("check then uses its float32 run of the same float16 weights).")
    if nchw:
        print("ORT NCHW: ONNX Runtime at its \"extended\" optimization level, which keeps the")
        print("convolutions in NCHW (no NCHWc layout transformer), as relayc runs them.")


if __name__ == "__main__":
    main()
