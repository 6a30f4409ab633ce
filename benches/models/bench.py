"""Runs the model zoo (benches/models/out/, written by generate.py) on relayc and ONNX Runtime,
alternately, at 1 and 2 threads; checks that relayc's outputs match ONNX Runtime's; prints the
table of benches/run.sh models. Called by benches/run.sh; usable alone:

    python3 benches/models/bench.py --relayc target/release/relayc [--rounds N] [--profile]
                                    [--threads 1,2] [--isas avx512,avx2] [NAME...]

Times are medians per inference: relayc's `relayc run --repeat N` (its own median, compile time
excluded), ONNX Runtime's of N runs after one warm-up run. The result of each relayc run is
compared with ONNX Runtime's: max |relayc - ORT| ≤ tol · max |ORT|, tol 1e-3 for float32 and
3e-2 for float16 (checked against ONNX Runtime's float32 run of the same float16 weights when
its CPU provider has no float16 kernels; ORT's time then shows "—"). A mismatch fails the run
(exit 1) after the table. relayc runs once per instruction set of --isas (`RELAYC_ISA`; default
every one of avx512 and avx2 this CPU has), each with its own columns. With --profile, relayc's
`--profile` of ten runs at one thread follows for the networks of PROFILED, per instruction set,
cut to the top kernels, each convolution and product with its GFLOP/s at its mean and at its
fastest call, and the fraction of the instruction set's multiply-add peak the fastest is (measured by relay-linalg's `peak` example, built
beside relayc: `cargo build --release -p relay-linalg --example peak`). With --nchw, ONNX
Runtime is also timed at its "extended" optimization level on the convolutional networks
(CONVOLUTIONAL), where it keeps their NCHW layout instead of converting the graph to its blocked
NCHWc layout: the table then has a column "ORT NCHW / relayc" for each thread count.

With --interleave, each network instead runs in this process through the relayc Python package
(built into the venv) and ONNX Runtime, one inference of each in turn, so that both see the same
moments of a host whose speed varies (on a shared 2-core machine the same run took 11 to 19 ms
from one second to the next); relayc then uses its default instruction set (RELAYC_ISA as the
process starts).
"""

import argparse
import json
import os
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


def host_isas():
    """The x86 instruction sets of relayc's kernels this CPU runs, best first."""
    try:
        flags = set(re.findall(r"\b(avx512f|avx2|fma)\b", Path("/proc/cpuinfo").read_text()))
    except OSError:
        return []
    return [isa for isa, need in (("avx512", {"avx512f"}), ("avx2", {"avx2", "fma"}))
            if need <= flags]


def isa_env(isa):
    """The environment running relayc with instruction set `isa` (None: its own choice)."""
    env = dict(os.environ)
    if isa:
        env["RELAYC_ISA"] = isa
    return env


def run_relayc(net, relayc, threads, repeat, scratch, isa=None):
    """(median seconds, outputs) of `relayc run --repeat`; raises on failure."""
    suffix = ".npy" if net.meta["outputs"] == 1 else ".npz"
    output = scratch / f"{net.name}{suffix}"
    done = subprocess.run(net.relayc_args(relayc, threads, repeat, output), capture_output=True,
                          text=True, env=isa_env(isa))
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


def run_interleaved(net, threads, repeat):
    """(ORT median seconds, relayc median seconds, mismatch or None): `repeat` inferences of
    each in turn in this process, after two of each."""
    import relayc

    # ONNX Runtime's idle threads spin after a run by default, on the core relayc's second
    # thread then needs: here they sleep.
    sess, widened = ort.reference_session(onnx.load(str(net.dir / "model.onnx")), threads,
                                          spinning=False)
    with np.load(net.dir / "params.npz") as z:
        params = {k: z[k] for k in z.files}
    vm = relayc.VM(relayc.compile(str(net.dir / "model.relay"), params=params, threads=threads),
                   threads=threads)
    feeds = {}
    for name, value in net.feeds.items():
        feeds[name] = relayc.empty(value.shape, str(value.dtype))  # read in place
        feeds[name][...] = value
    times = ([], [])
    for i in range(repeat + 2):
        start = time.perf_counter()
        want = ort.run(sess, net.feeds, widened)
        middle = time.perf_counter()
        got = vm(**feeds)
        end = time.perf_counter()
        if i >= 2:
            times[0].append(middle - start)
            times[1].append(end - middle)
    got = [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))]
    return statistics.median(times[0]), statistics.median(times[1]), mismatch(net, got, want)


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


