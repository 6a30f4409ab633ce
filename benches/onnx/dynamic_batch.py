"""The model zoo's networks with a dynamic batch, as exporters write them with
`dynamic_axes={"input": {0: "batch"}}`: each ONNX model of benches/models/out/<net>/ is
rewritten with its inputs' and outputs' first dimension a `dim_param` and each constant
`Reshape` spec made batch-agnostic (a leading batch of 1 kept in place becomes `0`, "the
input's"; a leading dimension that merges the batch with others becomes `-1`). relayc builds each
once, with no --input-shape (a module with `?` dimensions), and runs that one executable at
every batch size given; ONNX Runtime runs the same model. Prints the largest difference and
the median times, and relayc's time when the import is specialized to the batch
(`relayc run MODEL.onnx`, static shapes).

    benches/.venv/bin/python benches/onnx/dynamic_batch.py --relayc target/release/relayc \\
        --batches 1 4 mnist resnet50_b1
"""

import argparse
import re
import json
import pathlib
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper as nh

OUT = pathlib.Path(__file__).resolve().parent.parent / "models" / "out"


def dynamic(model):
    """`model` with a dynamic first dimension on its inputs and outputs, and batch-agnostic
    `Reshape` specs."""
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in onnx.shape_inference.infer_shapes(model).graph.value_info
    }
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    shapes.update({v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in g.input})
    for v in list(g.input) + list(g.output):
        if v.name not in inits:
            v.type.tensor_type.shape.dim[0].dim_param = "batch"
    del g.value_info[:]
    for n in g.node:
        if n.op_type != "Reshape" or n.input[1] not in inits:
            continue
        spec = nh.to_array(inits[n.input[1]]).copy()
        if -1 in spec:
            continue
        data = shapes.get(n.input[0], [])
        batch_first = len(data) == len(spec) and data[0] == spec[0] == 1
        spec[0] = 0 if batch_first else -1
        inits[n.input[1]].CopyFrom(nh.from_array(spec, n.input[1]))
    return model


def median_ms(f, rounds):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def relayc_ms(relayc, target, inputs, out, rounds):
    """relayc's median per run over `rounds` (its own `--repeat` timing)."""
    args = [relayc, "run", str(target), "--threads", "1", "--repeat", str(rounds)]
    for k, p in inputs.items():
        args += ["--input", f"{k}={p}"]
    args += ["--output", str(out)]
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    scale = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}
    for line in r.stderr.splitlines():
        found = re.search(r"p50 ([0-9.]+) (ns|µs|us|ms|s)\b", line)
        if line.startswith("run: ") and found:
            return float(found.group(1)) * scale[found.group(2)]
    raise SystemExit(f"no p50 in relayc's output:\n{r.stdout}{r.stderr}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relayc", required=True)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("nets", nargs="+")
    a = ap.parse_args()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for net in a.nets:
            model = dynamic(onnx.load(str(OUT / net / "model.onnx")))
            path = tmp / f"{net}.onnx"
            onnx.save(model, str(path))
            ro = tmp / f"{net}.ro"
            t = time.perf_counter()
            subprocess.run([a.relayc, "build", str(path), "-o", str(ro)], check=True,
                           capture_output=True)
            build_s = time.perf_counter() - t
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            names = json.loads((OUT / net / "meta.json").read_text())["inputs"]
            for batch in a.batches:
                feeds, files = {}, {}
                for name in names:
                    x = np.load(OUT / net / f"input_{name}.npy")
                    x = np.concatenate([x] * batch)
                    if x.dtype.kind == "f":
                        x = x + np.float32(0.01) * np.arange(batch, dtype=x.dtype).reshape(
                            (batch,) + (1,) * (x.ndim - 1))
                    feeds[name] = x
                    files[name] = tmp / f"{net}_{name}_{batch}.npy"
                    np.save(files[name], x)
                want = sess.run(None, feeds)
                out = tmp / f"{net}_{batch}.npz"
                dyn_ms = relayc_ms(a.relayc, ro, files, out, a.rounds)
                got = np.load(out)
                err = max(float(np.abs(got[str(i)] - w).max()) for i, w in enumerate(want))
                static_ms = relayc_ms(a.relayc, path, files, out, a.rounds)
                ort_ms = median_ms(lambda: sess.run(None, feeds), a.rounds)
                print(f"{net:14} batch {batch:2}: max |relayc - ORT| {err:.2e}; median ms: "
                      f"relayc dynamic {dyn_ms:8.2f} (one build, {build_s:.1f} s), "
                      f"relayc static {static_ms:8.2f}, ORT {ort_ms:8.2f}", flush=True)


if __name__ == "__main__":
    main()
