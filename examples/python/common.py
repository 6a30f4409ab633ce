"""Shared pieces of the serving examples: the model file, its inputs, and a load generator.

The servers (`serve_http.py`, `serve_ray.py`) take a POST whose body is one input tensor as
`.npy` bytes and answer with the output tensor as `.npy` bytes. The benchmark drivers
(`bench_http.py`, `bench_ray.py`) use this module to build the MNIST executable if it is
missing, compute the expected outputs with a direct `relayc.VM(...).run(...)` call, and send a
bounded number of requests (bounded in count and in time) from a few client threads, checking
every response against the expected output.
"""

from __future__ import annotations

import argparse
import http.client
import io
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
MNIST_ONNX = REPO / "crates" / "relay-onnx" / "tests" / "data" / "mnist.onnx"
MNIST_INPUT = REPO / "crates" / "relay-onnx" / "tests" / "data" / "mnist_input.npy"
DEFAULT_RO = Path("/tmp/mnist.ro")
NPY_MEDIA_TYPE = "application/x-npy"


def encode_npy(array: np.ndarray) -> bytes:
    """Serialize one array to `.npy` bytes (what `np.save` writes)."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def decode_npy(data: bytes) -> np.ndarray:
    """Parse `.npy` bytes into an array; raise ValueError if they are not one `.npy` array."""
    return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)


def find_relayc() -> str | None:
    """The relayc command line: $RELAYC, the repository's release build, or `relayc` on PATH."""
    candidates = [os.environ.get("RELAYC"), str(REPO / "target" / "release" / "relayc")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("relayc")


def ensure_executable(path: Path) -> Path:
    """Return `path`, first building the MNIST CNN into it if the file does not exist.

    It runs `relayc build crates/relay-onnx/tests/data/mnist.onnx -o PATH`; without the
    command line it compiles the same ONNX file with the Python package instead.
    """
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    relayc_cli = find_relayc()
    if relayc_cli is not None:
        print(f"building {path} with {relayc_cli}", flush=True)
        subprocess.run([relayc_cli, "build", str(MNIST_ONNX), "-o", str(path)], check=True)
    else:
        import relayc

        print(f"building {path} with relayc.compile (no relayc command line found)", flush=True)
        relayc.compile(MNIST_ONNX).save(str(path))
    return path


def sample_inputs(count: int, seed: int = 0) -> list[np.ndarray]:
    """`count` MNIST inputs: the repository's test image, then seeded random images like it."""
    image = np.load(MNIST_INPUT)
    rng = np.random.default_rng(seed)
    extra = [rng.random(image.shape, dtype=np.float32) for _ in range(count - 1)]
    return [image, *extra][:count]


def reference_outputs(
    ro_path: Path, inputs: list[np.ndarray], vm_threads: int | None
) -> list[np.ndarray]:
    """Run each input through a direct `relayc.VM(...).run(...)`: the expected outputs."""
    import relayc

    vm = relayc.VM(relayc.load(str(ro_path)), threads=vm_threads)
    return [np.array(vm.run(x), copy=True) for x in inputs]


@dataclass
class LoadResult:
    """What one load run measured: completed requests, failures, wall time and latencies."""

    completed: int = 0
    errors: int = 0
    mismatches: int = 0
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    first_failure: str | None = None

    @property
    def throughput(self) -> float:
        """Completed requests per second of wall time."""
        return self.completed / self.elapsed if self.elapsed > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        """The q-th percentile of the request latencies, in milliseconds."""
        return float(np.percentile(self.latencies, q)) * 1e3 if self.latencies else float("nan")

    @property
    def ok(self) -> bool:
        """True when every request completed and every response equalled the reference."""
        return self.completed > 0 and self.errors == 0 and self.mismatches == 0


def run_load(
    url: str,
    payloads: list[bytes],
    expected: list[np.ndarray],
    *,
    requests: int,
    concurrency: int,
    time_limit: float,
    timeout: float = 30.0,
) -> LoadResult:
    """POST up to `requests` payloads to `url` from `concurrency` threads in `time_limit` s.

    Request i sends `payloads[i % len(payloads)]` and its response must decode to an array equal
    (same dtype, shape and values) to `expected[i % len(payloads)]`. Each thread keeps one
    HTTP/1.1 connection open. The run stops when `requests` have been sent or the time is up.
    """
    target = urllib.parse.urlsplit(url)
    result = LoadResult()
    lock = threading.Lock()
    next_index = 0
    start = time.perf_counter()
    deadline = start + time_limit

    def take_index() -> int | None:
        nonlocal next_index
        with lock:
            if next_index >= requests or time.perf_counter() >= deadline:
                return None
            next_index += 1
            return next_index - 1

    def record(latency: float | None, failure: str | None, mismatch: bool = False) -> None:
        with lock:
            if failure is None:
                result.completed += 1
                result.latencies.append(latency)
                return
            if mismatch:
                result.mismatches += 1
            else:
                result.errors += 1
            result.first_failure = result.first_failure or failure

    def client() -> None:
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=timeout)
        headers = {"Content-Type": NPY_MEDIA_TYPE, "Accept": NPY_MEDIA_TYPE}
        try:
            while (index := take_index()) is not None:
                k = index % len(payloads)
                sent = time.perf_counter()
                try:
                    connection.request(
                        "POST", target.path or "/", body=payloads[k], headers=headers
                    )
                    response = connection.getresponse()
                    body = response.read()
                except (OSError, http.client.HTTPException) as error:
                    connection.close()  # reconnects on the next request
                    record(None, f"request {index}: {error!r}")
                    continue
                latency = time.perf_counter() - sent
                if response.status != 200:
                    record(None, f"request {index}: HTTP {response.status}: {body[:200]!r}")
                    continue
                try:
                    output = decode_npy(body)
                except ValueError as error:
                    record(None, f"request {index}: the response is not .npy: {error}")
                    continue
                want = expected[k]
                if output.dtype != want.dtype or not np.array_equal(output, want):
                    record(
                        None, f"request {index}: got {output!r}, expected {want!r}", mismatch=True
                    )
                    continue
                record(latency, None)
        finally:
            connection.close()

    threads = [threading.Thread(target=client, name=f"client-{i}") for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.elapsed = time.perf_counter() - start
    return result


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the server binds it right after)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_ready(url: str, timeout: float, alive=lambda: True) -> None:
    """Poll `url` with GET until it answers 200, for at most `timeout` seconds.

    `alive` is called between attempts; when it returns False (the server process died) this
    gives up at once. Raises TimeoutError or RuntimeError.
    """
    target = urllib.parse.urlsplit(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the server exited before {url} answered")
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=2)
        try:
            connection.request("GET", target.path or "/")
            response = connection.getresponse()
            response.read()  # closing with unread data would reset the connection
            if response.status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        finally:
            connection.close()
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def print_table(kind: str, rows: list[tuple[int, LoadResult]], concurrency: int) -> None:
    """Print one line per worker/replica count: requests, failures, throughput, p50 and p99."""
    print()
    print(
        f"{kind:>8}  {'requests':>8}  {'failed':>6}  {'req/s':>8}  {'p50 ms':>7}  {'p99 ms':>7}"
        f"   ({concurrency} client connections)"
    )
    for count, r in rows:
        print(
            f"{count:>8}  {r.completed:>8}  {r.errors + r.mismatches:>6}  {r.throughput:>8.1f}  "
            f"{r.percentile_ms(50):>7.2f}  {r.percentile_ms(99):>7.2f}"
        )


