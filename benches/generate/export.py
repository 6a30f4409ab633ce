"""Writes the generation workloads of issue 32 (benches/generate/README.md) into out/<config>/:

- generate.relay, generate_preallocated.relay, beam.relay and params.npz: GPT-2's greedy
  generation (its caches grown per step, or preallocated and written in place) and its beam
  search of width 4 as Relay programs (benches/models/zoo/generation.py) with the zoo's seeded `gpt2`
  weights;
- hf/: the same weights as a Hugging Face GPT2LMHeadModel (config.json, model.safetensors), the
  input onnxruntime-genai's model builder would take (its 0.18.0 does not build GPT-2:
  "GPT2LMHeadModel is not currently supported");
- decoder_with_past.onnx: that model exported as Hugging Face's exporters write a decoder with
  past (TorchScript exporter, opset 17): inputs `input_ids` [batch, sequence], `attention_mask`
  [batch, past + sequence], `past_key_values.N.key`/`.value` [batch, heads, past, 64]; outputs
  `logits` [batch, sequence, vocabulary], `present.N.key`/`.value` [batch, heads, past +
  sequence, 64]. A past of length 0 makes it the decoder without past (the prefill).

    python3 benches/generate/export.py [--config small|tiny] [--force]
    python3 benches/generate/export.py --test-data   # crates/relay-onnx/tests/data/generation/

`--test-data` writes the `test` config's decoder with past and `expected.npz`: prompts, counts,
end-of-sequence ids and the ids ONNX Runtime's greedy loop generates with them (`ort_greedy`),
which relayc's tests (`crates/relayc/tests/generation.rs`, the Python package's
`test_generate.py`) compare with token for token.

Needs numpy, onnx, torch and transformers (benches/.venv).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "models"))

from zoo import generation  # noqa: E402

CONFIGS = {"small": generation.SMALL, "tiny": generation.TINY, "test": generation.TEST}
TEST_DATA = HERE.parents[1] / "crates/relay-onnx/tests/data/generation"
# (prompt, new tokens, end-of-sequence id) of the test data.
# None: the first id generated (the loop stops after the prefill).
TEST_CASES = [([5, 17, 42, 3, 33, 11, 2], 24, -1), ([7], 40, -1), ([5, 17, 42, 3, 33, 11, 2], 24, 8),
              ([9, 9, 9, 1, 0], 30, None)]


def hf_model(config, w):
    """A GPT2LMHeadModel holding the zoo's weights: its fused `c_attn` is q, k and v side by
    side, and its Conv1D weights are the zoo's dense weights transposed."""
    import torch
    import transformers as tf

    cfg = tf.GPT2Config(vocab_size=config["vocab"], n_embd=config["width"],
                        n_layer=config["layers"], n_head=config["heads"],
                        n_positions=config["positions"], bos_token_id=config["eos"],
                        eos_token_id=config["eos"], tie_word_embeddings=True,
                        activation_function="gelu_new", layer_norm_epsilon=1e-5)
    model = tf.GPT2LMHeadModel(cfg).eval()
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    state = {"transformer.wte.weight": t(w["wte"]), "transformer.wpe.weight": t(w["wpe"]),
             "transformer.ln_f.weight": t(w["ln_f_gamma"]), "transformer.ln_f.bias": t(w["ln_f_beta"])}
    for i in range(config["layers"]):
        h, p = f"h{i}", f"transformer.h.{i}"
        for ours, theirs in (("ln1", "ln_1"), ("ln2", "ln_2")):
            state[f"{p}.{theirs}.weight"] = t(w[f"{h}_{ours}_gamma"])
            state[f"{p}.{theirs}.bias"] = t(w[f"{h}_{ours}_beta"])
        qkv = [f"{h}_attn_{x}" for x in "qkv"]
        state[f"{p}.attn.c_attn.weight"] = t(np.concatenate([w[f"{n}_weight"].T for n in qkv], 1))
        state[f"{p}.attn.c_attn.bias"] = t(np.concatenate([w[f"{n}_bias"] for n in qkv]))
        for ours, theirs in (("attn_out", "attn.c_proj"), ("mlp_in", "mlp.c_fc"),
                             ("mlp_out", "mlp.c_proj")):
            state[f"{p}.{theirs}.weight"] = t(w[f"{h}_{ours}_weight"].T)
            state[f"{p}.{theirs}.bias"] = t(w[f"{h}_{ours}_bias"])
    state["lm_head.weight"] = state["transformer.wte.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    leftover = [k for k in missing if not k.endswith(".attn.bias") and not k.endswith("masked_bias")]
    if leftover or unexpected:
        raise SystemExit(f"GPT-2 state: missing {leftover}, unexpected {unexpected}")
    return model


class DecoderWithPast:
    """The export wrapper: flat past tensors in, logits and flat presents out."""

    def __new__(cls, model, layers):
        import torch
        from transformers import DynamicCache

        class Wrapper(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, *past):
                cache = DynamicCache()
                for i in range(layers):
                    cache.update(past[2 * i], past[2 * i + 1], i)
                out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                 past_key_values=cache, use_cache=True)
                presents = []
                for i in range(layers):
                    layer = out.past_key_values.layers[i]
                    presents += [layer.keys, layer.values]
                return (out.logits, *presents)

        return Wrapper().eval()


