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

`preallocated_relay_text` is the same generation with preallocated caches: each a
`[heads, prompt + new_tokens, head width]` buffer, a parameter of its own of the decode loop,
written a row per step by `strided_set` in place (the VM's `invoke_packed_update`: the
parameter is dead after the write and nothing else holds it), the attention reading the whole
buffer with the positions not written yet masked.

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


def _dense(x, name):
    return f"add(nn.dense({x}, %{name}_weight, units=None), %{name}_bias)"


def _norm(x, name):
    return f"nn.layer_norm({x}, %{name}_gamma, %{name}_beta, epsilon=1e-05f)"


def _mlp(h, y):
    """The lines of layer `h`'s MLP block after its attention's output `y` (to `%{h}_out`)."""
    return [
        f"let %{h}_m = {_dense(_norm(y, f'{h}_ln2'), f'{h}_mlp_in')};",
        f"let %{h}_g = multiply(multiply(%{h}_m, 0.5f), add(tanh(multiply(add(%{h}_m, "
        f"multiply(power(%{h}_m, 3f), 0.044715f)), 0.7978846f)), 1f));",
        f"let %{h}_out = add({y}, {_dense(f'%{h}_g', f'{h}_mlp_out')});",
    ]


def _grown(j, rows):
    """Cache `j` of the `%caches` tuple grown by `rows` (along the length)."""
    return f"concatenate((%caches.{j}, {rows}), axis=1)"


def _written(j, rows):
    """Preallocated cache parameter `%c{j}` with `rows` written at the positions `%at`..`%to`
    (`strided_set`, in place: the parameter is dead after it)."""
    return f"strided_set(%c{j}, {rows}, %at, %to, %steps)"


def _attention_inputs(h, i, x, heads, cache=_grown):
    """The lines of layer `h` (the `i`th) binding its normalized input `x`, its queries, and
    its key and value caches with the new rows (`cache(j, rows)`: grown by default); `heads`
    splits a projection into heads."""
    return [
        f"let %{h}_a = {_norm(x, f'{h}_ln1')};",
        f"let %{h}_q = {heads(_dense(f'%{h}_a', f'{h}_attn_q'))};",
        f"let %{h}_k = {cache(2 * i, heads(_dense(f'%{h}_a', f'{h}_attn_k')))};",
        f"let %{h}_v = {cache(2 * i + 1, heads(_dense(f'%{h}_a', f'{h}_attn_v')))};",
    ]


def _cache_names(layers):
    """The caches a step binds, in order: `%h0_k, %h0_v, %h1_k, ...`."""
    return ", ".join(f"%h{i}_{kv}" for i in range(layers) for kv in "kv")


def _outputs(layers, x):
    """The last lines of a decoder function: the logits of the rows `x` and the grown caches."""
    return [
        f"let %logits = nn.dense({_norm(x, 'ln_f')}, %wte, units=None);",
        f"let %caches1 = ({_cache_names(layers)});",
        "(%logits, %caches1)",
    ]


def _local_fn(name, ids, beams, config, body):
    """`let %{name} = fn ({ids}, %caches) -> (logits of `beams` rows, caches) { body };`."""
    _, caches_t = _types(config, beams)
    lines = "\n      ".join(body)
    return f"""let %{name} = fn ({ids}, %caches: {caches_t}) -> (Tensor[({beams}, {config["vocab"]}), float32], {caches_t}) {{
      {lines}
  }};"""


def _types(config, beams=1):
    """The text of one cache's type (`[beams · heads, ?, head width]`) and of the caches' tuple."""
    layers, heads, d = config["layers"], config["heads"], config["width"] // config["heads"]
    cache_t = f"Tensor[({beams * heads}, ?, {d}), float32]"
    return cache_t, "(" + ", ".join([cache_t] * (2 * layers)) + ")"


def _forward(config):
    """`%forward(%ids, %caches)`: the decoder on `s` new ids of one sequence."""
    layers, width, heads = config["layers"], config["width"], config["heads"]
    d = width // heads

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
            *_attention_inputs(h, i, x, split_heads),
            f"let %{h}_s = add(multiply(nn.batch_matmul(%{h}_q, %{h}_k, transpose_b=True), "
            f"{1 / math.sqrt(d)!r}f), %mask);",
            f"let %{h}_c = nn.batch_matmul(nn.softmax(%{h}_s, axis=-1), %{h}_v, transpose_b=False);",
            f"let %{h}_y = add({x}, {_dense(f'reshape(transpose(%{h}_c, axes=[1, 0, 2]), newshape=[-1, {width}])', f'{h}_attn_out')});",
        ]
        body += _mlp(h, f"%{h}_y")
        x = f"%{h}_out"
    last = f"expand_dims(take({x}, subtract(%n, 1), axis=0), axis=0)"
    return _local_fn("forward", "%ids: Tensor[(?), int32]", 1, config, body + _outputs(layers, last))


