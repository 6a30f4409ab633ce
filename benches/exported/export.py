"""The exported zoo (issue 29): real PyTorch architectures exported to ONNX by both of PyTorch's
exporters, from configs with seeded weights (nothing is downloaded; no `from_pretrained`).

    python3 benches/exported/export.py [--force] [--list] [--exporter ts|dynamo] [NAME...]
    python3 benches/exported/export.py --tests [--force]

Each model is exported twice: by the TorchScript exporter (`torch.onnx.export(...,
dynamo=False, opset_version=17)`, `ts`) and by the dynamo exporter (`dynamo=True`,
opset 20, `dynamo`). Each export goes to `out/<name>_<exporter>/` (git-ignored):

- `model.onnx` (weights as initializers, no external data);
- `input_<name>.npy` for every graph input (`name` as the ONNX graph spells it), seeded;
- `output_<k>.npy`, ONNX Runtime's outputs in graph order (k = 0, 1, ...);
- `meta.json`: inputs, outputs, opset, the operators used (subgraphs included), the export
  and ONNX Runtime times, and max |ORT - PyTorch| / max(1, max |PyTorch|).

A model that fails to export (or that ONNX Runtime cannot run) writes `error.txt` with the
reason instead, and the generator goes on. `out/exports.json` summarizes every export of the
run. NAME selects models by name (or a prefix such as `hf_`); `--list` prints them.

`--tests` writes the small committed test models instead (tiny configs: hidden 32, 2
layers, vocab 128, GPT-2's 512), to `crates/relay-onnx/tests/data/exported/<name>_<exporter>/`, in the
same layout; `cargo test -p relayc --test exported` runs them.
"""

import argparse
import hashlib
import json
import sys
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "out"
TESTS = ROOT / "crates" / "relay-onnx" / "tests" / "data" / "exported"
EXPORTERS = ("ts", "dynamo")
TS_OPSET = 17
DYNAMO_OPSET = 20


