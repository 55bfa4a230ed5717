"""Topics in a cluster of three tidemark processes: created, grown and deleted through
the metadata quorum, placed on the brokers, led by one broker each, with leaderships moving when
a broker is fenced. Three nodes share the machine's two cores: the waits are generous.

Each node is asked directly (raw Metadata v1 and ListOffsets v1) so that what every node says
is checked, not only what a client's chosen broker says; confluent-kafka's clients then produce
and consume through the cluster, following the leaders and the group coordinator.
"""
import os
import signal
import struct
import tempfile
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from test_bad_input import Conn
from test_cluster import WAIT, Cluster

NOT_LEADER_OR_FOLLOWER = 6
LEADER_NOT_AVAILABLE = 5
INVALID_REPLICATION_FACTOR = 38


def metadata(cluster, node):
    return cluster.topics(node)


def list_offset_error(cluster, node, topic, partition):
    """The error node gives ListOffsets v1 (latest) for one partition."""
    name = topic.encode()
    body = struct.pack(">ii", -1, 1) + struct.pack(">h", len(name)) + name + struct.pack(">iiq", 1, partition, -1)
    with Conn(cluster.brokers[node], timeout=10) as c:
        r = c.call(2, 1, body)
        r.i32()
        r.string()
        r.i32()
        _p, error = r.i32(), r.i16()
        return error


def wait_for(what, check, nodes_logs):
    """Poll check() until it returns a true value (returned), within WAIT."""
    deadline = time.time() + WAIT
    last = None
    while time.time() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, AssertionError, EOFError, struct.error) as e:
            last = repr(e)
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {WAIT}s: {last}; logs: {nodes_logs()}")


@pytest.fixture
def cluster():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        c = Cluster(d)
        try:
            for n in (1, 2, 3):
                c.start(n)
            everyone = sorted((n, c.ports[n]) for n in (1, 2, 3))
            c.agreed([1, 2, 3], want_brokers=everyone)
            yield c
        finally:
            c.stop_all()


def logs(cluster):
    """Each node's log for a failure message: the first lines that name a panic or an error
    exit (with the lines after them), then the log's last 2,000 characters."""
    def excerpt(text):
        lines = text.splitlines()
        marks = [i for i, line in enumerate(lines) if "panicked at" in line or line.startswith("Error:")]
        picked = "\n".join("\n".join(lines[i:i + 4]) for i in marks[:3])
        return (picked + "\n...\n" if picked else "") + text[-2000:]
    return lambda: " | ".join(f"node {n}: " + excerpt(b.log()) for n, b in cluster.brokers.items())


