"""The transaction APIs on raw sockets, encoded by kafka-python 3's schema-driven classes (an
implementation of the protocol independent of tidemark's): the error answers Kafka gives, and
what no client library lets a test do on purpose: a stray transactional write (KIP-890 part 1),
a TxnOffsetCommit read back with require_stable, a transaction left open until its timeout.
"""
import socket
import struct
import time

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.admin.transactions import (DescribeProducersRequest, DescribeTransactionsRequest,
                                               ListTransactionsRequest)
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest,
                                                 InitProducerIdRequest, TxnOffsetCommitRequest)

from test_bad_input import crc32c, v2_record, v2_values
from test_conformance import call, create_topic, list_offsets

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
COORDINATOR_NOT_AVAILABLE = 15


def txn_batch(values, pid, epoch, seq):
    """A transactional v2 batch (attributes bit 4) of producer `pid` at `epoch`, sequences from
    `seq`."""
    ts = int(time.time() * 1000)
    recs = b"".join(v2_record(i, v) for i, v in enumerate(values))
    n = len(values)
    after_crc = struct.pack(">hiqqqhii", 0x10, n - 1, ts, ts, pid, epoch, seq, n) + recs
    body = struct.pack(">ibI", 0, 2, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(body)) + body


def until(what, f, timeout=20):
    deadline = time.time() + timeout
    while True:
        r = f()
        if r or time.time() > deadline:
            assert r, what
            return r
        time.sleep(0.1)


def find_txn_coordinator(broker, tid):
    """FindCoordinator key type 1 until the state topic exists: this node."""
    def ask():
        r = call(broker, FindCoordinatorRequest, 3, key=tid, key_type=1)
        return r if r.error_code == NONE else None
    r = until("the transaction coordinator", ask)
    assert r.port == broker.port


def init(broker, tid, timeout_ms=60000):
    find_txn_coordinator(broker, tid)
    r = call(broker, InitProducerIdRequest, 3, transactional_id=tid, transaction_timeout_ms=timeout_ms,
             producer_id=-1, producer_epoch=-1)
    assert r.error_code == NONE, r
    return r.producer_id, r.producer_epoch


def add_partitions(broker, tid, pid, epoch, topics):
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    r = call(broker, AddPartitionsToTxnRequest, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
             v3_and_below_producer_epoch=epoch,
             v3_and_below_topics=[T(name=n, partitions=ps) for n, ps in topics])
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end(broker, tid, pid, epoch, commit):
    return call(broker, EndTxnRequest, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                committed=commit).error_code


def produce(broker, topic, partition, records, tid=None):
    P = ProduceRequest
    r = call(broker, P, 9, transactional_id=tid, acks=-1, timeout_ms=10000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=records)])])
    return r.responses[0].partition_responses[0].error_code


def lso(broker, topic, partition=0, timestamp=-1):
    """The last stable offset: ListOffsets LATEST at READ_COMMITTED (or another timestamp's
    answer at READ_COMMITTED)."""
    L = ListOffsetsRequest
    r = call(broker, L, 5, replica_id=-1, isolation_level=1, topics=[
        L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=timestamp, max_num_offsets=1)])])
    p = r.topics[0].partitions[0]
    assert p.error_code == NONE
    return p.offset


def fetch_committed(broker, topic, offset=0, partition=0):
    """Fetch v11 at READ_COMMITTED: the partition's answer."""
    F = FetchRequest
    t = F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1,
        log_start_offset=-1, last_fetched_epoch=-1)])
    r = call(broker, F, 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
             session_id=0, session_epoch=-1, topics=[t], forgotten_topics_data=[], rack_id="")
    return r.responses[0].partitions[0]


