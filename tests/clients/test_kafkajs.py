"""kafkajs (Node.js, its own protocol implementation) against the real tidemark binary on
loopback: acks=all producing with keys, headers and gzip; consumer group members sharing a
topic, committing, and a restarted consumer resuming from the commits; its admin client. The
scripts in tests/clients/js run kafkajs and print what they saw as JSON; the checks are here.
scripts/test installs node, npm and the pinned kafkajs (npm ci in tests/clients/js) and sets
TIDEMARK_REQUIRE_KAFKAJS=1; elsewhere the tests are skipped when kafkajs is not installed."""
import base64
import json
import os
import shutil
import subprocess

import pytest

from test_aiokafka import stored_batches

JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
TIMEOUT = 180  # one script, at most (each bounds its own waits to 60 s)
NONE = 0
TOPIC_CONFIG = 1  # DescribeConfigs config source: the topic's own setting
DEFAULT_CONFIG = 5


@pytest.fixture(scope="module")
def node():
    path = shutil.which("node")
    if path is None or not os.path.isdir(os.path.join(JS, "node_modules", "kafkajs")):
        if os.environ.get("TIDEMARK_REQUIRE_KAFKAJS") == "1":
            raise AssertionError("node and kafkajs are required here (scripts/test installs them)")
        pytest.skip("node or kafkajs not installed (npm ci --prefix tests/clients/js)")
    return path


def run(node, script, **args):
    """Runs tests/clients/js/<script> with args; its result (the last line of stdout)."""
    r = subprocess.run([node, os.path.join(JS, script), json.dumps(args)], capture_output=True, timeout=TIMEOUT)
    log = r.stderr.decode(errors="replace")[-6000:]
    assert r.returncode == 0, "%s failed (exit %d):\n%s" % (script, r.returncode, log)
    return json.loads(r.stdout.decode().splitlines()[-1])


def b(s):
    return None if s is None else base64.b64decode(s)


def by_partition(records):
    out = {}
    for r in records:
        out.setdefault((r["topic"], r["partition"]), []).append(r)
    return out


def test_produce_keys_headers_gzip(broker, node):
    """kafkajs produces with acks=all to three partitions: an uncompressed and a gzip batch to
    each (keys, string, empty, binary and repeated headers, a null value); then, idempotent
    (InitProducerId), keyed records left to its partitioner, records with explicit timestamps,
    and one gzip sendBatch over two topics.
    Every send is answered without error at the expected base offset; the broker stores the gzip
    batches compressed; a group member reading from the beginning gets every record exactly
    once, offsets 0.. in send order per partition, keys, values, headers and CreateTime
    timestamps intact."""
    out = run(node, "produce.js", bootstrap=broker.bootstrap, topic="js-p", other="js-p2")
    res = {(r["codec"], r["partition"]): r for r in out["results"]}
    for part in range(3):
        assert (res["none", part]["errorCode"], res["none", part]["baseOffset"]) == (NONE, "0")
        assert (res["gzip", part]["errorCode"], res["gzip", part]["baseOffset"]) == (NONE, "20")
        batches = stored_batches(broker, "js-p", part)
        assert [(c, pid) for _, _, c, pid in batches[:2]] == [(None, -1), ("gzip", -1)], (part, batches)
        assert all(pid >= 0 for _, _, _, pid in batches[2:]), "the idempotent producer's batches"
    assert [r["baseOffset"] for r in out["results"] if r["codec"] == "ts"] == ["40", "41", "42"]
    assert all(r["errorCode"] == NONE for r in out["keyedResults"] + out["batchResults"])
    assert [c for _, _, c, _ in stored_batches(broker, "js-p2", 0)] == ["gzip"]

    read = by_partition(out["read"])
    assert sum(map(len, read.values())) == len(out["sent"]) + len(out["keyed"]) + 3
    for recs in read.values():
        assert [r["offset"] for r in recs] == list(range(len(recs))), "each offset once, in order"
        assert all(r["timestampType"] == 0 for r in recs)
    # The partitioner keeps a key on one partition (and 6 keys do not all land on one).
    keyed_at = {}
    for (topic, part), recs in read.items():
        for r in recs:
            if r["value"] and b(r["value"]).startswith(b"keyed-"):
                keyed_at.setdefault(b(r["key"]), set()).add(part)
    assert len(keyed_at) == 6 and all(len(ps) == 1 for ps in keyed_at.values()), keyed_at
    assert len(set().union(*keyed_at.values())) > 1, keyed_at
    # Per partition, exactly what was sent, in send order.
    for part in range(3):
        want = [(b(s["key"]), b(s["value"]), s["timestamp"], s["codec"]) for s in out["sent"]
                if s["partition"] == part and s["codec"] != "ts"]
        want += [(m["key"].encode(), m["value"].encode(), None, "keyed") for m in out["keyed"]
                 if part in keyed_at[m["key"].encode()]]
        want += [(b(s["key"]), b(s["value"]), s["timestamp"], "ts") for s in out["sent"]
                 if s["partition"] == part and s["codec"] == "ts"]
        if part == 1:
            want.append((b"batch", b"batch-a", None, "batch"))
        recs = read["js-p", part]
        assert [(b(r["key"]), b(r["value"])) for r in recs] == [(k, v) for k, v, _, _ in want], part
        for n, (r, (_, _, ts, codec)) in enumerate(zip(recs, want)):
            if codec in ("none", "gzip"):
                i = n % 20  # offsets 0-19 uncompressed, 20-39 gzip
                assert r["headers"] == {"codec": base64.b64encode(codec.encode()).decode(),
                                        "i": base64.b64encode(b"%d" % i).decode(), "empty": "",
                                        "bin": base64.b64encode(bytes([0, 255, i])).decode(),
                                        "twice": [base64.b64encode(b"a").decode(), base64.b64encode(b"b").decode()]}
            else:
                assert r["headers"] == {}
            if ts is None:
                assert out["before"] - 1000 <= r["timestamp"] <= out["after"] + 1000, (r, out["before"], out["after"])
            else:
                assert r["timestamp"] == ts
    assert [(b(r["key"]), b(r["value"])) for r in read["js-p2", 0]] == [(b"batch", b"batch-b"), (None, b"batch-c")]