def test_topics_are_created_placed_and_deleted_through_the_quorum(cluster):
    """CreateTopics through node 1 with replication factor 3: every node lists the topic with
    the same placement (three distinct replicas per partition, leaders spread two per broker,
    every replica in the ISR: a new partition is empty); a factor above the brokers is INVALID_REPLICATION_FACTOR; a partition asked
    of a node that does not lead it gets NOT_LEADER_OR_FOLLOWER, of its leader no error;
    CreatePartitions and DeleteTopics through node 2 reach every node, and the deleted topic's
    directories are gone from every data directory."""
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    futures = admin.create_topics([NewTopic("t3", 6, 3), NewTopic("too-many", 1, 4)], request_timeout=30)
    futures["t3"].result(30)
    with pytest.raises(KafkaException) as e:
        futures["too-many"].result(30)
    assert e.value.args[0].code() == INVALID_REPLICATION_FACTOR, e.value

    views = wait_for("t3 on every node", lambda: all("t3" in metadata(cluster, n) for n in (1, 2, 3))
                     and {n: metadata(cluster, n)["t3"] for n in (1, 2, 3)}, logs(cluster))
    assert views[1] == views[2] == views[3], views
    parts = views[1]
    assert [p[0] for p in parts] == list(range(6))
    for index, error, leader, replicas, isr in parts:
        assert error == 0 and sorted(replicas) == [1, 2, 3] and isr == replicas, parts
        assert leader == replicas[0], parts
    assert sorted(p[2] for p in parts) == [1, 1, 2, 2, 3, 3], f"leaders balanced: {parts}"

    for index, _, leader, _, _ in parts[:3]:
        assert list_offset_error(cluster, leader, "t3", index) == 0
        other = next(n for n in (1, 2, 3) if n != leader)
        assert list_offset_error(cluster, other, "t3", index) == NOT_LEADER_OR_FOLLOWER
    # KIP-951: Produce v10+ refused by a node that does not lead names the leader, its epoch
    # and its address (kafka-python's own decoding of the tagged fields).
    from test_conformance import ProduceRequest, TIMEOUT as CT, call
    from test_bad_input import v2_batch
    index, _, leader, _, _ = parts[0]
    other = next(n for n in (1, 2, 3) if n != leader)
    P = ProduceRequest
    r = call(cluster.brokers[other], P, 10, transactional_id=None, acks=-1, timeout_ms=CT * 1000, topic_data=[
        P.TopicProduceData(name="t3", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=index, records=v2_batch([b"x"]))])])
    part = r.responses[0].partition_responses[0]
    assert part.error_code == NOT_LEADER_OR_FOLLOWER, r
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, 0), r
    assert [(e.node_id, e.port) for e in r.node_endpoints] == [(leader, cluster.ports[leader])], r
    # Fetch v12 from the same node: the same hint, in the partition's CurrentLeader.
    from test_conformance import fetch
    f = fetch(cluster.brokers[other], 12, [(index, 0)], name="t3")
    fp = f.responses[0].partitions[0]
    assert fp.error_code == NOT_LEADER_OR_FOLLOWER, f
    assert (fp.current_leader.leader_id, fp.current_leader.leader_epoch) == (leader, 0), f

    admin2 = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    admin2.create_partitions([NewPartitions("t3", 8)], request_timeout=30)["t3"].result(30)
    wait_for("8 partitions on every node", lambda: all(len(metadata(cluster, n).get("t3", [])) == 8
                                                        for n in (1, 2, 3)), logs(cluster))
    # Every replica has the partition's directory; no other node has one.
    final = metadata(cluster, 1)["t3"]
    for index, _, _, replicas, _ in final:
        for n in (1, 2, 3):
            has = os.path.isdir(os.path.join(cluster.brokers[n].data_dir, f"t3-{index}"))
            assert has == (n in replicas), (index, n, replicas)

    admin2.delete_topics(["t3"], request_timeout=30)["t3"].result(30)
    wait_for("t3 gone everywhere", lambda: all("t3" not in metadata(cluster, n) for n in (1, 2, 3)), logs(cluster))
    wait_for("t3's directories gone", lambda: not any(
        name.startswith("t3-") for n in (1, 2, 3) for name in os.listdir(cluster.brokers[n].data_dir)), logs(cluster))