def test_error_answers_are_kafkas(broker):
    """InitProducerId above transaction.max.timeout.ms: INVALID_TRANSACTION_TIMEOUT; EndTxn for
    an unknown producer id: INVALID_PRODUCER_ID_MAPPING; EndTxn with no transaction open:
    INVALID_TXN_STATE; a retried commit is CONCURRENT_TRANSACTIONS until the markers are written, then succeeds; AddPartitionsToTxn
    with one unknown topic fails that one (UNKNOWN_TOPIC_OR_PARTITION) and answers the others
    OPERATION_NOT_ATTEMPTED, adding nothing; a stale epoch after a re-init is PRODUCER_FENCED;
    DescribeTransactions of an unknown id: TRANSACTIONAL_ID_NOT_FOUND; ListTransactions returns
    unknown state names and matches nothing for them."""
    create_topic(broker, "errs", partitions=2)
    find_txn_coordinator(broker, "e1")
    r = call(broker, InitProducerIdRequest, 3, transactional_id="e1", transaction_timeout_ms=900001,
             producer_id=-1, producer_epoch=-1)
    assert r.error_code == INVALID_TRANSACTION_TIMEOUT
    pid, epoch = init(broker, "e1")
    assert end(broker, "e1", pid + 1000, epoch, True) == INVALID_PRODUCER_ID_MAPPING
    assert end(broker, "e1", pid, epoch, True) == INVALID_TXN_STATE
    codes = add_partitions(broker, "e1", pid, epoch, [("errs", [0, 1]), ("no-such-topic", [0])])
    assert codes == {("errs", 0): OPERATION_NOT_ATTEMPTED, ("errs", 1): OPERATION_NOT_ATTEMPTED,
                     ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    d = call(broker, DescribeTransactionsRequest, 0, transactional_ids=["e1", "nobody"])
    by_id = {t.transactional_id: t for t in d.transaction_states}
    assert by_id["e1"].error_code == NONE and by_id["e1"].transaction_state == "Empty"
    assert by_id["e1"].topics == [], "nothing was added"
    assert by_id["nobody"].error_code == TRANSACTIONAL_ID_NOT_FOUND
    assert add_partitions(broker, "e1", pid, epoch, [("errs", [0, 1])]) == {("errs", 0): NONE, ("errs", 1): NONE}
    assert produce(broker, "errs", 0, txn_batch([b"a"], pid, epoch, 0), tid="e1") == NONE
    d = call(broker, DescribeTransactionsRequest, 0, transactional_ids=["e1"]).transaction_states[0]
    assert d.transaction_state == "Ongoing" and d.producer_id == pid
    assert sorted((t.topic, sorted(t.partitions)) for t in d.topics) == [("errs", [0, 1])]
    lt = call(broker, ListTransactionsRequest, 1, state_filters=["Ongoing", "Bogus"], producer_id_filters=[],
              duration_filter=-1)
    assert lt.unknown_state_filters == ["Bogus"]
    assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in lt.transaction_states] == \
        [("e1", pid, "Ongoing")]
    assert end(broker, "e1", pid, epoch, True) == NONE
    assert end(broker, "e1", pid, epoch, True) in (NONE, CONCURRENT_TRANSACTIONS), "a retried commit (Kafka: \
CONCURRENT_TRANSACTIONS while the markers are written)"
    until("CompleteCommit", lambda: call(broker, DescribeTransactionsRequest, 0, transactional_ids=["e1"])
          .transaction_states[0].transaction_state == "CompleteCommit")
    assert end(broker, "e1", pid, epoch, True) == NONE, "a retried commit once complete"
    assert end(broker, "e1", pid, epoch, False) == INVALID_TXN_STATE, "abort after commit"
    pid2, epoch2 = init(broker, "e1")
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert end(broker, "e1", pid, epoch, True) == PRODUCER_FENCED
    lt = call(broker, ListTransactionsRequest, 0, state_filters=["Bogus"], producer_id_filters=[])
    assert lt.unknown_state_filters == ["Bogus"] and lt.transaction_states == []


def producers(broker, topic):
    """DescribeProducers of partition 0: (id, epoch, coordinator epoch, open transaction's start)."""
    D = DescribeProducersRequest
    r = call(broker, D, 0, topics=[D.TopicRequest(name=topic, partition_indexes=[0])])
    p = r.topics[0].partitions[0]
    assert p.error_code == NONE
    return [(a.producer_id, a.producer_epoch, a.coordinator_epoch, a.current_txn_start_offset)
            for a in p.active_producers]


