"""Helper of scripts/kill9-loop.sh (not a pytest module): confluent-kafka producers that record
every acknowledged record, and the check that a restarted broker still holds them.

  kill9_producer.py create BOOTSTRAP TOPIC PARTITIONS
  kill9_producer.py produce BOOTSTRAP TOPIC PARTITIONS IDEMPOTENT(0|1) ROUND ACKFILE MAX_SECONDS
      Produces (acks=all) until SIGTERM or MAX_SECONDS, at most $K9_RATE records/s (default
      20000), round-robin over the partitions, values "<topic>-r<round>-<seq>" padded to 64
      bytes. Every delivery report without error appends "partition offset value" to ACKFILE
      (flushed at once). The plain variant has retries=0: nothing is ever sent twice, so any
      duplicate or reordering in the log is the broker's. The idempotent one retries (the
      broker must then deduplicate). Prints one summary line at the end.
  kill9_producer.py verify BOOTSTRAP TOPIC PARTITIONS ACKFILE...
      Reads every partition from offset 0 to its high watermark and checks: offsets contiguous
      from 0; no value twice; every acknowledged record at its offset; each producer session's
      records (acknowledged or not) in the log in the order they were produced. Exits 1 with
      one line per problem (at most 20 shown per kind).
"""
import os
import re
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

VALUE_RE = re.compile(rb"^(?P<topic>[^ ]+)-r(?P<round>\d+)-(?P<seq>\d+)x*$")


def create(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, int(partitions), 1)], request_timeout=20)[topic]
    fut.result(20)


def produce(bootstrap, topic, partitions, idempotent, rnd, ackfile, max_seconds):
    partitions, idempotent, max_seconds = int(partitions), idempotent == "1", float(max_seconds)
    rate = float(os.environ.get("K9_RATE", "20000"))
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
            "enable.idempotence": idempotent, "message.timeout.ms": 60_000,
            "queue.buffering.max.messages": 20_000}
    if not idempotent:
        conf["retries"] = 0
    p = Producer(conf)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    out = open(ackfile, "ab", buffering=0)
    acked, failed, errors = [0], [0], {}

    def on_delivery(err, msg):
        if err is None:
            out.write(b"%d %d %s\n" % (msg.partition(), msg.offset(), msg.value()))
            acked[0] += 1
        else:
            failed[0] += 1
            errors[err.name()] = errors.get(err.name(), 0) + 1

    started = time.time()
    seq = 0
    while not stop and time.time() - started < max_seconds:
        # Stay under the rate: sequence number seq is due at started + seq / rate.
        ahead = started + seq / rate - time.time()
        if ahead > 0:
            p.poll(min(ahead, 0.05))
            continue
        value = b"%s-r%s-%09d" % (topic.encode(), rnd.encode(), seq)
        value += b"x" * (64 - len(value))
        try:
            p.produce(topic, value=value, partition=seq % partitions, on_delivery=on_delivery)
            seq += 1
        except BufferError:
            p.poll(0.05)
            continue
        if seq % 200 == 0:
            p.poll(0)
    # Whatever reports already arrived; the broker may be gone, so no waiting for the rest.
    for _ in range(5):
        p.poll(0.01)
    out.close()
    print("%s round %s%s: produced %d, acknowledged %d, failed %d %s" % (
        topic, rnd, " (idempotent)" if idempotent else "", seq, acked[0], failed[0], errors or ""), flush=True)
    os._exit(0)  # do not let librdkafka wait for records the killed broker will never answer