def test_clients_follow_leaders_and_a_fenced_leader_leads_again_on_return(cluster):
    """confluent-kafka produces 300 messages to a 6-partition topic of factor 3 and a consumer
    group reads them all back (each request at the partition's leader, the group at the
    coordinator FindCoordinator names). Then one broker (not the active controller) is killed:
    once fenced, each partition it led is led by another in-sync replica and it leaves every
    ISR, while the partitions it did not lead keep their leaders; every message is read back
    from the two left. Restarted, it catches up and rejoins every ISR, and a preferred election
    makes it lead its partitions again, with every message there."""
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CTp
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin.create_topics([NewTopic("orders", 6, 3)], request_timeout=30)["orders"].result(30)
    wait_for("topic on every node", lambda: all("orders" in metadata(cluster, n) for n in (1, 2, 3)), logs(cluster))

    bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(300):
        p.produce("orders", key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(60) == 0, "every message acknowledged"

    def read_all(group):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["orders"])
        got = set()
        deadline = time.time() + WAIT
        while len(got) < 300 and time.time() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.add(m.value())
        c.commit(asynchronous=False)
        c.close()
        return got
    got = read_all("g1")
    assert len(got) == 300, f"read {len(got)} of 300; logs: {logs(cluster)()}"

    before = {i: (l, epoch) for i, _, l, _, _ in metadata(cluster, 1)["orders"] for epoch in [0]}
    controller = cluster.describe(1)[0]
    victim = next(n for n in (1, 2, 3) if n != controller)
    victim_led = [i for i, (l, _) in before.items() if l == victim]
    assert victim_led, before
    cluster.brokers[victim].stop(signal.SIGKILL)

    def fenced():
        orders = {i: (e, l, isr) for i, e, l, _, isr in metadata(cluster, controller)["orders"]}
        return orders if all(orders[i][1] not in (-1, victim) for i in victim_led) else None
    after = wait_for("the killed broker's partitions led by another replica", fenced, logs(cluster))
    for i, (error, leader, isr) in after.items():
        assert error == 0 and victim not in isr and leader in isr, after
        if i not in victim_led:
            assert leader == before[i][0], after
    got = read_all("g2")
    assert len(got) == 300, f"read {len(got)} of 300 with a broker down; logs: {logs(cluster)()}"

    cluster.start(victim)

    def rejoined():
        orders = metadata(cluster, controller)["orders"]
        return all(victim in isr for _, _, _, _, isr in orders)
    wait_for("the returned broker in every ISR again", rejoined, logs(cluster))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.elect_leaders(ElectionType.PREFERRED, [CTp("orders", i) for i in victim_led]).result(30)
    assert all(e is None for e in result.values()), result

    def back():
        orders = {i: l for i, _, l, _, _ in metadata(cluster, controller)["orders"]}
        return all(orders[i] == victim for i in victim_led)
    wait_for("the returned broker leads its partitions again", back, logs(cluster))
    got = read_all("g3")
    assert len(got) == 300, f"read {len(got)} of 300 after the return; logs: {logs(cluster)()}"


def test_a_standalone_data_directory_does_not_join_a_cluster(tmp_path):
    """A data directory holding a standalone node's topics is refused by a clustered start (its
    topics would be replaced by the cluster's), with an error naming them; the data stays."""
    from conftest import Broker, free_port
    d = tmp_path / "node"
    d.mkdir()
    port = free_port()
    b = Broker(str(d), port)
    b.start("--set", "node.id=1")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(30)
    b.stop()
    from test_cluster import cluster_settings
    import subprocess
    from conftest import BIN
    controller = free_port()
    out = subprocess.run([BIN, "serve", "--data-dir", str(d), "--listen", b.bootstrap,
                          *cluster_settings(1, {1: port}, {1: controller})],
                         capture_output=True, timeout=60)
    assert out.returncode != 0
    err = out.stderr.decode()
    assert "standalone" in err and "kept" in err, err
    assert (d / "kept-0").is_dir()


