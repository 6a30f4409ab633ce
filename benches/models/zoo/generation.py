"""GPT-2 generation as one Relay program (issue 32): `@main(%prompt, %new_tokens, weights...)`
runs the prompt through the decoder once (the prefill), then a tail-recursive loop that feeds
back one token per iteration, its key/value cache carried from step to step and grown by the
step's row, greedy (argmax) sampling, stopping after `new_tokens` tokens or at the end-of-
sequence id (which is returned, as Hugging Face's `generate` does). It returns the generated
ids, `Tensor[(?), int32]`.

The decoder is one local function of `@main`, `%forward(ids, caches)`, which the prefill and
every step call: its weights are `@main`'s parameters, so `relayc run --params` (TVM's
`bind_params_by_name`) makes them constants of the lifted function, packed once when a VM is
made. Its caches are a tuple of two `[heads, length, head width]` tensors per layer; the
positions of its ids start at the caches' length; its mask lets row `i` of `s` new ids see the
cache and the new ids up to itself.

The weights are the zoo's GPT-2 (`networks.gpt2`'s names and seeds: `wte`, `wpe`,
`h{i}_ln1_gamma`, `h{i}_attn_q_weight`, ...; `wpe` longer, its first rows the same), so the
generation computes what `networks.gpt2` computes for the same ids. `greedy` is the same loop
in numpy, the reference.
"""

import math

import numpy as np

from .networks import SEEDS
from .weights import splitmix_uniform, tensor_seed

# GPT-2 small.
SMALL = dict(layers=12, width=768, heads=12, vocab=50257, positions=1024, eos=50256)
# Test configs: every shape of the small one, smaller (`TEST`'s ONNX decoder is committed).
TINY = dict(layers=2, width=64, heads=4, vocab=97, positions=160, eos=96)
TEST = dict(layers=2, width=32, heads=2, vocab=61, positions=64, eos=60)


def weight_specs(layers, width, vocab, positions, **_):
    """(name, shape, scale, offset) of every weight, in @main's parameter order, as
    `networks.gpt2` draws them (dense weights [out, in], variance 1/fan-in)."""
    specs = [("wte", (vocab, width), math.sqrt(3 / width), 0.0), ("wpe", (positions, width), 0.1, 0.0)]
    for i in range(layers):
        h = f"h{i}"

        def dense(name, out, fan_in):
            return [(f"{name}_weight", (out, fan_in), math.sqrt(3 / fan_in), 0.0),
                    (f"{name}_bias", (out,), 0.1, 0.0)]

        def norm(name):
            return [(f"{name}_gamma", (width,), 0.1, 1.0), (f"{name}_beta", (width,), 0.1, 0.0)]

        specs += norm(f"{h}_ln1")
        for part in ("q", "k", "v", "out"):
            specs += dense(f"{h}_attn_{part}", width, width)
        specs += norm(f"{h}_ln2")
        specs += dense(f"{h}_mlp_in", 4 * width, width)
        specs += dense(f"{h}_mlp_out", width, 4 * width)
    specs += [("ln_f_gamma", (width,), 0.1, 1.0), ("ln_f_beta", (width,), 0.1, 0.0)]
    return specs


def weights(config, seed=SEEDS["gpt2"]):
    """The seeded weights by name (float32)."""
    return {
        name: splitmix_uniform(tensor_seed(seed, name), int(np.prod(shape)), scale, offset).reshape(shape)
        for name, shape, scale, offset in weight_specs(**config)
    }


