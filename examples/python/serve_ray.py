"""Serve a relayc executable with Ray Serve.

Each replica of the `RelaycModel` deployment loads the `.ro` file once and holds one
`relayc.VM` over it, run on one thread of its own (a VM is used by one thread at a time; the
GIL is released while it runs, so the replica's event loop keeps reading requests meanwhile).
Ray Serve's HTTP proxy spreads the requests over the replicas, on one machine or on a Ray
cluster of many.

    POST /  body: one input tensor as .npy bytes  ->  200, the output tensor as .npy bytes
            (400 with the error text if the input is not .npy or has the wrong type)

Run it with Ray Serve's command line (the keys after the import path are `app_builder`'s
arguments; `ro` must name a file that exists on every node that runs a replica):

    serve run serve_ray:app_builder ro=/tmp/mnist.ro num_replicas=2

or from Python, as bench_ray.py does:

    serve.run(app_builder({"ro": "/tmp/mnist.ro", "num_replicas": "2"}))
"""

from __future__ import annotations

import asyncio
import io
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import relayc
from ray import serve
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

NPY_MEDIA_TYPE = "application/x-npy"


@serve.deployment(ray_actor_options={"num_cpus": 1})
class RelaycModel:
    """A Ray Serve replica: one loaded executable and one VM over it."""

    def __init__(self, ro_path: str, vm_threads: int | None = 1) -> None:
        self._vm = relayc.VM(relayc.load(ro_path), threads=vm_threads)
        # The VM runs on this one thread only, off the replica's event loop.
        self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relayc-vm")

    def predict(self, body: bytes) -> bytes:
        """Decode one `.npy` input, run the VM on it and return the output as `.npy` bytes."""
        array = np.lib.format.read_array(io.BytesIO(body), allow_pickle=False)
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(self._vm.run(array)), allow_pickle=False)
        return buffer.getvalue()

    async def __call__(self, request: Request) -> Response:
        body = await request.body()
        loop = asyncio.get_running_loop()
        try:
            output = await loop.run_in_executor(self._runner, self.predict, body)
        except (ValueError, relayc.RunError) as error:  # not .npy / wrong dtype or shape
            return PlainTextResponse(
                getattr(error, "rendered", None) or str(error), status_code=400
            )
        return Response(output, media_type=NPY_MEDIA_TYPE)


def app_builder(args: dict[str, str]) -> serve.Application:
    """Build the application from `serve run`/`serve deploy` arguments (all strings).

    ro: the executable file (required); vm_threads: kernel threads per VM (default 1; 0 = all
    cores); num_replicas: a count, or "auto" for Ray Serve's autoscaling defaults (default: the
    deployment's settings, which a config file's `deployments` section overrides).
    """
    model = RelaycModel
    if "num_replicas" in args:
        replicas = args["num_replicas"]
        model = model.options(num_replicas=replicas if replicas == "auto" else int(replicas))
    return model.bind(args["ro"], int(args.get("vm_threads", 1)))