def test_stray_transactional_write_is_refused(broker):
    """KIP-890 part 1: a transactional batch to a partition the coordinator does not have in
    the producer's transaction is INVALID_TXN_STATE and appends nothing, so it cannot open a
    transaction no marker would end (the LSO stays at the high watermark); once the partition
    is added, the same batch goes in and holds the LSO until the commit's marker.
    DescribeProducers shows the open transaction's first offset, then none and the marker's
    coordinator epoch. spec: T6.1 at READ_COMMITTED: `-1` is the LSO, `-2` still the log start,
    and no record at or past the LSO is found by time."""
    create_topic(broker, "stray", partitions=1)
    pid, epoch = init(broker, "s1")
    assert produce(broker, "stray", 0, txn_batch([b"x"], pid, epoch, 0), tid="s1") == INVALID_TXN_STATE
    assert list_offsets(broker, 5, "stray", -1).offset == 0, "nothing appended"
    assert lso(broker, "stray") == 0
    assert add_partitions(broker, "s1", pid, epoch, [("stray", [0])]) == {("stray", 0): NONE}
    assert produce(broker, "stray", 0, txn_batch([b"x"], pid, epoch, 0), tid="s1") == NONE
    assert list_offsets(broker, 5, "stray", -1).offset == 1
    assert lso(broker, "stray") == 0, "the open transaction holds the LSO"
    assert lso(broker, "stray", timestamp=-2) == 0, "EARLIEST is the log start at any isolation"
    assert lso(broker, "stray", timestamp=0) == -1, "no record below the LSO to find by time"
    assert producers(broker, "stray") == [(pid, epoch, -1, 0)]
    assert end(broker, "s1", pid, epoch, True) == NONE
    until("the marker releases the LSO", lambda: lso(broker, "stray") == 2)
    assert producers(broker, "stray") == [(pid, epoch, 0, -1)]