def test_group_members_share_commit_and_resume(broker, node):
    """Two kafkajs members of one group split a 4-partition topic (disjoint, covering it, no
    rebalance while reading); the records produced after that are read exactly once, each by the
    member owning its partition, in order, and committed (OffsetFetch through the admin: 30
    everywhere). The second member leaves (LeaveGroup); the first, owning every partition, reads
    only the later records, from the other's commits. Then, in a new process (a restarted
    consumer), a member of the same group reads only what was produced while the group was
    empty, from offset 40, and commits 45."""
    args = dict(bootstrap=broker.bootstrap, topic="js-g", groupId="js-group")
    out = run(node, "group.js", mode="members", **args)
    s1, s2 = out["split"]
    assert len(s1) == 2 and sorted(s1 + s2) == [0, 1, 2, 3], out["split"]
    assert out["splitAfter"] == out["split"] and out["rejoinsDuringOne"] == 0

    def check(records, tag, first, per_partition, owner):
        parts = by_partition(records)
        assert sorted(parts) == [("js-g", p) for p in range(4)]
        for (_, p), recs in parts.items():
            assert [r["offset"] for r in recs] == list(range(first, first + per_partition)), (tag, p)
            assert [(b(r["key"]), b(r["value"])) for r in recs] == \
                [(b"k%d" % i, b"%s-%d-%d" % (tag, p, i)) for i in range(per_partition)]
            assert all(r["headers"] == {"tag": base64.b64encode(tag).decode()} for r in recs)
            assert {r["member"] for r in recs} == {owner(p)}, "read by the partition's owner only"
    check(out["one"], b"one", 0, 30, lambda p: 1 if p in s1 else 2)
    assert out["committedOne"] == {str(p): 30 for p in range(4)}
    check(out["two"], b"two", 30, 10, lambda p: 1)
    assert out["committedTwo"] == {str(p): 40 for p in range(4)}

    out = run(node, "group.js", mode="resume", **args)
    assert out["committedBefore"] == {str(p): 40 for p in range(4)}
    assert out["assignment"] == [0, 1, 2, 3]
    check(out["three"], b"three", 40, 5, lambda p: 3)
    assert out["committedAfter"] == {str(p): 45 for p in range(4)}