def export_onnx(config, model, path):
    import torch

    layers, heads = config["layers"], config["heads"]
    d = config["width"] // heads
    past_names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present_names = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    past, seq = 3, 2
    ids = torch.randint(0, config["vocab"], (1, seq))
    mask = torch.ones(1, past + seq, dtype=torch.int64)
    pasts = [torch.randn(1, heads, past, d) for _ in past_names]
    dynamic = {"input_ids": {0: "batch", 1: "sequence"},
               "attention_mask": {0: "batch", 1: "total_sequence"},
               "logits": {0: "batch", 1: "sequence"}}
    dynamic.update({n: {0: "batch", 2: "past_sequence"} for n in past_names})
    dynamic.update({n: {0: "batch", 2: "total_sequence"} for n in present_names})
    torch.onnx.export(DecoderWithPast(model, layers), (ids, mask, *pasts), str(path),
                      input_names=["input_ids", "attention_mask", *past_names],
                      output_names=["logits", *present_names], dynamic_axes=dynamic,
                      opset_version=17, dynamo=False)


def ort_greedy(session, config, prompt, new_tokens, eos=-1):
    """The greedy loop over ONNX Runtime, as Optimum's `ORTModelForCausalLM` runs it: the
    prefill with empty caches, then one id per step with the presents fed back as the past."""
    layers, heads = config["layers"], config["heads"]
    d = config["width"] // heads
    names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    past = [np.zeros((1, heads, 0, d), np.float32) for _ in names]
    ids, out = np.asarray([prompt], np.int64), []
    while len(out) < new_tokens:
        feeds = {"input_ids": ids, "attention_mask": np.ones((1, past[0].shape[2] + ids.shape[1]), np.int64)}
        logits, *past = session.run(None, {**feeds, **dict(zip(names, past))})
        out.append(int(np.argmax(logits[0, -1])))
        if out[-1] == eos:
            break
        ids = np.asarray([[out[-1]]], np.int64)
    return np.asarray(out, np.int64)


def write_test_data():
    import onnxruntime as ort

    config = generation.TEST
    TEST_DATA.mkdir(parents=True, exist_ok=True)
    model = hf_model(config, generation.weights(config))
    export_onnx(config, model, TEST_DATA / "model.onnx")
    session = ort.InferenceSession(str(TEST_DATA / "model.onnx"), providers=["CPUExecutionProvider"])
    cases = {}
    for i, (prompt, new_tokens, eos) in enumerate(TEST_CASES):
        if eos is None:
            eos = int(ort_greedy(session, config, prompt, new_tokens)[0])
        ids = ort_greedy(session, config, prompt, new_tokens, eos)
        cases.update({f"prompt{i}": np.asarray(prompt, np.int64), f"new_tokens{i}": np.int32(new_tokens),
                      f"eos{i}": np.int64(eos), f"ids{i}": ids})
    np.savez(TEST_DATA / "expected.npz", **cases)
    print(f"wrote {TEST_DATA}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="small")
    p.add_argument("--out", type=Path, default=HERE / "out")
    p.add_argument("--force", action="store_true")
    p.add_argument("--test-data", action="store_true")
    args = p.parse_args()
    if args.test_data:
        return write_test_data()
    config = CONFIGS[args.config]
    out = args.out / args.config
    out.mkdir(parents=True, exist_ok=True)
    (out / "generate.relay").write_text(generation.relay_text(config))
    (out / "beam.relay").write_text(generation.beam_relay_text(config))
    (out / "generate_preallocated.relay").write_text(generation.preallocated_relay_text(config))
    if (out / "decoder_with_past.onnx").exists() and not args.force:
        return
    w = generation.weights(config)
    np.savez(out / "params.npz", **w)
    model = hf_model(config, w)
    model.save_pretrained(out / "hf")
    export_onnx(config, model, out / "decoder_with_past.onnx")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
