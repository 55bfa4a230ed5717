"""ACL authorization on the real binary, with Kafka's StandardAuthorizer semantics, over SASL
(users made offline): a super user may do anything; others only what ACLs allow (DENY beats
ALLOW, prefixed patterns); producing, consuming in a group and listing topics are checked as
Kafka checks them; ACLs are made, listed and deleted with librdkafka's admin client (CreateAcls,
DescribeAcls, DeleteAcls) and kept across a restart; without an authorizer the ACL APIs answer
SECURITY_DISABLED."""
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from conftest import BIN
from test_clients import TIMEOUT, create

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = (("admin", "admin-pw"), ("alice", "alice-pw"), ("bob", "bob-pw"))


def settings(b):
    return ("--set", "listeners=SASL_PLAINTEXT://%s" % b.bootstrap, "--set", "authorizer.class.name=" + AUTHORIZER,
            "--set", "super.users=User:admin", "--set", "connection.failed.authentication.delay.ms=10")


@pytest.fixture
def broker(start_broker):
    b = start_broker()
    b.stop()
    for name, password in USERS:
        subprocess.run([BIN, "user", "add", name, "--data-dir", b.data_dir, "--password", password], check=True,
                       capture_output=True)
    b.start(*settings(b))
    return b


def conf(b, user, **extra):
    c = {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
         "sasl.username": user, "sasl.password": dict(USERS)[user]}
    c.update(extra)
    return c


def allow(principal, rt, name, op, pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW):
    return AclBinding(rt, name, pattern, principal, "*", op, permission)


def produce_errors(b, user, topic, n=3):
    """The delivery errors of `n` records produced by `user` (None for each success)."""
    p = Producer(conf(b, user, **{"message.timeout.ms": 8000}))
    errors = []
    for i in range(n):
        p.produce(topic, value=b"%d" % i, on_delivery=lambda err, _m: errors.append(err))
    p.flush(TIMEOUT)
    return errors


def topics_seen(b, user):
    return set(AdminClient(conf(b, user)).list_topics(timeout=TIMEOUT).topics)


def test_acls_decide_who_does_what(broker):
    """The super user creates a topic; alice, with no ACL, neither sees it in Metadata nor
    produces to it (TOPIC_AUTHORIZATION_FAILED); once allowed WRITE and READ on it and READ on
    group g she produces and consumes in that group, while bob is still refused (topic, then
    group) and a DENY for alice on the topic beats her ALLOW; a prefixed ALLOW opens every
    topic with that prefix."""
    b = broker
    admin = AdminClient(conf(b, "admin"))
    create(None, "orders", partitions=1, admin=admin)
    create(None, "pay-in", partitions=1, admin=admin)
    assert "orders" not in topics_seen(b, "alice")
    errs = produce_errors(b, "alice", "orders")
    assert errs and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errs), errs
    bindings = [allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.WRITE),
                allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.READ),
                allow("User:alice", ResourceType.GROUP, "g", AclOperation.READ),
                allow("User:*", ResourceType.TOPIC, "pay-", AclOperation.WRITE, ResourcePatternType.PREFIXED)]
    for f in admin.create_acls(bindings).values():
        f.result(TIMEOUT)
    assert "orders" in topics_seen(b, "alice") and "orders" not in topics_seen(b, "bob")
    assert produce_errors(b, "alice", "orders") == [None] * 3
    assert produce_errors(b, "bob", "pay-in") == [None] * 3, "the prefixed ALLOW for User:*"
    c = Consumer(conf(b, "alice", **{"group.id": "g", "auto.offset.reset": "earliest"}))
    c.subscribe(["orders"])
    seen = 0
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and seen < 3:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen += 1
    c.close()
    assert seen == 3
    bob = Consumer(conf(b, "bob", **{"group.id": "g", "auto.offset.reset": "earliest"}))
    bob.subscribe(["pay-in"])
    error = None
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and error is None:
        try:
            m = bob.poll(0.2)
            if m is not None and m.error() is not None:
                error = m.error()
        except KafkaException as e:
            error = e.args[0]
    bob.close()
    assert error is not None and error.code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                                  KafkaError.TOPIC_AUTHORIZATION_FAILED), error
    deny = allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.WRITE, permission=AclPermissionType.DENY)
    admin.create_acls([deny])[deny].result(TIMEOUT)
    errs = produce_errors(b, "alice", "orders")
    assert all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errs), errs


