"""Shapes that vary (issue 31): what a program with `?` dimensions costs when its shapes change
from call to call, in one process, through the `relayc` Python package (a release build in
benches/.venv, which `benches/run.sh dynamic` makes), against ONNX Runtime and numpy.

Workloads, each printed as a row with its target:
- first: the repository's attention model with a dynamic batch and sequence
  (crates/relay-onnx/tests/data/dynamic/), compiled once, called at sequence lengths it has not
  seen: each length's first call, then its warm call (median of --warm calls), relayc and ONNX
  Runtime (one session, the same lengths in the same order). Targets: the first call within
  1.5x the warm call + 100 us, and at most ONNX Runtime's first call.
- warm: the warm calls of `first` at lengths 16, 128 and 512 against ONNX Runtime's.
- bert: one BERT-base encoder layer with a dynamic batch and sequence (`bert_layer.py`, written
  as PyTorch exports Hugging Face's BertLayer; hidden 768, 12 heads, FFN 3072), compiled once,
  its first and warm calls at lengths 1...512 it has not seen, against ONNX Runtime.
- gpt2: the exported zoo's Hugging Face GPT-2 LM (benches/exported/export.py's
  `hf_gpt2_dynseq`, TorchScript exporter: hidden 256, 4 layers, vocabulary 50257, a dynamic
  batch and sequence, its causal mask built from the sequence), imported without
  `--input-shape`, its first and warm calls at lengths 1...512 it has not seen, against ONNX
  Runtime. Exported when missing (needs torch and transformers in the venv; skipped without).
- memory: 10^4 calls at 10^3 distinct lengths (each length ten times, in rounds); resident
  memory after the first 10^3 calls and at the end (target: within 10%).
- loop: the growing loop of issue 31 (a `Tensor[(?, 64)]` gaining a row per iteration by
  `concatenate`, tail-recursive), 300 iterations, against the same loop in numpy with a Python
  `for` (targets: >= 1.0x, then >= 2x): the first run of each, then the medians of --runs
  more, alternating.

    benches/run.sh dynamic [--lengths 1:512] [--threads 1]
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import psutil
import relayc

import bert_layer

ROOT = pathlib.Path(__file__).resolve().parents[2]
ATTENTION = ROOT / "crates/relay-onnx/tests/data/dynamic/attention_dynamic_batch_and_sequence/model.onnx"
LOOP = pathlib.Path(__file__).resolve().parent / "growing_loop.relay"


def rss_mib():
    return psutil.Process(os.getpid()).memory_info().rss / 2**20


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def lengths_of(spec):
    lo, hi = (int(v) for v in spec.split(":"))
    return list(range(lo, hi + 1))


def attention_inputs(length, rng):
    return (0.5 * rng.standard_normal((1, length, 32))).astype(np.float32)


def first_calls(vm, sess, lengths, warm):
    """Per length: relayc's first and warm call, ONNX Runtime's first and warm call (seconds)."""
    rng = np.random.default_rng(0)
    rows = []
    for n in lengths:
        x = attention_inputs(n, rng)
        r_first, got = timed(lambda: vm(x))
        r_warm = statistics.median(timed(lambda: vm(x))[0] for _ in range(warm))
        o_first, want = timed(lambda: sess.run(None, {"x": x}))
        o_warm = statistics.median(timed(lambda: sess.run(None, {"x": x}))[0] for _ in range(warm))
        diff = float(np.max(np.abs(np.asarray(got[0]) - want[0])))
        if diff > 1e-3:
            raise SystemExit(f"length {n}: relayc differs from ONNX Runtime by {diff}")
        rows.append((n, r_first, r_warm, o_first, o_warm))
    return rows


BERT_LENGTHS = [1, 7, 16, 31, 64, 100, 128, 200, 256, 384, 512]


def per_length(name, vm, sess, make, warm):
    """Per length of BERT_LENGTHS: relayc's first and warm call and ONNX Runtime's, on the
    arguments `make(n)` gives (positional for relayc, a feed dict for ONNX Runtime), the first
    output compared; seconds."""
    rows = []
    for n in BERT_LENGTHS:
        args, feeds = make(n)
        r_first, got = timed(lambda: vm(*args))
        r_warm = statistics.median(timed(lambda: vm(*args))[0] for _ in range(warm))
        o_first, want = timed(lambda: sess.run(None, feeds))
        o_warm = statistics.median(timed(lambda: sess.run(None, feeds))[0] for _ in range(warm))
        diff = float(np.max(np.abs(np.asarray(got) - want[0])))
        if diff > 1e-3 * max(1.0, float(np.max(np.abs(want[0])))):
            raise SystemExit(f"{name}, length {n}: relayc differs from ONNX Runtime by {diff}")
        rows.append((n, r_first, r_warm, o_first, o_warm))
    return rows


def session(path, threads):
    """relayc's VM (with its compile time) and ONNX Runtime's session for model `path`."""
    t, exe = timed(lambda: relayc.compile(str(path)))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return t, relayc.VM(exe, threads=threads), sess


def bert(threads, warm):
    """The BERT layer's first and warm calls per length, relayc and ONNX Runtime (seconds)."""
    path = pathlib.Path(__file__).resolve().parent / "out" / "bert_layer_dynamic.onnx"
    path.parent.mkdir(exist_ok=True)
    bert_layer.write(path)
    t, vm, sess = session(path, threads)
    rng = np.random.default_rng(2)

    def make(n):
        x = rng.standard_normal((1, n, bert_layer.HIDDEN)).astype(np.float32)
        return (x,), {"hidden": x}

    return t, per_length("bert layer", vm, sess, make, warm)


