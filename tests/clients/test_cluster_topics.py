"""Topics in a cluster of three tidemark processes (issue 20): created, grown and deleted through
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
        time.sleep(0.2)
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
    return lambda: " | ".join(f"node {n}: " + b.log()[-2000:] for n, b in cluster.brokers.items())


def test_topics_are_created_placed_and_deleted_through_the_quorum(cluster):
    """CreateTopics through node 1 with replication factor 3: every node lists the topic with
    the same placement (three distinct replicas per partition, all in the ISR, leaders spread
    two per broker); a factor above the brokers is INVALID_REPLICATION_FACTOR; a partition asked
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
        assert error == 0 and sorted(replicas) == [1, 2, 3] and sorted(isr) == [1, 2, 3], parts
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


def test_clients_follow_leaders_and_leaderships_move_when_a_broker_is_fenced(cluster):
    """confluent-kafka produces 300 messages to a 6-partition topic of factor 3 and a consumer
    group reads them all back (each request at the partition's leader, the group at the
    coordinator FindCoordinator names). Then one broker is killed: once fenced, the partitions
    it led are led by another ISR member at a higher leader epoch, it leaves every ISR, and a
    factor-1 topic's partition it held has no leader (LEADER_NOT_AVAILABLE) until it comes back,
    when it leads that partition again."""
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    futures = admin.create_topics([NewTopic("orders", 6, 3), NewTopic("solo", 3, 1)], request_timeout=30)
    for f in futures.values():
        f.result(30)
    wait_for("topics on every node", lambda: all({"orders", "solo"} <= set(metadata(cluster, n)) for n in (1, 2, 3)),
             logs(cluster))

    bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(300):
        p.produce("orders", key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(60) == 0, "every message acknowledged"

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g1", "auto.offset.reset": "earliest",
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
    assert len(got) == 300, f"read {len(got)} of 300; logs: {logs(cluster)()}"

    before = {name: {i: (l, r, isr) for i, _, l, r, isr in parts} for name, parts in metadata(cluster, 1).items()}
    controller = cluster.describe(1)[0]
    victim = next(n for n in (1, 2, 3) if n != controller)
    victim_led = [i for i, (l, _, _) in before["orders"].items() if l == victim]
    assert victim_led, before
    cluster.brokers[victim].stop(signal.SIGKILL)
    survivor = controller

    def moved():
        after = metadata(cluster, survivor)
        orders = {i: (l, isr) for i, _, l, _, isr in after["orders"]}
        if any(l == victim or victim in isr for l, isr in orders.values()):
            return None
        return after
    after = wait_for("leaderships moved off the killed broker", moved, logs(cluster))
    for i, error, leader, _replicas, isr in after["orders"]:
        assert error == 0 and leader != victim and leader in isr, after["orders"]
    solo_victim = [i for i, (l, _, _) in before["solo"].items() if l == victim]
    for i, error, leader, _replicas, isr in after["solo"]:
        if i in solo_victim:
            assert (error, leader, isr) == (LEADER_NOT_AVAILABLE, -1, [victim]), after["solo"]
        else:
            assert error == 0 and leader != victim

    cluster.start(victim)

    def back():
        solo = {i: l for i, _, l, _, _ in metadata(cluster, survivor)["solo"]}
        return all(solo[i] == victim for i in solo_victim)
    wait_for("the returned broker leads its factor-1 partitions again", back, logs(cluster))


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
    replicas completes at once (every replica in sync) and a preferred election then hands the
    leadership to the new first replica; a removal completes at once, the removed broker leaves
    the replicas and closes its copy; an addition stays under way (listed with its adding
    replica) until the new replica is in sync, and its cancellation restores the replicas;
    an unknown broker is INVALID_REPLICA_ASSIGNMENT; an election needing nothing says
    ELECTION_NOT_NEEDED."""
    from confluent_kafka import TopicPartition as CTp
    from confluent_kafka import ElectionType
    from kafka import KafkaAdminClient, TopicPartition

    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin.create_topics([NewTopic("moves", num_partitions=2, replica_assignment=[[1, 2], [2, 3]])],
                        request_timeout=30)["moves"].result(30)
    wait_for("moves on every node", lambda: all("moves" in metadata(cluster, n) for n in (1, 2, 3)), logs(cluster))
    parts = metadata(cluster, 3)["moves"]
    assert [(p[2], p[3]) for p in parts] == [(1, [1, 2]), (2, [2, 3])], parts

    k = KafkaAdminClient(bootstrap_servers=cluster.brokers[2].bootstrap, request_timeout_ms=30000)
    try:
        r = k.alter_partition_reassignments({TopicPartition("moves", 0): [2, 1], TopicPartition("moves", 1): [3],
                                             TopicPartition("moves", 9): [1]})
        assert r[TopicPartition("moves", 0)] is None and r[TopicPartition("moves", 1)] is None, r
        assert r[TopicPartition("moves", 9)] is not None, "unknown partition refused"
        r = k.alter_partition_reassignments({TopicPartition("moves", 0): [1, 7]})
        assert r[TopicPartition("moves", 0)].errno == 39, r  # INVALID_REPLICA_ASSIGNMENT

        def reordered():
            p = {i: (l, rep, isr) for i, _, l, rep, isr in metadata(cluster, 1)["moves"]}
            return p if p[0][1] == [2, 1] and p[1][1] == [3] else None
        p = wait_for("reassignments complete", reordered, logs(cluster))
        assert p[0][0] == 1, "the leader stays while it is a replica"
        assert p[1][0] == 3 and p[1][2] == [3], "the removed leader hands over"
        assert k.list_partition_reassignments() == {}

        # A new replica is not in sync until it has the data (replication): the move stays
        # under way, listed, until cancelled.
        r = k.alter_partition_reassignments({TopicPartition("moves", 1): [3, 1]})
        assert r[TopicPartition("moves", 1)] is None, r
        ongoing = wait_for("the addition listed", lambda: k.list_partition_reassignments(), logs(cluster))
        assert ongoing == {TopicPartition("moves", 1): {"replicas": [3, 1], "adding_replicas": [1],
                                                       "removing_replicas": []}}, ongoing
        r = k.alter_partition_reassignments({TopicPartition("moves", 1): None})
        assert r[TopicPartition("moves", 1)] is None, r
        wait_for("the cancellation", lambda: k.list_partition_reassignments() == {}, logs(cluster))
        wait_for("the replicas restored everywhere",
                 lambda: all(metadata(cluster, n)["moves"][1][3] == [3] for n in (1, 2, 3)), logs(cluster))
    finally:
        k.close()

    admin3 = AdminClient({"bootstrap.servers": cluster.brokers[3].bootstrap})
    result = admin3.elect_leaders(ElectionType.PREFERRED, [CTp("moves", 0), CTp("moves", 1)]).result(30)
    errors = {tp.partition: e for tp, e in result.items()}
    assert errors[0] is None, errors
    assert errors[1] is not None and errors[1].code() == 84, errors  # ELECTION_NOT_NEEDED
    wait_for("partition 0 led by its preferred replica",
             lambda: all(metadata(cluster, n)["moves"][0][2] == 2 for n in (1, 2, 3)), logs(cluster))
    # Node 2 no longer holds partition 1: its copy is closed (kept on disk), node 3's open.
    assert list_offset_error(cluster, 3, "moves", 1) == 0
    assert list_offset_error(cluster, 2, "moves", 1) == NOT_LEADER_OR_FOLLOWER


def test_security_state_is_cluster_wide(tmp_path):
    """SCRAM credentials set through node 1, ACLs created through nodes 2 and 3 at the same
    time, and a client quota set through node 3 reach every node through the metadata quorum:
    each node's files hold the same state (written by its publisher) and each node describes
    it; neither of the two concurrent ACL changes is lost (the second is made again from the
    first's result); a node restarted keeps it."""
    import threading
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    from test_quotas import alter, describe

    c = Cluster(str(tmp_path))
    extra = ("--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "--set", "super.users=User:ANONYMOUS")
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