def test_reassignments_and_preferred_leader_election(cluster):
    """kafka-python's AlterPartitionReassignments and ListPartitionReassignments and
    confluent-kafka's ElectLeaders, through different nodes: a reordering of a partition's
    replicas and the removal of a follower complete at once (the removed broker closes its copy
    and answers NOT_LEADER_OR_FOLLOWER); an addition completes once the new replica has copied
    the partition and joined the ISR (its cancellation is the image's unit test); an unknown
    broker is INVALID_REPLICA_ASSIGNMENT; a preferred election makes the in-sync preferred
    replica lead, one needing nothing is ELECTION_NOT_NEEDED."""
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CTp
    from kafka import KafkaAdminClient, TopicPartition

    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin.create_topics([NewTopic("moves", num_partitions=2, replica_assignment=[[1, 2], [2, 3]])],
                        request_timeout=30)["moves"].result(30)
    wait_for("moves on every node", lambda: all("moves" in metadata(cluster, n) for n in (1, 2, 3)), logs(cluster))
    parts = metadata(cluster, 3)["moves"]
    assert [(p[2], p[3], p[4]) for p in parts] == [(1, [1, 2], [1, 2]), (2, [2, 3], [2, 3])], parts
    p = Producer({"bootstrap.servers": cluster.brokers[2].bootstrap, "acks": "all"})
    for i in range(50):
        p.produce("moves", value=f"m{i}".encode(), partition=1)
    assert p.flush(60) == 0

    k = KafkaAdminClient(bootstrap_servers=cluster.brokers[2].bootstrap, request_timeout_ms=30000)
    try:
        tp0, tp1 = TopicPartition("moves", 0), TopicPartition("moves", 1)
        r = k.alter_partition_reassignments({tp0: [2, 1], tp1: [2], TopicPartition("moves", 9): [1]})
        assert r[tp0] is None and r[tp1] is None, r
        assert r[TopicPartition("moves", 9)] is not None, "unknown partition refused"
        r = k.alter_partition_reassignments({tp0: [1, 7]})
        assert r[tp0].errno == 39, r  # INVALID_REPLICA_ASSIGNMENT

        def done():
            p = {i: (l, rep) for i, _, l, rep, _ in metadata(cluster, 1)["moves"]}
            return p if p[0][1] == [2, 1] and p[1][1] == [2] else None
        p = wait_for("reassignments complete", done, logs(cluster))
        assert p[0][0] == 1 and p[1][0] == 2, "the leaders stay"
        assert k.list_partition_reassignments() == {}

        # A new replica joins the ISR once it has the data (replication): then the move
        # completes, on every node.
        r = k.alter_partition_reassignments({tp1: [2, 1]})
        assert r[tp1] is None, r
        wait_for("the addition complete everywhere", lambda: all(
            metadata(cluster, n)["moves"][1][3:] == ([2, 1], [2, 1]) for n in (1, 2, 3)), logs(cluster))
        assert k.list_partition_reassignments() == {}
    finally:
        k.close()

    admin3 = AdminClient({"bootstrap.servers": cluster.brokers[3].bootstrap})
    result = admin3.elect_leaders(ElectionType.PREFERRED, [CTp("moves", 0), CTp("moves", 1)]).result(30)
    errors = {tp.partition: e for tp, e in result.items()}
    assert errors[0] is None, errors  # node 2, preferred and in sync, leads now
    assert errors[1] is not None and errors[1].code() == 84, errors  # ELECTION_NOT_NEEDED
    wait_for("node 2 leads partition 0", lambda: metadata(cluster, 1)["moves"][0][2] == 2, logs(cluster))
    # Node 3 no longer holds partition 1: its copy is closed (kept on disk); node 2 leads it.
    assert list_offset_error(cluster, 2, "moves", 1) == 0
    assert list_offset_error(cluster, 3, "moves", 1) == NOT_LEADER_OR_FOLLOWER