def read_log(bootstrap, topic, partitions, deadline):
    """{partition: [value of offset 0, 1, ...]} up to each high watermark; asserts contiguity."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kill9-verify", "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.max.bytes": 8 << 20})
    logs, problems = {}, []
    try:
        ends = {}
        for p in range(partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), 20)
            ends[p] = hi
            logs[p] = []
            if lo != 0:
                problems.append("partition %d: log start offset %d, expected 0" % (p, lo))
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        pending = {p for p in range(partitions) if ends[p] > 0}
        while pending:
            if time.time() > deadline:
                problems.append("verify: timed out reading; still reading partitions %s" % sorted(pending))
                break
            for m in c.consume(10_000, 0.5):
                p = m.partition()
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        if len(logs[p]) >= ends[p]:
                            pending.discard(p)
                        continue
                    problems.append("verify: consume error %s" % m.error())
                    pending.discard(p)
                    continue
                if m.offset() != len(logs[p]):
                    problems.append("partition %d: offset %d read where %d was next (a gap)" % (p, m.offset(), len(logs[p])))
                    logs[p].extend([None] * max(0, m.offset() - len(logs[p])))
                if m.offset() == len(logs[p]):
                    logs[p].append(m.value())
                if len(logs[p]) >= ends[p]:
                    pending.discard(p)
    finally:
        c.close()
    return logs, ends, problems


def verify(bootstrap, topic, partitions, ackfiles):
    partitions = int(partitions)
    deadline = time.time() + 90
    logs, ends, problems = read_log(bootstrap, topic, partitions, deadline)
    kinds = {"loss": [], "duplicate": [], "misplaced": [], "reorder": []}
    # No value twice, in any partition.
    where = {}
    for p, values in logs.items():
        for o, v in enumerate(values):
            if v is None:
                continue
            if v in where:
                kinds["duplicate"].append("%s at %d-%d and %d-%d" % (v.decode(), *where[v], p, o))
            else:
                where[v] = (p, o)
    # Every acknowledged record at its offset.
    acked = 0
    for f in ackfiles:
        with open(f, "rb") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) != 3:
                    continue  # a torn last line of a killed producer
                p, o, v = int(parts[0]), int(parts[1]), parts[2]
                acked += 1
                log = logs.get(p, [])
                if o >= len(log):
                    kinds["loss"].append("%s acknowledged at %d-%d, beyond the high watermark %d" % (v.decode(), p, o, len(log)))
                elif log[o] != v:
                    if v in where:
                        kinds["misplaced"].append("%s acknowledged at %d-%d, found at %d-%d" % (v.decode(), p, o, *where[v]))
                    else:
                        kinds["loss"].append("%s acknowledged at %d-%d, missing (that offset holds %s)" % (
                            v.decode(), p, o, log[o].decode() if log[o] else None))
    # Each producer session's records in produce order, per partition.
    for p, values in logs.items():
        last = {}
        for o, v in enumerate(values):
            m = VALUE_RE.match(v or b"")
            if not m:
                if v is not None:
                    kinds["misplaced"].append("%d-%d holds an unexpected value %r" % (p, o, v[:80]))
                continue
            session, seq = m.group("round"), int(m.group("seq"))
            if session in last and seq <= last[session][0]:
                kinds["reorder"].append("round %s: seq %d at %d-%d after seq %d at %d-%d" % (
                    session.decode(), seq, p, o, last[session][0], p, last[session][1]))
            last[session] = (seq, o)
    total = sum(len(v) for v in logs.values())
    print("verify %s: %d records in the log (high watermarks %s), %d acknowledged records checked" % (
        topic, total, [ends[p] for p in range(partitions)], acked), flush=True)
    for kind, items in kinds.items():
        if items:
            problems.append("%d %s:" % (len(items), {"loss": "lost", "duplicate": "duplicated", "misplaced": "misplaced",
                                                     "reorder": "out of order"}[kind]))
            problems += ["  " + i for i in items[:20]]
    if problems:
        print("FAIL %s:\n%s" % (topic, "\n".join(problems)), flush=True)
        sys.exit(1)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "create":
        create(*args)
    elif cmd == "produce":
        produce(*args)
    elif cmd == "verify":
        verify(args[0], args[1], args[2], args[3:])
    else:
        sys.exit("unknown command " + cmd)