def _prefill(config):
    """`%prefill`: `%forward` on the prompt with empty caches."""
    heads, d = config["heads"], config["width"] // config["heads"]
    empty = f"zeros(shape=[{heads}, 0, {d}], dtype=\"float32\")"
    return f"let %prefill = %forward(%prompt, ({', '.join([empty] * (2 * config['layers']))}));"


def _main(config, body):
    """`@main(%prompt, %new_tokens, weights...)` around `body`."""
    params = ", ".join(
        f"%{name}: Tensor[({', '.join(map(str, shape))}), float32]"
        for name, shape, _, _ in weight_specs(**config)
    )
    return f"""#[version = "0.0.5"]
def @main(%prompt: Tensor[(?), int32], %new_tokens: int32, {params}) -> Tensor[(?), int32] {{
  {_forward(config)}
{body}
}}
"""


def relay_text(config):
    """The greedy generation program for `config` (see the module's documentation)."""
    _, caches_t = _types(config)
    return _main(config, f"""  let %decode = fn (%token: Tensor[(1), int32], %caches: {caches_t}, %count: int32, %out: Tensor[(?), int32]) -> Tensor[(?), int32] {{
    if (logical_or(greater_equal(%count, %new_tokens), equal(take(%token, 0), {config["eos"]}))) {{
      %out
    }} else {{
      let %step = %forward(%token, %caches);
      let %next = argmax(%step.0, axis=[-1]);
      %decode(%next, %step.1, add(%count, 1), concatenate((%out, %next), axis=0))
    }}
  }};
  {_prefill(config)}
  let %first = argmax(%prefill.0, axis=[-1]);
  %decode(%first, %prefill.1, 1, %first)""")


def _step_lines(config, beams, cache=_grown, mask=""):
    """The lines of a decoder step on one new id (`%tokens`) of each of `beams` sequences at
    position `%past`, their caches `[beams · heads, length, head width]` (beam-major), one
    product per layer for all; `cache` makes a layer's caches with the new rows, `mask` is
    added to the scores. Returns the lines and the last hidden state."""
    layers, width, heads = config["layers"], config["width"], config["heads"]
    d = width // heads
    rows = beams * heads

    def per_head(x):
        return f"reshape({x}, newshape=[{rows}, 1, {d}])"

    body = ["let %x0 = add(take(%wte, %tokens, axis=0), take(%wpe, %past, axis=0));"]
    x = "%x0"
    for i in range(layers):
        h = f"h{i}"
        scores = f"multiply(nn.batch_matmul(%{h}_q, %{h}_k, transpose_b=True), {1 / math.sqrt(d)!r}f)"
        body += [
            *_attention_inputs(h, i, x, per_head, cache),
            f"let %{h}_s = {f'add({scores}, {mask})' if mask else scores};",
            f"let %{h}_c = nn.batch_matmul(nn.softmax(%{h}_s, axis=-1), %{h}_v, transpose_b=False);",
            f"let %{h}_y = add({x}, {_dense(f'reshape(%{h}_c, newshape=[{beams}, {width}])', f'{h}_attn_out')});",
        ]
        body += _mlp(h, f"%{h}_y")
        x = f"%{h}_out"
    return body, x


def _beam_step(config, beams):
    """`%step(%tokens, %caches)`: the decoder on one new id of each of `beams` sequences, whose
    grown caches see every cached position (no mask)."""
    past = "let %past = take(shape_of(%caches.0, dtype=\"int32\"), 1);"
    body, x = _step_lines(config, beams)
    return _local_fn("step", f"%tokens: Tensor[({beams}), int32]", beams, config,
                     [past] + body + _outputs(config["layers"], x))