GPT2 = ROOT / "benches/exported/out/hf_gpt2_dynseq_ts/model.onnx"


def gpt2(threads, warm):
    """The exported GPT-2's first and warm calls per length, relayc and ONNX Runtime
    (seconds); `None` when it cannot be exported here."""
    if not GPT2.exists():
        export = ROOT / "benches/exported/export.py"
        done = subprocess.run([sys.executable, str(export), "hf_gpt2_dynseq", "--exporter", "ts"],
                              capture_output=True, text=True)
        if not GPT2.exists():
            print(f"gpt2: not exported ({done.stderr.strip().splitlines()[-1:]})")
            return None
    t, vm, sess = session(GPT2, threads)
    rng = np.random.default_rng(3)

    def make(n):
        ids = rng.integers(0, 50257, (1, n)).astype(np.int64)
        mask = np.ones((1, n), np.int64)
        return (ids, mask), {"input_ids": ids, "attention_mask": mask}

    return t, per_length("gpt2", vm, sess, make, warm)


def print_lengths(name, t, rows):
    """The per-length table of a model's first and warm calls."""
    print(f"{name}: compiled in {t * 1e3:.0f} ms; per length: relayc first / warm, "
          f"ONNX Runtime first / warm (ms), warm ratio")
    for n, r_first, r_warm, o_first, o_warm in rows:
        print(f"  {n:4d}: {r_first * 1e3:7.2f} / {r_warm * 1e3:7.2f}   "
              f"{o_first * 1e3:7.2f} / {o_warm * 1e3:7.2f}   {ratio(o_warm, r_warm)}")


def memory(vm, distinct, repeats):
    rng = np.random.default_rng(1)
    inputs = [attention_inputs(n, rng) for n in range(1, distinct + 1)]
    after_first = None
    for r in range(repeats):
        for x in inputs:
            vm(x)
        if r == 0:
            after_first = rss_mib()
    return after_first, rss_mib()


def numpy_loop(x, w, n):
    kv = x
    for _ in range(n):
        h = kv @ w.T
        s = h @ kv.T
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        att = s / s.sum(axis=-1, keepdims=True)
        ctx = att @ kv
        row = ctx.mean(axis=0, keepdims=True)
        kv = np.concatenate((kv, np.tanh(row)), axis=0)
    return kv


def growing_loop(threads, iterations, runs):
    """The first run of each, then the medians of `runs` more, alternating (a noisy host
    slows both alike)."""
    rng = np.random.default_rng(0)
    x = (0.1 * rng.standard_normal((1, 64))).astype(np.float32)
    w = (0.1 * rng.standard_normal((64, 64))).astype(np.float32)
    exe = relayc.compile(LOOP.read_text())
    vm = relayc.VM(exe, threads=threads)
    ours, got = timed(lambda: vm(x, w, np.int32(iterations)))
    theirs, want = timed(lambda: numpy_loop(x, w, iterations))
    diff = float(np.max(np.abs(np.asarray(got) - want)))
    if diff > 1e-3:
        raise SystemExit(f"growing loop: relayc differs from numpy by {diff}")
    times = [(timed(lambda: vm(x, w, np.int32(iterations)))[0],
              timed(lambda: numpy_loop(x, w, iterations))[0]) for _ in range(runs)]
    return (ours, theirs), tuple(statistics.median(t[i] for t in times) for i in (0, 1))


