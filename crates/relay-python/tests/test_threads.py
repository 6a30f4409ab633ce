"""One Executable shared by VMs on many threads, and the GIL released while running."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import relayc
import relay_programs as P
from support import EXAMPLES, adt_to_list, scalar, seeded


def mlp_inputs(seed):
    rng = np.random.default_rng(seed)
    return {
        "x": seeded(rng, (1, 784)),
        "w1": seeded(rng, (512, 784)), "b1": seeded(rng, (512,)),
        "w2": seeded(rng, (512, 512)), "b2": seeded(rng, (512,)),
        "w3": seeded(rng, (10, 512)), "b3": seeded(rng, (10,)),
    }


def test_eight_vms_on_eight_threads_share_one_executable():
    exe = relayc.compile(EXAMPLES / "mlp.relay")
    adt = relayc.compile(P.ADT)
    seeds = list(range(8))
    inputs = {s: mlp_inputs(s) for s in seeds}
    # Single-threaded reference results (kernel threads 1 everywhere: the same arithmetic).
    want = {s: relayc.VM(exe, threads=1)(**inputs[s]).copy() for s in seeds}
    # Different inputs give different outputs, so a mix-up would show.
    assert not np.array_equal(want[0], want[1])

    barrier = threading.Barrier(len(seeds))

    def work(seed):
        vm = relayc.VM(exe, threads=1)
        adt_vm = relayc.VM(adt)
        barrier.wait(timeout=60)
        outs = []
        for k in range(5):
            outs.append(vm(**inputs[seed]))
            xs, total, _ = adt_vm(seed * 10 + k)
            assert scalar(total) == sum(range(seed * 10 + k + 1))
            assert len(adt_to_list(xs)) == seed * 10 + k
        return seed, outs, threading.get_ident()

    with ThreadPoolExecutor(max_workers=len(seeds)) as pool:
        results = list(pool.map(work, seeds))

    assert len({ident for _, _, ident in results}) == len(seeds)
    for seed, outs, _ in results:
        for out in outs:
            np.testing.assert_array_equal(out, want[seed])


def calibrated_count(exe, seconds):
    """An iteration count for which COUNT runs about `seconds`."""
    vm = relayc.VM(exe)
    n = 100_000
    while True:
        start = time.perf_counter()
        vm(n)
        elapsed = time.perf_counter() - start
        if elapsed > 0.05:
            return max(n, int(n * seconds / elapsed))
        n *= 4


class Counter:
    """A pure-Python thread counting as fast as it can while it holds the GIL."""

    def __init__(self):
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.count += 1

    def __enter__(self):
        self._thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def rate(self, seconds=0.2):
        """Counts per second while the calling thread sleeps (the GIL free for the counter)."""
        before, start = self.count, time.perf_counter()
        time.sleep(seconds)
        return (self.count - before) / (time.perf_counter() - start)

    def during(self, action):
        """(counts, seconds) while `action()` runs on the calling thread, and its result."""
        before, start = self.count, time.perf_counter()
        result = action()
        return self.count - before, time.perf_counter() - start, result


def assert_counter_ran(counted, elapsed, rate, what):
    # With the GIL held throughout, the counter gets at most a switch interval (5 ms) at the
    # start; released, it counts at about its free rate (2 cores: it has one to itself).
    expected = rate * elapsed
    assert counted > 0.2 * expected, (
        f"the counter advanced {counted} times during {elapsed:.2f} s of {what}, "
        f"{expected:.0f} expected at its free rate of {rate:.0f}/s: the GIL was held"
    )


def test_the_gil_is_released_while_running():
    exe = relayc.compile(P.COUNT)
    n = calibrated_count(exe, 1.0)
    vm = relayc.VM(exe)
    with Counter() as counter:
        rate = counter.rate()
        counted, elapsed, result = counter.during(lambda: vm(n))
    assert scalar(result) == n
    assert elapsed > 0.3, f"the run was too short to tell ({elapsed:.3f} s)"
    assert_counter_ran(counted, elapsed, rate, "a run")


def test_the_gil_is_released_while_compiling():
    # The MLP's kernels (three dense layers, softmax) take a while to compile; compile it
    # until half a second has passed. Between the calls the counter may get the GIL for a
    # switch interval; that is far below the threshold.
    def compile_for_a_while():
        start, count = time.perf_counter(), 0
        while time.perf_counter() - start < 0.5 or count < 2:
            relayc.compile(EXAMPLES / "mlp.relay", threads=1)
            count += 1
        return count

    with Counter() as counter:
        rate = counter.rate()
        counted, elapsed, count = counter.during(compile_for_a_while)
    assert count >= 2
    assert_counter_ran(counted, elapsed, rate, f"{count} compiles")


def test_vms_run_in_parallel_threads_while_the_main_thread_runs_too():
    exe = relayc.compile(P.COUNT)
    n = calibrated_count(exe, 0.3)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(lambda k=k: scalar(relayc.VM(exe)(n + k))) for k in range(4)]
        mine = scalar(relayc.VM(exe)(n))
        assert [f.result(timeout=300) for f in futures] == [n + k for k in range(4)]
    assert mine == n


def test_one_vm_used_from_two_threads_at_once_is_an_error():
    exe = relayc.compile(P.COUNT)
    n = calibrated_count(exe, 2.0)
    vm = relayc.VM(exe)
    result = {}

    def long_run():
        result["value"] = scalar(vm(n))

    thread = threading.Thread(target=long_run)
    thread.start()
    try:
        time.sleep(0.3)
        assert thread.is_alive(), "the long run finished too soon"
        with pytest.raises(relayc.Error):
            vm(5)
    finally:
        thread.join()
    assert result["value"] == n
    # Free again afterwards.
    assert scalar(vm(5)) == 5
