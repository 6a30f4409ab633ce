"""What the peer scripts (kernels.py, vm.py) share: one thread for every BLAS or OpenMP pool,
the timing loop, and the line format `benches/run.sh` reads.

Import it before numpy: BLAS reads the thread variables when it loads. (ONNX Runtime's own
intra-op pool is sized by its session options.)
"""

import os
import time

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"


def median_time(fn, min_seconds):
    """The median wall time of one call of `fn`, in seconds, over at least `min_seconds`."""
    for _ in range(3):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < 11 or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 10000:
            break
    times.sort()
    return times[len(times) // 2]


def report(workload, peer, seconds):
    """Prints `PEER <workload> <peer> <median seconds>` for benches/run.sh."""
    print(f"PEER {workload} {peer} {seconds:.9e}", flush=True)