def seed_of(name):
    """A model's seed: the first 4 bytes of SHA-256 of its name (stable across runs)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little") & 0x7FFFFFFF


class Spec:
    """A model: `build(exporter)` returns (module, {input name: tensor}, output names) with
    torch seeded; `dynamic` maps input names to their dynamic axes ({axis: name}); `script`
    scripts the module for the TorchScript exporter (control flow); `only` restricts the
    exporters."""

    def __init__(self, name, build, dynamic=None, script=False, only=EXPORTERS, note=""):
        self.name, self.build, self.dynamic = name, build, dynamic
        self.script, self.only, self.note = script, only, note


# ---------------------------------------------------------------------------------------------
# torchvision classification networks (torchvision's own initialization, seeded; batch-norm
# statistics randomized so that eval-mode batch norm is not the identity; zero-initialized
# linear layers, ViT's head, drawn from N(0, 0.02)).


def randomize_norms(model):
    import torch

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.6, 1.4)
                m.weight.uniform_(0.5, 1.0)
                m.bias.uniform_(-0.1, 0.1)
            elif isinstance(m, torch.nn.Linear) and not m.weight.any():
                # torchvision's ViT zeroes its head: logits would be 0 whatever the network.
                torch.nn.init.normal_(m.weight, std=0.02)
    return model


def torchvision_net(arch, size=224):
    def build(exporter):
        import torch
        import torchvision

        kwargs = {"weights": None}
        if arch in ("googlenet", "inception_v3"):
            kwargs.update(aux_logits=False, init_weights=True)
        model = randomize_norms(getattr(torchvision.models, arch)(**kwargs))
        x = torch.rand(1, 3, size, size) * 2 - 1
        return model, {"input": x}, ["logits"]

    return build


TORCHVISION = [
    "resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
    "densenet121", "squeezenet1_0", "shufflenet_v2_x1_0", "mnasnet0_5", "regnet_y_400mf",
    "vgg11", "alexnet", "googlenet", "convnext_tiny", "vit_b_16",
]

# ---------------------------------------------------------------------------------------------
# Hugging Face transformers from configs (default attention, SDPA), seeded initialization.


def hf_wrapper(model, field, kwargs_names):
    """A module calling `model(**{name: arg})` and returning output `field` (one tensor)."""
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            out = self.model(**dict(zip(kwargs_names, args)), return_dict=True)
            return out[field]

    return Wrapped()


def token_inputs(vocab, batch, seq, pad=0, mask=True, token_types=False):
    """Seeded token ids (and an attention mask whose last `pad` positions of the last
    sequence are 0). Decoders get a mask of ones: without one, transformers looks for packed
    sequences in the position ids with `torch.diff`, which the TorchScript exporter lacks."""
    import torch

    inputs = {"input_ids": torch.randint(0, vocab, (batch, seq), dtype=torch.int64)}
    if mask:
        m = torch.ones(batch, seq, dtype=torch.int64)
        if pad:
            m[-1, seq - pad:] = 0
        inputs["attention_mask"] = m
    if token_types:
        t = torch.zeros(batch, seq, dtype=torch.int64)
        t[:, seq // 2:] = 1
        inputs["token_type_ids"] = t
    return inputs


def hf_net(kind, size="zoo", batch=1, seq=None):
    """`size` "zoo": small-but-real (hidden 256, 4 layers, real vocabularies); "tiny": the
    committed tests' (hidden 32, 1-2 layers, vocab 128)."""

    def build(exporter):
        import torch
        import transformers as tf

        tiny = size == "tiny"
        H = 32 if tiny else 256
        L = 2 if tiny else 4
        heads = 2 if tiny else 4
        ffn = 4 * H
        common = dict(attn_implementation="sdpa")
        if kind == "bert":
            vocab = 128 if tiny else 30522
            cfg = tf.BertConfig(vocab_size=vocab, hidden_size=H, num_hidden_layers=L,
                                num_attention_heads=heads, intermediate_size=ffn,
                                max_position_embeddings=512)
            model = tf.BertModel(cfg, add_pooling_layer=False, **{})
            n = seq or (8 if tiny else 128)
            inputs = token_inputs(vocab, batch, n, pad=n // 4, token_types=True)
            field = "last_hidden_state"
        elif kind == "distilbert":
            vocab = 128 if tiny else 30522
            cfg = tf.DistilBertConfig(vocab_size=vocab, dim=H, n_layers=L, n_heads=heads,
                                      hidden_dim=ffn)
            model = tf.DistilBertModel(cfg)
            n = seq or 128
            inputs = token_inputs(vocab, batch, n, pad=n // 4)
            field = "last_hidden_state"
        elif kind == "roberta":
            vocab = 128 if tiny else 50265
            cfg = tf.RobertaConfig(vocab_size=vocab, hidden_size=H, num_hidden_layers=L,
                                   num_attention_heads=heads, intermediate_size=ffn,
                                   max_position_embeddings=514)
            model = tf.RobertaModel(cfg, add_pooling_layer=False)
            n = seq or 128
            inputs = token_inputs(vocab, batch, n, pad=n // 4)
            # RoBERTa's padding token (1) must not be a real token: ids from 3.
            inputs["input_ids"] = inputs["input_ids"].clamp(min=3)
            field = "last_hidden_state"
        elif kind == "albert":
            vocab = 128 if tiny else 30000
            cfg = tf.AlbertConfig(vocab_size=vocab, embedding_size=128, hidden_size=H,
                                  num_hidden_layers=L, num_attention_heads=heads,
                                  intermediate_size=ffn)
            model = tf.AlbertModel(cfg, add_pooling_layer=False)
            n = seq or 128
            inputs = token_inputs(vocab, batch, n, pad=n // 4)
            field = "last_hidden_state"
        elif kind == "electra":
            vocab = 128 if tiny else 30522
            cfg = tf.ElectraConfig(vocab_size=vocab, embedding_size=128, hidden_size=H,
                                   num_hidden_layers=L, num_attention_heads=heads,
                                   intermediate_size=ffn)
            model = tf.ElectraModel(cfg)
            n = seq or 128
            inputs = token_inputs(vocab, batch, n, pad=n // 4)
            field = "last_hidden_state"
        elif kind == "gpt2":
            # Tiny: vocab 512, so that the tied head's 512 x 32 weight is past onnxscript's
            # constant-folding limit (8192 elements) and the dynamo export keeps the
            # Transpose(lm_head.weight) + MatMul that it writes at real sizes.
            vocab = 512 if tiny else 50257
            cfg = tf.GPT2Config(vocab_size=vocab, n_embd=H, n_layer=L, n_head=heads,
                                n_positions=1024, use_cache=False, tie_word_embeddings=True)
            model = tf.GPT2LMHeadModel(cfg)
            n = seq or (8 if tiny else 64)
            inputs = token_inputs(vocab, batch, n)
            field = "logits"
        elif kind == "opt":
            vocab = 128 if tiny else 50272
            cfg = tf.OPTConfig(vocab_size=vocab, hidden_size=H, num_hidden_layers=L,
                               num_attention_heads=heads, ffn_dim=ffn, word_embed_proj_dim=H,
                               use_cache=False)
            model = tf.OPTForCausalLM(cfg)
            n = seq or 64
            inputs = token_inputs(vocab, batch, n)
            field = "logits"
        elif kind == "gpt_neo":
            vocab = 128 if tiny else 50257
            cfg = tf.GPTNeoConfig(vocab_size=vocab, hidden_size=H, num_layers=L,
                                  num_heads=heads, intermediate_size=ffn,
                                  attention_types=[[["global", "local"], L // 2]],
                                  window_size=32, use_cache=False)
            model = tf.GPTNeoForCausalLM(cfg)
            n = seq or 64
            inputs = token_inputs(vocab, batch, n)
            field = "logits"
        elif kind == "llama":
            vocab = 128 if tiny else 32000
            cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=H, intermediate_size=688 if not
                                 tiny else 88, num_hidden_layers=L, num_attention_heads=heads,
                                 num_key_value_heads=max(1, heads // 2),
                                 max_position_embeddings=512, use_cache=False,
                                 tie_word_embeddings=False)
            model = tf.LlamaForCausalLM(cfg)
            n = seq or 64
            inputs = token_inputs(vocab, batch, n)
            field = "logits"
        elif kind == "t5_encoder":
            vocab = 128 if tiny else 32128
            cfg = tf.T5Config(vocab_size=vocab, d_model=H, d_kv=H // heads, d_ff=ffn,
                              num_layers=L, num_heads=heads, use_cache=False)
            model = tf.T5EncoderModel(cfg)
            n = seq or 128
            inputs = token_inputs(vocab, batch, n, pad=n // 4)
            field = "last_hidden_state"
        elif kind == "vit":
            cfg = tf.ViTConfig(hidden_size=H, num_hidden_layers=L, num_attention_heads=heads,
                               intermediate_size=ffn, image_size=32 if tiny else 224,
                               patch_size=8 if tiny else 16)
            model = tf.ViTModel(cfg, add_pooling_layer=False)
            s = 32 if tiny else 224
            inputs = {"pixel_values": torch.rand(batch, 3, s, s) * 2 - 1}
            field = "last_hidden_state"
        else:
            raise ValueError(kind)
        model.eval()
        return hf_wrapper(model, field, list(inputs)), inputs, [field]

    return build


HF = ["bert", "distilbert", "roberta", "albert", "electra", "gpt2", "opt", "gpt_neo", "llama",
      "t5_encoder", "vit"]

# ---------------------------------------------------------------------------------------------
# Recurrent networks.


def rnn_net(cell, size="zoo", bidirectional=False):
    def build(exporter):
        import torch

        n_in, hidden, layers, steps = (16, 32, 1, 6) if size == "tiny" else (64, 128, 2, 50)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                rnn = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
                self.rnn = rnn(n_in, hidden, num_layers=layers, batch_first=True,
                               bidirectional=bidirectional)
                self.head = torch.nn.Linear(hidden * (2 if bidirectional else 1), 8)

            def forward(self, x):
                y, _ = self.rnn(x)
                return self.head(y)

        return Net(), {"x": torch.randn(1, steps, n_in)}, ["y"]

    return build


# ---------------------------------------------------------------------------------------------
# Control flow: a scripted loop and if for the TorchScript exporter (ONNX Loop, If); torch.cond,
# while_loop and scan for the dynamo exporter.


def control_net(kind, size="zoo"):
    def build(exporter):
        import torch

        n = 16 if size == "tiny" else 256
        steps = 5 if size == "tiny" else 20

        if kind == "loop" and exporter == "ts":

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = torch.nn.Linear(n, n)

                def forward(self, xs):
                    h = torch.zeros(xs.size(1), xs.size(2))
                    for i in range(xs.size(0)):
                        h = torch.tanh(self.lin(xs[i]) + h)
                    return h

            return Net(), {"xs": torch.randn(steps, 1, n)}, ["h"]
        if kind == "loop":  # dynamo: while_loop

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = torch.nn.Linear(n, n)

                def forward(self, x, count):
                    from torch._higher_order_ops.while_loop import while_loop

                    def cond(i, h):
                        return i < count

                    def body(i, h):
                        return i + 1, torch.tanh(self.lin(h))

                    _, h = while_loop(cond, body, (torch.zeros_like(count), x))
                    return h

            return Net(), {"x": torch.randn(1, n), "count": torch.tensor(steps)}, ["h"]
        if kind == "if" and exporter == "ts":

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.a = torch.nn.Linear(n, n)
                    self.b = torch.nn.Linear(n, n)

                def forward(self, x):
                    if bool(x.sum() > 0):
                        y = torch.relu(self.a(x))
                    else:
                        y = torch.sigmoid(self.b(x))
                    return y * 2

            return Net(), {"x": torch.randn(1, n) + 0.5}, ["y"]
        if kind == "if":  # dynamo: torch.cond

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.a = torch.nn.Linear(n, n)
                    self.b = torch.nn.Linear(n, n)

                def forward(self, x):
                    def yes(x):
                        return torch.relu(self.a(x))

                    def no(x):
                        return torch.sigmoid(self.b(x))

                    return torch.cond(x.sum() > 0, yes, no, (x,)) * 2

            return Net(), {"x": torch.randn(1, n) + 0.5}, ["y"]
        if kind == "scan":

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = torch.nn.Linear(n, n)

                def forward(self, h0, xs):
                    from torch._higher_order_ops.scan import scan

                    def step(h, x):
                        h = torch.tanh(self.lin(x) + h)
                        return h, h * 0.5

                    h, ys = scan(step, h0, xs)
                    return h, ys

            return Net(), {"h0": torch.zeros(1, n), "xs": torch.randn(steps, 1, n)}, ["h", "ys"]
        if kind == "scan_cumsum":
            # A running sum written as a scripted loop over a tensor's rows (the TorchScript
            # exporter's Loop with a sequence-free carried state).

            class Net(torch.nn.Module):
                def forward(self, xs):
                    acc = torch.zeros_like(xs[0])
                    out = []
                    for i in range(xs.size(0)):
                        acc = acc + xs[i]
                        out.append(acc)
                    return torch.stack(out)

            return Net(), {"xs": torch.randn(steps, n)}, ["ys"]
        raise ValueError(kind)

    return build


# Token inputs whose batch and sequence are both dynamic (BERT's three, a decoder's two).
BATCH_AND_SEQUENCE_3 = {name: {0: "batch", 1: "sequence"}
                        for name in ("input_ids", "attention_mask", "token_type_ids")}
BATCH_AND_SEQUENCE_2 = {name: {0: "batch", 1: "sequence"}
                        for name in ("input_ids", "attention_mask")}


def specs():
    out = [Spec(f"tv_{a}", torchvision_net(a)) for a in TORCHVISION]
    out += [Spec(f"hf_{k}", hf_net(k)) for k in HF]
    out.append(Spec("hf_bert_dynbatch", hf_net("bert", batch=2),
                    dynamic={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
                             "token_type_ids": {0: "batch"}},
                    note="BERT with a dynamic batch (exported at batch 2)"))
    out.append(Spec("hf_gpt2_dynbatch", hf_net("gpt2", batch=2),
                    dynamic={"input_ids": {0: "batch"}},
                    note="GPT-2 with a dynamic batch (exported at batch 2)"))
    out.append(Spec("hf_bert_dynseq", hf_net("bert", batch=2), dynamic=BATCH_AND_SEQUENCE_3,
                    note="BERT with a dynamic batch and sequence (exported at 2 x 128)"))
    out.append(Spec("hf_gpt2_dynseq", hf_net("gpt2", batch=2), dynamic=BATCH_AND_SEQUENCE_2,
                    note="GPT-2 with a dynamic batch and sequence (exported at 2 x 64)"))
    out += [Spec("rnn_lstm", rnn_net("lstm")), Spec("rnn_gru", rnn_net("gru")),
            Spec("rnn_bilstm", rnn_net("lstm", bidirectional=True))]
    out += [Spec("cf_loop", control_net("loop"), script=True),
            Spec("cf_if", control_net("if"), script=True),
            Spec("cf_scan", control_net("scan"), only=("dynamo",)),
            Spec("cf_list_loop", control_net("scan_cumsum"), script=True)]
    return out


def test_specs():
    """The committed test models: tiny, one per exporter pattern."""
    return [
        Spec("bert", hf_net("bert", size="tiny"),
             note="SDPA attention: Where(IsNaN(x), 0, x) masked softmax"),
        Spec("gpt2", hf_net("gpt2", size="tiny"),
             note="tied LM head: Transpose(wte) + MatMul (dynamo)"),
        Spec("bert_dynbatch", hf_net("bert", size="tiny", batch=2),
             dynamic={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
                      "token_type_ids": {0: "batch"}},
             note="dynamic batch through the attention mask"),
        Spec("bert_dynseq", hf_net("bert", size="tiny", batch=2), dynamic=BATCH_AND_SEQUENCE_3,
             note="dynamic batch and sequence: the mask and the position ids from both"),
        Spec("gpt2_dynseq", hf_net("gpt2", size="tiny", batch=2), dynamic=BATCH_AND_SEQUENCE_2,
             note="dynamic batch and sequence: the causal mask from the sequence"),
        Spec("lstm", rnn_net("lstm", size="tiny")),
        Spec("gru", rnn_net("gru", size="tiny")),
        Spec("loop", control_net("loop", size="tiny"), script=True),
        Spec("if", control_net("if", size="tiny"), script=True),
        Spec("scan", control_net("scan", size="tiny"), only=("dynamo",)),
        Spec("list_loop", control_net("scan_cumsum", size="tiny"), script=True,
             note="a scripted loop appending to a list (TorchScript: SequenceEmpty, "
                  "SequenceInsert, ConcatFromSequence)"),
    ]


# ---------------------------------------------------------------------------------------------


def operators(graph, counter=None):
    """Every node's op type (domain-qualified outside ai.onnx), subgraphs included."""
    import onnx

    counter = Counter() if counter is None else counter
    for node in graph.node:
        counter[node.op_type if node.domain in ("", "ai.onnx") else
                f"{node.domain}.{node.op_type}"] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                operators(attr.g, counter)
            for g in attr.graphs:
                operators(g, counter)
    return counter


def ort_session(path, threads=1):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def flat(x):
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in flat(item)]
    raise TypeError(f"output of type {type(x)}")


def dynamo_shapes(spec, inputs):
    from torch.export import Dim

    dims = {}
    shapes = {}
    for name in inputs:
        axes = (spec.dynamic or {}).get(name)
        if not axes:
            shapes[name] = None
            continue
        shapes[name] = {axis: dims.setdefault(d, Dim(d, min=1, max=1024))
                        for axis, d in axes.items()}
    return shapes


def export_one(spec, exporter, directory):
    """Exports `spec` with `exporter` into `directory`; returns the summary record."""
    import onnx
    import torch

    record = {"model": spec.name, "exporter": exporter, "dir": str(directory)}
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():
        stale.unlink()
    path = directory / "model.onnx"
    started = time.time()
    try:
        torch.manual_seed(seed_of(spec.name))
        np.random.seed(seed_of(spec.name))
        model, inputs, output_names = spec.build(exporter)
        model.eval()
        args = tuple(inputs.values())
        names = list(inputs)
        with torch.no_grad():
            expected = [t.detach().numpy() for t in flat(model(*args))]
        # The TorchScript exporter traces with gradients enabled, as a user calls it (under
        # no_grad torchvision's attention takes its fast path, `_native_multi_head_attention`,
        # which that exporter has no symbolic for); the dynamo exporter under no_grad.
        with torch.set_grad_enabled(exporter == "ts"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if exporter == "ts":
                    module = torch.jit.script(model) if spec.script else model
                    dynamic_axes = None
                    if spec.dynamic:
                        dynamic_axes = {k: v for k, v in spec.dynamic.items() if k in names}
                        # The outputs' leading axes are the first input's.
                        first = next(iter(spec.dynamic.values()))
                        for o in output_names:
                            dynamic_axes[o] = dict(first)
                    torch.onnx.export(module, args, str(path), dynamo=False,
                                      opset_version=TS_OPSET, input_names=names,
                                      output_names=output_names, dynamic_axes=dynamic_axes,
                                      do_constant_folding=True)
                else:
                    kwargs = {}
                    if spec.dynamic:
                        # The wrapper takes `*args`: one argument, a tuple of the inputs.
                        kwargs["dynamic_shapes"] = (tuple(dynamo_shapes(spec, inputs).values()),)
                    program = torch.onnx.export(model, args, dynamo=True,
                                                opset_version=DYNAMO_OPSET, input_names=names,
                                                output_names=output_names, external_data=False,
                                                verbose=False, report=False, **kwargs)
                    program.save(str(path), external_data=False)
    except Exception as error:  # noqa: BLE001 - every failure is recorded, not raised
        reason = f"{type(error).__name__}: {error}".strip()
        (directory / "error.txt").write_text(reason + "\n\n" + traceback.format_exc())
        if path.exists():
            path.unlink()
        record.update(status="export failed", error=first_line(reason),
                      seconds=round(time.time() - started, 1))
        return record
    export_seconds = time.time() - started
    try:
        proto = onnx.load(str(path))
        initializers = {t.name for t in proto.graph.initializer}
        graph_inputs = [i.name for i in proto.graph.input if i.name not in initializers]
        feeds = {}
        values = list(inputs.values())
        for k, name in enumerate(graph_inputs):
            tensor = inputs[name] if name in inputs else values[k]
            feeds[name] = tensor.numpy()
        for name, value in feeds.items():
            np.save(directory / f"input_{name}.npy", value)
        start = time.time()
        session = ort_session(path)
        outputs = session.run(None, feeds)
        ort_seconds = time.time() - start
        for k, value in enumerate(outputs):
            np.save(directory / f"output_{k}.npy", value)
        errors = []
        for a, b in zip(outputs, expected):
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
            errors.append(float(np.max(np.abs(a - b))) / scale if a.shape == b.shape and a.size
                          else (0.0 if a.shape == b.shape else float("inf")))
        ops = operators(proto.graph)
        opset = {o.domain or "ai.onnx": o.version for o in proto.opset_import}
        meta = {
            "model": spec.name, "exporter": exporter, "note": spec.note, "opset": opset,
            "inputs": graph_inputs, "outputs": [o.name for o in proto.graph.output],
            "input_shapes": {n: list(v.shape) for n, v in feeds.items()},
            "dynamic": bool(spec.dynamic),
            "operators": dict(sorted(ops.items())),
            "export_seconds": round(export_seconds, 2),
            "ort_first_run_seconds": round(ort_seconds, 3),
            "ort_vs_torch": max(errors) if errors else 0.0,
            "bytes": path.stat().st_size,
        }
        (directory / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        record.update(status="ok", seconds=round(export_seconds, 1),
                      ort_vs_torch=meta["ort_vs_torch"], bytes=meta["bytes"],
                      operators=sorted(ops))
    except Exception as error:  # noqa: BLE001
        reason = f"{type(error).__name__}: {error}".strip()
        (directory / "error.txt").write_text("ONNX Runtime: " + reason + "\n\n"
                                             + traceback.format_exc())
        record.update(status="ort failed", error=first_line(reason),
                      seconds=round(export_seconds, 1))
    return record


def first_line(text):
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--tests", action="store_true", help="write the committed test models")
    parser.add_argument("--force", action="store_true", help="re-export existing models")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--exporter", choices=EXPORTERS, action="append")
    args = parser.parse_args()
    chosen = test_specs() if args.tests else specs()
    if args.names:
        chosen = [s for s in chosen if any(s.name == n or s.name.startswith(n)
                                           for n in args.names)]
    if args.list:
        for s in chosen:
            print(s.name, ",".join(s.only), s.note)
        return
    base = TESTS if args.tests else OUT
    base.mkdir(parents=True, exist_ok=True)
    exporters = args.exporter or EXPORTERS
    import torch

    torch.set_num_threads(1)
    summary_path = base / "exports.json"
    try:
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    except ValueError:
        summary = {}
    started = time.time()
    for spec in chosen:
        for exporter in exporters:
            if exporter not in spec.only:
                continue
            directory = base / f"{spec.name}_{exporter}"
            key = directory.name
            if not args.force and ((directory / "meta.json").exists()
                                   or (directory / "error.txt").exists()):
                continue
            record = export_one(spec, exporter, directory)
            summary[key] = record
            summary_path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
            status = record["status"]
            extra = record.get("error", f"ort vs torch {record.get('ort_vs_torch', 0):.2g}")
            print(f"{key:32} {status:14} {record['seconds']:7.1f} s  {extra}", flush=True)
    if args.tests:
        # The summary is for the zoo; the committed data keeps only the model directories.
        summary_path.unlink(missing_ok=True)
    print(f"== exported in {time.time() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
