"""Start the real tidemark binary on 127.0.0.1 with a random port and a fresh data dir."""
import http.client
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

BIN = os.environ.get("TIDEMARK_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "tidemark"))


_handed_out = set()


# Under pytest-xdist (scripts/test runs two workers) each worker takes its ports from a range
# of its own, below the kernel's ephemeral range, so two workers never hand out the same port.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_RANGE = (20000 + 6000 * int(_WORKER[2:]), 26000 + 6000 * int(_WORKER[2:])) if _WORKER[2:].isdigit() else None


def free_port():
    """A port free now, never one handed out before in this run: the OS may give the same
    ephemeral port twice in a row once it is closed, and a cluster test asks for six at once."""
    import random
    while True:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", random.randrange(*_RANGE) if _RANGE else 0))
            except OSError:
                continue
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


class Broker:
    def __init__(self, data_dir, port):
        self.data_dir, self.port, self.proc = data_dir, port, None
        self.bootstrap = f"127.0.0.1:{port}"

    def start(self, *extra):
        # Quick first rebalances (Kafka's default delay is 3 s).
        quick = ("--set", "group.initial.rebalance.delay.ms=200")
        self.proc = subprocess.Popen(
            [BIN, "serve", "--data-dir", self.data_dir, "--listen", self.bootstrap, *quick, *extra],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.data_dir, "broker.log"), "ab"))
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert self.proc.poll() is None, "broker exited: " + self.log()
                time.sleep(0.05)
        raise RuntimeError("broker did not start: " + self.log())

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        if sig == signal.SIGTERM:
            assert self.proc.returncode == 0, "unclean exit: " + self.log()
        # A killed process's io_uring listener outlives it briefly and still completes TCP
        # handshakes; wait until the port refuses, so that start() sees the new broker only.
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                time.sleep(0.05)
            except OSError:
                return

    def log(self):
        """The end of the broker's log: the last 64 KB (enough for its shutdown lines, the
        latency summary and a backtrace, which alone can pass 4 KB)."""
        with open(os.path.join(self.data_dir, "broker.log"), "rb") as f:
            return f.read().decode(errors="replace")[-65536:]


@pytest.fixture
def broker():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        b = Broker(os.path.join(d, "data"), free_port())
        os.makedirs(b.data_dir)
        b.start()
        yield b
        if b.proc.poll() is None:
            b.stop()


class FaultyBroker(Broker):
    """A broker whose metrics endpoint (on its own port) takes disk-fault rules at /faults
    (`serve --fault-injection`)."""

    def __init__(self, data_dir, port):
        super().__init__(data_dir, port)
        self.metrics_port = free_port()

    def start(self, *extra):
        super().start("--metrics-listen", "127.0.0.1:%d" % self.metrics_port, "--fault-injection", *extra)

    def http(self, method, path):
        """(status, body) of one request to the metrics endpoint."""
        c = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=10)
        try:
            c.request(method, path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()

    def inject(self, **rule):
        status, body = self.http("POST", "/faults?" + "&".join("%s=%s" % kv for kv in rule.items()))
        assert status == 200, body

    def heal(self):
        status, body = self.http("DELETE", "/faults")
        assert status == 200, body

    def metric(self, name):
        """The sum over shards of a counter or gauge at /metrics."""
        status, body = self.http("GET", "/metrics")
        assert status == 200
        values = [float(line.split()[-1]) for line in body.splitlines() if line.startswith("tidemark_%s{" % name)]
        assert values, "no %s at /metrics" % name
        return sum(values)

    def stop(self, sig=signal.SIGTERM):
        if sig == signal.SIGTERM and self.proc and self.proc.poll() is None:
            self.http("DELETE", "/faults")  # a clean stop needs a working disk
        super().stop(sig)


@pytest.fixture
def start_broker():
    """A function that starts a broker with extra `serve` arguments, each on a fresh data dir
    and port (`faults=True`: a FaultyBroker); every broker it started is stopped at the end."""
    started = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        def start(*extra, faults=False):
            b = (FaultyBroker if faults else Broker)(os.path.join(d, "data-%d" % len(started)), free_port())
            os.makedirs(b.data_dir)
            b.start(*extra)
            started.append(b)
            return b
        yield start
        for b in started:
            if b.proc.poll() is None:
                b.stop()