def preallocated_relay_text(config):
    """The greedy generation program for `config` with preallocated caches: after the
    prefill, each cache is a `[heads, prompt + new_tokens, head width]` buffer holding the
    prompt's rows, a parameter of its own of the decode loop, which writes each step's row at
    `%past` with `strided_set` (in place: the parameter is dead after the write, and the loop's
    tail call hands the result on alone) and attends over the whole buffer, positions after
    `%past` masked. Same ids as `relay_text`."""
    layers, heads, eos = config["layers"], config["heads"], config["eos"]
    d = config["width"] // heads
    cache_t, _ = _types(config)
    caches = ", ".join(f"%c{j}: {cache_t}" for j in range(2 * layers))
    step, x = _step_lines(config, 1, _written, "%mask")
    step = [
        "let %at = stack((0, %past), axis=0);",
        f"let %to = stack(({heads}, add(%past, 1)), axis=0);",
        "let %steps = ones(shape=[2], dtype=\"int32\");",
        "let %mask = where(greater(arange(0, %length, 1, dtype=\"int32\"), %past), -1e+09f, 0f);",
        *step,
        f"let %logits = nn.dense({_norm(x, 'ln_f')}, %wte, units=None);",
        "let %next = argmax(%logits, axis=[-1]);",
        f"%decode(%next, add(%count, 1), concatenate((%out, %next), axis=0), add(%past, 1), {_cache_names(layers)})",
    ]
    lines = "\n      ".join(step)
    buffer = (f"reshape(dyn.zeros(stack(({heads}, %length, {d}), axis=0), dtype=\"float32\"), "
              f"newshape=[{heads}, -1, {d}])")
    filled = ", ".join(
        f"strided_set({buffer}, %pc.{j}, zeros(shape=[2], dtype=\"int32\"), %end, ones(shape=[2], dtype=\"int32\"))"
        for j in range(2 * layers))
    return _main(config, f"""  let %prompt_length = take(shape_of(%prompt, dtype="int32"), 0);
  let %length = add(%prompt_length, %new_tokens);
  let %decode = fn (%tokens: Tensor[(1), int32], %count: int32, %out: Tensor[(?), int32], %past: int32, {caches}) -> Tensor[(?), int32] {{
    if (logical_or(greater_equal(%count, %new_tokens), equal(take(%tokens, 0), {eos}))) {{
      %out
    }} else {{
      {lines}
    }}
  }};
  {_prefill(config)}
  let %first = argmax(%prefill.0, axis=[-1]);
  let %end = stack(({heads}, %prompt_length), axis=0);
  let %pc = %prefill.1;
  %decode(%first, 1, reshape(%first, newshape=[-1]), %prompt_length, {filled})""")


def _top(beams, flat, size):
    """The lines binding `%top` to the positions of the `beams` largest of `%{flat}` (`size`
    floats), largest first, the lowest position first among equals: an argmax, that position
    masked, and again."""
    lines = [f"let %{flat}_0 = %{flat};"]
    picks = []
    for b in range(beams):
        lines.append(f"let %{flat}_i{b} = argmax(%{flat}_{b}, axis=[0]);")
        picks.append(f"%{flat}_i{b}")
        if b + 1 < beams:
            lines.append(f"let %{flat}_{b + 1} = where(equal(arange(0, {size}, 1, dtype=\"int32\"), "
                         f"%{flat}_i{b}), -3.4e+38f, %{flat}_{b});")
    lines.append(f"let %top = stack(({', '.join(picks)}), axis=0);")
    return lines