def bench_arguments(doc: str, unit: str) -> argparse.Namespace:
    """The options of a driver measuring `unit`s ("worker", "replica"): the executable, the
    counts to measure (`--workers`, `--replicas`) and the load."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(
        "ro",
        nargs="?",
        type=Path,
        default=DEFAULT_RO,
        help=f"the MNIST executable file (default {DEFAULT_RO}, built if missing)",
    )
    parser.add_argument(
        f"--{unit}s",
        dest="counts",
        type=int,
        nargs="+",
        default=[1, 2],
        help=f"{unit} counts to measure (default 1 2)",
    )
    parser.add_argument("--requests", type=int, default=2000, help=f"requests per {unit} count")
    parser.add_argument("--warmup", type=int, default=100, help="untimed requests first")
    parser.add_argument("--concurrency", type=int, default=4, help="client connections")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        help=f"seconds at most per {unit} count (the run stops by itself)",
    )
    parser.add_argument("--vm-threads", type=int, default=1, help="kernel threads per VM")
    parser.add_argument("--inputs", type=int, default=16, help="distinct inputs to cycle through")
    return parser.parse_args()


def prepare(args: argparse.Namespace) -> tuple[Path, list[bytes], list[np.ndarray]]:
    """The executable (built if missing), the request bodies and the expected outputs."""
    ro = ensure_executable(args.ro).resolve()
    inputs = sample_inputs(args.inputs)
    payloads = [encode_npy(x) for x in inputs]
    return ro, payloads, reference_outputs(ro, inputs, args.vm_threads)


def report(unit: str, rows: list[tuple[int, LoadResult]], concurrency: int) -> int:
    """Prints the table and the verdict: 0 if every response was right."""
    print_table(f"{unit}s", rows, concurrency)
    if rows and all(result.ok for _, result in rows):
        total = sum(result.completed for _, result in rows)
        print(f"\nall {total} responses equal relayc.VM(...).run(...) on the same inputs")
        return 0
    print("\nsome requests failed or differed from relayc.VM(...).run(...)", file=sys.stderr)
    return 1
