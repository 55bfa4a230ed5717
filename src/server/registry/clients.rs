//! What clients may ask and hold: requests, connections and memory; consumer groups and
//! committed offsets; transactions.

use super::*;

/// Requests, connections and memory.
pub const REQUESTS: &[Setting] = &[
    Setting {
        take: |c, v| {
            c.max_request_bytes = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.max_request_bytes.to_string()),
        ..Setting::int("socket.request.max.bytes", 1024, I32, "104857600", "Largest request frame; a larger one closes the connection.")
    },
    Setting {
        change: Change::Dynamic,
        take: |c, v| {
            c.limits.max_connections = v.int()? as usize;
            Ok(())
        },
        show: Some(|_, e| e.max_connections.to_string()),
        ..Setting::int("max.connections", 1, I32, "10000", "Client connections the broker keeps at once (all shards); a new one past it is closed at once.")
    },
    Setting {
        change: Change::Dynamic,
        take: |c, v| {
            c.limits.max_connections_per_ip = v.int()? as usize;
            Ok(())
        },
        show: Some(|_, e| e.max_connections_per_ip.to_string()),
        ..Setting::int("max.connections.per.ip", 1, I32, "1000", "Connections from one client address; a new one past it is closed at once.")
    },
    Setting {
        take: |c, v| {
            c.limits.connections_max_idle = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.limits.connections_max_idle.as_millis().to_string()),
        ..Setting::long(
            "connections.max.idle.ms",
            100,
            i64::MAX,
            "600000",
            "A connection that sends nothing this long is closed; also the longest a started request may take to arrive.",
        )
    },
    Setting {
        take: |c, v| {
            c.limits.max_inflight_per_connection = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.limits.max_inflight_per_connection.to_string()),
        ..Setting::int(
            "tidemark.max.inflight.requests.per.connection",
            1,
            1024,
            "16",
            "Requests of one connection read and not yet answered; the reader waits beyond it (answers stay in request order).",
        )
    },
    Setting {
        take: |c, v| {
            c.limits.queued_max_request_bytes = v.int()? as u64;
            Ok(())
        },
        show: Some(|c, _| c.limits.queued_max_request_bytes.to_string()),
        ..Setting::long(
            "queued.max.request.bytes",
            1 << 20,
            i64::MAX,
            "536870912",
            "Bytes of request frames read and not yet answered, per broker (an equal share per shard); readers wait beyond it. Kafka's -1 (unbounded) is refused.",
        )
    },
    Setting {
        take: |c, v| {
            c.limits.fetch_max_bytes = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.limits.fetch_max_bytes.to_string()),
        ..Setting::int("fetch.max.bytes", 1024, I32, "57671680", "The most one Fetch response carries (a request asking more gets this; the first batch is whole, KIP-74).")
    },
    Setting {
        take: |c, v| {
            c.limits.fetch_max_memory_bytes = v.int()? as u64;
            Ok(())
        },
        show: Some(|c, _| c.limits.fetch_max_memory_bytes.to_string()),
        ..Setting::long(
            "tidemark.fetch.max.memory.bytes",
            1 << 20,
            i64::MAX,
            "536870912",
            "Bytes of fetched records held for responses not yet written, per broker (an equal share per shard).",
        )
    },
    Setting {
        take: |c, v| {
            c.shard_io_memory = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.shard_io_memory.to_string()),
        ..Setting::long(
            "tidemark.shard.io.memory.bytes",
            64 << 10,
            1 << 40,
            "134217728",
            "Each shard's pool of DMA buffers registered with io_uring (write tails, disk reads), resident from start (docs/operations.md, Limits). Static.",
        )
    },
    Setting {
        take: |c, v| {
            c.batch_cache = v.flag()?;
            Ok(())
        },
        show: Some(|c, _| c.batch_cache.to_string()),
        ..Setting::flag(
            "tidemark.batch.cache.enable",
            "true",
            "Each shard keeps recently written and read log bytes in memory, within its share of `tidemark.fetch.max.memory.bytes`, for consumers at the tail (docs/architecture.md, Batch cache). Static.",
        )
    },
    Setting {
        take: |c, v| {
            c.shard_call_timeout = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.shard_call_timeout.as_millis().to_string()),
        ..Setting::long(
            "tidemark.shard.call.timeout.ms",
            100,
            I32,
            "30000",
            "How long a call to another shard (an append, a read, a topic change) may take before the client is answered REQUEST_TIMED_OUT, with a log line (at most one a second) and `tidemark_shard_call_timeouts_total`. The work itself is not cancelled. Long polls and rebalances wait as long as their requests ask.",
        )
    },
];

