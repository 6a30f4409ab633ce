"""Runs the exported zoo (benches/exported/out/, written by export.py) on relayc and ONNX Runtime
and prints the table of benches/exported/README.md. Called by `benches/run.sh exported`; alone:

    python3 benches/exported/run.py --relayc target/release/relayc [--rounds N]
                                    [--threads 1,2] [--markdown FILE] [NAME...]

For each exported model (NAME selects by prefix, e.g. `tv_` or `hf_bert`):

1. **Import and check**: `relayc run model.onnx --input NAME=input_NAME.npy ... --output
   out.npz --threads 1`; its outputs against ONNX Runtime's, stored by export.py. The error of
   an output is max |relayc - ORT| / max(1, max |ORT|) (the max abs difference, relative to the
   output's scale when that is above 1); a model matches when every output has ORT's shape and
   an error ≤ 1e-4 (TOLERANCE). A model exported with a dynamic batch is first built with its
   symbolic dimensions (`relayc build model.onnx -o model.ro`, no `--input-shape`), and that
   executable runs (`relayc run model.ro`), here and in the timing.
2. **Timing**, at each thread count: ROUNDS rounds, each running relayc (`relayc run --threads T
   --warmup 1 --repeat R`, its p50; the import and compile are outside the timed runs) and ONNX
   Runtime (a session with intra_op_num_threads T, inter_op 1, sequential execution, every
   graph optimization; the median of R runs after one warm-up), in alternating order (ours first
   in odd rounds, theirs first in even ones). R gives about half a second of ONNX Runtime's
   time (3 to 200). The table has the median over rounds and the ratio ORT / relayc (> 1:
   relayc faster); the geometric mean of the ratios per thread count is over the models that
   match.

A model that failed to export, fails to import or run, or mismatches, is a row with its error
(the first line; the unsupported operators by name), never a crash of the runner. The host's
CPU and ISA (avx512 when /proc/cpuinfo has avx512f, else avx2) head the table.
"""