def test_admin_client(broker, node):
    """kafkajs's admin client: CreateTopics with configs (again: already exists; a bad value:
    INVALID_CONFIG; validate_only creates nothing), listTopics, fetchTopicMetadata,
    describeCluster, DescribeConfigs (values, sources, defaults), AlterConfigs read back,
    CreatePartitions (a decrease: INVALID_PARTITIONS), ListOffsets (earliest, latest, by time),
    ListGroups and DescribeGroups (a stable group, its member and assignment, then Empty),
    DeleteGroups refused while the group has a member (NON_EMPTY_GROUP), OffsetFetch (by topic
    and all), offsets set by the admin, DeleteRecords (the low watermark moves; past the high
    watermark: OFFSET_OUT_OF_RANGE), DeleteGroups and DeleteTopics."""
    out = run(node, "admin.js", bootstrap=broker.bootstrap, topic="js-adm")
    ok = {k: v.get("ok") for k, v in out.items()}
    err = {k: v["error"] for k, v in out.items() if "error" in v}
    assert set(err) == {"createBadConfig", "shrink", "deleteNonEmptyGroup", "deleteRecordsPastEnd"}, err

    assert ok["create"] is True and ok["createAgain"] is False  # false: TOPIC_ALREADY_EXISTS
    assert err["createBadConfig"]["types"] == ["INVALID_CONFIG"]
    assert ok["createValidateOnly"] is True
    assert "js-adm" in ok["listTopics"] and "js-adm-bad" not in ok["listTopics"]
    assert "js-adm-validate" not in ok["listTopics"], "validate_only created the topic"
    (t,) = ok["metadata"]["topics"]
    assert t["name"] == "js-adm"
    assert [(p["partitionId"], p["leader"], p["replicas"], p["partitionErrorCode"]) for p in t["partitions"]] == \
        [(0, 0, [0], NONE), (1, 0, [0], NONE)]
    # The cluster id is the data directory's (meta.properties), a Kafka UUID of 22 characters.
    with open(os.path.join(broker.data_dir, "meta.properties")) as f:
        cluster_id = dict(line.strip().split("=", 1) for line in f if "=" in line)["cluster.id"]
    assert len(cluster_id) == 22
    assert ok["cluster"] == {"brokers": [{"nodeId": 0, "host": "127.0.0.1", "port": broker.port}],
                             "controller": 0, "clusterId": cluster_id}

    # [value, source, isDefault, readOnly]
    assert ok["configs"] == [{"errorCode": NONE, "entries": {
        "retention.ms": ["3600000", TOPIC_CONFIG, False, False],
        "max.message.bytes": ["200000", TOPIC_CONFIG, False, False],
        "cleanup.policy": ["delete", DEFAULT_CONFIG, True, False]}}]
    assert [r["errorCode"] for r in ok["alter"]["resources"]] == [NONE]
    # AlterConfigs replaces the topic's overrides with the given set.
    assert ok["configsAfter"] == [{"errorCode": NONE, "entries": {
        "retention.ms": ["7200000", TOPIC_CONFIG, False, False],
        "max.message.bytes": ["1048588", DEFAULT_CONFIG, True, False]}}]

    assert err["shrink"]["types"] == ["INVALID_PARTITIONS"]
    assert [p["partitionId"] for p in ok["metadataAfter"]["topics"][0]["partitions"]] == [0, 1, 2, 3]
    assert ok["offsets"] == [{"partition": p, "low": 0, "high": 10} for p in range(4)]
    assert ok["byTimestamp"] == [{"partition": p, "offset": 4} for p in range(4)], "first record at or after T"

    group = "js-adm-group"
    assert {"groupId": group, "protocolType": "consumer"} in ok["listGroups"]["groups"]
    (g,) = ok["describeGroup"]
    assert (g["errorCode"], g["groupId"], g["state"], g["protocolType"]) == (NONE, group, "Stable", "consumer"), g
    (m,) = g["members"]
    assert m["clientId"] == "kafkajs-admin" and m["clientHost"].startswith("/127.0.0.1"), m
    assert m["assignment"] == {"js-adm": [0, 1, 2, 3]}
    assert err["deleteNonEmptyGroup"]["types"] == ["NON_EMPTY_GROUP"]
    assert ok["describeEmptyGroup"] == [{"state": "Empty", "members": 0}]
    want = [{"topic": "js-adm", "partitions": [{"partition": p, "offset": "10", "metadata": None} for p in range(4)]}]
    assert ok["fetchOffsets"] == want and ok["fetchOffsetsAllTopics"] == want
    assert [(p["partition"], p["offset"]) for p in ok["offsetsAfterSet"][0]["partitions"]] == \
        [(0, "3"), (1, "10"), (2, "10"), (3, "7")]

    assert ok["offsetsAfterDelete"] == [{"partition": 0, "low": 0, "high": 10}, {"partition": 1, "low": 6, "high": 10},
                                        {"partition": 2, "low": 10, "high": 10}, {"partition": 3, "low": 0, "high": 10}]
    assert err["deleteRecordsPastEnd"]["types"] == ["OFFSET_OUT_OF_RANGE"]
    assert ok["deleteGroup"] == [{"groupId": group, "errorCode": NONE}]
    assert group not in [g["groupId"] for g in ok["listGroupsAfter"]["groups"]]
    assert "js-adm" not in ok["listTopicsAfter"]


def test_transactions_commit_abort_and_offsets(broker, node):
    """kafkajs's transactional producer: a committed transaction's records (on two partitions)
    and its group offsets (sendOffsets) become visible; an aborted one's records reach a
    read_uncommitted consumer only."""
    r = run(node, "transactions.js", bootstrap=broker.bootstrap, topic="js-txn")
    assert sorted(r["readCommitted"]) == ["c0", "c1", "c2", "c3"], r
    assert sorted(r["readUncommitted"]) == ["a0", "a1", "c0", "c1", "c2", "c3"], r
    assert sorted(map(tuple, r["offsets"])) == [(0, 2), (1, -1)], r