# Runs of a --profile (after one warm-up): the fastest call of each kernel is what it can do,
# its mean what the host's load left it.
PROFILE_RUNS = 10
PROFILE_ROW = re.compile(r"(\S+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+"
                         r"([0-9.]+)%\s+(.*)")


def shapes(arguments):
    """The argument shapes and the result shape of a profile row's `a, b -> c`."""
    ins, _, out = arguments.partition("->")
    parse = lambda text: [[int(d) for d in m.split(",") if d.strip()]  # noqa: E731
                          for m in re.findall(r"\[([^\]]*)\]", text)]
    outs = parse(out)
    return parse(ins), outs[0] if outs else []


def macs(name, arguments):
    """Multiply-adds of one call of a convolution or product kernel, from its shapes; None for
    other kernels."""
    ins, out = shapes(arguments)
    if len(ins) < 2 or not out:
        return None
    x, w, positions = ins[0], ins[1], int(np.prod(out))
    if "conv2d_NCHWc" in name:
        # weight [O/B, C/bi, KH, KW, bi, B] (depthwise [C/B, 1, KH, KW, 1, B]), or the stem's
        # [O/B, C, KH, KW, B]: per output element, every weight dimension but the outer and
        # the output block.
        return positions * int(np.prod(w[1:-1])) if len(w) in (5, 6) else None
    if "conv2d" in name and len(w) == 4:
        return positions * int(np.prod(w[1:]))  # OIHW, grouped: I is C / groups
    if any(k in name for k in ("dense", "batch_matmul", "matmul")) and x:
        return positions * x[-1]
    return None


def profile(net, relayc, scratch, top, isa, peaks):
    """Prints the `top` costliest kernels and the totals of relayc's profile of PROFILE_RUNS
    runs at one thread with instruction set `isa`, convolutions and products with their
    GFLOP/s at their mean and fastest calls, and the fastest's fraction of the ISA's peak."""
    args = net.relayc_args(relayc, 1, PROFILE_RUNS, scratch / f"profile-{net.name}.npz")
    args += ["--warmup", "1", "--profile"]
    done = subprocess.run(args, capture_output=True, text=True, env=isa_env(isa))
    peak = peaks.get(isa) if isa else None
    at = f", {isa}" + (f" (peak {peak:.1f} GFLOP/s a core)" if peak else "") if isa else ""
    print(f"\n### {net.name}: relayc run --profile --threads 1 --repeat {PROFILE_RUNS} "
          f"--warmup 1{at}, top {top} kernels\n")
    if done.returncode != 0:
        print(f"relayc failed (exit {done.returncode}): {done.stderr[-2000:]}")
        return
    lines = done.stderr.splitlines()
    kernels = [i for i, line in enumerate(lines) if line.startswith("kernel ")]
    print("| kernel | calls | share | mean | GFLOP/s | fastest | GFLOP/s | of peak | arguments |")
    print("|---|---|---|---|---|---|---|---|---|")
    for line in (lines[kernels[0] + 1 :] if kernels else [])[:top]:
        row = PROFILE_ROW.match(line)
        if not row:
            continue
        name, calls, _, mean_us, min_us, _, share, arguments = row.groups()
        n = macs(name, arguments)
        rate = lambda us: 2 * n / (float(us) * 1e-6) / 1e9 if n else None  # noqa: E731
        mean, best = rate(mean_us), rate(min_us)
        print(f"| {name} | {calls} | {share}% | {fmt(float(mean_us) * 1e-6)} | "
              f"{f'{mean:.1f}' if mean else '—'} | {fmt(float(min_us) * 1e-6)} | "
              f"{f'{best:.1f}' if best else '—'} | "
              f"{f'{best / peak:.0%}' if best and peak else '—'} | {arguments.strip()} |")
    print()
    print("\n".join(line for line in lines if line.startswith(("all kernels", "run time",
                                                                  "compile:"))))


