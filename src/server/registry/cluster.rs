//! Replication and the metadata quorum.

use super::*;

/// Replication.
pub const REPLICATION: &[Setting] = &[
    Setting {
        take: |c, v| {
            c.replication.lag_time_max = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.replication.lag_time_max.as_millis().to_string()),
        ..Setting::long(
            "replica.lag.time.max.ms",
            1,
            I32,
            "30000",
            "A follower whose fetches have not reached the leader's durable end for this long leaves the ISR \
             (through the controller); once caught up it rejoins.",
        )
    },
    Setting {
        take: |c, v| {
            c.replication.fetch_max_bytes = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.replication.fetch_max_bytes.to_string()),
        ..Setting::int("replica.fetch.max.bytes", 1, I32, "1048576", "A follower's share per partition of one fetch.")
    },
    Setting {
        take: |c, v| {
            c.replication.fetch_response_max_bytes = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.replication.fetch_response_max_bytes.to_string()),
        ..Setting::int("replica.fetch.response.max.bytes", 1, I32, "10485760", "A follower's fetch in all.")
    },
    Setting {
        take: |c, v| {
            c.replication.fetch_wait_max_ms = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.replication.fetch_wait_max_ms.to_string()),
        ..Setting::int(
            "replica.fetch.wait.max.ms",
            0,
            I32,
            "500",
            "How long a follower's fetch waits at the leader for new data.",
        )
    },
    Setting {
        take: |c, v| {
            c.replication.fetch_backoff = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.replication.fetch_backoff.as_millis().to_string()),
        ..Setting::long(
            "replica.fetch.backoff.ms",
            0,
            I32,
            "1000",
            "A follower's pause after a failed fetch or connection.",
        )
    },
    Setting {
        take: |_, v| v.int().map(|_| ()),
        show: Some(|c, _| c.cluster.as_ref().map_or(1, |k| k.offsets_replication_factor).to_string()),
        ..Setting {
            kind: ConfigType::Short,
            ..Setting::int(
                "offsets.topic.replication.factor",
                1,
                I16,
                "3",
                "A clustered node's replication factor of `__consumer_offsets`, created once that many brokers \
                 are unfenced (until then its coordinators are not available, as Kafka's). Standalone: one.",
            )
        }
    },
    Setting {
        kind: ConfigType::Short,
        ..Setting::int(
            "transaction.state.log.replication.factor",
            1,
            I16,
            "3",
            "A clustered node's replication factor of `__transaction_state`, created once that many brokers are \
             unfenced. Standalone: one.",
        )
    },
    Setting {
        ..Setting::int(
            "transaction.state.log.min.isr",
            1,
            I32,
            "2",
            "A clustered node creates `__transaction_state` with this `min.insync.replicas`: the transaction \
             coordinator's writes need that many replicas in sync (else COORDINATOR_NOT_AVAILABLE, as in Kafka).",
        )
    },
];

/// The metadata quorum.
pub const QUORUM: &[Setting] = &[
    Setting {
        valid: "`broker,controller` (either order), `controller`, `broker`",
        take: take_cluster,
        ..Setting::text(
            "process.roles",
            "A node of a cluster: `broker,controller` runs a voter of the metadata quorum and a broker in one process (KRaft's combined mode); `controller` a voter only (its listeners are controller listeners only; no partitions); `broker` partitions and clients, following the quorum as an observer (its node id is not a voter's). Unset: standalone, as always.",
        )
    },
    Setting {
        valid: "`id@host:port,...`, ids unique",
        take: take_cluster,
        ..Setting::text(
            "controller.quorum.voters",
            "A static quorum: its voters and their CONTROLLER listeners (this or `controller.quorum.bootstrap.servers` is required with `process.roles`); a controller's `node.id` must be one of them, a broker-only node's must not. Every node must list the same set (a node with another set is refused by its peers).",
        )
    },
    Setting {
        valid: "host:port,...",
        take: take_cluster,
        ..Setting::text(
            "controller.quorum.bootstrap.servers",
            "A dynamic quorum (KIP-853), without `controller.quorum.voters`: where the controllers are. A controller whose servers name only its own controller listener starts the quorum as its one voter (Kafka's shipped single-node files); any other controller waits to be added (AddRaftVoter); a broker-only node fetches the metadata from them.",
        )
    },
    Setting {
        valid: "listener names",
        take: take_cluster,
        ..Setting::text(
            "controller.listener.names",
            "The listener (the first named) that serves the metadata quorum and Kafka's controller APIs; on a controller it must be in `listeners` (and `listener.security.protocol.map`), on a broker-only node it must not (it names the controllers' listener). Required with `process.roles`.",
        )
    },
    Setting {
        ..Setting::int(
            "controller.quorum.election.timeout.ms",
            100,
            600_000,
            "1000",
            "A controller that hears no leader for a random time in [this, 1.5 × this] starts an election.",
        )
    },
    Setting {
        ..Setting::int(
            "broker.heartbeat.interval.ms",
            10,
            3_600_000,
            "2000",
            "How often a clustered broker heartbeats to the active controller.",
        )
    },
    Setting {
        valid: "above the heartbeat interval",
        ..Setting::int(
            "broker.session.timeout.ms",
            10,
            3_600_000,
            "9000",
            "The active controller fences a broker silent this long (it leaves Metadata until its next heartbeat).",
        )
    },
];
