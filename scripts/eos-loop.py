#!/usr/bin/env python3
"""Exactly-once across kill -9: a transactional consume-transform-produce worker keeps going
while the broker is killed (SIGKILL) at random moments and restarted; at the end every input
record is in the output exactly once (read_committed), in input order per partition, and the
group's committed offsets are the input's end offsets.

  TIDEMARK_BIN=target/release/tidemark target/venv/bin/python scripts/eos-loop.py [--rounds N]

Starts `tidemark serve` (one shard per core) on a free port with a fresh data dir, prefills a
4-partition input topic with numbered records (idempotent producer, not transactional), and
runs the worker in a thread: a read_committed group member (no auto commit) reads up to
--batch records, a transactional producer writes b"out:<value>" for each to the same
partition of the output topic and the member's positions to the group
(send_offsets_to_transaction), and commits. Any error (a failed delivery, a timed-out,
abortable or fatal transaction call, a fenced producer, a consumer error) makes the worker
drop both clients and start over: the new producer's init_transactions (same
transactional.id) completes or aborts what the old one left open, and the new member resumes
from the group's committed offsets.

The main thread kills the broker N times, each at a random point of the worker's progress:
round r (of N) picks a random record count within the r-th of N+1 equal shares of the input,
waits until the worker has committed that many, sleeps a random 0-100 ms (so the kill lands
in any phase of a transaction) and kills; the broker is restarted on the same data at once.
The worker does not begin a transaction more than half a share past the current share until
that round's kill is done, so all N kills happen while there is work left.

Prints one summary line; exits non-zero on a missing, duplicated or misplaced output record,
wrong committed offsets, a broker that does not come back or does not stop cleanly at the
end, or a worker that does not finish (every wait has a deadline; on a stuck worker its
stack is printed). On failure the work dir (data/broker.log, clients.log) is kept.
EOS_DEBUG=eos,cgrp,protocol (librdkafka debug contexts) logs the clients' detail to
clients.log."""
import argparse
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

IN, OUT, GROUP, TXN_ID = "eos-in", "eos-out", "eos-group", "eos-worker"
CALL_TIMEOUT = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


