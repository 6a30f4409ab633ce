"""Measure serve_http.py: throughput and p50/p99 latency for each worker count.

For each worker count it starts `serve_http.py` as a separate process on 127.0.0.1 (a free
port), waits for `GET /healthz`, sends a warm-up and then a bounded number of `POST /predict`
requests (at most --requests, for at most --time-limit seconds) from --concurrency client
threads, checks every response against a direct `relayc.VM(...).run(...)` call, and stops the
server. It exits with status 1 if any response failed or differed.

    python bench_http.py /tmp/mnist.ro --workers 1 2 --requests 2000

Without the .ro argument it uses /tmp/mnist.ro, building it from the repository's MNIST ONNX
model with `relayc build` first if it does not exist.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from common import (
    DEFAULT_RO,
    LoadResult,
    encode_npy,
    ensure_executable,
    free_port,
    print_table,
    reference_outputs,
    run_load,
    sample_inputs,
    wait_until_ready,
)

HERE = Path(__file__).resolve().parent


def bench_workers(
    ro: Path, workers: int, args: argparse.Namespace, payloads, expected
) -> LoadResult:
    """Start serve_http.py with `workers` workers, load it, stop it, return the measurements."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        str(HERE / "serve_http.py"),
        str(ro),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--vm-threads",
        str(args.vm_threads),
    ]
    server = subprocess.Popen(command)
    try:
        wait_until_ready(f"{base}/healthz", timeout=60, alive=lambda: server.poll() is None)
        load = dict(concurrency=args.concurrency, time_limit=args.time_limit)
        run_load(f"{base}/predict", payloads, expected, requests=args.warmup, **load)
        return run_load(f"{base}/predict", payloads, expected, requests=args.requests, **load)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> int:
    """Measure each worker count, print the table; 0 if every response was right."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "ro",
        nargs="?",
        type=Path,
        default=DEFAULT_RO,
        help=f"the MNIST executable file (default {DEFAULT_RO}, built if missing)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1, 2],
        help="worker counts to measure (default 1 2)",
    )
    parser.add_argument("--requests", type=int, default=2000, help="requests per worker count")
    parser.add_argument("--warmup", type=int, default=100, help="untimed requests first")
    parser.add_argument("--concurrency", type=int, default=4, help="client connections")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        help="seconds at most per worker count (the run stops by itself)",
    )
    parser.add_argument("--vm-threads", type=int, default=1, help="kernel threads per VM")
    parser.add_argument("--inputs", type=int, default=16, help="distinct inputs to cycle through")
    args = parser.parse_args()

    ro = ensure_executable(args.ro)
    inputs = sample_inputs(args.inputs)
    payloads = [encode_npy(x) for x in inputs]
    expected = reference_outputs(ro, inputs, args.vm_threads)

    rows = []
    for workers in args.workers:
        result = bench_workers(ro, workers, args, payloads, expected)
        rows.append((workers, result))
        if result.first_failure:
            print(f"workers={workers}: first failure: {result.first_failure}", file=sys.stderr)
    print_table("workers", rows, args.concurrency)

    if all(result.ok for _, result in rows):
        total = sum(result.completed for _, result in rows)
        print(f"\nall {total} responses equal relayc.VM(...).run(...) on the same inputs")
        return 0
    print("\nsome requests failed or differed from relayc.VM(...).run(...)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