import argparse
import datetime
import json
import math
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TOLERANCE = 1e-4
UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def isa():
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    if re.search(r"\bavx512f\b", flags):
        return "avx512"
    if re.search(r"\bavx2\b", flags):
        return "avx2"
    return "sse"


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def clean(text):
    """relayc's diagnostic as one line: miette's box drawing and wrapping removed."""
    text = re.sub(r"[│╰╭─×┬┴├┤┌┐└┘]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def unsupported(text):
    """The operators relayc names as not supported, and the dynamic-shape refusals."""
    text = clean(text)
    ops = set(re.findall(r"operator `([A-Za-z0-9_.]+)` is not supported", text))
    for op, what in re.findall(r"\((\w+) of [\w.]+\): (input \d+ (?:is computed from a dynamic "
                               r"dimension|has the dynamic shape))", text):
        ops.add(f"{op} (dynamic {what.split()[0]} {what.split()[1]})")
    return sorted(ops)


def first_error(text):
    """The first informative line of relayc's stderr: the diagnostic's code and first node."""
    text = clean(text)
    found = re.search(r"(\d+ node\(s\) cannot be imported: node `[^`]*` \([^)]*\): .*?)"
                      r"(?= node `|$)", text)
    if found:
        return found.group(1)[:300]
    return text[:300]


class Model:
    def __init__(self, directory):
        self.dir = directory
        self.name, _, self.exporter = directory.name.rpartition("_")
        self.error = None
        meta = directory / "meta.json"
        if not meta.exists():
            reason = (directory / "error.txt").read_text() if (directory / "error.txt").exists() \
                else "no model.onnx"
            self.error = "export failed: " + next(
                (line for line in reason.splitlines() if line.strip()), "").strip()[:300]
            self.meta = None
            return
        self.meta = json.loads(meta.read_text())
        self.inputs = {n: directory / f"input_{n}.npy" for n in self.meta["inputs"]}
        self.feeds = {n: np.load(p) for n, p in self.inputs.items()}
        self.expected = [np.load(directory / f"output_{k}.npy")
                         for k in range(len(self.meta["outputs"]))]

    def relayc_args(self, relayc, output, threads, repeat=None):
        target = getattr(self, "built", None) or self.dir / "model.onnx"
        args = [str(relayc), "run", str(target), "--output", str(output),
                "--threads", str(threads)]
        for n, p in self.inputs.items():
            args += ["--input", f"{n}={p}"]
        if repeat:
            args += ["--warmup", "1", "--repeat", str(repeat)]
        return args


def run_relayc(model, relayc, scratch, threads, repeat=None):
    """(p50 seconds or None, outputs, stderr) of one `relayc run`; raises on failure."""
    output = scratch / f"{model.dir.name}.npz"
    output.unlink(missing_ok=True)
    done = subprocess.run(model.relayc_args(relayc, output, threads, repeat),
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr or f"exit {done.returncode}")
    seconds = None
    if repeat:
        found = re.search(r"p50 ([0-9.]+) (ns|µs|us|ms|s)\b", done.stderr)
        if not found:
            raise RuntimeError(f"no p50 in relayc's output: {done.stderr[-500:]}")
        seconds = float(found.group(1)) * UNITS[found.group(2)]
    with np.load(output) as z:
        outputs = [z[str(i)] for i in range(len(z.files))]
    return seconds, outputs


def compare(ours, theirs):
    """(max error over outputs, None or the first mismatch's description)."""
    if len(ours) != len(theirs):
        return math.inf, f"{len(ours)} outputs, ONNX Runtime has {len(theirs)}"
    worst, problem = 0.0, None
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            return math.inf, f"output {i}: shape {a.shape}, ONNX Runtime's {b.shape}"
        if not a.size:
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        same_nan = np.isnan(a64) & np.isnan(b64)
        diff = np.where(same_nan, 0.0, np.abs(a64 - b64))
        scale = max(1.0, float(np.nanmax(np.abs(b64))) if not np.isnan(b64).all() else 1.0)
        err = float(np.max(diff)) / scale if not np.isnan(diff).any() else math.inf
        if err > worst or math.isnan(err):
            worst = err
        if not err <= TOLERANCE and problem is None:
            at = np.unravel_index(int(np.nanargmax(diff)), a.shape)
            problem = (f"output {i}: error {err:.3g} at {tuple(int(x) for x in at)} (relayc "
                       f"{a64[at]:.6g}, ORT {b64[at]:.6g})")
    return worst, problem


def ort_session(path, threads):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def time_ort(session, feeds, repeat):
    session.run(None, feeds)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fmt(seconds):
    if seconds is None:
        return "—"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e3:.3f} ms"