def test_txn_offset_commit_is_unstable_until_the_commit(broker):
    """TxnOffsetCommit: the offset is staged, OffsetFetch with require_stable (v7) answers
    UNSTABLE_OFFSET_COMMIT and without it the previous offset, until the transaction commits;
    an aborted transaction's offset vanishes."""
    create_topic(broker, "in", partitions=1)
    pid, epoch = init(broker, "o1")

    def fetch_offset(stable):
        G = OffsetFetchRequest
        r = call(broker, G, 7, group_id="og", topics=[G.OffsetFetchRequestTopic(name="in", partition_indexes=[0])],
                 require_stable=stable)
        p = r.topics[0].partitions[0]
        return p.error_code, p.committed_offset

    def txn_commit(offset):
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        r = call(broker, TxnOffsetCommitRequest, 3, transactional_id="o1", group_id="og", producer_id=pid,
                 producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None, topics=[
                     T(name="in", partitions=[T.TxnOffsetCommitRequestPartition(
                         partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                         committed_metadata="")])])
        return r.topics[0].partitions[0].error_code

    for commit, offset in ((True, 5), (False, 9)):
        r = until("AddOffsetsToTxn", lambda: call(broker, AddOffsetsToTxnRequest, 3, transactional_id="o1",
                                                    producer_id=pid, producer_epoch=epoch,
                                                    group_id="og").error_code != CONCURRENT_TRANSACTIONS)
        assert r
        assert call(broker, AddOffsetsToTxnRequest, 3, transactional_id="o1", producer_id=pid, producer_epoch=epoch,
                    group_id="og").error_code == NONE
        assert txn_commit(offset) == NONE
        before = 5 if not commit else -1
        assert fetch_offset(True) == (UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch_offset(False) == (NONE, before), "invisible while open"
        assert end(broker, "o1", pid, epoch, commit) == NONE
        until("the marker on the offsets partition", lambda: fetch_offset(True)[0] == NONE)
        assert fetch_offset(True) == (NONE, 5), "committed: 5; aborted: 9 dropped, 5 stays"


def test_abandoned_transaction_is_aborted_at_its_timeout(start_broker):
    """A transaction left open (its producer gone) holds the LSO until its timeout; the
    coordinator then fences the producer (its epoch bumped) and writes ABORT markers: the LSO
    passes it, a READ_COMMITTED fetch lists it as aborted, and the producer's late commit is
    refused (PRODUCER_FENCED). The same holds when the broker is killed (-9) while the
    transaction is open: replayed at startup, it is aborted at its timeout."""
    for kill in (False, True):
        b = start_broker("--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
        create_topic(b, "late", partitions=1)
        pid, epoch = init(b, "t1", timeout_ms=1500)
        assert add_partitions(b, "t1", pid, epoch, [("late", [0])]) == {("late", 0): NONE}
        assert produce(b, "late", 0, txn_batch([b"l1", b"l2"], pid, epoch, 0), tid="t1") == NONE
        assert lso(b, "late") == 0
        if kill:
            import signal
            b.stop(signal.SIGKILL)
            b.start("--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
            assert lso(b, "late") == 0, "replayed: still open"
        until("the timeout abort", lambda: lso(b, "late") == 3, timeout=30)
        p = fetch_committed(b, "late")
        assert (p.high_watermark, p.last_stable_offset) == (3, 3)
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
        # The records and the ABORT marker's control record (version 0, coordinator epoch 0):
        # the client drops the records by the list and skips the control batch.
        assert [v for _, v in v2_values(p.records)] == [b"l1", b"l2", bytes(6)]
        assert end(b, "t1", pid, epoch, True) == PRODUCER_FENCED
        b.stop()


def test_kill_between_markers_and_during_state_writes(start_broker):
    """kill -9 at two moments of a commit, the disk slowed on purpose (`--fault-injection`):
    (1) between the markers of two partitions (one partition's marker durable, the other's
    fdatasync held): after the restart the coordinator finds PrepareCommit and writes the
    markers again (a second COMMIT marker where one was kept: harmless), so both partitions show
    the whole transaction to READ_COMMITTED;
    (2) while the PrepareCommit record itself is being made durable (EndTxn unanswered): after
    the restart the transaction is either prepared (committed on both partitions) or still
    open (aborted at its timeout on both); never one partition without the other."""
    import signal
    import threading
    settings = ("--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
    b = start_broker(*settings, faults=True)
    create_topic(b, "m", partitions=2)
    for round_, slowed in enumerate(("/m-1/", "/__transaction_state-")):
        tid = "k%d" % round_
        pid, epoch = init(b, tid, timeout_ms=2000)
        assert add_partitions(b, tid, pid, epoch, [("m", [0, 1])]) == {("m", 0): NONE, ("m", 1): NONE}
        start = [lso(b, "m", p) for p in (0, 1)]
        for p in (0, 1):
            assert produce(b, "m", p, txn_batch([b"r%d-%d" % (round_, p)], pid, epoch, 0), tid=tid) == NONE
        ends = [list_offsets(b, 5, "m", -1, partition=p).offset for p in (0, 1)]
        b.inject(op="sync", fault="slow", ms=8000, path=slowed, count=1)
        answered = []
        t = threading.Thread(target=lambda: answered.append(end(b, tid, pid, epoch, True)), daemon=True)
        t.start()
        if slowed == "/m-1/":
            t.join(10)
            assert answered == [NONE], "EndTxn is answered once PrepareCommit is durable"
            until("partition 0's marker", lambda: lso(b, "m", 0) == ends[0] + 1)
            assert lso(b, "m", 1) == start[1], "partition 1's marker is not durable yet"
        else:
            time.sleep(0.5)
            assert answered == [], "PrepareCommit is not durable yet"
        b.stop(signal.SIGKILL)
        b.start(*settings)
        # Committed (markers written again) or aborted at the timeout: both partitions alike.
        until("both partitions settled", lambda: [lso(b, "m", p) for p in (0, 1)] == [e + 1 for e in ends]
              or [lso(b, "m", p) for p in (0, 1)] == [e + 2 for e in ends], timeout=30)
        aborted = [[a.first_offset for a in fetch_committed(b, "m", partition=p).aborted_transactions] for p in (0, 1)]
        if slowed == "/m-1/":
            assert aborted == [[], []], "the prepared commit was completed"
        else:
            assert aborted in ([[], []], [[ends[0] - 1], [ends[1] - 1]]), aborted


def test_transaction_state_topic_is_internal(broker):
    """`__transaction_state` is guarded as `__consumer_offsets` is: Metadata flags it internal,
    and DeleteTopics, CreatePartitions, AlterConfigs (retention would delete live state),
    DeleteRecords and CreateTopics of it are refused, so no client can lose or re-home the
    coordinator's state."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
    from test_conformance import metadata
    find_txn_coordinator(broker, "any")
    (t,) = metadata(broker, 12, ["__transaction_state"]).topics
    assert t.error_code == NONE and t.is_internal
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    refused = {
        "delete": a.delete_topics(["__transaction_state"])["__transaction_state"],
        "grow": a.create_partitions([NewPartitions("__transaction_state", 100)])["__transaction_state"],
        "create": a.create_topics([NewTopic("__transaction_state", 1, 1)])["__transaction_state"],
    }
    res = ConfigResource("topic", "__transaction_state", set_config={"retention.ms": "1000"})
    refused["alter"] = a.alter_configs([res])[res]
    codes = {}
    for what, f in refused.items():
        try:
            f.result(30)
        except Exception as e:  # KafkaException with the broker's error
            codes[what] = e.args[0].code()
    # Kafka's codes: INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, TOPIC_ALREADY_EXISTS.
    assert codes == {"delete": 17, "grow": 42, "create": 36, "alter": 42}, codes
    from kafka.protocol.admin import DeleteRecordsRequest as D
    r = call(broker, D, 2, topics=[D.DeleteRecordsTopic(name="__transaction_state", partitions=[
        D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=10000)
    assert r.topics[0].partitions[0].error_code == 44, "POLICY_VIOLATION"
    (t,) = metadata(broker, 12, ["__transaction_state"]).topics
    assert len(t.partitions) == 8, "still Kafka's placement: transaction.state.log.num.partitions"


def test_txn_offset_commit_outside_the_transaction_is_refused(broker):
    """A TxnOffsetCommit whose group was not added with AddOffsetsToTxn (KIP-890 part 1) is
    INVALID_TXN_STATE and writes nothing: no transaction opens on the offsets partition, so
    OffsetFetch with require_stable stays answerable (not UNSTABLE_OFFSET_COMMIT for good)."""
    create_topic(broker, "in2", partitions=1)
    pid, epoch = init(broker, "o2")
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    r = call(broker, TxnOffsetCommitRequest, 3, transactional_id="o2", group_id="og2", producer_id=pid,
             producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None, topics=[
                 T(name="in2", partitions=[T.TxnOffsetCommitRequestPartition(
                     partition_index=0, committed_offset=3, committed_leader_epoch=-1, committed_metadata="")])])
    assert r.topics[0].partitions[0].error_code == INVALID_TXN_STATE
    G = OffsetFetchRequest
    r = call(broker, G, 7, group_id="og2", topics=[G.OffsetFetchRequestTopic(name="in2", partition_indexes=[0])],
             require_stable=True)
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.committed_offset) == (NONE, -1)


def test_read_committed_lists_the_aborted_transactions_of_the_returned_records(broker):
    """A READ_COMMITTED fetch that returns only the first batches (a small partition_max_bytes)
    lists the aborted transactions overlapping those records, not every aborted transaction up
    to the LSO (Kafka bounds the list by the fetched data); a fetch from further on lists the
    later ones."""
    create_topic(broker, "bounded", partitions=1)
    pid, epoch = init(broker, "b1")
    offsets = []
    for i in range(3):
        until("the previous transaction's markers", lambda: add_partitions(
            broker, "b1", pid, epoch, [("bounded", [0])]) == {("bounded", 0): NONE})
        offsets.append(list_offsets(broker, 5, "bounded", -1).offset)
        assert produce(broker, "bounded", 0, txn_batch([b"v" * 200], pid, epoch, i), tid="b1") == NONE
        assert end(broker, "b1", pid, epoch, False) == NONE
    until("the last abort marker", lambda: lso(broker, "bounded") == 6)
    F = FetchRequest
    t = F.FetchTopic(topic="bounded", partitions=[F.FetchTopic.FetchPartition(
        partition=0, fetch_offset=0, partition_max_bytes=1, current_leader_epoch=-1, log_start_offset=-1,
        last_fetched_epoch=-1)])
    r = call(broker, F, 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1, isolation_level=1,
             session_id=0, session_epoch=-1, topics=[t], forgotten_topics_data=[], rack_id="")
    p = r.responses[0].partitions[0]
    assert [v for _, v in v2_values(p.records)] == [b"v" * 200], "one batch (KIP-74: the first whole)"
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, offsets[0])]
    p = fetch_committed(broker, "bounded", offset=offsets[1])
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, offsets[1]), (pid, offsets[2])]


def test_idle_transactional_id_expires(start_broker):
    """transactional.id.expiration.ms: an id with no open transaction and no request for that
    long is forgotten (a tombstone in `__transaction_state`): DescribeTransactions answers
    TRANSACTIONAL_ID_NOT_FOUND, also after a restart (the tombstone replayed), and a new
    InitProducerId starts it afresh at epoch 0 with a new producer id. An id with a
    transaction open is not expired."""
    settings = ("--set", "transactional.id.expiration.ms=1500",
                "--set", "transaction.remove.expired.transaction.cleanup.interval.ms=200",
                "--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
    b = start_broker(*settings)
    create_topic(b, "exp", partitions=1)
    pid, epoch = init(b, "idle")
    pid2, epoch2 = init(b, "busy", timeout_ms=60000)
    assert add_partitions(b, "busy", pid2, epoch2, [("exp", [0])]) == {("exp", 0): NONE}

    def state(tid):
        t = call(b, DescribeTransactionsRequest, 0, transactional_ids=[tid]).transaction_states[0]
        return t.error_code, t.transaction_state
    assert state("idle") == (NONE, "Empty")
    until("the idle id expires", lambda: state("idle")[0] == TRANSACTIONAL_ID_NOT_FOUND, timeout=30)
    assert state("busy") == (NONE, "Ongoing"), "an open transaction keeps its id"
    b.stop()
    b.start(*settings)
    assert state("idle")[0] == TRANSACTIONAL_ID_NOT_FOUND, "the tombstone replayed"
    again = init(b, "idle")
    assert again[1] == 0 and again[0] != pid, (again, pid)


INVALID_PRODUCER_EPOCH = 47


def end_v5(broker, tid, pid, epoch, commit):
    """EndTxn v5 (transactions version 2): (error, producer id, epoch to go on with)."""
    r = call(broker, EndTxnRequest, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
    return r.error_code, r.producer_id, r.producer_epoch


def produce_v12(broker, topic, partition, records, tid):
    P = ProduceRequest
    r = call(broker, P, 12, transactional_id=tid, acks=-1, timeout_ms=10000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=records)])])
    return r.responses[0].partition_responses[0].error_code


def described(broker, tid):
    d = call(broker, DescribeTransactionsRequest, 0, transactional_ids=[tid]).transaction_states[0]
    return d.transaction_state, d.producer_epoch, sorted((t.topic, p) for t in d.topics for p in t.partitions)


def test_transactions_v2_bump_the_epoch_and_enrol_partitions_at_the_first_write(broker):
    """Transactions version 2 (KIP-890 part 2), as Kafka 4's coordinator and partition leaders
    serve it: a Produce v12 transactional batch adds its partition to the transaction itself (no
    AddPartitionsToTxn); EndTxn v5 bumps the epoch at every commit or abort and answers the
    producer id and epoch to go on with; the next transaction starts at once at the new epoch (the
    leader retries the coordinator while the previous markers are written, and may answer
    CONCURRENT_TRANSACTIONS, retriable); the markers carry the bumped epoch, so a write at the
    old epoch is INVALID_PRODUCER_EPOCH; a retried EndTxn (the old epoch) gets the same answer,
    a stale one on the next transaction PRODUCER_FENCED; an abort needs no partition; a
    TxnOffsetCommit v5 adds the group's offsets partition itself. READ_COMMITTED readers see the
    committed records only."""
    create_topic(broker, "tv2", partitions=2)
    pid, e0 = init(broker, "v2")
    assert produce_v12(broker, "tv2", 0, txn_batch([b"a0", b"a1"], pid, e0, 0), "v2") == NONE
    assert described(broker, "v2") == ("Ongoing", e0, [("tv2", 0)]), "enrolled by the leader"
    assert lso(broker, "tv2") == 0, "the open transaction holds the LSO"
    assert end_v5(broker, "v2", pid, e0, True) == (NONE, pid, e0 + 1)
    # The next transaction at once, at the bumped epoch (the markers may still be in flight).
    until("the second transaction's first write", lambda: produce_v12(
        broker, "tv2", 1, txn_batch([b"b0"], pid, e0 + 1, 0), "v2") == NONE)
    assert end_v5(broker, "v2", pid, e0, True)[0] == PRODUCER_FENCED, "an old retry on the open transaction"
    assert end_v5(broker, "v2", pid, e0 + 1, False) == (NONE, pid, e0 + 2)
    until("the abort completes", lambda: end_v5(broker, "v2", pid, e0 + 1, False) == (NONE, pid, e0 + 2))
    assert end_v5(broker, "v2", pid, e0 + 1, True) == (INVALID_TXN_STATE, -1, -1), "a retry of the other outcome"
    assert produce_v12(broker, "tv2", 0, txn_batch([b"zombie"], pid, e0, 2), "v2") == INVALID_PRODUCER_EPOCH
    until("both partitions stable", lambda: lso(broker, "tv2", 0) == 3 and lso(broker, "tv2", 1) == 2)
    p0, p1 = fetch_committed(broker, "tv2", partition=0), fetch_committed(broker, "tv2", partition=1)
    assert [v for _, v in v2_values(p0.records)][:2] == [b"a0", b"a1"], "then the commit marker"
    assert p0.aborted_transactions in ([], None)
    assert [(a.producer_id, a.first_offset) for a in p1.aborted_transactions] == [(pid, 0)], "b0 aborted"
    # An abort with nothing written still bumps.
    assert end_v5(broker, "v2", pid, e0 + 2, False) == (NONE, pid, e0 + 3)
    until("the empty abort completes", lambda: described(broker, "v2") == ("CompleteAbort", e0 + 3, []))
    # TxnOffsetCommit v5: the offsets partition joins without AddOffsetsToTxn.
    until("the group coordinator", lambda: call(broker, FindCoordinatorRequest, 3, key="g2",
                                                 key_type=0).error_code == NONE)
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    r = call(broker, TxnOffsetCommitRequest, 5, transactional_id="v2", group_id="g2", producer_id=pid,
             producer_epoch=e0 + 3, generation_id=-1, member_id="", group_instance_id=None, topics=[
                 T(name="tv2", partitions=[T.TxnOffsetCommitRequestPartition(
                     partition_index=0, committed_offset=2, committed_leader_epoch=-1, committed_metadata="")])])
    assert r.topics[0].partitions[0].error_code == NONE
    state, epoch, partitions = described(broker, "v2")
    assert (state, epoch, [t for t, _ in partitions]) == ("Ongoing", e0 + 3, ["__consumer_offsets"])
    assert end_v5(broker, "v2", pid, e0 + 3, True) == (NONE, pid, e0 + 4)
    G = OffsetFetchRequest

    def fetched():
        r = call(broker, G, 7, group_id="g2", topics=[G.OffsetFetchRequestTopic(name="tv2", partition_indexes=[0])],
                 require_stable=True)
        p = r.topics[0].partitions[0]
        return (p.error_code, p.committed_offset)
    until("the committed offset", lambda: fetched() == (NONE, 2))


def test_transactions_v1_and_v2_side_by_side(broker):
    """A producer at transactions version 0 (EndTxn v3, AddPartitionsToTxn v3) keeps its epoch
    across commits and still has its partitions checked, not added (Produce v9 to a partition
    not in the transaction: INVALID_TXN_STATE); the same id may then speak version 2."""
    create_topic(broker, "tv1", partitions=1)
    pid, e0 = init(broker, "v1")
    assert produce(broker, "tv1", 0, txn_batch([b"x"], pid, e0, 0), tid="v1") == INVALID_TXN_STATE
    assert add_partitions(broker, "v1", pid, e0, [("tv1", [0])]) == {("tv1", 0): NONE}
    assert produce(broker, "tv1", 0, txn_batch([b"x"], pid, e0, 0), tid="v1") == NONE
    assert end(broker, "v1", pid, e0, True) == NONE
    until("the commit completes", lambda: described(broker, "v1")[0] == "CompleteCommit")
    assert described(broker, "v1")[1] == e0, "no bump at version 0"
    assert produce_v12(broker, "tv1", 0, txn_batch([b"y"], pid, e0, 1), "v1") == NONE
    assert end_v5(broker, "v1", pid, e0, True) == (NONE, pid, e0 + 1)
    until("committed", lambda: lso(broker, "tv1") == 4)


def test_pipelined_first_writes_keep_their_order(broker):
    """A producer at transactions version 2 pipelines batches on one connection, as Kafka 4's
    Java client does (five in flight): the first batch to a partition waits for the coordinator
    to add it while the next batches to the same partition are already there; each is appended
    in the order sent (no OUT_OF_ORDER_SEQUENCE_NUMBER), across several transactions whose next
    one starts right after the commit, the markers possibly still being written."""
    create_topic(broker, "pipe", partitions=1)
    pid, epoch = init(broker, "p2")
    P = ProduceRequest
    with socket.create_connection(("127.0.0.1", broker.port), timeout=20) as s:
        for txn in range(5):
            frames, corrs = [], []
            for i in range(5):
                req = P[12](transactional_id="p2", acks=-1, timeout_ms=10000, topic_data=[
                    P.TopicProduceData(name="pipe", partition_data=[P.TopicProduceData.PartitionProduceData(
                        index=0, records=txn_batch([b"t%d-%d" % (txn, i)], pid, epoch, i))])])
                corr = 1000 * txn + i + 1
                req.with_header(correlation_id=corr, client_id="pipeline")
                frames.append(req.encode(header=True, framed=True))
                corrs.append((req, corr))
            s.sendall(b"".join(frames))
            for req, corr in corrs:
                size, = struct.unpack(">i", recv_exact(s, 4))
                resp = req.header.get_response_class().decode(recv_exact(s, size), version=12, header=True)
                assert resp.header.correlation_id == corr
                code = resp.responses[0].partition_responses[0].error_code
                assert code == NONE, (txn, corr, code)
            error, pid2, epoch = end_v5(broker, "p2", pid, epoch, True)
            assert (error, pid2) == (NONE, pid)
    until("the last commit's marker", lambda: lso(broker, "pipe") == 30)
    p = fetch_committed(broker, "pipe")
    values = [v for _, v in v2_values(p.records) if v and v.startswith(b"t")]
    assert values == [b"t%d-%d" % (t, i) for t in range(5) for i in range(5)]


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "closed by the broker"
        buf += chunk
    return buf


def test_one_request_enrols_its_partitions_in_one_write(broker):
    """Transactions version 2: a Produce v12 request with transactional batches for three
    partitions adds all three to the transaction in one `__transaction_state` record (as Kafka's
    AddPartitionsToTxnManager sends one AddPartitionsToTxn per request): after InitProducerId
    (one record) the state topic holds two records, not four. A partition the topic lacks is
    refused alone and joins nothing."""
    create_topic(broker, "three", partitions=3)
    pid, e = init(broker, "one-write")
    P = ProduceRequest
    parts = [P.TopicProduceData.PartitionProduceData(index=i, records=txn_batch([b"v%d" % i], pid, e, 0))
             for i in (0, 1, 2, 7)]
    r = call(broker, P, 12, transactional_id="one-write", acks=-1, timeout_ms=10000,
             topic_data=[P.TopicProduceData(name="three", partition_data=parts)])
    codes = {p.index: p.error_code for p in r.responses[0].partition_responses}
    assert codes == {0: NONE, 1: NONE, 2: NONE, 7: UNKNOWN_TOPIC_OR_PARTITION}, codes
    assert described(broker, "one-write") == ("Ongoing", e, [("three", 0), ("three", 1), ("three", 2)])
    written = sum(list_offsets(broker, 5, "__transaction_state", -1, partition=i).offset for i in range(8))
    assert written == 2, "InitProducerId and one enrolment: %d records" % written