def test_security_state_is_cluster_wide(tmp_path):
    """A user node 1 had before the cluster formed becomes the cluster's; SCRAM credentials set
    through node 1, ACLs created through nodes 2 and 3 at the same time, and a client quota set through node 3 reach every node through the metadata quorum:
    each node's files hold the same state (written by its publisher) and each node describes
    it; neither of the two concurrent ACL changes is lost (the second is made again from the
    first's result); a node restarted keeps it."""
    import threading
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    from test_quotas import alter, describe

    import subprocess
    from conftest import BIN
    c = Cluster(str(tmp_path))
    extra = ("--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "--set", "super.users=User:ANONYMOUS")
    # Node 1 starts with a user of its own (as an operator bootstraps one): the cluster's
    # first version of the credentials is a node's own file.
    subprocess.run([BIN, "user", "add", "admin", "--data-dir", c.brokers[1].data_dir, "--password", "pw"],
                   check=True, capture_output=True)
    try:
        for n in (1, 2, 3):
            c.start(n, *extra)
        c.agreed([1, 2, 3], want_brokers=sorted((n, c.ports[n]) for n in (1, 2, 3)))
        a1 = AdminClient({"bootstrap.servers": c.brokers[1].bootstrap})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        for f in a1.alter_user_scram_credentials([UserScramCredentialUpsertion("alice", info, b"pw")]).values():
            f.result(30)

        def binding(topic):
            return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                              AclOperation.READ, AclPermissionType.ALLOW)
        errors = []

        def create_acl(node, topic):
            try:
                a = AdminClient({"bootstrap.servers": c.brokers[node].bootstrap})
                for f in a.create_acls([binding(topic)]).values():
                    f.result(30)
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=create_acl, args=(n, f"t{n}")) for n in (2, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert alter(c.brokers[3], [("client-id", "slow")], [("producer_byte_rate", 1024)]) == [(0, None)]
        # A cluster-default broker setting through node 2 (IncrementalAlterConfigs on the
        # broker resource ""): every node's broker-configs holds it.
        from test_configs import incremental_raw
        # (The admin clients cannot name the resource "": a raw IncrementalAlterConfigs v0, SET.)
        assert incremental_raw(c.brokers[2], 4, "", ("log.retention.ms", 0, "12345")) == (0, None)
        wait_for("the cluster default on every node", lambda: all(
            "default log.retention.ms=12345" in open(os.path.join(c.brokers[n].data_dir, "broker-configs")).read()
            for n in (1, 2, 3) if os.path.exists(os.path.join(c.brokers[n].data_dir, "broker-configs"))) and all(
            os.path.exists(os.path.join(c.brokers[n].data_dir, "broker-configs")) for n in (1, 2, 3)), logs(c))

        def same_files():
            texts = {}
            for name in ("credentials", "acls", "quotas"):
                found = set()
                for n in (1, 2, 3):
                    path = os.path.join(c.brokers[n].data_dir, name)
                    found.add(open(path).read() if os.path.exists(path) else None)
                if len(found) != 1 or None in found:
                    return None
                texts[name] = found.pop()
            return texts
        texts = wait_for("the same security files on every node", same_files, logs(c))
        # The files name users and resources in base64.
        assert "YWxpY2U=" in texts["credentials"] and "dDI=" in texts["acls"] and "dDM=" in texts["acls"], texts
        assert "YWRtaW4=" in texts["credentials"], "node 1's own user seeded the cluster's credentials"

        acl_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        for n in (1, 2, 3):
            a = AdminClient({"bootstrap.servers": c.brokers[n].bootstrap})
            assert sorted(b.name for b in a.describe_acls(acl_filter).result(30)) == ["t2", "t3"]
            assert describe(c.brokers[n], []) == [((("client-id", "slow"),), (("producer_byte_rate", 1024.0),))]
        users = a1.describe_user_scram_credentials(["alice"])
        assert users["alice"].result(30).user == "alice", users
        c.brokers[2].stop()
        c.start(2, *extra)
        assert describe(c.brokers[2], []) == [((("client-id", "slow"),), (("producer_byte_rate", 1024.0),))]
    finally:
        c.stop_all()


def test_topic_changes_reach_every_node_and_the_metadata_log_stays_small(cluster):
    """Topic creations through node 1 (CreateTopics, one partition, factor 3), each timed until
    all three nodes list it in Metadata, then as many deletions: TIDEMARK_TOPIC_CHANGES changes in
    all (40 in CI; scripts/bench-topics.sh runs 1,000 and reports the figures). Checked: every
    creation is visible everywhere and every deletion gone everywhere; the metadata log's
    directory is printed with its size (segments and snapshot)."""
    changes = int(os.environ.get("TIDEMARK_TOPIC_CHANGES", "40"))
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    names = [f"bench-{i}" for i in range(changes // 2)]
    took = []
    for name in names:
        start = time.time()
        admin.create_topics([NewTopic(name, 1, 3)], request_timeout=30)[name].result(30)
        wait_for(f"{name} everywhere", lambda: all(name in metadata(cluster, n) for n in (1, 2, 3)), logs(cluster))
        took.append(time.time() - start)
    for name in names:
        admin.delete_topics([name], request_timeout=30)[name].result(30)
    wait_for("deletions everywhere", lambda: all(not any(t.startswith("bench-") for t in metadata(cluster, n))
                                                 for n in (1, 2, 3)), logs(cluster))
    took.sort()
    ms = [t * 1000 for t in took]
    print(f"topic creation visible on 3 nodes over {len(ms)} creations: p50 {ms[len(ms) // 2]:.1f} ms, "
          f"p99 {ms[min(len(ms) - 1, int(len(ms) * 0.99))]:.1f} ms, max {ms[-1]:.1f} ms")
    meta = os.path.join(cluster.brokers[1].data_dir, "__cluster_metadata-0")

    def used(f):
        # A segment is preallocated: its bytes in use end at its last non-zero byte.
        data = open(os.path.join(meta, f), "rb").read()
        return len(data.rstrip(b"\0")) if f.endswith(".log") else len(data)
    files = {f: used(f) for f in sorted(os.listdir(meta))}
    print(f"metadata log after {changes} topic changes (+ registrations, {cluster.gauges(1)['tidemark_controller_last_log_index']} "
          f"entries): {sum(files.values())} bytes in use: {files}")


def test_a_returning_node_deletes_only_topics_it_took_from_the_metadata(cluster):
    """A topic is deleted while node 3 is stopped, and a topic the cluster never had (a file
    with its own id, as a standalone node's or an older build's) is put in node 3's data
    directory. Back, node 3 deletes the cluster's topic it recorded (`cluster-topics`) and keeps
    the other on disk, unserved and reported in its log, never deleted."""
    import base64
    from test_bad_input import crc32c
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin.create_topics([NewTopic("gone", 1, 3)], request_timeout=30)["gone"].result(30)
    wait_for("gone on node 3", lambda: "gone" in metadata(cluster, 3), logs(cluster))
    n3 = cluster.brokers[3]
    n3.stop()
    own_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    body = f"tidemark-topic 2\nid={own_id}\npartitions=1\n"
    with open(os.path.join(n3.data_dir, "topics", "stray.topic"), "w") as f:
        f.write(body + "crc32c=%08x\n" % crc32c(body.encode()))
    admin.delete_topics(["gone"], request_timeout=30)["gone"].result(30)
    cluster.start(3)
    wait_for("gone deleted on node 3", lambda: not os.path.exists(os.path.join(n3.data_dir, "topics", "gone.topic")),
             logs(cluster))
    wait_for("the stray reported", lambda: "not the cluster's" in n3.log(), logs(cluster))
    assert os.path.exists(os.path.join(n3.data_dir, "topics", "stray.topic")), "a topic not the cluster's is kept"
    assert "stray" not in metadata(cluster, 1)


def test_a_node_that_missed_many_changes_catches_up_from_a_snapshot(cluster):
    """Node 3 is stopped while 1,200 topic changes commit (more than the 1,000 entries between
    snapshots, so the active controller snapshots and purges what node 3 missed); restarted, it
    installs the snapshot (a snapshot file appears in its metadata directory), and lists exactly
    the topics the others list."""
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    cluster.brokers[3].stop()
    for batch in range(6):
        names = [f"churn-{batch}-{i}" for i in range(100)]
        for f in admin.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=60).values():
            f.result(60)
        if batch < 5:
            for f in admin.delete_topics(names, request_timeout=60).values():
                f.result(60)
    meta = os.path.join(cluster.brokers[3].data_dir, "__cluster_metadata-0")
    assert not any(f.startswith("snapshot-") for f in os.listdir(meta))
    cluster.start(3)

    def caught_up():
        views = [sorted(metadata(cluster, n)) for n in (1, 2, 3)]
        return views[0] == views[1] == views[2] and any(t.startswith("churn-5-") for t in views[2])
    wait_for("node 3 caught up", caught_up, logs(cluster))
    assert any(f.startswith("snapshot-") for f in os.listdir(meta)), os.listdir(meta)
    assert sum(t.startswith("churn-") for t in metadata(cluster, 3)) == 100


def test_the_controller_port_refuses_strangers_before_reading_their_frames(cluster):
    """A quorum connection (its preface, 0xFF 'TMQ') that does not carry the voter set's hash (a
    peer of another cluster) is answered "cluster mismatch" and closed before any frame it
    announces is read, however large. Anything else is taken as a Kafka client of the
    controller listener: a frame size past the limit (an HTTP request's first bytes read as
    one, or 2 GiB) closes the connection unanswered, nothing buffered. The quorum goes on
    serving."""
    import socket
    from test_bad_input import assert_closed, Conn
    port = cluster.controller_ports[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"\xffTMQ" + struct.pack(">Q", 1) + struct.pack(">I", 0x7FFFFFFF))
        size = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
        reply = s.recv(size, socket.MSG_WAITALL)
        assert b"cluster mismatch" in reply, reply
        try:
            closed = s.recv(1) == b""
        except ConnectionResetError:  # closed with the announced frame unread
            closed = True
        assert closed, "closed after the answer"

    class Port:
        pass
    Port.port = port
    for stranger in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", struct.pack(">I", 0x7FFFFFFF) + b"\x00" * 64):
        with Conn(Port, timeout=10) as c:
            c.send(stranger)
            assert_closed(c, repr(stranger[:8]), timeout=10)
    everyone = sorted((n, cluster.ports[n]) for n in (1, 2, 3))
    cluster.agreed([1, 2, 3], want_brokers=everyone)


def test_a_paused_controller_is_replaced_and_steps_down_when_resumed(cluster):
    """Nemesis: SIGSTOP of the active controller's process (a long GC pause, a frozen VM). The
    other two elect another and go on committing topic creations; on SIGCONT the paused node
    learns the new term, steps down (one active controller again, everywhere), takes every
    change it missed, and a creation through it commits. Checker: every topic created is listed
    by all three nodes with one placement, none is lost or doubled."""
    controller = cluster.describe(1)[0]
    others = [n for n in (1, 2, 3) if n != controller]
    os.kill(cluster.brokers[controller].proc.pid, signal.SIGSTOP)
    try:
        new = cluster.agreed(others, not_controller=controller)
        admin = AdminClient({"bootstrap.servers": cluster.brokers[others[0]].bootstrap})
        created = [f"during-pause-{i}" for i in range(5)]
        for f in admin.create_topics([NewTopic(n, 1, 1) for n in created], request_timeout=30).values():
            f.result(30)
    finally:
        os.kill(cluster.brokers[controller].proc.pid, signal.SIGCONT)
    everyone = sorted((n, cluster.ports[n]) for n in (1, 2, 3))
    print(f"paused controller {controller} replaced by {new}; after SIGCONT: "
          f"{cluster.agreed([1, 2, 3], want_brokers=everyone)}")
    back = AdminClient({"bootstrap.servers": cluster.brokers[controller].bootstrap})
    back.create_topics([NewTopic("after-resume", 1, 1)], request_timeout=30)["after-resume"].result(30)
    wanted = set(created) | {"after-resume"}

    def converged():
        views = {n: {t: p for t, p in metadata(cluster, n).items() if t in wanted} for n in (1, 2, 3)}
        return views if set(views[1]) == wanted and views[1] == views[2] == views[3] else None
    views = wait_for("every node lists every topic alike", converged, logs(cluster))
    assert all(len(parts) == 1 for parts in views[1].values()), views[1]
    gauges = {n: cluster.gauges(n) for n in (1, 2, 3)}
    assert sum(g["tidemark_controller_active"] for g in gauges.values()) == 1, gauges