def relay_text(config):
    """The generation program for `config` (see the module's documentation)."""
    layers, width, heads = config["layers"], config["width"], config["heads"]
    vocab, eos = config["vocab"], config["eos"]
    d = width // heads
    cache_t = f"Tensor[({heads}, ?, {d}), float32]"
    caches_t = "(" + ", ".join([cache_t] * (2 * layers)) + ")"
    params = ", ".join(
        f"%{name}: Tensor[({', '.join(map(str, shape))}), float32]"
        for name, shape, _, _ in weight_specs(**config)
    )

    def dense(x, name):
        return f"add(nn.dense({x}, %{name}_weight, units=None), %{name}_bias)"

    def norm(x, name):
        return f"nn.layer_norm({x}, %{name}_gamma, %{name}_beta, epsilon=1e-05f)"

    def split_heads(x):
        return f"transpose(reshape({x}, newshape=[-1, {heads}, {d}]), axes=[1, 0, 2])"

    body = [
        "let %s = shape_of(%ids, dtype=\"int32\");",
        "let %past = take(shape_of(%caches.0, dtype=\"int32\"), 1);",
        "let %n = take(%s, 0);",
        "let %pos = arange(%past, add(%past, %n), 1, dtype=\"int32\");",
        "let %x0 = add(take(%wte, %ids, axis=0), take(%wpe, %pos, axis=0));",
        # Row i (position past + i) sees columns 0 ... past + i.
        "let %cols = expand_dims(arange(0, add(%past, %n), 1, dtype=\"int32\"), axis=0);",
        "let %mask = where(greater(%cols, expand_dims(%pos, axis=1)), -1e+09f, 0f);",
    ]
    x = "%x0"
    for i in range(layers):
        h = f"h{i}"
        body += [
            f"let %{h}_a = {norm(x, f'{h}_ln1')};",
            f"let %{h}_q = {split_heads(dense(f'%{h}_a', f'{h}_attn_q'))};",
            f"let %{h}_k = concatenate((%caches.{2 * i}, {split_heads(dense(f'%{h}_a', f'{h}_attn_k'))}), axis=1);",
            f"let %{h}_v = concatenate((%caches.{2 * i + 1}, {split_heads(dense(f'%{h}_a', f'{h}_attn_v'))}), axis=1);",
            f"let %{h}_s = add(multiply(nn.batch_matmul(%{h}_q, %{h}_k, transpose_b=True), "
            f"{1 / math.sqrt(d)!r}f), %mask);",
            f"let %{h}_c = nn.batch_matmul(nn.softmax(%{h}_s, axis=-1), %{h}_v, transpose_b=False);",
            f"let %{h}_y = add({x}, {dense(f'reshape(transpose(%{h}_c, axes=[1, 0, 2]), newshape=[-1, {width}])', f'{h}_attn_out')});",
            f"let %{h}_m = {dense(norm(f'%{h}_y', f'{h}_ln2'), f'{h}_mlp_in')};",
            f"let %{h}_g = multiply(multiply(%{h}_m, 0.5f), add(tanh(multiply(add(%{h}_m, "
            f"multiply(power(%{h}_m, 3f), 0.044715f)), 0.7978846f)), 1f));",
            f"let %{h}_out = add(%{h}_y, {dense(f'%{h}_g', f'{h}_mlp_out')});",
        ]
        x = f"%{h}_out"
    last = f"expand_dims(take({x}, subtract(%n, 1), axis=0), axis=0)"
    body += [
        f"let %logits = nn.dense({norm(last, 'ln_f')}, %wte, units=None);",
        "let %caches1 = (" + ", ".join(f"%h{i}_{kv}" for i in range(layers) for kv in "kv") + ");",
        "(%logits, %caches1)",
    ]
    forward = "\n      ".join(body)
    empty = f"zeros(shape=[{heads}, 0, {d}], dtype=\"float32\")"
    return f"""#[version = "0.0.5"]
def @main(%prompt: Tensor[(?), int32], %new_tokens: int32, {params}) -> Tensor[(?), int32] {{
  let %forward = fn (%ids: Tensor[(?), int32], %caches: {caches_t}) -> (Tensor[(1, {vocab}), float32], {caches_t}) {{
      {forward}
  }};
  let %decode = fn (%token: Tensor[(1), int32], %caches: {caches_t}, %count: int32, %out: Tensor[(?), int32]) -> Tensor[(?), int32] {{
    if (logical_or(greater_equal(%count, %new_tokens), equal(take(%token, 0), {eos}))) {{
      %out
    }} else {{
      let %step = %forward(%token, %caches);
      let %next = argmax(%step.0, axis=[-1]);
      %decode(%next, %step.1, add(%count, 1), concatenate((%out, %next), axis=0))
    }}
  }};
  let %prefill = %forward(%prompt, ({", ".join([empty] * (2 * layers))}));
  let %first = argmax(%prefill.0, axis=[-1]);
  %decode(%first, %prefill.1, 1, %first)
}}
"""


def greedy(config, w, prompt, new_tokens):
    """The generation in numpy with a growing cache (the reference)."""
    layers, width, heads, eos = config["layers"], config["width"], config["heads"], config["eos"]
    d = width // heads

    def norm(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w[f"{name}_gamma"] + w[f"{name}_beta"]

    def dense(x, name):
        return x @ w[f"{name}_weight"].T + w[f"{name}_bias"]

    def split(x):
        return x.reshape(-1, heads, d).transpose(1, 0, 2)

    caches = [np.zeros((heads, 0, d), np.float32) for _ in range(2 * layers)]

    def forward(ids):
        past, n = caches[0].shape[1], len(ids)
        pos = np.arange(past, past + n)
        x = w["wte"][ids] + w["wpe"][pos]
        mask = np.where(np.arange(past + n)[None, :] > pos[:, None], -1e9, 0).astype(np.float32)
        for i in range(layers):
            h = f"h{i}"
            a = norm(x, f"{h}_ln1")
            q = split(dense(a, f"{h}_attn_q"))
            caches[2 * i] = np.concatenate((caches[2 * i], split(dense(a, f"{h}_attn_k"))), 1)
            caches[2 * i + 1] = np.concatenate((caches[2 * i + 1], split(dense(a, f"{h}_attn_v"))), 1)
            s = q @ caches[2 * i].transpose(0, 2, 1) / np.float32(math.sqrt(d)) + mask
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            c = (p @ caches[2 * i + 1]).transpose(1, 0, 2).reshape(n, width)
            y = x + dense(c, f"{h}_attn_out")
            m = dense(norm(y, f"{h}_ln2"), f"{h}_mlp_in")
            g = 0.5 * m * (1 + np.tanh(0.7978846 * (m + 0.044715 * m**3)))
            x = y + dense(g, f"{h}_mlp_out")
        return norm(x[-1:], "ln_f") @ w["wte"].T

    out = [int(np.argmax(forward(np.asarray(prompt))))]
    while len(out) < new_tokens and out[-1] != eos:
        out.append(int(np.argmax(forward(np.asarray(out[-1:])))))
    return np.asarray(out, np.int32)
