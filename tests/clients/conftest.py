"""Start the real tidemark binary on 127.0.0.1 with a random port and a fresh data dir."""
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

BIN = os.environ.get("TIDEMARK_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "tidemark"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        with open(os.path.join(self.data_dir, "broker.log"), "rb") as f:
            return f.read().decode(errors="replace")[-4000:]


@pytest.fixture
def broker():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        b = Broker(os.path.join(d, "data"), free_port())
        os.makedirs(b.data_dir)
        b.start()
        yield b
        if b.proc.poll() is None:
            b.stop()
