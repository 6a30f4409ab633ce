"""Greedy generation with GPT-2 (issue 32): relayc against ONNX Runtime driven by a Python loop.

Workloads (out/<config>/ from export.py; the same seeded weights everywhere), a prompt of
--prompt ids and --new-tokens new ones, each the median of --runs runs after a warm-up:
- greedy: relayc, the zoo's program (generate.relay, weights bound by
  `relayc.compile(params=...)`), its caches grown per step; the same with preallocated caches
  written in place (generate_preallocated.relay); relayc, the ONNX decoder with past in a generation loop
  (`relayc.compile(model, generate=True)`), what `relayc.generate` runs; ONNX Runtime, the same
  decoder with past in a Python loop with I/O binding (Optimum's `ORTModelForCausalLM`: the
  presents of a step bound as the next step's past, no copies);
- beam search of width 4: relayc, the zoo's program (beam.relay); ONNX Runtime, the decoder
  with past on a batch of 4 beams in a Python loop, the presents reordered by each beam's
  origin in numpy (Hugging Face's `_reorder_cache`), the same selection
  (zoo/generation.py's `log_softmax` and `top`).
Time to first token is a run with one new token (the prefill and its selection); tokens per
second after the first are the other new tokens over the rest of a full run. Every run's ids
must equal ONNX Runtime's. Last, the bandwidth bound: the weights a step reads (every dense
weight and the head, float32) over the host's copy bandwidth (numpy's copy of 256 MiB, bytes
read and written), beside relayc's time per token.

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


class OrtBeam(OrtLoop):
    """Beam search over an ONNX Runtime session: the prefill on the prompt, its caches repeated
    for each beam, then a batch of one token per beam per step."""

    def __init__(self, path, config, threads, beams=4):
        super().__init__(path, config, threads)
        self.beams, self.vocab = beams, config["vocab"]

    def run(self, ids, pasts, length):
        """The logits of the last position and the presents, as numpy arrays."""
        feeds = {"input_ids": ids, "attention_mask": np.ones((ids.shape[0], length), np.int64)}
        feeds.update(zip(self.past, pasts))
        logits, *presents = self.session.run(None, feeds)
        return logits[:, -1], presents

    def __call__(self, prompt, new_tokens):
        empty = np.zeros((1, self.heads, 0, self.d), np.float32)
        logits, presents = self.run(np.asarray([prompt], np.int64), [empty] * len(self.past), len(prompt))
        first = generation.log_softmax(logits[0])
        tokens = generation.top(first, self.beams)
        scores, seqs = first[tokens], tokens[:, None]
        pasts = [np.repeat(p, self.beams, axis=0) for p in presents]
        for step in range(1, new_tokens):
            logits, presents = self.run(tokens[:, None].astype(np.int64), pasts, len(prompt) + step)
            total = (generation.log_softmax(logits) + scores[:, None]).reshape(-1)
            picked = generation.top(total, self.beams)
            origin, tokens = picked // self.vocab, picked % self.vocab
            scores = total[picked]
            pasts = [p[origin] for p in presents]
            seqs = np.concatenate((seqs[origin], tokens[:, None]), 1)
        return seqs[int(np.argmax(scores))].astype(np.int64)


def copy_bandwidth(runs=7):
    """The host's copy bandwidth in bytes per second (read and written): the best of `runs`
    copies of 256 MiB with numpy."""
    src = np.ones(64 << 20, np.float32)
    dst = np.empty_like(src)
    best = min(timed_once(lambda: np.copyto(dst, src)) for _ in range(runs))
    return 2 * src.nbytes / best


def timed_once(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def step_weight_bytes(params):
    """The bytes of weights one decode step reads: every matrix (dense weights and the
    embedding, read whole by the head), float32."""
    return sum(v.nbytes for k, v in params.items() if v.ndim == 2 and k != "wpe")


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


PEER = "ONNX Runtime (Python loop, I/O binding)"
BEAM_PEER = "ONNX Runtime (Python loop, beams reordered in numpy)"


def compare(label, threads, runners, n, runs):
    """Times each runner (the peer first) and prints a row per runner; returns relayc's
    seconds per token after the first, by runner."""
    rows = {}
    for name, run in runners.items():
        first, _ = timed(lambda: run(1), runs)
        total, ids = timed(lambda: run(n), runs)
        rows[name] = (first, (n - 1) / (total - first), ids)
    peer = next(iter(rows.values()))
    for name, (first, rate, ids) in rows.items():
        same = "ids equal ONNX Runtime's" if np.array_equal(ids, peer[2]) else "IDS DIFFER"
        print(f"  {label}, {threads} thread(s), {name}: first token {first * 1e3:.1f} ms "
              f"({ratio(peer[0], first)}), {rate:.1f} tokens/s after it "
              f"({ratio(rate, peer[1])}); {same}")
    return {name: 1 / rate for name, (_, rate, _) in rows.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="small")
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--skip", nargs="*", default=[], choices=["greedy", "beam"])
    args = p.parse_args()
    config, out = CONFIGS[args.config], HERE / "out" / args.config
    if not (out / "decoder_with_past.onnx").exists():
        raise SystemExit(f"{out} is missing: run benches/generate/export.py --config {args.config}")
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, config["vocab"], args.prompt).astype(np.int64)
    n, ids32 = args.new_tokens, prompt.astype(np.int32)
    params = dict(np.load(out / "params.npz"))
    onnx_path = out / "decoder_with_past.onnx"
    print(f"GPT-2 {args.config}: {args.prompt}-token prompt, {n} new tokens; "
          f"relayc {relayc.__version__}, onnxruntime {ort.__version__}")
    per_token = {}
    for threads in args.threads:
        if "greedy" not in args.skip:
            theirs = OrtLoop(onnx_path, config, threads)
            zoo = relayc.VM(relayc.compile(str(out / "generate.relay"), params=params, threads=threads))
            written = relayc.VM(relayc.compile(str(out / "generate_preallocated.relay"), params=params,
                                               threads=threads))
            onnx = relayc.VM(relayc.compile(str(onnx_path), generate=True, threads=threads))
            per_token[threads] = compare("greedy", threads, {
                PEER: lambda k: theirs(prompt, k),
                "relayc, zoo program": lambda k: np.asarray(zoo(ids32, np.int32(k))),
                "relayc, zoo program, preallocated cache": lambda k: np.asarray(written(ids32, np.int32(k))),
                "relayc, ONNX decoder in a loop": lambda k: np.asarray(onnx(prompt, np.int32(k), np.int64(-1))),
            }, n, args.runs)
        if "beam" not in args.skip:
            theirs = OrtBeam(onnx_path, config, threads)
            beam = relayc.VM(relayc.compile(str(out / "beam.relay"), params=params, threads=threads))
            compare("beam 4", threads, {
                BEAM_PEER: lambda k: theirs(prompt, k),
                "relayc, zoo program": lambda k: np.asarray(beam(ids32, np.int32(k))),
            }, n, args.runs)
    if per_token:
        weights, bandwidth = step_weight_bytes(params), copy_bandwidth()
        bound = weights / bandwidth
        print(f"  bandwidth bound: {weights / 1e6:.0f} MB of weights a step / copy bandwidth "
              f"{bandwidth / 1e9:.1f} GB/s = {bound * 1e3:.1f} ms a token")
        for threads, times in per_token.items():
            for name, t in times.items():
                print(f"  greedy, {threads} thread(s), {name}: {t * 1e3:.1f} ms a token "
                      f"({weights / t / 1e9:.1f} GB/s of weights), {t / bound:.2f}× the bound")


if __name__ == "__main__":
    main()
