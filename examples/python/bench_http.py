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
    LoadResult,
    bench_arguments,
    free_port,
    prepare,
    report,
    run_load,
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
    args = bench_arguments(__doc__, "worker")
    ro, payloads, expected = prepare(args)

    rows = []
    for workers in args.counts:
        result = bench_workers(ro, workers, args, payloads, expected)
        rows.append((workers, result))
        if result.first_failure:
            print(f"workers={workers}: first failure: {result.first_failure}", file=sys.stderr)
    return report("worker", rows, args.concurrency)

if __name__ == "__main__":
    sys.exit(main())
