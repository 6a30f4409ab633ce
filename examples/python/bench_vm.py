"""Measure the model alone: VM runs per second on 1 and 2 threads, one VM per thread.

The baseline for the servers' figures: no HTTP, no `.npy` coding, just `vm.run(x)` in a loop
on each thread, every VM over one shared executable. Each thread checks its last output
against a run on the main thread.

    python bench_vm.py /tmp/mnist.ro --threads 1 2 --runs 20000
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import numpy as np
import relayc

from common import DEFAULT_RO, MNIST_INPUT, ensure_executable


def runs_per_second(exe: relayc.Executable, x: np.ndarray, threads: int, runs: int) -> float:
    """Run `runs` calls on each of `threads` threads, each with its own VM; return calls/s."""
    expected = relayc.VM(exe, threads=1).run(x).copy()
    vms = [relayc.VM(exe, threads=1) for _ in range(threads)]
    outputs: list[np.ndarray | None] = [None] * threads

    def work(i: int) -> None:
        for _ in range(runs):
            outputs[i] = vms[i].run(x)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - start
    assert all(np.array_equal(out, expected) for out in outputs), "a thread's output differs"
    return threads * runs / elapsed


def main() -> None:
    """Print the calls per second and the time per call for each thread count."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ro", nargs="?", type=Path, default=DEFAULT_RO)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=20000, help="calls per thread")
    args = parser.parse_args()

    exe = relayc.load(str(ensure_executable(args.ro)))
    image = np.load(MNIST_INPUT)
    x = relayc.empty(image.shape, str(image.dtype))  # 64-byte aligned: read in place
    x[...] = image
    runs_per_second(exe, x, 1, args.runs // 10)  # warm-up
    for threads in args.threads:
        rate = runs_per_second(exe, x, threads, args.runs)
        print(f"{threads} threads: {rate:9.0f} runs/s  ({threads / rate * 1e6:6.1f} us per run)")


if __name__ == "__main__":
    main()