def ratio(peer, ours):
    return f"{peer / ours:.2f}×"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="1:512", help="first-call lengths, LO:HI")
    p.add_argument("--warm", type=int, default=5, help="warm calls per length")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--distinct", type=int, default=1000, help="memory: distinct lengths")
    p.add_argument("--repeats", type=int, default=10, help="memory: calls per length")
    p.add_argument("--iterations", type=int, default=300, help="growing loop iterations")
    p.add_argument("--runs", type=int, default=5, help="growing loop runs after the first")
    p.add_argument("--skip", nargs="*", default=[],
                   choices=["first", "bert", "gpt2", "memory", "loop"])
    args = p.parse_args()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    print(f"relayc {relayc.__version__ if hasattr(relayc, '__version__') else ''}, "
          f"onnxruntime {ort.__version__}, {args.threads} thread(s)")

    if "first" not in args.skip:
        rss0 = rss_mib()
        t, exe = timed(lambda: relayc.compile(str(ATTENTION)))
        vm = relayc.VM(exe, threads=args.threads)
        sess = ort.InferenceSession(str(ATTENTION), opts, providers=["CPUExecutionProvider"])
        print(f"attention: compiled in {t * 1e3:.1f} ms, resident {rss_mib():.0f} MiB "
              f"(+{rss_mib() - rss0:.0f})")
        rows = first_calls(vm, sess, lengths_of(args.lengths), args.warm)
        met = sum(r[1] <= 1.5 * r[2] + 100e-6 for r in rows)
        beat = sum(r[1] <= r[3] for r in rows)
        med = lambda i: statistics.median(r[i] for r in rows) * 1e3
        print(f"first call at an unseen length ({len(rows)} lengths): relayc median "
              f"{med(1):.2f} ms (max {max(r[1] for r in rows) * 1e3:.2f}), warm {med(2):.3f} ms; "
              f"ONNX Runtime first {med(3):.3f} ms, warm {med(4):.3f} ms")
        print(f"  within 1.5x warm + 100 us: {met}/{len(rows)}; at most ONNX Runtime's first "
              f"call: {beat}/{len(rows)}; resident after: {rss_mib():.0f} MiB")
        for n in (16, 128, 512):
            if n > rows[-1][0]:
                continue
            r = next(r for r in rows if r[0] == n)
            print(f"  warm at {n}: relayc {r[2] * 1e3:.3f} ms, ONNX Runtime {r[4] * 1e3:.3f} ms, "
                  f"{ratio(r[4], r[2])} (target >= 1.0x)")

    if "bert" not in args.skip:
        print_lengths("bert layer", *bert(args.threads, 3))

    if "gpt2" not in args.skip:
        result = gpt2(args.threads, 3)
        if result is not None:
            print_lengths("gpt2 (exported, dynamic batch and sequence)", *result)

    if "memory" not in args.skip:
        vm = relayc.VM(relayc.compile(str(ATTENTION)), threads=args.threads)
        first, end = memory(vm, args.distinct, args.repeats)
        print(f"memory: {args.distinct * args.repeats} calls at {args.distinct} lengths: "
              f"{first:.0f} MiB after the first {args.distinct}, {end:.0f} MiB at the end "
              f"({(end / first - 1) * 100:+.1f}%, target within 10%)")

    if "loop" not in args.skip:
        first, median = growing_loop(args.threads, args.iterations, args.runs)
        for name, (ours, theirs) in (("first run", first), (f"median of {args.runs}", median)):
            print(f"growing loop, {args.iterations} iterations, {name}: relayc "
                  f"{ours * 1e3:.0f} ms, numpy {theirs * 1e3:.0f} ms, {ratio(theirs, ours)} "
                  f"(targets >= 1.0x, then >= 2x)")


if __name__ == "__main__":
    main()
