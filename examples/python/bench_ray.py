"""Measure serve_ray.py: throughput and p50/p99 latency for each replica count.

It starts a single-node Ray instance on this machine, Ray Serve's HTTP proxy on 127.0.0.1 (a
free port), and for each replica count deploys `serve_ray.app_builder` with that many replicas,
sends a warm-up and then a bounded number of requests (at most --requests, for at most
--time-limit seconds) from --concurrency client threads, checks every response against a
direct `relayc.VM(...).run(...)` call, and deletes the application. Ray is shut down at the
end. It exits with status 1 if any response failed or differed.

    python bench_ray.py /tmp/mnist.ro --replicas 1 2 --requests 2000

Without the .ro argument it uses /tmp/mnist.ro, building it from the repository's MNIST ONNX
model with `relayc build` first if it does not exist. Run it by hand: Ray is not part of CI.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from common import (
    DEFAULT_RO,
    encode_npy,
    ensure_executable,
    free_port,
    print_table,
    reference_outputs,
    run_load,
    sample_inputs,
)


def main() -> int:
    """Measure each replica count, print the table; 0 if every response was right."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "ro",
        nargs="?",
        type=Path,
        default=DEFAULT_RO,
        help=f"the MNIST executable file (default {DEFAULT_RO}, built if missing)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        nargs="+",
        default=[1, 2],
        help="replica counts to measure (default 1 2)",
    )
    parser.add_argument("--requests", type=int, default=2000, help="requests per replica count")
    parser.add_argument("--warmup", type=int, default=100, help="untimed requests first")
    parser.add_argument("--concurrency", type=int, default=4, help="client connections")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        help="seconds at most per replica count (the run stops by itself)",
    )
    parser.add_argument("--vm-threads", type=int, default=1, help="kernel threads per VM")
    parser.add_argument("--inputs", type=int, default=16, help="distinct inputs to cycle through")
    args = parser.parse_args()

    ro = ensure_executable(args.ro).resolve()
    inputs = sample_inputs(args.inputs)
    payloads = [encode_npy(x) for x in inputs]
    expected = reference_outputs(ro, inputs, args.vm_threads)

    # A single-node Ray takes the loopback address as its node address (what Ray does on macOS
    # and Windows), so that its own servers listen on 127.0.0.1 only. Read when ray is imported.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray
    from ray import serve

    from serve_ray import app_builder

    port = free_port()
    url = f"http://127.0.0.1:{port}/predict"
    quiet = {"enable_access_log": False, "log_level": "WARNING"}
    ray.init(include_dashboard=False, logging_level=logging.WARNING)
    logging.getLogger("ray.serve").setLevel(logging.WARNING)
    rows = []
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config=quiet)
        cpus = ray.cluster_resources().get("CPU", 0)
        for replicas in args.replicas:
            if replicas > cpus:  # each replica asks for one CPU; Serve would wait for ever
                print(f"skipping {replicas} replicas: Ray has {cpus:g} CPUs", file=sys.stderr)
                continue
            app = app_builder(
                {"ro": str(ro), "num_replicas": str(replicas), "vm_threads": str(args.vm_threads)}
            )
            serve.run(app, name="mnist", route_prefix="/predict", logging_config=quiet)
            load = dict(concurrency=args.concurrency, time_limit=args.time_limit)
            run_load(url, payloads, expected, requests=args.warmup, **load)
            result = run_load(url, payloads, expected, requests=args.requests, **load)
            serve.delete("mnist")
            rows.append((replicas, result))
            if result.first_failure:
                print(
                    f"replicas={replicas}: first failure: {result.first_failure}", file=sys.stderr
                )
    finally:
        serve.shutdown()
        ray.shutdown()
    print_table("replicas", rows, args.concurrency)

    if rows and all(result.ok for _, result in rows):
        total = sum(result.completed for _, result in rows)
        print(f"\nall {total} responses equal relayc.VM(...).run(...) on the same inputs")
        return 0
    print("\nsome requests failed or differed from relayc.VM(...).run(...)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
