"""Writes the model zoo (benches/models/README.md): each network as Relay text with its weights in
a .npz (bound by `relayc run --params`), its inputs as .npy files and an ONNX model with the same
weights as initializers; and, with --tests, the committed test data of benches/tests/models.rs.

    python3 benches/models/generate.py [--out DIR] [--force] [NAME...]   # the zoo (default out/)
    python3 benches/models/generate.py --tests [DIR]                     # the test data

A network directory holds model.relay, params.npz, model.onnx, input_<name>.npy and meta.json
(the inputs, the number of outputs, the float type); a network is skipped when its meta.json
exists, unless --force.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import generation, networks, ort  # noqa: E402
from zoo.lstm import lstm  # noqa: E402

HERE = Path(__file__).resolve().parent

# name -> builder of the whole network.
NETWORKS = {
    "mnist": networks.mnist,
    "lstm": lstm,
    "densenet121": networks.densenet121,
    "mobilenetv2": networks.mobilenetv2,
    "resnet50_b1": lambda: networks.resnet50(1),
    "resnet50_b8": lambda: networks.resnet50(8),
    "resnet50_b1_f16": lambda: networks.resnet50(1, "float16"),
    "bert_b1": lambda: networks.bert(1),
    "bert_b8": lambda: networks.bert(8),
    "bert_b1_f16": lambda: networks.bert(1, "float16"),
    "gpt2": networks.gpt2,
}

# name -> builder of the test models (small networks whole, one block of each large one).
TESTS = {
    "mnist": networks.mnist,
    "lstm": lstm,
    "resnet50_layer2_0": networks.resnet50_block,
    "resnet50_layer2_0_f16": lambda: networks.resnet50_block("float16"),
    "mobilenetv2_block2": networks.mobilenetv2_block,
    "bert_layer0": networks.bert_block,
    "gpt2_h0": networks.gpt2_block,
}

# name -> (config, prompt, new tokens, program) of the generation tests (zoo/generation.py):
# the greedy loop, beam search of width 4 (a prompt whose beams and greedy ids differ), and the
# greedy loop with preallocated caches written in place.
GENERATION_TESTS = {
    "gpt2_generate_tiny": (generation.TINY, [5, 17, 42, 3, 88, 11, 2, 60], 40, "greedy"),
    "gpt2_beam_tiny": (generation.TINY, [9, 30, 77], 40, "beam"),
    "gpt2_generate_preallocated_tiny": (generation.TINY, [5, 17, 42, 3, 88, 11, 2, 60], 40, "preallocated"),
}

# program -> (its Relay text, its numpy reference) by config (zoo/generation.py).
GENERATION_PROGRAMS = {
    "greedy": (generation.relay_text, generation.greedy),
    "beam": (generation.beam_relay_text, generation.beam_search),
    "preallocated": (generation.preallocated_relay_text, generation.greedy),
}

# At most this many expected values are stored per output (every stride-th element).
EXPECTED_VALUES = 4096


# Networks whose weights are another's (batch 8): their params.npz is a link to that one's.
SHARED_PARAMS = {"resnet50_b8": "resnet50_b1", "bert_b8": "bert_b1"}


def write_network(name, graph, directory):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.relay").write_text(graph.relay_text())
    params = directory / "params.npz"
    params.unlink(missing_ok=True)
    owner = SHARED_PARAMS.get(name)
    if owner and (directory.parent / owner / "meta.json").exists():
        params.symlink_to(Path("..") / owner / "params.npz")
    else:
        np.savez(params, **graph.params)
    for input_name, data in graph.inputs.items():
        np.save(directory / f"input_{input_name}.npy", data)
    model = graph.onnx_model()
    size = model.ByteSize()
    import onnx

    onnx.save(model, str(directory / "model.onnx"))
    meta = {
        "name": graph.name,
        "dtype": graph.dtype,
        "inputs": list(graph.inputs),
        "outputs": len(model.graph.output),
        "onnx_bytes": size,
    }
    (directory / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def write_test(name, graph, directory):
    """name.relay, name.manifest (how to regenerate every tensor, the expected outputs)."""
    (directory / f"{name}.relay").write_text(graph.relay_text())
    model = graph.onnx_model()
    sess, was_widened = ort.reference_session(model)
    outputs = ort.run(sess, dict(graph.inputs), was_widened)
    lines = [
        f"# {name}: written by benches/models/generate.py --tests; read by "
        "benches/tests/models.rs.",
        "# param|input NAME DTYPE SHAPE splitmix SEED SCALE OFFSET  (zoo/weights.py)",
        "# param NAME DTYPE SHAPE causal_mask                      (0 on and below the diagonal,"
        " -10000 above)",
        "# output INDEX STRIDE COUNT FILE  (every STRIDE-th of COUNT elements, by ONNX Runtime"
        + (" in float32 from the float16 weights)" if was_widened else ")"),
    ]
    lines += graph.manifest
    for index, out in enumerate(outputs):
        flat = np.asarray(out, dtype=np.float32).reshape(-1)
        stride = max(1, -(-flat.size // EXPECTED_VALUES))
        file = f"{name}.expected{index}.npy"
        np.save(directory / file, np.ascontiguousarray(flat[::stride]))
        lines.append(f"output {index} {stride} {flat.size} {file}")
    (directory / f"{name}.manifest").write_text("\n".join(lines) + "\n")


def write_generation_test(name, directory):
    """name.relay and name.manifest of a generation program (the weights by seed, the prompt
    and the count as values) and the ids the numpy loop generates."""
    config, prompt, new_tokens, program = GENERATION_TESTS[name]
    text, reference = GENERATION_PROGRAMS[program]
    (directory / f"{name}.relay").write_text(text(config))
    seed = networks.SEEDS["gpt2"]
    lines = [
        f"# {name}: written by benches/models/generate.py --tests; read by benches/tests/models.rs.",
        "# input NAME int32 SHAPE|scalar values V,V,...",
        "# param NAME DTYPE SHAPE splitmix SEED SCALE OFFSET  (zoo/weights.py)",
        f"# output INDEX STRIDE COUNT FILE  (the ids of zoo/generation.py's numpy {program} loop)",
        f"input prompt int32 {len(prompt)} values {','.join(map(str, prompt))}",
        f"input new_tokens int32 scalar values {new_tokens}",
    ]
    for pname, shape, scale, offset in generation.weight_specs(**config):
        dims = ",".join(map(str, shape))
        lines.append(f"param {pname} float32 {dims} splitmix "
                     f"{generation.tensor_seed(seed, pname)} {scale!r} {offset!r}")
    ids = reference(config, generation.weights(config, seed), prompt, new_tokens)
    np.save(directory / f"{name}.expected0.npy", ids)
    lines.append(f"output 0 1 {ids.size} {name}.expected0.npy")
    (directory / f"{name}.manifest").write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--tests", nargs="?", const=HERE / "tests", type=Path)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    if args.tests is not None:
        args.tests.mkdir(parents=True, exist_ok=True)
        for name in args.names or [*TESTS, *GENERATION_TESTS]:
            print(f"== test model {name}", file=sys.stderr, flush=True)
            if name in GENERATION_TESTS:
                write_generation_test(name, args.tests)
            else:
                write_test(name, TESTS[name](), args.tests)
        return
    for name in args.names or NETWORKS:
        directory = args.out / name
        if (directory / "meta.json").exists() and not args.force:
            continue
        print(f"== generating {name} in {directory}", file=sys.stderr, flush=True)
        write_network(name, NETWORKS[name](), directory)


if __name__ == "__main__":
    main()