def beam_relay_text(config, beams=4):
    """The beam search program for `config`: the prefill, then `beams` sequences decoded
    together, each step keeping the `beams` continuations of highest total log-probability;
    after `new_tokens` ids, the sequence of the best. No end-of-sequence stop and no length
    penalty (every beam is `new_tokens` long)."""
    layers, heads, vocab = config["layers"], config["heads"], config["vocab"]
    _, caches_t = _types(config, beams)

    def reorder(cache):
        # The caches of each beam's origin: `[beams, heads, length, d]`, taken by beam.
        d = config["width"] // heads
        return (f"reshape(take(reshape({cache}, newshape=[{beams}, {heads}, -1, {d}]), %origin, axis=0), "
                f"newshape=[{beams * heads}, -1, {d}])")

    def indent(lines, n):
        return ("\n" + " " * n).join(lines)

    size = beams * vocab
    step = _top(beams, "total", size) + [
        "let %origin = floor_divide(%top, " + str(vocab) + ");",
        "let %next = floor_mod(%top, " + str(vocab) + ");",
        "let %rc = %r.1;",
        "let %caches2 = (" + ", ".join(reorder(f"%rc.{j}") for j in range(2 * layers)) + ");",
        "let %seqs1 = concatenate((take(%seqs, %origin, axis=0), expand_dims(%next, axis=1)), axis=1);",
        "%decode(%next, take(%total, %top), %seqs1, %caches2, add(%count, 1))",
    ]
    first = _top(beams, "first", vocab) + [
        "let %pc = %prefill.1;",
        "let %tiled = (" + ", ".join(f"tile(%pc.{j}, reps=[{beams}, 1, 1])" for j in range(2 * layers)) + ");",
        "%decode(%top, take(%first, %top), expand_dims(%top, axis=1), %tiled, 1)",
    ]
    return _main(config, f"""  {_beam_step(config, beams)}
  let %decode = fn (%tokens: Tensor[({beams}), int32], %scores: Tensor[({beams}), float32], %seqs: Tensor[({beams}, ?), int32], %caches: {caches_t}, %count: int32) -> Tensor[(?), int32] {{
    if (greater_equal(%count, %new_tokens)) {{
      take(%seqs, argmax(%scores, axis=[0]), axis=0)
    }} else {{
      let %r = %step(%tokens, %caches);
      let %total = reshape(add(nn.log_softmax(%r.0, axis=-1), expand_dims(%scores, axis=1)), newshape=[{size}]);
      {indent(step, 6)}
    }}
  }};
  {_prefill(config)}
  let %first = reshape(nn.log_softmax(%prefill.0, axis=-1), newshape=[{vocab}]);
  {indent(first, 2)}""")


def _numpy_forward(config, w):
    """`forward(ids, caches)`: the decoder in numpy on the new ids of one sequence, its caches
    (a list of `[heads, length, head width]` arrays) grown in place; the last row's logits."""
    layers, width, heads = config["layers"], config["width"], config["heads"]
    d = width // heads

    def norm(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w[f"{name}_gamma"] + w[f"{name}_beta"]

    def dense(x, name):
        return x @ w[f"{name}_weight"].T + w[f"{name}_bias"]

    def split(x):
        return x.reshape(-1, heads, d).transpose(1, 0, 2)

    def forward(ids, caches):
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
        return (norm(x[-1:], "ln_f") @ w["wte"].T)[0]

    return forward


def _empty_caches(config):
    heads, d = config["heads"], config["width"] // config["heads"]
    return [np.zeros((heads, 0, d), np.float32) for _ in range(2 * config["layers"])]


def greedy(config, w, prompt, new_tokens):
    """The greedy generation in numpy with a growing cache (the reference)."""
    forward, caches, eos = _numpy_forward(config, w), _empty_caches(config), config["eos"]
    out = [int(np.argmax(forward(np.asarray(prompt), caches)))]
    while len(out) < new_tokens and out[-1] != eos:
        out.append(int(np.argmax(forward(np.asarray(out[-1:]), caches))))
    return np.asarray(out, np.int32)


def log_softmax(x):
    """Log-probabilities of the last axis, in float32."""
    x = x.astype(np.float32)
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def top(scores, k):
    """The positions of the `k` largest of `scores` (flat), largest first, the lowest position
    first among equals (what the program's argmax-and-mask selection picks)."""
    return np.argsort(-scores, kind="stable")[:k]


def beam_search(config, w, prompt, new_tokens, beams=4):
    """The beam search in numpy (the reference of `beam_relay_text`): the ids of the best of
    `beams` sequences, `new_tokens` long."""
    forward, vocab = _numpy_forward(config, w), config["vocab"]
    caches = _empty_caches(config)
    first = log_softmax(forward(np.asarray(prompt), caches))
    tokens = top(first, beams)
    scores, seqs = first[tokens], tokens[:, None]
    beam_caches = [list(caches) for _ in range(beams)]
    for _ in range(1, new_tokens):
        logp = np.stack([log_softmax(forward(tokens[b:b + 1], beam_caches[b])) for b in range(beams)])
        total = (logp + scores[:, None]).reshape(-1)
        picked = top(total, beams)
        origin, tokens = picked // vocab, picked % vocab
        scores = total[picked]
        beam_caches = [list(beam_caches[o]) for o in origin]
        seqs = np.concatenate((seqs[origin], tokens[:, None]), 1)
    return seqs[int(np.argmax(scores))].astype(np.int32)