/// Consumer groups and committed offsets.
pub const GROUPS: &[Setting] = &[
    Setting {
        take: |c, v| {
            c.coordinator.limits.min_session_timeout_ms = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.limits.min_session_timeout_ms.to_string()),
        ..Setting::int(
            "group.min.session.timeout.ms",
            1,
            I32,
            "6000",
            "JoinGroup with a shorter session timeout: INVALID_SESSION_TIMEOUT.",
        )
    },
    Setting {
        take: |c, v| {
            c.coordinator.limits.max_session_timeout_ms = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.limits.max_session_timeout_ms.to_string()),
        ..Setting::int(
            "group.max.session.timeout.ms",
            1,
            I32,
            "1800000",
            "JoinGroup with a longer session timeout: INVALID_SESSION_TIMEOUT.",
        )
    },
    Setting {
        take: |c, v| {
            c.coordinator.limits.initial_rebalance_delay_ms = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.limits.initial_rebalance_delay_ms.to_string()),
        ..Setting::int(
            "group.initial.rebalance.delay.ms",
            0,
            I32,
            "3000",
            "The first rebalance of an empty group waits this long for more members, each new member extending the wait, up to the rebalance timeout.",
        )
    },
    Setting {
        take: |c, v| {
            c.coordinator.limits.max_size = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.limits.max_size.to_string()),
        ..Setting::int("group.max.size", 1, 1_000_000, "1000", "Members a group takes; more: GROUP_MAX_SIZE_REACHED.")
    },
    Setting {
        take: |c, v| {
            c.coordinator.consumer.heartbeat_interval_ms = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.consumer.heartbeat_interval_ms.to_string()),
        ..Setting::int(
            "group.consumer.heartbeat.interval.ms",
            1,
            I32,
            "5000",
            "How often members of a consumer-protocol group (KIP-848) heartbeat; the broker tells them. Kafka bounds it by `group.consumer.min/max.heartbeat.interval.ms`; tidemark takes any positive value (tests use short ones).",
        )
    },
    Setting {
        take: |c, v| {
            c.coordinator.consumer.session_timeout_ms = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.consumer.session_timeout_ms.to_string()),
        ..Setting::int(
            "group.consumer.session.timeout.ms",
            1,
            I32,
            "45000",
            "A consumer-protocol member silent this long is fenced and its partitions reassigned.",
        )
    },
    Setting {
        take: |c, v| {
            c.coordinator.consumer.max_size = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.consumer.max_size.to_string()),
        ..Setting::int("group.consumer.max.size", 1, I32, "2147483647", "Members a consumer-protocol group takes; more: GROUP_MAX_SIZE_REACHED.")
    },
    Setting {
        default: Some("bidirectional"),
        valid: "`bidirectional`, `upgrade`, `downgrade`, `disabled`",
        take: |c, v| {
            let Some(policy) = crate::groups::consumer::MigrationPolicy::parse(v.value) else {
                bail!("{}={}: must be bidirectional, upgrade, downgrade or disabled", v.key, v.value);
            };
            c.coordinator.consumer.migration = policy;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.consumer.migration.name().to_string()),
        ..Setting::text(
            "group.consumer.migration.policy",
            "Which online conversions a group with members may make (KIP-848): upgrade, a classic group of consumers becomes a consumer group at the first ConsumerGroupHeartbeat; downgrade, a consumer group whose last consumer-protocol member left becomes classic. Empty groups convert either way whatever the policy.",
        )
    },
    Setting {
        take: |c, v| {
            c.coordinator.offsets_partitions = v.int()? as u32;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.offsets_partitions.to_string()),
        ..Setting::int(
            "offsets.topic.num.partitions",
            1,
            1000,
            "8",
            "Partitions of `__consumer_offsets` when it is created (at the first start); a group lives on partition `crc32c(group id) % partitions`. Changing it afterwards has no effect: the existing topic's count is used. Kafka's default: 50.",
        )
    },
    Setting {
        take: |c, v| {
            c.coordinator.offsets_segment_bytes = v.int()? as u64;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.offsets_segment_bytes.to_string()),
        ..Setting::int(
            "offsets.topic.segment.bytes",
            1 << 20,
            I32,
            "104857600",
            "`segment.bytes` of `__consumer_offsets` when it is created.",
        )
    },
    Setting {
        take: |c, v| {
            // Metadata travels in int16 strings in the offset records.
            c.coordinator.metadata_max_bytes = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.metadata_max_bytes.to_string()),
        ..Setting::int("offset.metadata.max.bytes", 0, I16, "4096", "Longest metadata string of a committed offset; longer: OFFSET_METADATA_TOO_LARGE for that partition.")
    },
    Setting {
        take: |c, v| {
            c.coordinator.compaction_bytes = v.int()? as u64;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.compaction_bytes.to_string()),
        ..Setting::long(
            "tidemark.offsets.compaction.bytes",
            0,
            i64::MAX,
            "16777216",
            "A `__consumer_offsets` partition larger than this (and than twice its live offsets) is compacted: every live offset is written again in a new segment and the segments before it are deleted.",
        )
    },
    Setting {
        take: |c, v| {
            c.coordinator.compaction_check = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.coordinator.compaction_check.as_millis().to_string()),
        ..Setting::long(
            "tidemark.offsets.compaction.check.ms",
            100,
            i64::MAX,
            "10000",
            "How often offsets partitions are looked at for compaction.",
        )
    },
];