class Broker:
    def __init__(self, binary, data_dir, port, extra):
        self.binary, self.data_dir, self.port, self.extra = binary, data_dir, port, extra
        self.bootstrap = "127.0.0.1:%d" % port
        self.proc = None

    def start(self):
        with open(os.path.join(self.data_dir, "broker.log"), "ab") as log:
            self.proc = subprocess.Popen([self.binary, "serve", "--data-dir", self.data_dir, "--listen",
                                          self.bootstrap, *self.extra], stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + 20
        while not port_open(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError("the broker exited while starting (status %s)" % self.proc.returncode)
            if time.time() > deadline:
                raise RuntimeError("the broker did not listen within 20 s")
            time.sleep(0.05)

    def stop(self, sig):
        self.proc.send_signal(sig)
        self.proc.wait(30)
        # A killed broker's io_uring listener outlives it briefly: wait until the port refuses.
        deadline = time.time() + 10
        while port_open(self.port):
            if time.time() > deadline:
                raise RuntimeError("port %d still accepts 10 s after the broker stopped" % self.port)
            time.sleep(0.05)

    def tail(self, n=30):
        with open(os.path.join(self.data_dir, "broker.log"), "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")


def client_conf(bootstrap):
    # No re-bootstrap when the (only) broker is down: librdkafka 2.16 then decommissions the
    # broker it learned from metadata, and a group coordinator cached on that broker makes
    # send_offsets_to_transaction() hang past its timeout (librdkafka issues 5511 and 5456).
    conf = {"bootstrap.servers": bootstrap, "metadata.recovery.strategy": "none"}
    if os.environ.get("EOS_DEBUG"):
        conf["debug"] = os.environ["EOS_DEBUG"]
    return conf


class Worker(threading.Thread):
    """The consume-transform-produce loop; starts over with new clients on any error."""

    def __init__(self, bootstrap, ends, batch, deadline, logger):
        super().__init__(daemon=True)
        self.bootstrap, self.ends, self.batch, self.deadline, self.logger = bootstrap, ends, batch, deadline, logger
        self.allowed = 0  # no transaction begins while this many records or more are committed
        self.committed = {p: 0 for p in ends}  # the group's offsets as of the last commit
        self.commits = 0  # transactions committed
        self.failed_commits = 0  # commit_transaction calls that raised
        self.restarts = 0  # times the worker started over
        self.error = None
        self.finished = False
        self.phase = "starting"  # the call the worker is in, for a failure report

    def total(self):
        return sum(self.committed.values())

    def done(self):
        return all(self.committed[p] >= self.ends[p] for p in self.ends)

    def run(self):
        try:
            while not self.done():
                if time.time() > self.deadline:
                    raise RuntimeError("deadline passed with committed offsets %s of %s" % (self.committed, self.ends))
                try:
                    self.session()
                except KafkaException as e:
                    self.logger.warning("worker starts over after %s", e.args[0])
                    self.restarts += 1
                    time.sleep(0.2)
            self.finished = True
        except Exception as e:  # reported by the main thread
            self.error = e

    def session(self):
        conf = client_conf(self.bootstrap)
        producer = consumer = None
        try:
            self.phase = "init_transactions"
            producer = Producer({**conf, "transactional.id": TXN_ID, "linger.ms": 5, "transaction.timeout.ms": 10000})
            producer.init_transactions(CALL_TIMEOUT)
            consumer = Consumer({**conf, "group.id": GROUP, "enable.auto.commit": False,
                                 "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                 "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
            self.phase = "committed"
            for tp in consumer.committed([TopicPartition(IN, p) for p in sorted(self.ends)], CALL_TIMEOUT):
                if tp.error is None and tp.offset >= 0:
                    self.committed[tp.partition] = tp.offset
            consumer.subscribe([IN])
            while not self.done() and time.time() < self.deadline:
                self.phase = "consume"
                msgs = consumer.consume(num_messages=self.batch, timeout=0.5)
                for m in msgs:
                    if m.error() is not None:
                        raise KafkaException(m.error())
                if not msgs:
                    continue
                self.phase = "gate"
                while self.total() >= self.allowed and time.time() < self.deadline:
                    time.sleep(0.005)
                self.phase = "begin_transaction"
                producer.begin_transaction()
                self.phase = "produce"
                errors = []
                for m in msgs:
                    producer.produce(OUT, value=b"out:" + m.value(), partition=m.partition(),
                                     on_delivery=lambda e, _m: e is not None and errors.append(e))
                positions = consumer.position(consumer.assignment())
                self.phase = "send_offsets_to_transaction"
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), CALL_TIMEOUT)
                self.phase = "flush"
                left = producer.flush(CALL_TIMEOUT)
                if errors:
                    raise KafkaException(errors[0])
                if left:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "%d records undelivered" % left))
                self.phase = "commit_transaction"
                try:
                    producer.commit_transaction(CALL_TIMEOUT)
                except KafkaException:
                    self.failed_commits += 1
                    raise
                self.commits += 1
                for tp in positions:
                    if tp.offset >= 0:
                        self.committed[tp.partition] = tp.offset
        finally:
            # Drop the clients: the next init_transactions fences this producer and ends its
            # transaction; the next member starts from the group's committed offsets.
            if consumer is not None:
                self.phase = "consumer close"
                try:
                    consumer.close()
                except Exception as e:  # the broker may be down
                    self.logger.warning("consumer close: %s", e)
            if producer is not None:
                self.phase = "producer purge"
                try:
                    producer.purge()
                except Exception as e:
                    self.logger.warning("producer purge: %s", e)


