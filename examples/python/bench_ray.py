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

import logging
import os
import sys

from common import bench_arguments, free_port, prepare, report, run_load


def main() -> int:
    """Measure each replica count, print the table; 0 if every response was right."""
    args = bench_arguments(__doc__, "replica")
    ro, payloads, expected = prepare(args)

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
        for replicas in args.counts:
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
    return report("replica", rows, args.concurrency)

if __name__ == "__main__":
    sys.exit(main())