def measure(model, relayc, scratch, threads_list, rounds):
    row = {"model": model.name, "exporter": model.exporter, "import": None, "match": None,
           "error": None, "err": None, "ops": [], "times": {}}
    if model.meta is None:
        row["error"] = model.error
        return row
    try:
        if model.meta.get("dynamic"):
            # A dynamic-batch model is built once with its symbolic dimensions (`?`, no
            # --input-shape), as its user would, and that executable runs.
            built = scratch / f"{model.dir.name}.ro"
            done = subprocess.run([str(relayc), "build", str(model.dir / "model.onnx"), "-o",
                                   str(built)], capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                raise RuntimeError(done.stderr or f"exit {done.returncode}")
            model.built = built
        _, outputs = run_relayc(model, relayc, scratch, 1)
    except subprocess.TimeoutExpired:
        row.update(error="relayc run timed out", **{"import": False})
        return row
    except RuntimeError as error:
        text = str(error)
        row["import"] = False
        row["ops"] = unsupported(text)
        row["error"] = first_error(text)
        return row
    row["import"] = True
    row["err"], problem = compare(outputs, model.expected)
    row["match"] = problem is None
    if problem:
        row["error"] = problem
    path = model.dir / "model.onnx"
    for threads in threads_list:
        try:
            session = ort_session(path, threads)
            first = time_ort(session, model.feeds, 1)
            repeat = max(3, min(200, int(0.5 / max(first, 1e-6))))
            ours, theirs = [], []
            for k in range(rounds):
                order = ("ours", "theirs") if k % 2 == 0 else ("theirs", "ours")
                for who in order:
                    if who == "ours":
                        ours.append(run_relayc(model, relayc, scratch, threads, repeat)[0])
                    else:
                        theirs.append(time_ort(session, model.feeds, repeat))
            row["times"][threads] = (statistics.median(ours), statistics.median(theirs))
        except Exception as error:  # noqa: BLE001 - a row, not a crash
            row["error"] = (row["error"] or "") + f" timing at {threads} threads failed: " \
                + first_error(str(error))
    return row


def geomean(values):
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def table(rows, threads_list, header):
    lines = [header, ""]
    cols = ["model", "exporter", "imports", "matches", "max rel. error"]
    for t in threads_list:
        cols += [f"relayc {t}t", f"ORT {t}t", f"ORT / relayc {t}t"]
    cols.append("error (first line)")
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    ratios = {t: [] for t in threads_list}
    for r in rows:
        yes = {True: "yes", False: "no", None: "—"}
        cells = [f"`{r['model']}`", r["exporter"], yes[r["import"]], yes[r["match"]],
                 "—" if r["err"] is None else f"{r['err']:.1e}"]
        for t in threads_list:
            ours, theirs = r["times"].get(t, (None, None))
            ratio = theirs / ours if ours and theirs else None
            if ratio and r["match"]:
                ratios[t].append(ratio)
            cells += [fmt(ours), fmt(theirs), "—" if ratio is None else f"{ratio:.2f}×"]
        error = r["error"] or ""
        if r["ops"]:
            error = "unsupported: " + ", ".join(r["ops"]) + (f" — {error}" if error else "")
        cells.append(error.replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for t in threads_list:
        g = geomean(ratios[t])
        text = "—" if g is None else f"{g:.2f}×"
        lines.append(f"- geometric mean of ORT / relayc at {t} thread{'s' if t > 1 else ''}, over "
                     f"the {len(ratios[t])} models that match: **{text}**")
    counts = {
        "exported": sum(r["import"] is not None for r in rows),
        "export failed": sum(r["import"] is None for r in rows),
        "import fails": sum(r["import"] is False for r in rows),
        "mismatch": sum(r["match"] is False for r in rows),
        "match": sum(bool(r["match"]) for r in rows),
    }
    lines.append("- " + ", ".join(f"{k}: {v}" for k, v in counts.items()))
    ops = {}
    for r in rows:
        for op in r["ops"]:
            ops.setdefault(op, []).append(f"{r['model']}_{r['exporter']}")
    if ops:
        lines.append("- operators relayc does not import: " + "; ".join(
            f"`{op}` ({len(models)}: {', '.join(models)})" for op, models in sorted(ops.items())))
    return "\n".join(lines) + "\n"


def version(module):
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001
        return "—"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*")
    parser.add_argument("--relayc", default=str(HERE.parent.parent / "target/release/relayc"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    threads_list = [int(t) for t in args.threads.split(",")]
    dirs = sorted(d for d in OUT.iterdir() if d.is_dir()) if OUT.exists() else []
    if args.names:
        dirs = [d for d in dirs if any(d.name.startswith(n) for n in args.names)]
    if not dirs:
        sys.exit(f"no exported models in {OUT}: run benches/exported/export.py first")
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=HERE).stdout.strip()
    except OSError:
        rev = "—"
    header = (f"Exported zoo, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
              f"CPU {cpu_name()}, {len(Path('/proc/cpuinfo').read_text().split('processor')) - 1}"
              f" logical cores, ISA {isa()}; relayc at {rev}; onnxruntime "
              f"{version('onnxruntime')}, onnx {version('onnx')}; {args.rounds} rounds; "
              f"tolerance {TOLERANCE} (max |diff| / max(1, max |ORT|))")
    print(header, file=sys.stderr)
    rows = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="relayc-exported-") as scratch:
        for d in dirs:
            t0 = time.time()
            model = Model(d)
            row = measure(model, args.relayc, Path(scratch), threads_list, args.rounds)
            rows.append(row)
            timing = " ".join(f"{t}t {fmt(a)}/{fmt(b)}" for t, (a, b) in row["times"].items())
            status = ("export failed" if row["import"] is None else
                      "import failed" if not row["import"] else
                      "match" if row["match"] else "MISMATCH")
            print(f"{d.name:32} {status:13} {timing}  ({time.time() - t0:.0f} s) "
                  f"{', '.join(row['ops'])} {row['error'] or ''}", file=sys.stderr, flush=True)
    text = table(rows, threads_list, header)
    text += f"- runner time: {time.time() - started:.0f} s\n"
    print(text)
    (OUT / "results.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