def read_committed_to_end(bootstrap, topic, partitions, timeout=60):
    """({partition: [(offset, value)]}, high watermarks): every record from the start until each
    partition's read_committed end reaches the high watermark (no transaction open there)."""
    # librdkafka asks ListOffsets with the consumer's isolation level: the high watermark
    # comes from a read_uncommitted one.
    u = Consumer({**client_conf(bootstrap), "group.id": "eos-verify"})
    hw = {p: u.get_watermark_offsets(TopicPartition(topic, p), CALL_TIMEOUT, cached=False)[1] for p in partitions}
    u.close()
    c = Consumer({**client_conf(bootstrap), "group.id": "eos-verify", "isolation.level": "read_committed",
                  "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got, eof = {p: [] for p in partitions}, {}
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is not None:
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(m.error())
                    eof[m.partition()] = m.offset()
                else:
                    got[m.partition()].append((m.offset(), m.value()))
                    eof.pop(m.partition(), None)
            if all(eof.get(p, -1) >= hw[p] for p in partitions):
                return got, hw
    finally:
        c.close()
    raise RuntimeError("read_committed did not reach the high watermarks %s within %d s (ends seen %s)" % (
        hw, timeout, eof))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="broker kills (default 3)")
    ap.add_argument("--records", type=int, default=4000, help="input records (default 4000)")
    ap.add_argument("--partitions", type=int, default=4, help="input and output partitions (default 4)")
    ap.add_argument("--batch", type=int, default=50, help="records per transaction at most (default 50)")
    ap.add_argument("--seed", type=int, default=None, help="for the kill points (default: random)")
    ap.add_argument("--timeout", type=int, default=300, help="overall deadline in seconds (default 300)")
    args = ap.parse_args()
    if args.rounds < 0 or args.records < args.rounds + 1 or args.partitions < 1 or args.batch < 1:
        ap.error("need rounds >= 0, records > rounds, partitions >= 1, batch >= 1")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rnd = random.Random(seed)
    binary = os.environ.get("TIDEMARK_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                         "target", "release", "tidemark"))
    if not os.access(binary, os.X_OK):
        sys.exit("eos-loop: no broker binary at %s (set TIDEMARK_BIN)" % binary)

    work = tempfile.mkdtemp(prefix="eos-loop-", dir=os.environ.get("TMPDIR"))
    data = os.path.join(work, "data")
    os.makedirs(data)
    # librdkafka logs to stderr: send that (and the worker's own lines) to clients.log, and
    # keep the real stderr for the report.
    report = os.fdopen(os.dup(2), "w")
    os.dup2(os.open(os.path.join(work, "clients.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 2)
    logger = logging.getLogger("eos-loop")
    logger.addHandler(logging.StreamHandler(sys.stderr))
    logger.setLevel(logging.INFO)
    logger.propagate = False

    broker = Broker(binary, data, free_port(), ["--set", "group.initial.rebalance.delay.ms=200",
                                                "--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"])
    started = time.time()
    deadline = started + args.timeout
    ok, summary, problems, worker, kills = False, "", [], None, []
    try:
        broker.start()
        b = broker.bootstrap
        admin = AdminClient(client_conf(b))
        for f in admin.create_topics([NewTopic(t, args.partitions, 1) for t in (IN, OUT)],
                                     request_timeout=CALL_TIMEOUT).values():
            f.result(CALL_TIMEOUT)
        # Prefill: record i (b"<i>") to partition i % partitions.
        p = Producer({**client_conf(b), "enable.idempotence": True, "acks": "all", "linger.ms": 5})
        errors = []
        for i in range(args.records):
            while True:
                try:
                    p.produce(IN, value=b"%d" % i, partition=i % args.partitions,
                              on_delivery=lambda e, _m: e is not None and errors.append(e))
                    break
                except BufferError:
                    p.poll(0.05)
        if p.flush(CALL_TIMEOUT) != 0 or errors:
            raise RuntimeError("prefill failed: %s" % errors[:3])
        del p
        inputs = {q: [b"%d" % i for i in range(q, args.records, args.partitions)] for q in range(args.partitions)}
        ends = {q: len(v) for q, v in inputs.items()}

        worker = Worker(b, ends, args.batch, deadline, logger)
        share = args.records // (args.rounds + 1)
        # The worker may go half a share past a kill point before that kill is done.
        worker.allowed = share + share // 2 if args.rounds else args.records
        worker.start()
        for r in range(args.rounds):
            share_end = args.records * (r + 1) // (args.rounds + 1)
            target = rnd.randint(min(worker.total() + 1, share_end), share_end)
            while worker.total() < target and worker.error is None:
                if time.time() > deadline:
                    raise RuntimeError("round %d: the worker is stuck at %d committed records (waiting for %d)" % (
                        r + 1, worker.total(), target))
                time.sleep(0.002)
            if worker.error is not None:
                break
            delay = rnd.uniform(0, 0.1)
            time.sleep(delay)
            phase = worker.phase
            broker.stop(signal.SIGKILL)
            kills.append("%d+%dms@%s" % (target, delay * 1000, phase))
            logger.info("kill %d: %s", r + 1, kills[-1])
            broker.start()
            worker.allowed = args.records * (r + 2) // (args.rounds + 1) + share // 2 if r + 1 < args.rounds \
                else args.records
        worker.allowed = args.records
        worker.join(max(0, deadline - time.time()))
        if worker.is_alive():
            raise RuntimeError("the worker did not finish before the deadline (committed %s of %s)" % (
                worker.committed, ends))
        if worker.error is not None:
            raise worker.error

        probe = Consumer({**client_conf(b), "group.id": GROUP, "isolation.level": "read_committed"})
        committed = {tp.partition: tp.offset for tp in probe.committed(
            [TopicPartition(IN, q) for q in range(args.partitions)], CALL_TIMEOUT)}
        probe.close()
        if committed != ends:
            problems.append("group offsets %s, want %s" % (committed, ends))
        got, hw = read_committed_to_end(b, OUT, range(args.partitions))
        total, dups, missing, misplaced, disorder = 0, 0, 0, 0, 0
        for q in range(args.partitions):
            out = [v for _, v in got[q]]
            total += len(out)
            want = [b"out:" + v for v in inputs[q]]
            counts = {}
            for v in out:
                counts[v] = counts.get(v, 0) + 1
            wanted = set(want)
            dups += sum(n - 1 for n in counts.values() if n > 1)
            missing += sum(1 for v in want if v not in counts)
            misplaced += sum(1 for v in counts if v not in wanted)
            if out != want and not dups and not missing and not misplaced:
                disorder += 1
        if dups or missing or misplaced or disorder:
            problems.append("output: %d duplicated, %d missing, %d misplaced, %d partitions out of order" % (
                dups, missing, misplaced, disorder))
        if len(kills) < args.rounds:
            problems.append("only %d of %d kills happened" % (len(kills), args.rounds))
        ok = not problems
        summary = ("eos-loop: %s: %d inputs, %d outputs read_committed (%d duplicated, %d missing); %d kills "
                   "(committed records + delay @ worker phase: %s); %d transactions committed, %d worker restarts, "
                   "%d failed commits; %d aborted or control records in the output log; seed %d; %.1fs") % (
            "ok" if ok else "FAILED", args.records, total, dups, missing, len(kills), ", ".join(kills),
            worker.commits, worker.restarts, worker.failed_commits, sum(hw.values()) - total, seed,
            time.time() - started)
    except Exception as e:
        problems.append("%s: %s" % (type(e).__name__, e))
        summary = "eos-loop: FAILED after %d kills (%s): %s (seed %d)" % (
            len(kills), ", ".join(kills), "; ".join(problems), seed)
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            try:
                broker.stop(signal.SIGTERM)
                if broker.proc.returncode != 0:
                    problems.append("the broker exited with status %d on SIGTERM" % broker.proc.returncode)
                    ok = False
            except Exception as e:
                problems.append("stopping the broker: %s" % e)
                ok = False
    print(summary, flush=True)
    if not ok:
        for p in problems:
            print("  " + p, file=report)
        if worker is not None and worker.is_alive():
            stack = "".join(traceback.format_stack(sys._current_frames()[worker.ident]))
            print("the worker is in %s:\n%s" % (worker.phase, stack), file=report)
        print("broker log (tail); work dir kept (data/broker.log, clients.log): %s\n%s" % (work, broker.tail()),
              file=report)
        report.flush()
        os._exit(1)  # the worker thread may be stuck in a client call: do not wait for it
    shutil.rmtree(work, ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    main()