/// Transactions.
pub const TRANSACTIONS: &[Setting] = &[
    Setting {
        take: |c, v| {
            c.txn.partitions = v.int()? as u32;
            Ok(())
        },
        show: Some(|c, _| c.txn.partitions.to_string()),
        ..Setting::int(
            "transaction.state.log.num.partitions",
            1,
            1000,
            "8",
            "Partitions of `__transaction_state` when it is created (at the first start); a transactional id lives on partition `abs(hashCode(id)) % partitions` (Kafka's), served by the shard owning it. Changing it afterwards has no effect. Kafka's default: 50.",
        )
    },
    Setting {
        take: |c, v| {
            c.txn.segment_bytes = v.int()? as u64;
            Ok(())
        },
        show: Some(|c, _| c.txn.segment_bytes.to_string()),
        ..Setting::int(
            "transaction.state.log.segment.bytes",
            1 << 20,
            I32,
            "104857600",
            "`segment.bytes` of `__transaction_state` when it is created.",
        )
    },
    Setting {
        take: |c, v| {
            c.txn.max_timeout_ms = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.txn.max_timeout_ms.to_string()),
        ..Setting::int(
            "transaction.max.timeout.ms",
            1,
            I32,
            "900000",
            "The longest `transaction.timeout.ms` a producer may ask; longer: INVALID_TRANSACTION_TIMEOUT at InitProducerId.",
        )
    },
    Setting {
        take: |c, v| {
            c.txn.id_expiration_ms = v.int()?;
            Ok(())
        },
        show: Some(|c, _| c.txn.id_expiration_ms.to_string()),
        ..Setting::int(
            "transactional.id.expiration.ms",
            1,
            I32,
            "604800000",
            "A transactional id with no open transaction and no request this long is forgotten (a tombstone).",
        )
    },
    Setting {
        take: |c, v| {
            c.txn.abort_check = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.txn.abort_check.as_millis().to_string()),
        ..Setting::int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            1,
            I32,
            "10000",
            "How often each shard aborts the transactions open longer than their timeout (the producer's epoch is bumped: it is fenced).",
        )
    },
    Setting {
        take: |c, v| {
            c.txn.expire_check = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.txn.expire_check.as_millis().to_string()),
        ..Setting::int(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            1,
            I32,
            "3600000",
            "How often the coordinator forgets transactional ids idle past `transactional.id.expiration.ms`.",
        )
    },
];