def test_acl_admin_apis_and_restart(broker):
    """DescribeAcls lists what CreateAcls made (filtered by type and principal); the ACLs
    survive a restart; DeleteAcls returns and removes what its filter matches; a user who is
    not allowed ALTER on the cluster cannot create ACLs (CLUSTER_AUTHORIZATION_FAILED)."""
    b = broker
    admin = AdminClient(conf(b, "admin"))
    made = [allow("User:alice", ResourceType.TOPIC, "t1", AclOperation.READ),
            allow("User:alice", ResourceType.GROUP, "g1", AclOperation.READ),
            allow("User:bob", ResourceType.TOPIC, "t1", AclOperation.DESCRIBE)]
    for f in admin.create_acls(made).values():
        f.result(TIMEOUT)
    alice_topics = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:alice", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    listed = admin.describe_acls(alice_topics).result(TIMEOUT)
    assert [(x.name, x.operation) for x in listed] == [("t1", AclOperation.READ)], listed
    b.stop()
    b.start(*settings(b))
    admin = AdminClient(conf(b, "admin"))
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    assert len(admin.describe_acls(everything).result(TIMEOUT)) == 3, "kept across the restart"
    gone = admin.delete_acls([alice_topics])[alice_topics].result(TIMEOUT)
    assert [(x.name, x.principal) for x in gone] == [("t1", "User:alice")]
    assert len(admin.describe_acls(everything).result(TIMEOUT)) == 2
    sneaky = allow("User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)
    alice = AdminClient(conf(b, "alice"))
    with pytest.raises(KafkaException) as refused:
        alice.create_acls([sneaky])[sneaky].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, refused.value


def test_without_an_authorizer_the_acl_apis_are_disabled(start_broker):
    """No authorizer.class.name: everyone may do anything, and CreateAcls answers
    SECURITY_DISABLED."""
    b = start_broker()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    binding = allow("User:alice", ResourceType.TOPIC, "t", AclOperation.READ)
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([binding])[binding].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED, refused.value


def first_error(consumer, seconds=TIMEOUT):
    """The first error a consumer reports (from poll or raised), or None."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            m = consumer.poll(0.2)
            if m is not None and m.error() is not None:
                return m.error()
        except KafkaException as e:
            return e.args[0]
    return None


def test_group_operations_and_topic_checks_of_groups(broker):
    """KIP-430 for groups: alice, allowed READ on groups g (consumer protocol) and k (classic;
    READ implies DESCRIBE), is told her operations on each when she describes it
    (ConsumerGroupDescribe, DescribeGroups: READ and DESCRIBE, not DELETE), the super user all
    of them. Kafka 4's topic checks (KAFKA-18813): a consumer-protocol (KIP-848) member that
    subscribes to a topic it may not describe gets TOPIC_AUTHORIZATION_FAILED, and describing a
    group that names such a topic gets TOPIC_AUTHORIZATION_FAILED instead of its members."""
    b = broker
    admin = AdminClient(conf(b, "admin"))
    create(None, "orders", partitions=1, admin=admin)
    create(None, "secret", partitions=1, admin=admin)
    bindings = [allow("User:alice", ResourceType.TOPIC, "orders", AclOperation.READ),
                allow("User:alice", ResourceType.GROUP, "g", AclOperation.READ),
                allow("User:alice", ResourceType.GROUP, "h", AclOperation.READ),
                allow("User:alice", ResourceType.GROUP, "k", AclOperation.READ)]
    for f in admin.create_acls(bindings).values():
        f.result(TIMEOUT)
    c = Consumer(conf(b, "alice", **{"group.id": "g", "group.protocol": "consumer", "auto.offset.reset": "earliest"}))
    c.subscribe(["orders"])
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and not c.assignment():
        c.poll(0.2)
    assert c.assignment(), "alice joined g"

    def ops(user, group):
        a = AdminClient(conf(b, user))  # kept alive until the answer comes
        return a.describe_consumer_groups([group], include_authorized_operations=True)[group].result(TIMEOUT)
    assert set(ops("alice", "g").authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert AclOperation.DELETE in set(ops("admin", "g").authorized_operations)
    c.close()
    k = Consumer(conf(b, "alice", **{"group.id": "k", "auto.offset.reset": "earliest"}))  # classic
    k.subscribe(["orders"])
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and not k.assignment():
        k.poll(0.2)
    assert set(ops("alice", "k").authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}, "DescribeGroups"
    k.close()

    h = Consumer(conf(b, "alice", **{"group.id": "h", "group.protocol": "consumer"}))
    h.subscribe(["secret"])
    error = first_error(h)
    h.close()
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    # The super user's member of h subscribes to secret; alice may no longer describe h.
    s = Consumer(conf(b, "admin", **{"group.id": "h", "group.protocol": "consumer"}))
    s.subscribe(["secret"])
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and not s.assignment():
        s.poll(0.2)
    with pytest.raises(KafkaException) as e:
        ops("alice", "h")
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value
    s.close()
