"""Ctrl-C: KeyboardInterrupt stops a run that would never end, and the VM runs again afterwards.

Each case runs in a child Python process, so that a binding that ignores the interrupt costs a
timeout here rather than a hung test session.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import relay_programs as P

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, threading, time, _thread
    import numpy as np
    import relayc

    # A process started with SIGINT ignored (a background job of a non-interactive shell, as
    # CI may start it) would get no KeyboardInterrupt at all: install Python's own handler, as
    # an interactive session has it.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    how = sys.argv[1]
    exe = relayc.compile({spin!r})
    vm = relayc.VM(exe)
    # A terminating run first: the loop stops at once for a negative start.
    assert int(vm(-5)) == -5

    def interrupt():
        if how == "interrupt_main":
            _thread.interrupt_main()
        elif how == "raise_signal":
            signal.raise_signal(signal.SIGINT)  # from the timer thread: delivered to the process
        else:
            os.kill(os.getpid(), signal.SIGINT)

    for attempt in range(2):
        timer = threading.Timer(0.2, interrupt)
        start = time.perf_counter()
        timer.start()
        try:
            vm(0)
        except KeyboardInterrupt:
            elapsed = time.perf_counter() - start
        else:
            print("the run returned", flush=True)
            sys.exit(3)
        finally:
            timer.join()
        print(f"interrupted after {{elapsed:.3f}} s", flush=True)
        if elapsed > 1.2:
            sys.exit(4)
        # The same VM runs again, and a fresh one too.
        assert int(vm(-1)) == -1
        assert int(relayc.VM(exe)(-2)) == -2

    print("ok", flush=True)
    """
).format(spin=P.SPIN)


@pytest.mark.parametrize("how", ["interrupt_main", "raise_signal", "kill"])
def test_keyboard_interrupt_stops_an_endless_run(how, tmp_path):
    script = tmp_path / "spin.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        proc = subprocess.run(
            [sys.executable, str(script), how],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(
            f"the run was not interrupted ({how}): the child was killed after 60 s\n"
            f"stdout:\n{err.stdout}\nstderr:\n{err.stderr}"
        )
    assert proc.returncode == 0, (
        f"exit {proc.returncode} ({how})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    assert proc.stdout.count("interrupted after") == 2, proc.stdout
    assert proc.stdout.rstrip().endswith("ok"), proc.stdout
