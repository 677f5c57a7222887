"""A stand-in for the AWS Lambda Runtime API on 127.0.0.1, as documented
(https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html): it starts a
function's `bootstrap` the way Lambda does, hands it events through
`GET /2018-06-01/runtime/invocation/next`, takes the answers of
`POST .../invocation/{id}/response` and `.../invocation/{id}/error`, and
`POST .../init/error`, and timestamps every step.

Used by the benchmarks (scripts/bench), with Python's standard library only.
The tests have the same stand-in in Rust (testkit/src/runtime_api.rs), inside
the test binary beside their keys and tables; this one measures from outside.
"""

import http.server
import itertools
import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time

PREFIX = "/2018-06-01/runtime"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:plant-store"


class Invocation:
    def __init__(self, request_id, event):
        self.request_id = request_id
        self.event = event
        self.handed_out = None  # when /next returned it
        self.answered = None  # when its /response or /error arrived
        self.response = None
        self.error = None
        self.done = threading.Event()


class RuntimeApi:
    """One execution environment: a server on a free port of 127.0.0.1 and,
    once `start_function` is called, the function's process."""

    def __init__(self):
        self.pending = queue.Queue()
        self.invocations = {}
        self.init_error = None
        self.first_next = None  # when the function first asked for work
        self.next_waiting = threading.Event()
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.process = None
        self.started = None
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                # Headers and body go out as separate writes: without this,
                # Nagle's algorithm holds the body until the function's
                # delayed ACK (~40 ms), a stall that is the harness's, not
                # the function's.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self):
                if self.path != f"{PREFIX}/invocation/next":
                    return self.answer(404, {"errorMessage": "not found"})
                api.note_next()
                invocation = api.pending.get()
                if invocation is None:  # shutting down
                    return self.answer(410, {})
                with api.lock:
                    api.in_flight += 1
                    api.max_in_flight = max(api.max_in_flight, api.in_flight)
                invocation.handed_out = time.perf_counter()
                deadline_ms = int(time.time() * 1000) + 10_000
                body = invocation.event
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Lambda-Runtime-Aws-Request-Id", invocation.request_id)
                self.send_header("Lambda-Runtime-Deadline-Ms", str(deadline_ms))
                self.send_header("Lambda-Runtime-Invoked-Function-Arn", FUNCTION_ARN)
                self.send_header(
                    "Lambda-Runtime-Trace-Id",
                    f"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
                )
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                now = time.perf_counter()
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else self.read_chunked()
                parts = self.path[len(PREFIX) :].strip("/").split("/")
                if parts == ["init", "error"]:
                    api.init_error = body
                    api.next_waiting.set()  # nothing more will come
                    return self.answer(202, {"status": "OK"})
                if len(parts) == 3 and parts[0] == "invocation" and parts[2] in ("response", "error"):
                    invocation = api.invocations.get(parts[1])
                    if invocation is None:
                        return self.answer(400, {"errorMessage": "unknown request id"})
                    invocation.answered = now
                    if parts[2] == "response":
                        invocation.response = body
                    else:
                        invocation.error = body
                    with api.lock:
                        api.in_flight -= 1
                    invocation.done.set()
                    return self.answer(202, {"status": "OK"})
                return self.answer(404, {"errorMessage": "not found"})

            def read_chunked(self):
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    return b""
                body = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return body
                    body += self.rfile.read(size)
                    self.rfile.readline()

            def answer(self, status, document):
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a function killed mid-request: nothing to report

        self.server = Server(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def note_next(self):
        with self.lock:
            if self.first_next is None:
                self.first_next = time.perf_counter()
        self.next_waiting.set()

    def start_function(self, command, env, stdout=subprocess.DEVNULL):
        """Starts the function as Lambda does: its bootstrap, with the Runtime
        API's address and the function's settings in the environment."""
        lambda_env = {
            "AWS_LAMBDA_RUNTIME_API": self.address,
            "AWS_LAMBDA_FUNCTION_NAME": "plant-store",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/plant-store",
            "AWS_LAMBDA_LOG_STREAM_NAME": "local",
            "AWS_LAMBDA_LOG_FORMAT": "JSON",
            "AWS_LAMBDA_LOG_LEVEL": "WARN",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        lambda_env.update(env)
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            command, env=lambda_env, stdout=stdout, stderr=subprocess.STDOUT
        )

    def wait_until_ready(self, timeout=30):
        """Waits for the first /next (init done) or an init error; returns the
        init time in seconds."""
        if not self.next_waiting.wait(timeout):
            raise RuntimeError("the function never asked for an invocation")
        if self.init_error is not None:
            raise RuntimeError(f"init failed: {self.init_error!r}")
        return self.first_next - self.started

    def invoke(self, event, timeout=30):
        """Hands one event to the function and waits for its answer. Returns
        the Invocation, with `handed_out` and `answered` timestamps."""
        invocation = self.submit(event)
        if not invocation.done.wait(timeout):
            raise RuntimeError(f"no answer to {invocation.request_id} within {timeout}s")
        return invocation

    def submit(self, event):
        request_id = f"bench-{next(self.ids):08d}"
        invocation = Invocation(request_id, event if isinstance(event, bytes) else event.encode())
        self.invocations[request_id] = invocation
        self.pending.put(invocation)
        return invocation

    def peak_rss_kib(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return None

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        for _ in range(64):  # release every waiting /next
            self.pending.put(None)
        self.server.shutdown()
        self.server.server_close()
