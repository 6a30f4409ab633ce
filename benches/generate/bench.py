"""Greedy generation with GPT-2 (issue 32): relayc against ONNX Runtime driven by a Python loop.

Workloads (out/<config>/ from export.py; the same seeded weights everywhere), a prompt of
--prompt ids and --new-tokens new ones, each the median of --runs runs after a warm-up:
- relayc, the zoo's program (generate.relay, weights bound by `relayc.compile(params=...)`);
- relayc, the ONNX decoder with past in a generation loop (`relayc.compile(model,
  generate=True)`), what `relayc.generate` runs;
- ONNX Runtime, the same decoder with past in a Python loop with I/O binding (Optimum's
  `ORTModelForCausalLM`: the presents of a step bound as the next step's past, no copies).
Time to first token is a run with one new token (the prefill and its argmax); tokens per second
after the first are the other new tokens over the rest of a full run. Every run's ids must
equal ONNX Runtime's.

    benches/run.sh generate [--config small] [--threads 1 2]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "models"))

import onnxruntime as ort  # noqa: E402
import relayc  # noqa: E402

from zoo import generation  # noqa: E402

CONFIGS = {"small": generation.SMALL, "tiny": generation.TINY}


class OrtLoop:
    """The greedy loop over an ONNX Runtime session with I/O binding."""

    def __init__(self, path, config, threads):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.layers, self.heads = config["layers"], config["heads"]
        self.d = config["width"] // self.heads
        self.past = [f"past_key_values.{i}.{kv}" for i in range(self.layers) for kv in ("key", "value")]
        self.present = [f"present.{i}.{kv}" for i in range(self.layers) for kv in ("key", "value")]

    def __call__(self, prompt, new_tokens):
        binding = self.session.io_binding()
        empty = np.zeros((1, self.heads, 0, self.d), np.float32)
        pasts = [ort.OrtValue.ortvalue_from_numpy(empty) for _ in self.past]
        ids, out, length = np.asarray([prompt], np.int64), [], 0
        while len(out) < new_tokens:
            length += ids.shape[1]
            binding.bind_cpu_input("input_ids", ids)
            binding.bind_cpu_input("attention_mask", np.ones((1, length), np.int64))
            for name, value in zip(self.past, pasts):
                binding.bind_ortvalue_input(name, value)
            binding.bind_output("logits")
            for name in self.present:
                binding.bind_output(name)
            self.session.run_with_iobinding(binding)
            logits, *pasts = binding.get_outputs()
            out.append(int(np.argmax(logits.numpy()[0, -1])))
            ids = np.asarray([[out[-1]]], np.int64)
            binding.clear_binding_inputs()
            binding.clear_binding_outputs()
        return np.asarray(out, np.int64)


def timed(f, runs):
    f()  # warm-up
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def ratio(peer, ours):
    return f"{peer / ours:.2f}×"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="small")
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = p.parse_args()
    config, out = CONFIGS[args.config], HERE / "out" / args.config
    if not (out / "decoder_with_past.onnx").exists():
        raise SystemExit(f"{out} is missing: run benches/generate/export.py --config {args.config}")
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, config["vocab"], args.prompt).astype(np.int64)
    n = args.new_tokens
    params = dict(np.load(out / "params.npz"))
    print(f"GPT-2 {args.config}: {args.prompt}-token prompt, {n} new tokens, greedy; "
          f"relayc {relayc.__version__}, onnxruntime {ort.__version__}")
    for threads in args.threads:
        theirs = OrtLoop(out / "decoder_with_past.onnx", config, threads)
        zoo = relayc.VM(relayc.compile(str(out / "generate.relay"), params=params, threads=threads))
        onnx = relayc.VM(relayc.compile(str(out / "decoder_with_past.onnx"), generate=True,
                                        threads=threads))
        runners = {
            "ONNX Runtime (Python loop, I/O binding)": lambda k: theirs(prompt, k),
            "relayc, zoo program": lambda k: np.asarray(zoo(prompt.astype(np.int32), np.int32(k))),
            "relayc, ONNX decoder in a loop": lambda k: np.asarray(onnx(prompt, np.int32(k), np.int64(-1))),
        }
        rows = {}
        for name, run in runners.items():
            first, _ = timed(lambda: run(1), args.runs)
            total, ids = timed(lambda: run(n), args.runs)
            rows[name] = (first, (n - 1) / (total - first), ids)
        peer = rows["ONNX Runtime (Python loop, I/O binding)"]
        for name, (first, rate, ids) in rows.items():
            same = "ids equal ONNX Runtime's" if np.array_equal(ids, peer[2]) else "IDS DIFFER"
            print(f"  {threads} thread(s), {name}: first token {first * 1e3:.1f} ms "
                  f"({ratio(peer[0], first)}), {rate:.1f} tokens/s after it "
                  f"({ratio(rate, peer[1])}); {same}")


if __name__ == "__main__":
    main()
