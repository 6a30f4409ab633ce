"""Serve a relayc executable over HTTP with the standard library only.

One `relayc.Executable` is loaded once and shared; a `ThreadPoolExecutor` of N worker threads
runs the requests, each worker thread with its own `relayc.VM` over that executable (a VM is
used by one thread at a time; the GIL is released while it runs, so the workers run in
parallel). `http.server.ThreadingHTTPServer` reads and writes the HTTP messages.

    POST /predict   body: one input tensor as .npy bytes  ->  200, the output tensor as .npy bytes
                    (400 with the error text if the input is not .npy or has the wrong type)
    GET  /healthz   ->  200 "ok" (for a load balancer's health check)

    python serve_http.py /tmp/mnist.ro --workers 2 --port 8000

It listens on 127.0.0.1 unless --host says otherwise. To serve past one machine, run one such
process per machine (or per core group) behind a load balancer; see docs/serving.md.
"""

from __future__ import annotations

import argparse
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import relayc

from common import NPY_MEDIA_TYPE, decode_npy, encode_npy


class ModelServer(ThreadingHTTPServer):
    """An HTTP server whose requests run on a pool of worker threads, one VM per thread."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        executable: relayc.Executable,
        workers: int,
        vm_threads: int | None,
    ) -> None:
        super().__init__(address, PredictHandler)
        self.executable = executable
        self.vm_threads = vm_threads
        self._local = threading.local()
        self.pool = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="relayc-vm", initializer=self._start_worker
        )

    def _start_worker(self) -> None:
        """Give the calling worker thread its own VM over the shared executable."""
        self._local.vm = relayc.VM(self.executable, threads=self.vm_threads)

    def _predict_on_worker(self, body: bytes) -> bytes:
        """Decode an input, run the worker thread's VM on it and encode the output."""
        return encode_npy(self._local.vm.run(decode_npy(body)))

    def predict(self, body: bytes) -> bytes:
        """Run one request on a worker thread and wait for its output (.npy bytes)."""
        return self.pool.submit(self._predict_on_worker, body).result()

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=True, cancel_futures=True)


class PredictHandler(BaseHTTPRequestHandler):
    """`POST /predict` runs the model; `GET /healthz` says the server is up."""

    protocol_version = "HTTP/1.1"  # keep connections open between requests
    disable_nagle_algorithm = True  # headers and body go out as two writes
    server: ModelServer

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._reply(HTTPStatus.OK, b"ok\n", "text/plain")
        else:
            self._reply(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/predict":
            self._reply(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
            return
        try:
            output = self.server.predict(body)
        except (ValueError, relayc.RunError) as error:  # not .npy / wrong dtype or shape
            message = getattr(error, "rendered", None) or str(error)
            self._reply(HTTPStatus.BAD_REQUEST, message.encode() + b"\n", "text/plain")
            return
        self._reply(HTTPStatus.OK, output, NPY_MEDIA_TYPE)

    def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Log only failed requests (a line per success would cost more than the model)."""
        if isinstance(code, int) and code >= 400:
            super().log_request(code, size)


def main() -> None:
    """Parse the command line and serve until interrupted (SIGINT or SIGTERM)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ro", help="the executable file (.ro) to serve")
    parser.add_argument("--workers", type=int, default=2, help="worker threads, one VM each")
    parser.add_argument(
        "--vm-threads", type=int, default=1, help="kernel threads per VM (0: all cores; default 1)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop like Ctrl-C
    executable = relayc.load(args.ro)
    with ModelServer((args.host, args.port), executable, args.workers, args.vm_threads) as server:
        print(
            f"serving {args.ro} on http://{args.host}:{server.server_port}/predict "
            f"with {args.workers} workers",
            flush=True,
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
