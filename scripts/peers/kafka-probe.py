#!/usr/bin/env python3
"""Send one Kafka ApiVersions v0 request to HOST:PORT; exit 0 if it answers with error_code 0.

Usage: kafka-probe.py HOST:PORT [--list]   (--list prints "api_key name min max" per line)
Standard library only, so it also runs outside the peers venv.
"""
import socket
import struct
import sys

NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
         9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
         13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
         17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
         21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
         24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit",
         29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs", 33: "AlterConfigs", 35: "DescribeLogDirs",
         36: "SaslAuthenticate", 37: "CreatePartitions", 42: "DeleteGroups",
         44: "IncrementalAlterConfigs", 46: "ListPartitionReassignments",
         47: "OffsetDelete", 50: "DescribeUserScramCredentials",
         51: "AlterUserScramCredentials", 60: "DescribeCluster",
         61: "DescribeProducers", 68: "ConsumerGroupHeartbeat",
         65: "DescribeTransactions", 66: "ListTransactions", 69: "ConsumerGroupDescribe", 71: "GetTelemetrySubscriptions", 75: "DescribeTopicPartitions"}


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def api_versions(host, port, timeout=2.0):
    client_id = b"peer-probe"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        resp = recv_exact(s, size)
    corr, err, n = struct.unpack(">ihi", resp[:10])
    if corr != 1:
        raise ValueError(f"correlation id {corr} != 1")
    apis = [struct.unpack(">hhh", resp[10 + 6 * i:16 + 6 * i]) for i in range(max(n, 0))]
    return err, apis


def main():
    host, _, port = sys.argv[1].rpartition(":")
    try:
        err, apis = api_versions(host or "127.0.0.1", int(port))
    except (OSError, ValueError, struct.error) as e:
        print(f"no Kafka answer from {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    if "--list" in sys.argv:
        for key, lo, hi in sorted(apis):
            print(key, NAMES.get(key, "?"), lo, hi)
    return 0 if err == 0 and apis else 1


if __name__ == "__main__":
    sys.exit(main())