def fma_peaks(relayc):
    """{isa: GFLOP/s} of relay-linalg's `peak` example beside relayc ({} without it)."""
    peak = Path(relayc).parent / "examples" / "peak"
    if not peak.exists():
        print(f"({peak} is missing: no fractions of the peak)", file=sys.stderr)
        return {}
    done = subprocess.run([str(peak)], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relayc", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--nchw", action="store_true")
    parser.add_argument("--isas", default=None,
                        help="instruction sets relayc runs with, e.g. avx512,avx2 (default: "
                             "those of avx512 and avx2 this CPU has)")
    parser.add_argument("--interleave", action="store_true")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    names = args.names or ORDER
    thread_counts = [int(t) for t in args.threads.split(",")]
    isas = args.isas.split(",") if args.isas else (host_isas() or [None])
    if args.interleave:
        interleave(names, thread_counts, args)
        return
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
                for isa in isas:
                    try:
                        t_ours, got = run_relayc(net, args.relayc, threads, REPEATS[name],
                                                 scratch, isa)
                    except RuntimeError as error:
                        failures[name] = f"{isa or 'relayc'}: {error}"
                        break
                    samples[(name, ("relayc", isa), threads)].append(t_ours)
                    wrong = mismatch(net, got, want)
                    if wrong:
                        failures[name] = (f"{isa or 'relayc'}: relayc's result differs from "
                                          f"ONNX Runtime's: {wrong}")
                        break
                if name in failures:
                    break
    table(names, thread_counts, isas, samples, failures, args.nchw)
    if args.profile:
        peaks = fma_peaks(args.relayc)
        for name, net in nets.items():
            if name not in failures and name in PROFILED:
                for isa in isas:
                    profile(net, args.relayc, scratch, 8, isa, peaks)
    if failures:
        print("\nFAILED:", file=sys.stderr)
        for name, why in failures.items():
            print(f"- {name}: {why}", file=sys.stderr)
        sys.exit(1)


def interleave(names, thread_counts, args):
    """The --interleave table: each network's inferences by ONNX Runtime and by the relayc
    package in turn, in this process, `rounds` times."""
    samples = defaultdict(list)
    failures = {}
    for rnd in range(1, args.rounds + 1):
        for name in names:
            net = Network(name, args.out / name)
            for threads in thread_counts:
                print(f"== round {rnd}/{args.rounds}: {name}, {threads} thread(s), interleaved",
                      file=sys.stderr, flush=True)
                t_ort, t_ours, wrong = run_interleaved(net, threads, max(4 * REPEATS[name], 20))
                samples[(name, "ort", threads)].append(t_ort)
                samples[(name, ("relayc", None), threads)].append(t_ours)
                if wrong:
                    failures[name] = f"relayc's result differs from ONNX Runtime's: {wrong}"
    print("\nInterleaved: one inference of each in turn, in one process (the relayc package);")
    print("ONNX Runtime's idle threads do not spin (session.intra_op.allow_spinning = 0).")
    table(names, thread_counts, [None], samples, failures, False)
    if failures:
        for name, why in failures.items():
            print(f"- {name}: {why}", file=sys.stderr)
        sys.exit(1)


def table(names, thread_counts, isas, samples, failures, nchw):
    t = {key: statistics.median(v) for key, v in samples.items()}
    label = lambda isa: f" {isa}" if isa else ""  # noqa: E731
    header = "| network |"
    rule = "|---|"
    for threads in thread_counts:
        header += f" ORT {threads}t |"
        rule += "---|"
        for isa in isas:
            header += f" relayc{label(isa)} {threads}t | ORT / relayc{label(isa)} {threads}t |"
            rule += "---|---|"
        if nchw:
            header += f" ORT NCHW {threads}t, / relayc{label(isas[0])} |"
            rule += "---|"
    print()
    print(header + " target | matches ORT |")
    print(rule + "---|---|")
    for name in names:
        cells = []
        for threads in thread_counts:
            theirs = t.get((name, "ort", threads))
            cells.append(fmt(theirs))
            for isa in isas:
                ours = t.get((name, ("relayc", isa), threads))
                cells += [fmt(ours), f"{theirs / ours:.2f}×" if theirs and ours else "—"]
            if nchw:
                plain = t.get((name, "ort-nchw", threads))
                ours = t.get((name, ("relayc", isas[0]), threads))
                cells.append(f"{fmt(plain)}, {plain / ours:.2f}×" if plain and ours else "—")
        first = ("relayc", isas[0])
        extra = ""
        ours1 = t.get((name, first, 1))
        ours2 = t.get((name, first, 2))
        if name == "lstm" and ours1:
            extra = f" (relayc {ours1 / 100 * 1e6:.3g} µs per step)"
        if name.endswith("_f16"):
            base = t.get((name[: -len("_f16")], first, 1))
            if base and ours1:
                extra = f" (float16 / float32: {ours1 / base:.2f}×)"
        elif name == "resnet50_b1" and ours1 and ours2:
            extra = f" (2 threads: {ours1 / ours2:.2f}× our 1 thread)"
        ok = "FAIL" if name in failures else ("yes" if (name, first, 1) in t else "—")
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
