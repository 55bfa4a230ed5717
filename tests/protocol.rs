//! Codec round trips for every API and version tidemark implements: random messages encoded,
//! decoded and encoded again give the same bytes and consume the whole frame; arbitrary
//! bytes never panic the request decoder; headers follow the flexible-version rules; every
//! generated frame is byte for byte the one in `tests/fixtures/protocol-golden.txt`.

use bytes::Bytes;
use proptest::prelude::*;
use tidemark::protocol::admin::*;
use tidemark::protocol::codec::{Reader, TaggedFields, Writer};
use tidemark::protocol::errors::ErrorCode;
use tidemark::protocol::groups::*;
use tidemark::protocol::messages::*;
use tidemark::protocol::security::*;
use tidemark::protocol::txn::*;
use tidemark::protocol::*;

/// A deterministic generator of field values.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn i8(&mut self) -> i8 {
        self.next() as i8
    }
    fn i16(&mut self) -> i16 {
        self.next() as i16
    }
    fn i32(&mut self) -> i32 {
        self.next() as i32
    }
    fn i64(&mut self) -> i64 {
        self.next() as i64
    }
    fn bool(&mut self) -> bool {
        self.next().is_multiple_of(2)
    }
    fn len(&mut self) -> usize {
        (self.next() % 4) as usize
    }
    fn string(&mut self) -> String {
        (0..self.next() % 12).map(|i| (b'a' + ((self.next() + i) % 26) as u8) as char).collect()
    }
    fn opt_string(&mut self) -> Option<String> {
        if self.next().is_multiple_of(4) {
            None
        } else {
            Some(self.string())
        }
    }
    fn bytes(&mut self) -> Option<Bytes> {
        if self.next().is_multiple_of(5) {
            None
        } else {
            Some(Bytes::from((0..self.next() % 40).map(|_| self.next() as u8).collect::<Vec<_>>()))
        }
    }
    fn uuid(&mut self) -> [u8; 16] {
        let mut u = [0u8; 16];
        u[..8].copy_from_slice(&self.next().to_be_bytes());
        u[8..].copy_from_slice(&self.next().to_be_bytes());
        u
    }
    fn tags(&mut self) -> TaggedFields {
        TaggedFields((0..self.next() % 2).map(|i| (i as u32 * 3, Bytes::from(vec![self.next() as u8; 3]))).collect())
    }
    /// Uninterpreted tagged fields for a struct whose tags `meaningful` carry fields of their
    /// own: the same draws as [`Gen::tags`], renumbered past them.
    fn tags_except(&mut self, meaningful: &[u32]) -> TaggedFields {
        let mut t = self.tags();
        for (tag, _) in &mut t.0 {
            if meaningful.contains(tag) {
                *tag += 10;
            }
        }
        t
    }
    fn ints(&mut self) -> Vec<i32> {
        (0..self.len()).map(|_| self.i32()).collect()
    }
    fn strings(&mut self) -> Vec<String> {
        (0..self.len()).map(|_| self.string()).collect()
    }
    /// Non-null bytes (protocol metadata, assignments).
    fn payload(&mut self) -> Bytes {
        self.bytes().unwrap_or_default()
    }
}

/// A request of `api` with generated fields; `version` only picks which tags are meaningful.
fn gen_request(api: i16, version: i16, g: &mut Gen) -> Request {
    match api {
        PRODUCE => Request::Produce(ProduceRequest {
            transactional_id: g.opt_string(),
            acks: g.i16(),
            timeout_ms: g.i32(),
            topics: (0..g.len())
                .map(|_| ProduceTopic {
                    name: if version <= 12 { g.string() } else { String::new() },
                    topic_id: if version >= 13 { g.uuid() } else { [0; 16] },
                    partitions: (0..g.len())
                        .map(|_| ProducePartition { index: g.i32(), records: g.bytes(), tags: g.tags() })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        FETCH => {
            // Fields of later versions draw from their own generator, so the frames of the
            // earlier versions stay as they were.
            let mut n = Gen(g.0.rotate_left(17) | 1);
            Request::Fetch(FetchRequest {
                cluster_id: n.opt_string(),
                replica_id: g.i32(),
                replica_state: ReplicaState { replica_id: n.i32(), replica_epoch: n.i64(), tags: n.tags() },
                max_wait_ms: g.i32(),
                min_bytes: g.i32(),
                max_bytes: g.i32(),
                isolation_level: g.i8(),
                session_id: g.i32(),
                session_epoch: g.i32(),
                topics: (0..g.len())
                    .map(|_| FetchTopic {
                        topic: g.string(),
                        topic_id: n.uuid(),
                        partitions: (0..g.len())
                            .map(|_| FetchPartition {
                                partition: g.i32(),
                                current_leader_epoch: g.i32(),
                                fetch_offset: g.i64(),
                                last_fetched_epoch: g.i32(),
                                log_start_offset: g.i64(),
                                partition_max_bytes: g.i32(),
                                replica_directory_id: n.uuid(),
                                high_watermark: Gen(g.0.rotate_left(29) | 1).i64(),
                                tags: if version >= 18 { g.tags_except(&[0, 1]) } else { g.tags_except(&[0]) },
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                forgotten_topics: (0..g.len())
                    .map(|_| ForgottenTopic {
                        topic: g.string(),
                        topic_id: n.uuid(),
                        partitions: g.ints(),
                        tags: g.tags(),
                    })
                    .collect(),
                rack_id: g.string(),
                tags: g.tags_except(&[0, 1]),
            })
        }
        LIST_OFFSETS => Request::ListOffsets(ListOffsetsRequest {
            replica_id: g.i32(),
            isolation_level: g.i8(),
            topics: (0..g.len())
                .map(|_| ListOffsetsTopic {
                    name: g.string(),
                    partitions: (0..g.len())
                        .map(|_| ListOffsetsPartition {
                            partition_index: g.i32(),
                            current_leader_epoch: g.i32(),
                            timestamp: g.i64(),
                            max_num_offsets: g.i32(),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            timeout_ms: Gen(g.0.rotate_left(17) | 1).i32(),
            tags: g.tags(),
        }),
        METADATA => Request::Metadata(MetadataRequest {
            topics: if g.bool() {
                None
            } else {
                Some(
                    (0..g.len())
                        .map(|_| MetadataRequestTopic { topic_id: g.uuid(), name: g.opt_string(), tags: g.tags() })
                        .collect(),
                )
            },
            allow_auto_topic_creation: g.bool(),
            include_cluster_authorized_operations: g.bool(),
            include_topic_authorized_operations: g.bool(),
            tags: g.tags(),
        }),
        API_VERSIONS => Request::ApiVersions(ApiVersionsRequest {
            client_software_name: g.string(),
            client_software_version: g.string(),
            tags: g.tags(),
        }),
        CREATE_TOPICS => Request::CreateTopics(CreateTopicsRequest {
            topics: (0..g.len())
                .map(|_| CreatableTopic {
                    name: g.string(),
                    num_partitions: g.i32(),
                    replication_factor: g.i16(),
                    assignments: (0..g.len())
                        .map(|_| CreatableAssignment { partition_index: g.i32(), broker_ids: g.ints(), tags: g.tags() })
                        .collect(),
                    configs: (0..g.len())
                        .map(|_| CreatableConfig { name: g.string(), value: g.opt_string(), tags: g.tags() })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            timeout_ms: g.i32(),
            validate_only: g.bool(),
            tags: g.tags(),
        }),
        DELETE_TOPICS => Request::DeleteTopics(DeleteTopicsRequest {
            topics: (0..g.len())
                .map(|_| DeleteTopicState { name: g.opt_string(), topic_id: g.uuid(), tags: g.tags() })
                .collect(),
            topic_names: (0..g.len()).map(|_| g.string()).collect(),
            timeout_ms: g.i32(),
            tags: g.tags(),
        }),
        LIST_CONFIG_RESOURCES => Request::ListConfigResources(ListConfigResourcesRequest {
            resource_types: (0..g.len()).map(|_| g.i8()).collect(),
            tags: g.tags(),
        }),
        UNREGISTER_BROKER => Request::UnregisterBroker(UnregisterBrokerRequest { broker_id: g.i32(), tags: g.tags() }),
        ADD_RAFT_VOTER => Request::AddRaftVoter(AddRaftVoterRequest {
            cluster_id: g.opt_string(),
            timeout_ms: g.i32(),
            voter_id: g.i32(),
            voter_directory_id: g.uuid(),
            listeners: (0..g.len())
                .map(|_| QuorumListener { name: g.string(), host: g.string(), port: g.i16() as u16, tags: g.tags() })
                .collect(),
            ack_when_committed: if version >= 1 { g.bool() } else { true },
            tags: g.tags(),
        }),
        REMOVE_RAFT_VOTER => Request::RemoveRaftVoter(RemoveRaftVoterRequest {
            cluster_id: g.opt_string(),
            voter_id: g.i32(),
            voter_directory_id: g.uuid(),
            tags: g.tags(),
        }),
        DESCRIBE_QUORUM => Request::DescribeQuorum(DescribeQuorumRequest {
            topics: (0..g.len())
                .map(|_| QuorumTopicRequest {
                    topic_name: g.string(),
                    partitions: (0..g.len())
                        .map(|_| QuorumPartitionRequest { partition_index: g.i32(), tags: g.tags() })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        UPDATE_FEATURES => Request::UpdateFeatures(UpdateFeaturesRequest {
            timeout_ms: g.i32(),
            feature_updates: (0..g.len())
                .map(|_| FeatureUpdateKey {
                    feature: g.string(),
                    max_version_level: g.i16(),
                    allow_downgrade: if version == 0 { g.bool() } else { false },
                    upgrade_type: if version >= 1 { g.i8() } else { 1 },
                    tags: g.tags(),
                })
                .collect(),
            validate_only: if version >= 1 { g.bool() } else { false },
            tags: g.tags(),
        }),
        DESCRIBE_CONFIGS => Request::DescribeConfigs(DescribeConfigsRequest {
            resources: (0..g.len())
                .map(|_| DescribeConfigsResource {
                    resource_type: g.i8(),
                    resource_name: g.string(),
                    configuration_keys: if g.bool() { None } else { Some((0..g.len()).map(|_| g.string()).collect()) },
                    tags: g.tags(),
                })
                .collect(),
            include_synonyms: g.bool(),
            include_documentation: g.bool(),
            tags: g.tags(),
        }),
        ALTER_CONFIGS | INCREMENTAL_ALTER_CONFIGS => Request::AlterConfigs(AlterConfigsRequest {
            incremental: api == INCREMENTAL_ALTER_CONFIGS,
            resources: (0..g.len())
                .map(|_| AlterConfigsResource {
                    resource_type: g.i8(),
                    resource_name: g.string(),
                    configs: (0..g.len())
                        .map(|_| AlterableConfig {
                            name: g.string(),
                            operation: g.i8(),
                            value: g.opt_string(),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            validate_only: g.bool(),
            tags: g.tags(),
        }),
        FIND_COORDINATOR => Request::FindCoordinator(FindCoordinatorRequest {
            key: g.string(),
            key_type: g.i8(),
            coordinator_keys: g.strings(),
            tags: g.tags(),
        }),
        OFFSET_COMMIT => Request::OffsetCommit(OffsetCommitRequest {
            group_id: g.string(),
            generation_id_or_member_epoch: g.i32(),
            member_id: g.string(),
            group_instance_id: g.opt_string(),
            retention_time_ms: g.i64(),
            topics: (0..g.len())
                .map(|_| OffsetCommitRequestTopic {
                    name: g.string(),
                    partitions: (0..g.len())
                        .map(|_| OffsetCommitRequestPartition {
                            partition_index: g.i32(),
                            committed_offset: g.i64(),
                            committed_leader_epoch: g.i32(),
                            commit_timestamp: g.i64(),
                            committed_metadata: g.opt_string(),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        OFFSET_FETCH => {
            let topics = |g: &mut Gen| -> Option<Vec<OffsetFetchRequestTopic>> {
                if g.bool() {
                    None
                } else {
                    Some(
                        (0..g.len())
                            .map(|_| OffsetFetchRequestTopic {
                                name: g.string(),
                                partition_indexes: g.ints(),
                                tags: g.tags(),
                            })
                            .collect(),
                    )
                }
            };
            Request::OffsetFetch(OffsetFetchRequest {
                group_id: g.string(),
                topics: topics(g),
                groups: (0..g.len())
                    .map(|_| {
                        // v9's member fields from their own generator: earlier frames unchanged.
                        let mut n = Gen(g.0.rotate_left(17) | 1);
                        OffsetFetchRequestGroup {
                            group_id: g.string(),
                            member_id: n.opt_string(),
                            member_epoch: n.i32(),
                            topics: topics(g),
                            tags: g.tags(),
                        }
                    })
                    .collect(),
                require_stable: g.bool(),
                tags: g.tags(),
            })
        }
        JOIN_GROUP => Request::JoinGroup(JoinGroupRequest {
            group_id: g.string(),
            session_timeout_ms: g.i32(),
            rebalance_timeout_ms: g.i32(),
            member_id: g.string(),
            group_instance_id: g.opt_string(),
            protocol_type: g.string(),
            protocols: (0..g.len())
                .map(|_| JoinGroupRequestProtocol { name: g.string(), metadata: g.payload(), tags: g.tags() })
                .collect(),
            reason: g.opt_string(),
            tags: g.tags(),
        }),
        HEARTBEAT => Request::Heartbeat(HeartbeatRequest {
            group_id: g.string(),
            generation_id: g.i32(),
            member_id: g.string(),
            group_instance_id: g.opt_string(),
            tags: g.tags(),
        }),
        LEAVE_GROUP => Request::LeaveGroup(LeaveGroupRequest {
            group_id: g.string(),
            member_id: g.string(),
            members: (0..g.len())
                .map(|_| MemberIdentity {
                    member_id: g.string(),
                    group_instance_id: g.opt_string(),
                    reason: g.opt_string(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        SYNC_GROUP => Request::SyncGroup(SyncGroupRequest {
            group_id: g.string(),
            generation_id: g.i32(),
            member_id: g.string(),
            group_instance_id: g.opt_string(),
            protocol_type: g.opt_string(),
            protocol_name: g.opt_string(),
            assignments: (0..g.len())
                .map(|_| SyncGroupRequestAssignment { member_id: g.string(), assignment: g.payload(), tags: g.tags() })
                .collect(),
            tags: g.tags(),
        }),
        DESCRIBE_GROUPS => Request::DescribeGroups(DescribeGroupsRequest {
            groups: g.strings(),
            include_authorized_operations: g.bool(),
            tags: g.tags(),
        }),
        LIST_GROUPS => Request::ListGroups(ListGroupsRequest {
            states_filter: g.strings(),
            types_filter: Gen(g.0.rotate_left(17) | 1).strings(),
            tags: g.tags(),
        }),
        DELETE_GROUPS => Request::DeleteGroups(DeleteGroupsRequest { groups_names: g.strings(), tags: g.tags() }),
        OFFSET_DELETE => Request::OffsetDelete(OffsetDeleteRequest {
            group_id: g.string(),
            topics: (0..g.len())
                .map(|_| OffsetDeleteRequestTopic {
                    name: g.string(),
                    partitions: (0..g.len())
                        .map(|_| OffsetDeleteRequestPartition { partition_index: g.i32(), tags: g.tags() })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        INIT_PRODUCER_ID => Request::InitProducerId(InitProducerIdRequest {
            transactional_id: g.opt_string(),
            transaction_timeout_ms: g.i32(),
            producer_id: g.i64(),
            producer_epoch: g.i16(),
            tags: g.tags(),
        }),
        ADD_PARTITIONS_TO_TXN => {
            let topics = |g: &mut Gen| {
                (0..g.len())
                    .map(|_| AddPartitionsToTxnTopic { name: g.string(), partitions: g.ints(), tags: g.tags() })
                    .collect::<Vec<_>>()
            };
            Request::AddPartitionsToTxn(AddPartitionsToTxnRequest {
                transactions: (0..g.len())
                    .map(|_| AddPartitionsToTxnTransaction {
                        transactional_id: g.string(),
                        producer_id: g.i64(),
                        producer_epoch: g.i16(),
                        verify_only: g.bool(),
                        topics: topics(g),
                        tags: g.tags(),
                    })
                    .collect(),
                v3_and_below_transactional_id: g.string(),
                v3_and_below_producer_id: g.i64(),
                v3_and_below_producer_epoch: g.i16(),
                v3_and_below_topics: topics(g),
                tags: g.tags(),
            })
        }
        ADD_OFFSETS_TO_TXN => Request::AddOffsetsToTxn(AddOffsetsToTxnRequest {
            transactional_id: g.string(),
            producer_id: g.i64(),
            producer_epoch: g.i16(),
            group_id: g.string(),
            tags: g.tags(),
        }),
        WRITE_TXN_MARKERS => Request::WriteTxnMarkers(WriteTxnMarkersRequest {
            markers: (0..g.len())
                .map(|_| WritableTxnMarker {
                    producer_id: g.i64(),
                    producer_epoch: g.i16(),
                    transaction_result: g.bool(),
                    topics: (0..g.len())
                        .map(|_| WritableTxnMarkerTopic {
                            name: g.string(),
                            partition_indexes: g.ints(),
                            tags: g.tags(),
                        })
                        .collect(),
                    coordinator_epoch: g.i32(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        OFFSET_FOR_LEADER_EPOCH => Request::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest {
            replica_id: g.i32(),
            topics: (0..g.len())
                .map(|_| OffsetForLeaderTopic {
                    topic: g.string(),
                    partitions: (0..g.len())
                        .map(|_| OffsetForLeaderPartition {
                            partition: g.i32(),
                            current_leader_epoch: g.i32(),
                            leader_epoch: g.i32(),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        END_TXN => Request::EndTxn(EndTxnRequest {
            transactional_id: g.string(),
            producer_id: g.i64(),
            producer_epoch: g.i16(),
            committed: g.bool(),
            tags: g.tags(),
        }),
        TXN_OFFSET_COMMIT => Request::TxnOffsetCommit(TxnOffsetCommitRequest {
            transactional_id: g.string(),
            group_id: g.string(),
            producer_id: g.i64(),
            producer_epoch: g.i16(),
            generation_id: g.i32(),
            member_id: g.string(),
            group_instance_id: g.opt_string(),
            topics: (0..g.len())
                .map(|_| TxnOffsetCommitRequestTopic {
                    name: g.string(),
                    partitions: (0..g.len())
                        .map(|_| TxnOffsetCommitRequestPartition {
                            partition_index: g.i32(),
                            committed_offset: g.i64(),
                            committed_leader_epoch: g.i32(),
                            committed_metadata: g.opt_string(),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        DESCRIBE_TRANSACTIONS => Request::DescribeTransactions(DescribeTransactionsRequest {
            transactional_ids: g.strings(),
            tags: g.tags(),
        }),
        LIST_TRANSACTIONS => Request::ListTransactions(ListTransactionsRequest {
            state_filters: g.strings(),
            producer_id_filters: (0..g.len()).map(|_| g.i64()).collect(),
            duration_filter: g.i64(),
            // Drawn from its own generator, so the earlier versions' frames stay as they were.
            transactional_id_pattern: Gen(g.0.rotate_left(17) | 1).opt_string(),
            tags: g.tags(),
        }),
        CREATE_PARTITIONS => Request::CreatePartitions(CreatePartitionsRequest {
            topics: (0..g.len())
                .map(|_| CreatePartitionsTopic {
                    name: g.string(),
                    count: g.i32(),
                    assignments: g.bool().then(|| {
                        (0..g.len())
                            .map(|_| CreatePartitionsAssignment { broker_ids: g.ints(), tags: g.tags() })
                            .collect()
                    }),
                    tags: g.tags(),
                })
                .collect(),
            timeout_ms: g.i32(),
            validate_only: g.bool(),
            tags: g.tags(),
        }),
        DELETE_RECORDS => Request::DeleteRecords(DeleteRecordsRequest {
            topics: (0..g.len())
                .map(|_| DeleteRecordsTopic {
                    name: g.string(),
                    partitions: (0..g.len())
                        .map(|_| DeleteRecordsPartition { partition_index: g.i32(), offset: g.i64(), tags: g.tags() })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            timeout_ms: g.i32(),
            tags: g.tags(),
        }),
        DESCRIBE_LOG_DIRS => Request::DescribeLogDirs(DescribeLogDirsRequest {
            topics: g.bool().then(|| {
                (0..g.len())
                    .map(|_| DescribableLogDirTopic { topic: g.string(), partitions: g.ints(), tags: g.tags() })
                    .collect()
            }),
            tags: g.tags(),
        }),
        DESCRIBE_CLUSTER => Request::DescribeCluster(DescribeClusterRequest {
            include_cluster_authorized_operations: g.bool(),
            endpoint_type: g.i8(),
            include_fenced_brokers: g.bool(),
            tags: g.tags(),
        }),
        DESCRIBE_PRODUCERS => Request::DescribeProducers(DescribeProducersRequest {
            topics: (0..g.len())
                .map(|_| DescribeProducersTopic { name: g.string(), partition_indexes: g.ints(), tags: g.tags() })
                .collect(),
            tags: g.tags(),
        }),
        CONSUMER_GROUP_HEARTBEAT => Request::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest {
            group_id: g.string(),
            member_id: g.string(),
            member_epoch: g.i32(),
            instance_id: g.opt_string(),
            rack_id: g.opt_string(),
            rebalance_timeout_ms: g.i32(),
            subscribed_topic_names: if g.bool() { None } else { Some(g.strings()) },
            subscribed_topic_regex: g.opt_string(),
            server_assignor: g.opt_string(),
            topic_partitions: if g.bool() { None } else { Some(topic_partitions(g)) },
            tags: g.tags(),
        }),
        CONSUMER_GROUP_DESCRIBE => Request::ConsumerGroupDescribe(ConsumerGroupDescribeRequest {
            group_ids: g.strings(),
            include_authorized_operations: g.bool(),
            tags: g.tags(),
        }),
        ELECT_LEADERS => Request::ElectLeaders(ElectLeadersRequest {
            election_type: g.i8(),
            topic_partitions: if g.bool() {
                None
            } else {
                Some(
                    (0..g.len())
                        .map(|_| ElectLeadersTopic { topic: g.string(), partitions: g.ints(), tags: g.tags() })
                        .collect(),
                )
            },
            timeout_ms: g.i32(),
            tags: g.tags(),
        }),
        ALTER_PARTITION_REASSIGNMENTS => Request::AlterPartitionReassignments(AlterPartitionReassignmentsRequest {
            timeout_ms: g.i32(),
            allow_replication_factor_change: Gen(g.0.rotate_left(17) | 1).i8() & 1 == 1,
            topics: (0..g.len())
                .map(|_| ReassignableTopic {
                    name: g.string(),
                    partitions: (0..g.len())
                        .map(|_| ReassignablePartition {
                            partition_index: g.i32(),
                            replicas: if g.bool() { None } else { Some(g.ints()) },
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        LIST_PARTITION_REASSIGNMENTS => Request::ListPartitionReassignments(ListPartitionReassignmentsRequest {
            timeout_ms: g.i32(),
            topics: if g.bool() {
                None
            } else {
                Some(
                    (0..g.len())
                        .map(|_| ListPartitionReassignmentsTopics {
                            name: g.string(),
                            partition_indexes: g.ints(),
                            tags: g.tags(),
                        })
                        .collect(),
                )
            },
            tags: g.tags(),
        }),
        DESCRIBE_TOPIC_PARTITIONS => Request::DescribeTopicPartitions(DescribeTopicPartitionsRequest {
            topics: (0..g.len()).map(|_| DescribeTopicPartitionsTopic { name: g.string(), tags: g.tags() }).collect(),
            response_partition_limit: g.i32(),
            cursor: gen_cursor(g),
            tags: g.tags(),
        }),
        SASL_HANDSHAKE => Request::SaslHandshake(SaslHandshakeRequest { mechanism: g.string(), tags: g.tags() }),
        SASL_AUTHENTICATE => {
            Request::SaslAuthenticate(SaslAuthenticateRequest { auth_bytes: g.payload(), tags: g.tags() })
        }
        DESCRIBE_USER_SCRAM_CREDENTIALS => Request::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest {
            users: if g.bool() {
                None
            } else {
                Some((0..g.len()).map(|_| UserName { name: g.string(), tags: g.tags() }).collect())
            },
            tags: g.tags(),
        }),
        ALTER_USER_SCRAM_CREDENTIALS => Request::AlterUserScramCredentials(AlterUserScramCredentialsRequest {
            deletions: (0..g.len())
                .map(|_| ScramCredentialDeletion { name: g.string(), mechanism: g.i8(), tags: g.tags() })
                .collect(),
            upsertions: (0..g.len())
                .map(|_| ScramCredentialUpsertion {
                    name: g.string(),
                    mechanism: g.i8(),
                    iterations: g.i32(),
                    salt: g.payload(),
                    salted_password: g.payload(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        DESCRIBE_ACLS => Request::DescribeAcls(acl_filter(g)),
        CREATE_ACLS => Request::CreateAcls(CreateAclsRequest {
            creations: (0..g.len())
                .map(|_| AclCreation {
                    resource_type: g.i8(),
                    resource_name: g.string(),
                    // The default: v0 has no pattern type, so a decoded v0 creation carries it.
                    resource_pattern_type: 3,
                    principal: g.string(),
                    host: g.string(),
                    operation: g.i8(),
                    permission_type: g.i8(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        DELETE_ACLS => Request::DeleteAcls(DeleteAclsRequest {
            filters: (0..g.len()).map(|_| acl_filter(g)).collect(),
            tags: g.tags(),
        }),
        DESCRIBE_CLIENT_QUOTAS => Request::DescribeClientQuotas(DescribeClientQuotasRequest {
            components: (0..g.len())
                .map(|_| QuotaComponent {
                    entity_type: g.string(),
                    match_type: g.i8(),
                    match_name: g.opt_string(),
                    tags: g.tags(),
                })
                .collect(),
            strict: g.bool(),
            tags: g.tags(),
        }),
        ALTER_CLIENT_QUOTAS => Request::AlterClientQuotas(AlterClientQuotasRequest {
            entries: (0..g.len())
                .map(|_| QuotaAlteration {
                    entity: quota_entity(g),
                    ops: (0..g.len())
                        .map(|_| QuotaOp {
                            key: g.string(),
                            value: g.i32() as f64 / 8.0,
                            remove: g.bool(),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            validate_only: g.bool(),
            tags: g.tags(),
        }),
        _ => unreachable!(),
    }
}

fn quota_entity(g: &mut Gen) -> Vec<QuotaEntityData> {
    (0..g.len())
        .map(|_| QuotaEntityData { entity_type: g.string(), entity_name: g.opt_string(), tags: g.tags() })
        .collect()
}

/// A DescribeAcls request or DeleteAcls filter (pattern type the default: v0 has none).
fn acl_filter(g: &mut Gen) -> AclFilter {
    AclFilter {
        resource_type_filter: g.i8(),
        resource_name_filter: g.opt_string(),
        pattern_type_filter: 3,
        principal_filter: g.opt_string(),
        host_filter: g.opt_string(),
        operation: g.i8(),
        permission_type: g.i8(),
        tags: g.tags(),
    }
}

/// Encode, decode, encode: same bytes, whole frame consumed.
fn round_trip<M: Message>(m: &mut M, api: i16, version: i16) {
    round_trip_from(m, M::default(), api, version)
}

/// The same, decoding into `back` (for a message whose decoder is set up from the API key).
fn round_trip_from<M: Message>(m: &mut M, mut back: M, api: i16, version: i16) {
    let flexible = if api == API_VERSIONS { version >= 3 } else { is_flexible(api, version) };
    let mut w = Writer::new(flexible);
    m.codec(&mut w, version).unwrap();
    let first = w.buf.freeze();
    let mut r = Reader::new(first.clone(), flexible);
    back.codec(&mut r, version).unwrap_or_else(|e| panic!("api {api} v{version}: {e}"));
    assert_eq!(r.remaining(), 0, "api {api} v{version}: bytes left over");
    let mut w = Writer::new(flexible);
    back.codec(&mut w, version).unwrap();
    assert_eq!(w.buf.freeze(), first, "api {api} v{version}: re-encoding differs");
}

fn round_trip_request(req: Request, version: i16) {
    let header = RequestHeader {
        api_key: req.api_key(),
        api_version: version,
        correlation_id: 7,
        client_id: Some("t".into()),
        tags: TaggedFields::default(),
    };
    let frame = req.encode(&header).unwrap();
    let (h, decoded) = decode_request(frame.slice(4..)).unwrap();
    assert_eq!(h.correlation_id, 7);
    assert_eq!(h.client_id.as_deref(), Some("t"));
    match decoded {
        Request::Produce(mut m) => round_trip(&mut m, PRODUCE, version),
        Request::Fetch(mut m) => round_trip(&mut m, FETCH, version),
        Request::ListOffsets(mut m) => round_trip(&mut m, LIST_OFFSETS, version),
        Request::Metadata(mut m) => round_trip(&mut m, METADATA, version),
        Request::ApiVersions(mut m) => round_trip(&mut m, API_VERSIONS, version),
        Request::CreateTopics(mut m) => round_trip(&mut m, CREATE_TOPICS, version),
        Request::DeleteTopics(mut m) => round_trip(&mut m, DELETE_TOPICS, version),
        Request::DescribeConfigs(mut m) => round_trip(&mut m, DESCRIBE_CONFIGS, version),
        Request::ListConfigResources(mut m) => round_trip(&mut m, LIST_CONFIG_RESOURCES, version),
        Request::DescribeQuorum(mut m) => round_trip(&mut m, DESCRIBE_QUORUM, version),
        Request::UnregisterBroker(mut m) => round_trip(&mut m, UNREGISTER_BROKER, version),
        Request::AddRaftVoter(mut m) => round_trip(&mut m, ADD_RAFT_VOTER, version),
        Request::RemoveRaftVoter(mut m) => round_trip(&mut m, REMOVE_RAFT_VOTER, version),
        Request::UpdateFeatures(mut m) => round_trip(&mut m, UPDATE_FEATURES, version),
        Request::AlterConfigs(mut m) => {
            let api = if m.incremental { INCREMENTAL_ALTER_CONFIGS } else { ALTER_CONFIGS };
            let back = AlterConfigsRequest { incremental: m.incremental, ..Default::default() };
            round_trip_from(&mut m, back, api, version)
        }
        Request::FindCoordinator(mut m) => round_trip(&mut m, FIND_COORDINATOR, version),
        Request::OffsetCommit(mut m) => round_trip(&mut m, OFFSET_COMMIT, version),
        Request::OffsetFetch(mut m) => round_trip(&mut m, OFFSET_FETCH, version),
        Request::JoinGroup(mut m) => round_trip(&mut m, JOIN_GROUP, version),
        Request::Heartbeat(mut m) => round_trip(&mut m, HEARTBEAT, version),
        Request::LeaveGroup(mut m) => round_trip(&mut m, LEAVE_GROUP, version),
        Request::SyncGroup(mut m) => round_trip(&mut m, SYNC_GROUP, version),
        Request::DescribeGroups(mut m) => round_trip(&mut m, DESCRIBE_GROUPS, version),
        Request::ListGroups(mut m) => round_trip(&mut m, LIST_GROUPS, version),
        Request::DeleteGroups(mut m) => round_trip(&mut m, DELETE_GROUPS, version),
        Request::OffsetDelete(mut m) => round_trip(&mut m, OFFSET_DELETE, version),
        Request::InitProducerId(mut m) => round_trip(&mut m, INIT_PRODUCER_ID, version),
        Request::AddPartitionsToTxn(mut m) => round_trip(&mut m, ADD_PARTITIONS_TO_TXN, version),
        Request::AddOffsetsToTxn(mut m) => round_trip(&mut m, ADD_OFFSETS_TO_TXN, version),
        Request::EndTxn(mut m) => round_trip(&mut m, END_TXN, version),
        Request::OffsetForLeaderEpoch(mut m) => round_trip(&mut m, OFFSET_FOR_LEADER_EPOCH, version),
        Request::WriteTxnMarkers(mut m) => round_trip(&mut m, WRITE_TXN_MARKERS, version),
        Request::TxnOffsetCommit(mut m) => round_trip(&mut m, TXN_OFFSET_COMMIT, version),
        Request::DescribeTransactions(mut m) => round_trip(&mut m, DESCRIBE_TRANSACTIONS, version),
        Request::ListTransactions(mut m) => round_trip(&mut m, LIST_TRANSACTIONS, version),
        Request::CreatePartitions(mut m) => round_trip(&mut m, CREATE_PARTITIONS, version),
        Request::DeleteRecords(mut m) => round_trip(&mut m, DELETE_RECORDS, version),
        Request::DescribeLogDirs(mut m) => round_trip(&mut m, DESCRIBE_LOG_DIRS, version),
        Request::DescribeCluster(mut m) => round_trip(&mut m, DESCRIBE_CLUSTER, version),
        Request::DescribeProducers(mut m) => round_trip(&mut m, DESCRIBE_PRODUCERS, version),
        Request::DescribeTopicPartitions(mut m) => round_trip(&mut m, DESCRIBE_TOPIC_PARTITIONS, version),
        Request::ElectLeaders(mut m) => round_trip(&mut m, ELECT_LEADERS, version),
        Request::AlterPartitionReassignments(mut m) => round_trip(&mut m, ALTER_PARTITION_REASSIGNMENTS, version),
        Request::ListPartitionReassignments(mut m) => round_trip(&mut m, LIST_PARTITION_REASSIGNMENTS, version),
        Request::ConsumerGroupHeartbeat(mut m) => round_trip(&mut m, CONSUMER_GROUP_HEARTBEAT, version),
        Request::ConsumerGroupDescribe(mut m) => round_trip(&mut m, CONSUMER_GROUP_DESCRIBE, version),
        Request::SaslHandshake(mut m) => round_trip(&mut m, SASL_HANDSHAKE, version),
        Request::SaslAuthenticate(mut m) => round_trip(&mut m, SASL_AUTHENTICATE, version),
        Request::DescribeUserScramCredentials(mut m) => round_trip(&mut m, DESCRIBE_USER_SCRAM_CREDENTIALS, version),
        Request::AlterUserScramCredentials(mut m) => round_trip(&mut m, ALTER_USER_SCRAM_CREDENTIALS, version),
        Request::DescribeAcls(mut m) => round_trip(&mut m, DESCRIBE_ACLS, version),
        Request::CreateAcls(mut m) => round_trip(&mut m, CREATE_ACLS, version),
        Request::DeleteAcls(mut m) => round_trip(&mut m, DELETE_ACLS, version),
        Request::DescribeClientQuotas(mut m) => round_trip(&mut m, DESCRIBE_CLIENT_QUOTAS, version),
        Request::AlterClientQuotas(mut m) => round_trip(&mut m, ALTER_CLIENT_QUOTAS, version),
    }
}

/// What to do with each generated response: round-trip it, or keep its bytes (golden test).
trait Responses {
    fn take<M: Message>(&mut self, m: &mut M, api: i16, version: i16);
}

/// Round-trips every response it is given.
struct RoundTrip;

impl Responses for RoundTrip {
    fn take<M: Message>(&mut self, m: &mut M, api: i16, version: i16) {
        round_trip(m, api, version)
    }
}

/// KIP-848 partitions by topic id.
fn topic_partitions(g: &mut Gen) -> Vec<TopicPartitions> {
    (0..g.len()).map(|_| TopicPartitions { topic_id: g.uuid(), partitions: g.ints(), tags: g.tags() }).collect()
}

/// A DescribeTopicPartitions cursor, or none.
fn gen_cursor(g: &mut Gen) -> Option<DescribeTopicPartitionsCursor> {
    if g.bool() {
        None
    } else {
        Some(DescribeTopicPartitionsCursor { topic_name: g.string(), partition_index: g.i32(), tags: g.tags() })
    }
}

/// KIP-951's broker addresses, for leader hints.
fn node_endpoints(g: &mut Gen) -> Vec<NodeEndpoint> {
    (0..g.len())
        .map(|_| NodeEndpoint {
            node_id: g.i32(),
            host: g.string(),
            port: g.i32(),
            rack: g.opt_string(),
            tags: g.tags(),
        })
        .collect()
}

/// Generates one response of `api` at `version` and hands it to `out`.
fn gen_responses(api: i16, version: i16, g: &mut Gen, out: &mut impl Responses) {
    match api {
        PRODUCE => {
            let mut n = Gen(g.0.rotate_left(17) | 1);
            out.take(
                &mut ProduceResponse {
                    topics: (0..g.len())
                        .map(|_| ProduceTopicResponse {
                            name: if version <= 12 { g.string() } else { String::new() },
                            topic_id: if version >= 13 { n.uuid() } else { [0; 16] },
                            partitions: (0..g.len())
                                .map(|_| ProducePartitionResponse {
                                    index: g.i32(),
                                    error_code: ErrorCode(g.i16()),
                                    base_offset: g.i64(),
                                    log_append_time_ms: g.i64(),
                                    log_start_offset: g.i64(),
                                    record_errors: (0..g.len())
                                        .map(|_| RecordError {
                                            batch_index: g.i32(),
                                            message: g.opt_string(),
                                            tags: g.tags(),
                                        })
                                        .collect(),
                                    error_message: g.opt_string(),
                                    current_leader: LeaderIdAndEpoch {
                                        leader_id: n.i32(),
                                        leader_epoch: n.i32(),
                                        tags: n.tags(),
                                    },
                                    tags: g.tags_except(&[0]),
                                })
                                .collect(),
                            tags: g.tags(),
                        })
                        .collect(),
                    throttle_time_ms: g.i32(),
                    node_endpoints: node_endpoints(&mut n),
                    tags: g.tags_except(&[0]),
                },
                api,
                version,
            )
        }
        FETCH => {
            let mut n = Gen(g.0.rotate_left(17) | 1);
            out.take(
                &mut FetchResponse {
                    throttle_time_ms: g.i32(),
                    error_code: ErrorCode(g.i16()),
                    session_id: g.i32(),
                    topics: (0..g.len())
                        .map(|_| FetchTopicResponse {
                            topic: g.string(),
                            topic_id: n.uuid(),
                            partitions: (0..g.len())
                                .map(|_| FetchPartitionResponse {
                                    partition_index: g.i32(),
                                    error_code: ErrorCode(g.i16()),
                                    high_watermark: g.i64(),
                                    last_stable_offset: g.i64(),
                                    log_start_offset: g.i64(),
                                    aborted_transactions: if g.bool() {
                                        None
                                    } else {
                                        Some(
                                            (0..g.len())
                                                .map(|_| AbortedTransaction {
                                                    producer_id: g.i64(),
                                                    first_offset: g.i64(),
                                                    tags: g.tags(),
                                                })
                                                .collect(),
                                        )
                                    },
                                    preferred_read_replica: g.i32(),
                                    records: g.bytes(),
                                    diverging_epoch: EpochEndOffset {
                                        epoch: n.i32(),
                                        end_offset: n.i64(),
                                        tags: n.tags(),
                                    },
                                    current_leader: LeaderIdAndEpoch {
                                        leader_id: n.i32(),
                                        leader_epoch: n.i32(),
                                        tags: n.tags(),
                                    },
                                    snapshot_id: SnapshotId { end_offset: n.i64(), epoch: n.i32(), tags: n.tags() },
                                    tags: g.tags_except(&[0, 1, 2]),
                                })
                                .collect(),
                            tags: g.tags(),
                        })
                        .collect(),
                    node_endpoints: node_endpoints(&mut n),
                    tags: g.tags_except(&[0]),
                },
                api,
                version,
            )
        }
        LIST_OFFSETS => out.take(
            &mut ListOffsetsResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| ListOffsetsTopicResponse {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| ListOffsetsPartitionResponse {
                                partition_index: g.i32(),
                                error_code: ErrorCode(g.i16()),
                                old_style_offsets: (0..g.len()).map(|_| g.i64()).collect(),
                                timestamp: g.i64(),
                                offset: g.i64(),
                                leader_epoch: g.i32(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        METADATA => out.take(
            &mut MetadataResponse {
                throttle_time_ms: g.i32(),
                brokers: (0..g.len())
                    .map(|_| MetadataBroker {
                        node_id: g.i32(),
                        host: g.string(),
                        port: g.i32(),
                        rack: g.opt_string(),
                        tags: g.tags(),
                    })
                    .collect(),
                cluster_id: g.opt_string(),
                controller_id: g.i32(),
                topics: (0..g.len())
                    .map(|_| MetadataTopic {
                        error_code: ErrorCode(g.i16()),
                        name: Some(g.string()),
                        topic_id: g.uuid(),
                        is_internal: g.bool(),
                        partitions: (0..g.len())
                            .map(|_| MetadataPartition {
                                error_code: ErrorCode(g.i16()),
                                partition_index: g.i32(),
                                leader_id: g.i32(),
                                leader_epoch: g.i32(),
                                replica_nodes: g.ints(),
                                isr_nodes: g.ints(),
                                offline_replicas: g.ints(),
                                tags: g.tags(),
                            })
                            .collect(),
                        topic_authorized_operations: g.i32(),
                        tags: g.tags(),
                    })
                    .collect(),
                cluster_authorized_operations: g.i32(),
                error_code: if version >= 13 { ErrorCode(g.i16()) } else { ErrorCode(0) },
                tags: g.tags(),
            },
            api,
            version,
        ),
        API_VERSIONS => out.take(
            &mut ApiVersionsResponse {
                error_code: ErrorCode(g.i16()),
                api_keys: (0..g.len())
                    .map(|_| ApiVersion {
                        api_key: g.i16(),
                        min_version: g.i16(),
                        max_version: g.i16(),
                        tags: g.tags(),
                    })
                    .collect(),
                throttle_time_ms: g.i32(),
                supported_features: (0..g.len())
                    .map(|_| FeatureRange { name: g.string(), min: g.i16(), max: g.i16(), tags: g.tags() })
                    .collect(),
                finalized_features_epoch: if g.bool() { -1 } else { g.i64() },
                finalized_features: (0..g.len())
                    .map(|_| FeatureRange { name: g.string(), min: g.i16(), max: g.i16(), tags: g.tags() })
                    .collect(),
                // Tags past the three feature fields (3: ZkMigrationReady).
                tags: TaggedFields(g.tags().0.into_iter().map(|(t, b)| (t + 3, b)).collect()),
            },
            api,
            version,
        ),
        CREATE_TOPICS => out.take(
            &mut CreateTopicsResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| CreatableTopicResult {
                        name: g.string(),
                        topic_id: g.uuid(),
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        num_partitions: g.i32(),
                        replication_factor: g.i16(),
                        configs: if g.bool() {
                            None
                        } else {
                            Some(
                                (0..g.len())
                                    .map(|_| CreatableTopicConfigs {
                                        name: g.string(),
                                        value: g.opt_string(),
                                        read_only: g.bool(),
                                        config_source: g.i8(),
                                        is_sensitive: g.bool(),
                                        tags: g.tags(),
                                    })
                                    .collect(),
                            )
                        },
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DELETE_TOPICS => out.take(
            &mut DeleteTopicsResponse {
                throttle_time_ms: g.i32(),
                responses: (0..g.len())
                    .map(|_| DeletableTopicResult {
                        name: Some(g.string()),
                        topic_id: g.uuid(),
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        UPDATE_FEATURES => out.take(
            &mut UpdateFeaturesResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                results: if version <= 1 {
                    (0..g.len())
                        .map(|_| UpdatableFeatureResult {
                            feature: g.string(),
                            error_code: ErrorCode(g.i16()),
                            error_message: g.opt_string(),
                            tags: g.tags(),
                        })
                        .collect()
                } else {
                    Vec::new()
                },
                tags: g.tags(),
            },
            api,
            version,
        ),
        UNREGISTER_BROKER => out.take(
            &mut UnregisterBrokerResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        ADD_RAFT_VOTER => out.take(
            &mut AddRaftVoterResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        REMOVE_RAFT_VOTER => out.take(
            &mut RemoveRaftVoterResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_QUORUM => {
            let v2 = version >= 2;
            let v1 = version >= 1;
            let replica = |g: &mut Gen| QuorumReplicaState {
                replica_id: g.i32(),
                replica_directory_id: if v2 { g.uuid() } else { [0; 16] },
                log_end_offset: g.i64(),
                last_fetch_timestamp: if v1 { g.i64() } else { -1 },
                last_caught_up_timestamp: if v1 { g.i64() } else { -1 },
                tags: g.tags(),
            };
            out.take(
                &mut DescribeQuorumResponse {
                    error_code: ErrorCode(g.i16()),
                    error_message: if v2 { g.opt_string() } else { None },
                    topics: (0..g.len())
                        .map(|_| QuorumTopicData {
                            topic_name: g.string(),
                            partitions: (0..g.len())
                                .map(|_| QuorumPartitionData {
                                    partition_index: g.i32(),
                                    error_code: ErrorCode(g.i16()),
                                    error_message: if v2 { g.opt_string() } else { None },
                                    leader_id: g.i32(),
                                    leader_epoch: g.i32(),
                                    high_watermark: g.i64(),
                                    current_voters: (0..g.len()).map(|_| replica(g)).collect(),
                                    observers: (0..g.len()).map(|_| replica(g)).collect(),
                                    tags: g.tags(),
                                })
                                .collect(),
                            tags: g.tags(),
                        })
                        .collect(),
                    nodes: if v2 {
                        (0..g.len())
                            .map(|_| QuorumNode {
                                node_id: g.i32(),
                                listeners: (0..g.len())
                                    .map(|_| QuorumListener {
                                        name: g.string(),
                                        host: g.string(),
                                        port: g.i16() as u16,
                                        tags: g.tags(),
                                    })
                                    .collect(),
                                tags: g.tags(),
                            })
                            .collect()
                    } else {
                        Vec::new()
                    },
                    tags: g.tags(),
                },
                api,
                version,
            )
        }
        LIST_CONFIG_RESOURCES => out.take(
            &mut ListConfigResourcesResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                config_resources: (0..g.len())
                    .map(|_| ConfigResourceListed { resource_name: g.string(), resource_type: g.i8(), tags: g.tags() })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_CONFIGS => out.take(
            &mut DescribeConfigsResponse {
                throttle_time_ms: g.i32(),
                results: (0..g.len())
                    .map(|_| DescribeConfigsResult {
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        resource_type: g.i8(),
                        resource_name: g.string(),
                        configs: (0..g.len())
                            .map(|_| DescribeConfigsEntry {
                                name: g.string(),
                                value: g.opt_string(),
                                read_only: g.bool(),
                                is_default: g.bool(),
                                config_source: g.i8(),
                                is_sensitive: g.bool(),
                                synonyms: (0..g.len())
                                    .map(|_| DescribeConfigsSynonym {
                                        name: g.string(),
                                        value: g.opt_string(),
                                        source: g.i8(),
                                        tags: g.tags(),
                                    })
                                    .collect(),
                                config_type: g.i8(),
                                documentation: g.opt_string(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        ALTER_CONFIGS | INCREMENTAL_ALTER_CONFIGS => out.take(
            &mut AlterConfigsResponse {
                throttle_time_ms: g.i32(),
                responses: (0..g.len())
                    .map(|_| AlterConfigsResourceResponse {
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        resource_type: g.i8(),
                        resource_name: g.string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        FIND_COORDINATOR => out.take(
            &mut FindCoordinatorResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                node_id: g.i32(),
                host: g.string(),
                port: g.i32(),
                coordinators: (0..g.len())
                    .map(|_| Coordinator {
                        key: g.string(),
                        node_id: g.i32(),
                        host: g.string(),
                        port: g.i32(),
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        OFFSET_COMMIT => out.take(
            &mut OffsetCommitResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| OffsetCommitResponseTopic {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| OffsetCommitResponsePartition {
                                partition_index: g.i32(),
                                error_code: ErrorCode(g.i16()),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        OFFSET_FETCH => {
            let topics = |g: &mut Gen| -> Vec<OffsetFetchResponseTopic> {
                (0..g.len())
                    .map(|_| OffsetFetchResponseTopic {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| OffsetFetchResponsePartition {
                                partition_index: g.i32(),
                                committed_offset: g.i64(),
                                committed_leader_epoch: g.i32(),
                                metadata: g.opt_string(),
                                error_code: ErrorCode(g.i16()),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect()
            };
            out.take(
                &mut OffsetFetchResponse {
                    throttle_time_ms: g.i32(),
                    topics: topics(g),
                    error_code: ErrorCode(g.i16()),
                    groups: (0..g.len())
                        .map(|_| OffsetFetchResponseGroup {
                            group_id: g.string(),
                            topics: topics(g),
                            error_code: ErrorCode(g.i16()),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                },
                api,
                version,
            )
        }
        JOIN_GROUP => out.take(
            &mut JoinGroupResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                generation_id: g.i32(),
                protocol_type: g.opt_string(),
                protocol_name: g.opt_string(),
                leader: g.string(),
                skip_assignment: g.bool(),
                member_id: g.string(),
                members: (0..g.len())
                    .map(|_| JoinGroupResponseMember {
                        member_id: g.string(),
                        group_instance_id: g.opt_string(),
                        metadata: g.payload(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        HEARTBEAT => out.take(
            &mut HeartbeatResponse { throttle_time_ms: g.i32(), error_code: ErrorCode(g.i16()), tags: g.tags() },
            api,
            version,
        ),
        LEAVE_GROUP => out.take(
            &mut LeaveGroupResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                members: (0..g.len())
                    .map(|_| MemberResponse {
                        member_id: g.string(),
                        group_instance_id: g.opt_string(),
                        error_code: ErrorCode(g.i16()),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        SYNC_GROUP => out.take(
            &mut SyncGroupResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                protocol_type: g.opt_string(),
                protocol_name: g.opt_string(),
                assignment: g.payload(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_GROUPS => out.take(
            &mut DescribeGroupsResponse {
                throttle_time_ms: g.i32(),
                groups: (0..g.len())
                    .map(|_| DescribedGroup {
                        error_code: ErrorCode(g.i16()),
                        // Drawn only where it exists, so older versions' bytes stay as committed.
                        error_message: if version >= 6 { g.opt_string() } else { None },
                        group_id: g.string(),
                        group_state: g.string(),
                        protocol_type: g.string(),
                        protocol_data: g.string(),
                        members: (0..g.len())
                            .map(|_| DescribedGroupMember {
                                member_id: g.string(),
                                group_instance_id: g.opt_string(),
                                client_id: g.string(),
                                client_host: g.string(),
                                member_metadata: g.payload(),
                                member_assignment: g.payload(),
                                tags: g.tags(),
                            })
                            .collect(),
                        authorized_operations: g.i32(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        LIST_GROUPS => out.take(
            &mut ListGroupsResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                groups: (0..g.len())
                    .map(|_| ListedGroup {
                        group_id: g.string(),
                        protocol_type: g.string(),
                        group_state: g.string(),
                        group_type: Gen(g.0.rotate_left(17) | 1).string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DELETE_GROUPS => out.take(
            &mut DeleteGroupsResponse {
                throttle_time_ms: g.i32(),
                results: (0..g.len())
                    .map(|_| DeletableGroupResult {
                        group_id: g.string(),
                        error_code: ErrorCode(g.i16()),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        OFFSET_DELETE => out.take(
            &mut OffsetDeleteResponse {
                error_code: ErrorCode(g.i16()),
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| OffsetDeleteResponseTopic {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| OffsetDeleteResponsePartition {
                                partition_index: g.i32(),
                                error_code: ErrorCode(g.i16()),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        INIT_PRODUCER_ID => out.take(
            &mut InitProducerIdResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                producer_id: g.i64(),
                producer_epoch: g.i16(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        ADD_PARTITIONS_TO_TXN => {
            let results = |g: &mut Gen| {
                (0..g.len())
                    .map(|_| AddPartitionsToTxnTopicResult {
                        name: g.string(),
                        results_by_partition: (0..g.len())
                            .map(|_| AddPartitionsToTxnPartitionResult {
                                partition_index: g.i32(),
                                partition_error_code: ErrorCode(g.i16()),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect::<Vec<_>>()
            };
            out.take(
                &mut AddPartitionsToTxnResponse {
                    throttle_time_ms: g.i32(),
                    error_code: ErrorCode(g.i16()),
                    results_by_transaction: (0..g.len())
                        .map(|_| AddPartitionsToTxnResult {
                            transactional_id: g.string(),
                            topic_results: results(g),
                            tags: g.tags(),
                        })
                        .collect(),
                    results_by_topic_v3_and_below: results(g),
                    tags: g.tags(),
                },
                api,
                version,
            )
        }
        ADD_OFFSETS_TO_TXN => out.take(
            &mut AddOffsetsToTxnResponse { throttle_time_ms: g.i32(), error_code: ErrorCode(g.i16()), tags: g.tags() },
            api,
            version,
        ),
        END_TXN => out.take(
            &mut EndTxnResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                producer_id: if version >= 5 { g.i64() } else { -1 },
                producer_epoch: if version >= 5 { g.i16() } else { -1 },
                tags: g.tags(),
            },
            api,
            version,
        ),
        OFFSET_FOR_LEADER_EPOCH => out.take(
            &mut OffsetForLeaderEpochResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| OffsetForLeaderTopicResult {
                        topic: g.string(),
                        partitions: (0..g.len())
                            .map(|_| EpochEndOffsetResult {
                                error_code: ErrorCode(g.i16()),
                                partition: g.i32(),
                                leader_epoch: g.i32(),
                                end_offset: g.i64(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        WRITE_TXN_MARKERS => out.take(
            &mut WriteTxnMarkersResponse {
                markers: (0..g.len())
                    .map(|_| WritableTxnMarkerResult {
                        producer_id: g.i64(),
                        topics: (0..g.len())
                            .map(|_| WritableTxnMarkerTopicResult {
                                name: g.string(),
                                partitions: (0..g.len())
                                    .map(|_| WritableTxnMarkerPartitionResult {
                                        partition_index: g.i32(),
                                        error_code: ErrorCode(g.i16()),
                                        tags: g.tags(),
                                    })
                                    .collect(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        TXN_OFFSET_COMMIT => out.take(
            &mut TxnOffsetCommitResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| TxnOffsetCommitResponseTopic {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| TxnOffsetCommitResponsePartition {
                                partition_index: g.i32(),
                                error_code: ErrorCode(g.i16()),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_TRANSACTIONS => out.take(
            &mut DescribeTransactionsResponse {
                throttle_time_ms: g.i32(),
                transaction_states: (0..g.len())
                    .map(|_| DescribedTransaction {
                        error_code: ErrorCode(g.i16()),
                        transactional_id: g.string(),
                        transaction_state: g.string(),
                        transaction_timeout_ms: g.i32(),
                        transaction_start_time_ms: g.i64(),
                        producer_id: g.i64(),
                        producer_epoch: g.i16(),
                        topics: (0..g.len())
                            .map(|_| TransactionTopicData { topic: g.string(), partitions: g.ints(), tags: g.tags() })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        LIST_TRANSACTIONS => out.take(
            &mut ListTransactionsResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                unknown_state_filters: g.strings(),
                transaction_states: (0..g.len())
                    .map(|_| ListedTransaction {
                        transactional_id: g.string(),
                        producer_id: g.i64(),
                        transaction_state: g.string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        CREATE_PARTITIONS => out.take(
            &mut CreatePartitionsResponse {
                throttle_time_ms: g.i32(),
                results: (0..g.len())
                    .map(|_| CreatePartitionsTopicResult {
                        name: g.string(),
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DELETE_RECORDS => out.take(
            &mut DeleteRecordsResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| DeleteRecordsTopicResult {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| DeleteRecordsPartitionResult {
                                partition_index: g.i32(),
                                low_watermark: g.i64(),
                                error_code: ErrorCode(g.i16()),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_LOG_DIRS => out.take(
            &mut DescribeLogDirsResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                results: (0..g.len())
                    .map(|_| DescribeLogDirsResult {
                        error_code: ErrorCode(g.i16()),
                        log_dir: g.string(),
                        topics: (0..g.len())
                            .map(|_| DescribeLogDirsTopic {
                                name: g.string(),
                                partitions: (0..g.len())
                                    .map(|_| DescribeLogDirsPartition {
                                        partition_index: g.i32(),
                                        partition_size: g.i64(),
                                        offset_lag: g.i64(),
                                        is_future_key: g.bool(),
                                        tags: g.tags(),
                                    })
                                    .collect(),
                                tags: g.tags(),
                            })
                            .collect(),
                        total_bytes: g.i64(),
                        usable_bytes: g.i64(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_CLUSTER => out.take(
            &mut DescribeClusterResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                endpoint_type: g.i8(),
                cluster_id: g.string(),
                controller_id: g.i32(),
                brokers: (0..g.len())
                    .map(|_| DescribeClusterBroker {
                        broker_id: g.i32(),
                        host: g.string(),
                        port: g.i32(),
                        rack: g.opt_string(),
                        is_fenced: g.bool(),
                        tags: g.tags(),
                    })
                    .collect(),
                cluster_authorized_operations: g.i32(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        CONSUMER_GROUP_HEARTBEAT => out.take(
            &mut ConsumerGroupHeartbeatResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                member_id: g.opt_string(),
                member_epoch: g.i32(),
                heartbeat_interval_ms: g.i32(),
                assignment: if g.bool() {
                    None
                } else {
                    Some(ConsumerGroupAssignment { topic_partitions: topic_partitions(g), tags: g.tags() })
                },
                tags: g.tags(),
            },
            api,
            version,
        ),
        CONSUMER_GROUP_DESCRIBE => {
            let described = |g: &mut Gen| DescribedAssignment {
                topic_partitions: (0..g.len())
                    .map(|_| DescribedTopicPartitions {
                        topic_id: g.uuid(),
                        topic_name: g.string(),
                        partitions: g.ints(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            };
            out.take(
                &mut ConsumerGroupDescribeResponse {
                    throttle_time_ms: g.i32(),
                    groups: (0..g.len())
                        .map(|_| ConsumerGroupDescribeGroup {
                            error_code: ErrorCode(g.i16()),
                            error_message: g.opt_string(),
                            group_id: g.string(),
                            group_state: g.string(),
                            group_epoch: g.i32(),
                            assignment_epoch: g.i32(),
                            assignor_name: g.string(),
                            members: (0..g.len())
                                .map(|_| ConsumerGroupDescribeMember {
                                    member_id: g.string(),
                                    instance_id: g.opt_string(),
                                    rack_id: g.opt_string(),
                                    member_epoch: g.i32(),
                                    client_id: g.string(),
                                    client_host: g.string(),
                                    subscribed_topic_names: g.strings(),
                                    subscribed_topic_regex: g.opt_string(),
                                    assignment: described(g),
                                    target_assignment: described(g),
                                    member_type: g.i8(),
                                    tags: g.tags(),
                                })
                                .collect(),
                            authorized_operations: g.i32(),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                },
                api,
                version,
            )
        }
        DESCRIBE_TOPIC_PARTITIONS => out.take(
            &mut DescribeTopicPartitionsResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| DescribeTopicPartitionsTopicResponse {
                        error_code: ErrorCode(g.i16()),
                        name: g.opt_string(),
                        topic_id: g.uuid(),
                        is_internal: g.bool(),
                        partitions: (0..g.len())
                            .map(|_| DescribeTopicPartitionsPartition {
                                error_code: ErrorCode(g.i16()),
                                partition_index: g.i32(),
                                leader_id: g.i32(),
                                leader_epoch: g.i32(),
                                replica_nodes: g.ints(),
                                isr_nodes: g.ints(),
                                eligible_leader_replicas: if g.bool() { None } else { Some(g.ints()) },
                                last_known_elr: if g.bool() { None } else { Some(g.ints()) },
                                offline_replicas: g.ints(),
                                tags: g.tags(),
                            })
                            .collect(),
                        topic_authorized_operations: g.i32(),
                        tags: g.tags(),
                    })
                    .collect(),
                next_cursor: gen_cursor(g),
                tags: g.tags(),
            },
            api,
            version,
        ),
        ELECT_LEADERS => out.take(
            &mut ElectLeadersResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                replica_election_results: (0..g.len())
                    .map(|_| ElectLeadersTopicResult {
                        topic: g.string(),
                        partition_result: (0..g.len())
                            .map(|_| ElectLeadersPartitionResult {
                                partition_id: g.i32(),
                                error_code: ErrorCode(g.i16()),
                                error_message: g.opt_string(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        ALTER_PARTITION_REASSIGNMENTS => out.take(
            &mut AlterPartitionReassignmentsResponse {
                throttle_time_ms: g.i32(),
                allow_replication_factor_change: if version >= 1 { g.i8() & 1 == 1 } else { true },
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                responses: (0..g.len())
                    .map(|_| ReassignableTopicResponse {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| ReassignablePartitionResponse {
                                partition_index: g.i32(),
                                error_code: ErrorCode(g.i16()),
                                error_message: g.opt_string(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        LIST_PARTITION_REASSIGNMENTS => out.take(
            &mut ListPartitionReassignmentsResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                topics: (0..g.len())
                    .map(|_| OngoingTopicReassignment {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| OngoingPartitionReassignment {
                                partition_index: g.i32(),
                                replicas: g.ints(),
                                adding_replicas: g.ints(),
                                removing_replicas: g.ints(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_PRODUCERS => out.take(
            &mut DescribeProducersResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| DescribeProducersTopicResponse {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| DescribeProducersPartition {
                                partition_index: g.i32(),
                                error_code: ErrorCode(g.i16()),
                                error_message: g.opt_string(),
                                active_producers: (0..g.len())
                                    .map(|_| ProducerStateEntry {
                                        producer_id: g.i64(),
                                        producer_epoch: g.i32(),
                                        last_sequence: g.i32(),
                                        last_timestamp: g.i64(),
                                        coordinator_epoch: g.i32(),
                                        current_txn_start_offset: g.i64(),
                                        tags: g.tags(),
                                    })
                                    .collect(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        SASL_HANDSHAKE => out.take(
            &mut SaslHandshakeResponse { error_code: ErrorCode(g.i16()), mechanisms: g.strings(), tags: g.tags() },
            api,
            version,
        ),
        SASL_AUTHENTICATE => out.take(
            &mut SaslAuthenticateResponse {
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                auth_bytes: g.payload(),
                session_lifetime_ms: g.i64(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_USER_SCRAM_CREDENTIALS => out.take(
            &mut DescribeUserScramCredentialsResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                results: (0..g.len())
                    .map(|_| DescribeUserScramCredentialsResult {
                        user: g.string(),
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        credential_infos: (0..g.len())
                            .map(|_| CredentialInfo { mechanism: g.i8(), iterations: g.i32(), tags: g.tags() })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        ALTER_USER_SCRAM_CREDENTIALS => out.take(
            &mut AlterUserScramCredentialsResponse {
                throttle_time_ms: g.i32(),
                results: (0..g.len())
                    .map(|_| AlterUserScramCredentialsResult {
                        user: g.string(),
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_ACLS => out.take(
            &mut DescribeAclsResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                resources: (0..g.len())
                    .map(|_| DescribeAclsResource {
                        resource_type: g.i8(),
                        resource_name: g.string(),
                        pattern_type: 3,
                        acls: (0..g.len())
                            .map(|_| AclDescription {
                                principal: g.string(),
                                host: g.string(),
                                operation: g.i8(),
                                permission_type: g.i8(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        CREATE_ACLS => out.take(
            &mut CreateAclsResponse {
                throttle_time_ms: g.i32(),
                results: (0..g.len())
                    .map(|_| AclCreationResult {
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DELETE_ACLS => out.take(
            &mut DeleteAclsResponse {
                throttle_time_ms: g.i32(),
                filter_results: (0..g.len())
                    .map(|_| DeleteAclsFilterResult {
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        matching_acls: (0..g.len())
                            .map(|_| DeleteAclsMatchingAcl {
                                error_code: ErrorCode(g.i16()),
                                error_message: g.opt_string(),
                                resource_type: g.i8(),
                                resource_name: g.string(),
                                pattern_type: 3,
                                principal: g.string(),
                                host: g.string(),
                                operation: g.i8(),
                                permission_type: g.i8(),
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_CLIENT_QUOTAS => out.take(
            &mut DescribeClientQuotasResponse {
                throttle_time_ms: g.i32(),
                error_code: ErrorCode(g.i16()),
                error_message: g.opt_string(),
                entries: if g.bool() {
                    None
                } else {
                    Some(
                        (0..g.len())
                            .map(|_| QuotaEntry {
                                entity: quota_entity(g),
                                values: (0..g.len())
                                    .map(|_| QuotaValue { key: g.string(), value: g.i64() as f64, tags: g.tags() })
                                    .collect(),
                                tags: g.tags(),
                            })
                            .collect(),
                    )
                },
                tags: g.tags(),
            },
            api,
            version,
        ),
        ALTER_CLIENT_QUOTAS => out.take(
            &mut AlterClientQuotasResponse {
                throttle_time_ms: g.i32(),
                entries: (0..g.len())
                    .map(|_| QuotaAlterationResult {
                        error_code: ErrorCode(g.i16()),
                        error_message: g.opt_string(),
                        entity: quota_entity(g),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        _ => unreachable!(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every request and response of every supported version round-trips.
    #[test]
    fn every_api_and_version_round_trips(seed in 1u64..u64::MAX) {
        for &(api, lo, hi, _) in SUPPORTED {
            for version in lo..=hi {
                let mut g = Gen(seed ^ ((api as u64) << 32) ^ version as u64 | 1);
                round_trip_request(gen_request(api, version, &mut g), version);
                gen_responses(api, version, &mut g, &mut RoundTrip);
            }
        }
    }

    /// Arbitrary bytes (and arbitrary bytes behind a valid header) never panic the decoder.
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), api in 0usize..SUPPORTED.len(), version in 0i16..14) {
        let _ = decode_request(Bytes::from(bytes.clone()));
        let mut framed = Vec::new();
        framed.extend_from_slice(&SUPPORTED[api].0.to_be_bytes());
        framed.extend_from_slice(&version.to_be_bytes());
        framed.extend_from_slice(&1i32.to_be_bytes());
        framed.extend_from_slice(&bytes);
        let _ = decode_request(Bytes::from(framed));
    }
}

// ---------------------------------------------------------------- golden bytes
//
// The exact frames the codec writes for a fixed set of generated messages, every API and
// version, kept in a committed file: any change to what goes on the wire (a field moved, a
// version range or a default changed) fails here, even one that still round-trips.

/// The golden file: one line per frame, `api version seed kind hex` (the whole frame, size
/// prefix included).
const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/protocol-golden.txt");
/// Seeds of the golden messages (each seeds every API and version).
const GOLDEN_SEEDS: std::ops::RangeInclusive<u64> = 1..=40;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Bytes {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect::<Vec<_>>().into()
}

/// The `api version seed kind` that names a golden line.
fn golden_key(line: &str) -> String {
    line.splitn(5, ' ').take(4).collect::<Vec<_>>().join(" ")
}

/// Collects the golden lines. When the committed file has the same message (by its key, so a
/// new version does not disturb the others), its bytes are decoded and must re-encode to
/// themselves (otherwise the fresh bytes are).
struct Golden<'a> {
    seed: u64,
    committed: &'a std::collections::HashMap<String, &'a str>,
    lines: Vec<String>,
}

impl Golden<'_> {
    /// The committed frame of the message with this key prefix (`api version seed kind `).
    fn committed_frame(&self, prefix: &str) -> Option<Bytes> {
        let line = self.committed.get(prefix.trim_end())?;
        line.strip_prefix(prefix).map(unhex)
    }

    fn push(&mut self, api: i16, version: i16, kind: &str, frame: &[u8]) {
        self.lines.push(format!("{api} {version} {} {kind} {}", self.seed, hex(frame)));
    }

    fn request(&mut self, req: Request, version: i16) {
        let api = req.api_key();
        let header = RequestHeader {
            api_key: api,
            api_version: version,
            correlation_id: self.seed as i32,
            client_id: Some("golden".into()),
            tags: TaggedFields::default(),
        };
        let frame = req.encode(&header).unwrap();
        let prefix = format!("{api} {version} {} request ", self.seed);
        let check = self.committed_frame(&prefix).unwrap_or_else(|| frame.clone());
        let (h, decoded) = decode_request(check.slice(4..)).unwrap_or_else(|e| panic!("{prefix}: {e:?}"));
        let again = decoded.clone().encode(&h).unwrap();
        if api == METADATA && version == 0 {
            // v0 reads an empty topic array as "all topics" (`None`), which encodes as null:
            // the same request, other bytes.
            assert_eq!(decode_request(again.slice(4..)).map(|d| d.1), Ok(decoded), "{prefix}: decoded again");
        } else {
            assert_eq!(again, check, "{prefix}: decoded and re-encoded");
        }
        self.push(api, version, "request", &frame);
    }
}

impl Responses for Golden<'_> {
    fn take<M: Message>(&mut self, m: &mut M, api: i16, version: i16) {
        let header = RequestHeader {
            api_key: api,
            api_version: version,
            correlation_id: self.seed as i32,
            ..Default::default()
        };
        let frame = encode_response(&header, m).unwrap();
        let prefix = format!("{api} {version} {} response ", self.seed);
        let check = self.committed_frame(&prefix).unwrap_or_else(|| frame.clone());
        let (cid, mut back): (i32, M) =
            decode_response(&header, check.slice(4..)).unwrap_or_else(|e| panic!("{prefix}: {e}"));
        assert_eq!(cid, self.seed as i32);
        assert_eq!(encode_response(&header, &mut back).unwrap(), check, "{prefix}: decoded and re-encoded");
        self.push(api, version, "response", &frame);
    }
}

/// Every request and response of every supported version encodes to the committed bytes, and
/// the committed bytes decode and re-encode to themselves. `TIDEMARK_BLESS=1` rewrites the file
/// (only for an intended change of the wire format; review its diff).
#[test]
fn every_api_and_version_matches_the_golden_bytes() {
    let bless = std::env::var("TIDEMARK_BLESS").is_ok_and(|v| v == "1");
    let text = if bless {
        String::new()
    } else {
        std::fs::read_to_string(GOLDEN).expect("golden file (TIDEMARK_BLESS=1 writes it)")
    };
    let committed: std::collections::HashMap<String, &str> = text.lines().map(|l| (golden_key(l), l)).collect();
    let mut golden = Golden { seed: 0, committed: &committed, lines: Vec::new() };
    for seed in GOLDEN_SEEDS {
        golden.seed = seed;
        for &(api, lo, hi, _) in SUPPORTED {
            for version in lo..=hi {
                let mut g =
                    Gen((seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((api as u64) << 32) ^ ((version as u64) << 16))
                        | 1);
                golden.request(gen_request(api, version, &mut g), version);
                gen_responses(api, version, &mut g, &mut golden);
            }
        }
    }
    if bless {
        let mut out = golden.lines.join("\n");
        out.push('\n');
        std::fs::write(GOLDEN, out).unwrap();
        return;
    }
    let mut missing = Vec::new();
    for fresh in &golden.lines {
        let key = golden_key(fresh);
        match committed.get(&key) {
            Some(old) if old != fresh => panic!("{key} differs from the golden bytes\n now: {fresh}\n was: {old}"),
            Some(_) => {}
            None => missing.push(key),
        }
    }
    assert!(missing.is_empty(), "not in the golden file (TIDEMARK_BLESS=1 adds them): {missing:?}");
    assert_eq!(golden.lines.len(), committed.len(), "golden lines no API version makes any more");
}

/// Unknown APIs and unsupported versions still yield the header, so the broker can answer.
#[test]
fn unsupported_requests_keep_their_header() {
    let mut frame = Vec::new();
    frame.extend_from_slice(&999i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&42i32.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    let e = decode_request(Bytes::from(frame)).unwrap_err();
    assert_eq!(e.header.unwrap().correlation_id, 42);
    assert_eq!(e.error, ProtoError::UnknownApi(999));
    // A client newer than tidemark asks ApiVersions v5 (Kafka 4.4) (flexible header v2): answered with the header.
    let header = RequestHeader {
        api_key: API_VERSIONS,
        api_version: 5,
        correlation_id: 9,
        client_id: Some("kafka-python".into()),
        tags: TaggedFields::default(),
    };
    let mut w = Writer::new(true);
    w.buf.extend_from_slice(&API_VERSIONS.to_be_bytes());
    w.buf.extend_from_slice(&5i16.to_be_bytes());
    w.buf.extend_from_slice(&9i32.to_be_bytes());
    w.buf.extend_from_slice(&12i16.to_be_bytes());
    w.buf.extend_from_slice(b"kafka-python");
    w.buf.extend_from_slice(&[0, 1, 1, 0]); // tags, name "", version "", tags
    let e = decode_request(w.buf.freeze()).unwrap_err();
    assert_eq!(e.header.as_ref().map(|h| h.correlation_id), Some(9));
    assert_eq!(e.error, ProtoError::UnsupportedVersion { api: API_VERSIONS, version: 5 });
    // The answer, as Kafka's: a v0 response (header v0, error 35) listing ApiVersions' own
    // versions only (ApiVersionsRequest.getErrorResponse).
    let frame = error_response(&header, &e.error).expect("an unsupported ApiVersions is answered");
    let v0 = RequestHeader { api_version: 0, ..header.clone() };
    let (cid, back): (i32, ApiVersionsResponse) = decode_response(&v0, frame.slice(4..)).unwrap();
    assert_eq!((cid, back.error_code), (9, ErrorCode(35)));
    assert_eq!(
        back.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect::<Vec<_>>(),
        vec![(API_VERSIONS, 0, 4)]
    );
    // Any other API at a version it lacks, or an unknown API, has no answer: the connection closes.
    let produce = RequestHeader { api_key: 0, api_version: 99, ..header };
    assert!(error_response(&produce, &ProtoError::UnsupportedVersion { api: 0, version: 99 }).is_none());
    assert!(error_response(&produce, &ProtoError::UnknownApi(999)).is_none());
}

// ---------------------------------------------------------------- exact bytes
//
// Round trips cannot catch a field order that is wrong the same way in decode and encode.
// These frames are written field by field from Kafka's message JSON definitions (not by the
// codec): each must decode to the expected message and that message must encode to the same
// bytes.

/// Hand-built wire bytes, independent of the codec.
#[derive(Default)]
struct B(Vec<u8>);

impl B {
    fn i8(mut self, v: i8) -> Self {
        self.0.push(v as u8);
        self
    }
    fn i16(mut self, v: i16) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i64(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    /// Classic string: int16 length.
    fn s(self, v: &str) -> Self {
        let mut b = self.i16(v.len() as i16);
        b.0.extend_from_slice(v.as_bytes());
        b
    }
    /// Classic null string.
    fn null_s(self) -> Self {
        self.i16(-1)
    }
    /// Classic bytes: int32 length.
    fn bytes(self, v: &[u8]) -> Self {
        let mut b = self.i32(v.len() as i32);
        b.0.extend_from_slice(v);
        b
    }
    /// Classic array length.
    fn arr(self, n: i32) -> Self {
        self.i32(n)
    }
    /// Compact length (n + 1; 0 is null), small enough for one varint byte.
    fn clen(mut self, n: Option<usize>) -> Self {
        let v = n.map_or(0, |n| n + 1);
        assert!(v < 0x80);
        self.0.push(v as u8);
        self
    }
    /// Compact string.
    fn cs(self, v: &str) -> Self {
        let mut b = self.clen(Some(v.len()));
        b.0.extend_from_slice(v.as_bytes());
        b
    }
    fn cnull(self) -> Self {
        self.clen(None)
    }
    fn cbytes(self, v: &[u8]) -> Self {
        let mut b = self.clen(Some(v.len()));
        b.0.extend_from_slice(v);
        b
    }
    fn carr(self, n: usize) -> Self {
        self.clen(Some(n))
    }
    /// An empty tagged-field section.
    fn tags(self) -> Self {
        self.i8(0)
    }
}

/// Request header v1 (classic) or v2 (flexible): correlation id 1, client id "c".
fn request_header(api: i16, version: i16) -> B {
    let b = B::default().i16(api).i16(version).i32(1).s("c");
    if is_flexible(api, version) {
        b.tags()
    } else {
        b
    }
}

/// `body` after the request header decodes to `expected`, which encodes back to the same frame.
fn check_request<M: Message>(api: i16, version: i16, body: B, mut expected: M, unwrap: fn(Request) -> Option<M>) {
    let mut frame = request_header(api, version).0;
    frame.extend_from_slice(&body.0);
    let (h, req) = decode_request(Bytes::from(frame.clone())).unwrap_or_else(|e| panic!("api {api} v{version}: {e:?}"));
    assert_eq!((h.api_key, h.api_version, h.correlation_id), (api, version, 1));
    assert_eq!(unwrap(req), Some(expected.clone()), "api {api} v{version}: decoded");
    let encoded = encode_request(&h, &mut expected).unwrap();
    assert_eq!(&encoded[4..], &frame[..], "api {api} v{version}: encoded");
}

/// The same for a response body (response header v0 or v1 before it).
fn check_response<M: Message>(api: i16, version: i16, body: B, mut expected: M) {
    let header = RequestHeader { api_key: api, api_version: version, correlation_id: 1, ..Default::default() };
    let mut frame = 1i32.to_be_bytes().to_vec();
    // Response header v1 for flexible versions, except ApiVersions (always v0).
    if is_flexible(api, version) && api != API_VERSIONS {
        frame.push(0);
    }
    frame.extend_from_slice(&body.0);
    let (cid, back): (i32, M) = decode_response(&header, Bytes::from(frame.clone())).unwrap();
    assert_eq!((cid, &back), (1, &expected), "api {api} v{version}: decoded");
    let encoded = encode_response(&header, &mut expected).unwrap();
    assert_eq!(&encoded[4..], &frame[..], "api {api} v{version}: encoded");
}

#[test]
fn find_coordinator_exact_bytes() {
    // v4 (flexible): KeyType, then the batched CoordinatorKeys; no Key.
    check_request(
        FIND_COORDINATOR,
        4,
        B::default().i8(1).carr(2).cs("g1").cs("g2").tags(),
        FindCoordinatorRequest { key_type: 1, coordinator_keys: vec!["g1".into(), "g2".into()], ..Default::default() },
        |r| if let Request::FindCoordinator(m) = r { Some(m) } else { None },
    );
    // v1: Key then KeyType.
    check_request(
        FIND_COORDINATOR,
        1,
        B::default().s("g1").i8(1),
        FindCoordinatorRequest { key: "g1".into(), key_type: 1, ..Default::default() },
        |r| if let Request::FindCoordinator(m) = r { Some(m) } else { None },
    );
    // v4 response: ThrottleTimeMs, then per key: Key, NodeId, Host, Port, ErrorCode, ErrorMessage.
    check_response(
        FIND_COORDINATOR,
        4,
        B::default().i32(5).carr(1).cs("g1").i32(7).cs("h").i32(9092).i16(0).cnull().tags().tags(),
        FindCoordinatorResponse {
            throttle_time_ms: 5,
            coordinators: vec![Coordinator {
                key: "g1".into(),
                node_id: 7,
                host: "h".into(),
                port: 9092,
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    // v2 response: ThrottleTimeMs, ErrorCode, ErrorMessage, NodeId, Host, Port.
    check_response(
        FIND_COORDINATOR,
        2,
        B::default().i32(5).i16(15).s("busy").i32(-1).s("").i32(-1),
        FindCoordinatorResponse {
            throttle_time_ms: 5,
            error_code: ErrorCode(15),
            error_message: Some("busy".into()),
            node_id: -1,
            port: -1,
            ..Default::default()
        },
    );
}

#[test]
fn offset_commit_exact_bytes() {
    let unwrap = |r| if let Request::OffsetCommit(m) = r { Some(m) } else { None };
    // v1: GenerationId and MemberId after GroupId; CommitTimestamp between the offset and the
    // metadata.
    check_request(
        OFFSET_COMMIT,
        1,
        B::default().s("grp").i32(5).s("m1").arr(1).s("t").arr(1).i32(0).i64(42).i64(1000).s("md"),
        OffsetCommitRequest {
            group_id: "grp".into(),
            generation_id_or_member_epoch: 5,
            member_id: "m1".into(),
            topics: vec![OffsetCommitRequestTopic {
                name: "t".into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: 42,
                    commit_timestamp: 1000,
                    committed_metadata: Some("md".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
        unwrap,
    );
    // v2: RetentionTimeMs after MemberId.
    check_request(
        OFFSET_COMMIT,
        2,
        B::default().s("grp").i32(5).s("m1").i64(60_000).arr(0),
        OffsetCommitRequest {
            group_id: "grp".into(),
            generation_id_or_member_epoch: 5,
            member_id: "m1".into(),
            retention_time_ms: 60_000,
            ..Default::default()
        },
        unwrap,
    );
    // v8 (flexible): GroupInstanceId after MemberId; CommittedLeaderEpoch after the offset.
    check_request(
        OFFSET_COMMIT,
        8,
        B::default()
            .cs("grp")
            .i32(5)
            .cs("m1")
            .cs("i1")
            .carr(1)
            .cs("t")
            .carr(1)
            .i32(0)
            .i64(42)
            .i32(3)
            .cnull()
            .tags()
            .tags()
            .tags(),
        OffsetCommitRequest {
            group_id: "grp".into(),
            generation_id_or_member_epoch: 5,
            member_id: "m1".into(),
            group_instance_id: Some("i1".into()),
            topics: vec![OffsetCommitRequestTopic {
                name: "t".into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: 42,
                    committed_leader_epoch: 3,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
        unwrap,
    );
    // v3 response: ThrottleTimeMs first.
    check_response(
        OFFSET_COMMIT,
        3,
        B::default().i32(9).arr(1).s("t").arr(1).i32(2).i16(22),
        OffsetCommitResponse {
            throttle_time_ms: 9,
            topics: vec![OffsetCommitResponseTopic {
                name: "t".into(),
                partitions: vec![OffsetCommitResponsePartition {
                    partition_index: 2,
                    error_code: ErrorCode(22),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn offset_fetch_exact_bytes() {
    let unwrap = |r| if let Request::OffsetFetch(m) = r { Some(m) } else { None };
    // v8 (flexible): only the batched Groups (each with nullable Topics), then RequireStable.
    check_request(
        OFFSET_FETCH,
        8,
        B::default()
            .carr(2)
            .cs("g1")
            .carr(1)
            .cs("t")
            .carr(2)
            .i32(0)
            .i32(1)
            .tags()
            .tags()
            .cs("g2")
            .cnull()
            .tags()
            .i8(1)
            .tags(),
        OffsetFetchRequest {
            groups: vec![
                OffsetFetchRequestGroup {
                    group_id: "g1".into(),
                    topics: Some(vec![OffsetFetchRequestTopic {
                        name: "t".into(),
                        partition_indexes: vec![0, 1],
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
                OffsetFetchRequestGroup { group_id: "g2".into(), topics: None, ..Default::default() },
            ],
            require_stable: true,
            ..Default::default()
        },
        unwrap,
    );
    // v2: null Topics means all topics.
    check_request(
        OFFSET_FETCH,
        2,
        B::default().s("g").arr(-1),
        OffsetFetchRequest { group_id: "g".into(), topics: None, ..Default::default() },
        unwrap,
    );
    // v5 response: leader epoch between the offset and the metadata; the top-level ErrorCode
    // after the topics.
    check_response(
        OFFSET_FETCH,
        5,
        B::default().i32(0).arr(1).s("t").arr(1).i32(0).i64(42).i32(3).s("md").i16(0).i16(16),
        OffsetFetchResponse {
            topics: vec![OffsetFetchResponseTopic {
                name: "t".into(),
                partitions: vec![OffsetFetchResponsePartition {
                    partition_index: 0,
                    committed_offset: 42,
                    committed_leader_epoch: 3,
                    metadata: Some("md".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            error_code: ErrorCode(16),
            ..Default::default()
        },
    );
    // v8 response: per group GroupId, Topics, then the group's ErrorCode.
    check_response(
        OFFSET_FETCH,
        8,
        B::default()
            .i32(0)
            .carr(1)
            .cs("g1")
            .carr(1)
            .cs("t")
            .carr(1)
            .i32(0)
            .i64(-1)
            .i32(-1)
            .cnull()
            .i16(0)
            .tags()
            .tags()
            .i16(16)
            .tags()
            .tags(),
        OffsetFetchResponse {
            groups: vec![OffsetFetchResponseGroup {
                group_id: "g1".into(),
                topics: vec![OffsetFetchResponseTopic {
                    name: "t".into(),
                    partitions: vec![OffsetFetchResponsePartition { committed_offset: -1, ..Default::default() }],
                    ..Default::default()
                }],
                error_code: ErrorCode(16),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn join_group_exact_bytes() {
    // v5: RebalanceTimeoutMs after SessionTimeoutMs; GroupInstanceId after MemberId.
    check_request(
        JOIN_GROUP,
        5,
        B::default().s("g").i32(10_000).i32(300_000).s("").s("i").s("consumer").arr(1).s("range").bytes(&[1, 2, 3]),
        JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 300_000,
            group_instance_id: Some("i".into()),
            protocol_type: "consumer".into(),
            protocols: vec![JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: Bytes::from_static(&[1, 2, 3]),
                ..Default::default()
            }],
            ..Default::default()
        },
        |r| if let Request::JoinGroup(m) = r { Some(m) } else { None },
    );
    // v9 response (flexible): ProtocolType before ProtocolName; SkipAssignment between Leader
    // and MemberId; a member's GroupInstanceId before its Metadata.
    check_response(
        JOIN_GROUP,
        9,
        B::default()
            .i32(0)
            .i16(0)
            .i32(1)
            .cs("consumer")
            .cs("range")
            .cs("m1")
            .i8(1)
            .cs("m1")
            .carr(1)
            .cs("m1")
            .cnull()
            .cbytes(&[9])
            .tags()
            .tags(),
        JoinGroupResponse {
            generation_id: 1,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            leader: "m1".into(),
            skip_assignment: true,
            member_id: "m1".into(),
            members: vec![JoinGroupResponseMember {
                member_id: "m1".into(),
                metadata: Bytes::from_static(&[9]),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn heartbeat_exact_bytes() {
    // v3: GroupInstanceId last.
    check_request(
        HEARTBEAT,
        3,
        B::default().s("g").i32(2).s("m").s("i"),
        HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 2,
            member_id: "m".into(),
            group_instance_id: Some("i".into()),
            ..Default::default()
        },
        |r| if let Request::Heartbeat(m) = r { Some(m) } else { None },
    );
    check_response(
        HEARTBEAT,
        4,
        B::default().i32(3).i16(27).tags(),
        HeartbeatResponse { throttle_time_ms: 3, error_code: ErrorCode(27), ..Default::default() },
    );
}

#[test]
fn leave_group_exact_bytes() {
    let unwrap = |r| if let Request::LeaveGroup(m) = r { Some(m) } else { None };
    check_request(
        LEAVE_GROUP,
        0,
        B::default().s("g").s("m"),
        LeaveGroupRequest { group_id: "g".into(), member_id: "m".into(), ..Default::default() },
        unwrap,
    );
    // v5 (flexible): the member batch, each with a Reason.
    check_request(
        LEAVE_GROUP,
        5,
        B::default().cs("g").carr(1).cs("m").cnull().cs("bye").tags().tags(),
        LeaveGroupRequest {
            group_id: "g".into(),
            members: vec![MemberIdentity { member_id: "m".into(), reason: Some("bye".into()), ..Default::default() }],
            ..Default::default()
        },
        unwrap,
    );
    check_response(
        LEAVE_GROUP,
        3,
        B::default().i32(0).i16(0).arr(1).s("m").s("i").i16(25),
        LeaveGroupResponse {
            members: vec![MemberResponse {
                member_id: "m".into(),
                group_instance_id: Some("i".into()),
                error_code: ErrorCode(25),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn sync_group_exact_bytes() {
    // v5 (flexible): GroupInstanceId, ProtocolType, ProtocolName before the assignments.
    check_request(
        SYNC_GROUP,
        5,
        B::default()
            .cs("g")
            .i32(1)
            .cs("m")
            .cnull()
            .cs("consumer")
            .cs("range")
            .carr(1)
            .cs("m")
            .cbytes(&[7, 8])
            .tags()
            .tags(),
        SyncGroupRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: "m".into(),
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments: vec![SyncGroupRequestAssignment {
                member_id: "m".into(),
                assignment: Bytes::from_static(&[7, 8]),
                ..Default::default()
            }],
            ..Default::default()
        },
        |r| if let Request::SyncGroup(m) = r { Some(m) } else { None },
    );
    check_response(
        SYNC_GROUP,
        5,
        B::default().i32(0).i16(0).cs("consumer").cs("range").cbytes(&[7, 8]).tags(),
        SyncGroupResponse {
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignment: Bytes::from_static(&[7, 8]),
            ..Default::default()
        },
    );
}

#[test]
fn describe_groups_exact_bytes() {
    check_request(
        DESCRIBE_GROUPS,
        4,
        B::default().arr(1).s("g").i8(1),
        DescribeGroupsRequest { groups: vec!["g".into()], include_authorized_operations: true, ..Default::default() },
        |r| if let Request::DescribeGroups(m) = r { Some(m) } else { None },
    );
    // v4 response: a member's GroupInstanceId after its MemberId; AuthorizedOperations after
    // the members.
    check_response(
        DESCRIBE_GROUPS,
        4,
        B::default()
            .i32(0)
            .arr(1)
            .i16(0)
            .s("g")
            .s("Stable")
            .s("consumer")
            .s("range")
            .arr(1)
            .s("m")
            .s("i")
            .s("c")
            .s("/127.0.0.1")
            .bytes(&[1])
            .bytes(&[2])
            .i32(8),
        DescribeGroupsResponse {
            groups: vec![DescribedGroup {
                group_id: "g".into(),
                group_state: "Stable".into(),
                protocol_type: "consumer".into(),
                protocol_data: "range".into(),
                members: vec![DescribedGroupMember {
                    member_id: "m".into(),
                    group_instance_id: Some("i".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    member_metadata: Bytes::from_static(&[1]),
                    member_assignment: Bytes::from_static(&[2]),
                    ..Default::default()
                }],
                authorized_operations: 8,
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn list_groups_exact_bytes() {
    check_request(
        LIST_GROUPS,
        4,
        B::default().carr(1).cs("Stable").tags(),
        ListGroupsRequest { states_filter: vec!["Stable".into()], ..Default::default() },
        |r| if let Request::ListGroups(m) = r { Some(m) } else { None },
    );
    check_request(LIST_GROUPS, 0, B::default(), ListGroupsRequest::default(), |r| {
        if let Request::ListGroups(m) = r {
            Some(m)
        } else {
            None
        }
    });
    check_response(
        LIST_GROUPS,
        4,
        B::default().i32(0).i16(0).carr(1).cs("g").cs("consumer").cs("Stable").tags().tags(),
        ListGroupsResponse {
            groups: vec![ListedGroup {
                group_id: "g".into(),
                protocol_type: "consumer".into(),
                group_state: "Stable".into(),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn delete_groups_exact_bytes() {
    check_request(
        DELETE_GROUPS,
        2,
        B::default().carr(1).cs("g").tags(),
        DeleteGroupsRequest { groups_names: vec!["g".into()], ..Default::default() },
        |r| if let Request::DeleteGroups(m) = r { Some(m) } else { None },
    );
    // v0 already has ThrottleTimeMs.
    check_response(
        DELETE_GROUPS,
        0,
        B::default().i32(4).arr(1).s("g").i16(69),
        DeleteGroupsResponse {
            throttle_time_ms: 4,
            results: vec![DeletableGroupResult {
                group_id: "g".into(),
                error_code: ErrorCode(69),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn init_producer_id_exact_bytes() {
    let unwrap = |r| if let Request::InitProducerId(m) = r { Some(m) } else { None };
    // v0: absent ProducerId and ProducerEpoch decode as -1.
    check_request(
        INIT_PRODUCER_ID,
        0,
        B::default().s("tx").i32(1000),
        InitProducerIdRequest {
            transactional_id: Some("tx".into()),
            transaction_timeout_ms: 1000,
            ..Default::default()
        },
        unwrap,
    );
    // v3 (flexible): ProducerId then ProducerEpoch after the timeout.
    check_request(
        INIT_PRODUCER_ID,
        3,
        B::default().cnull().i32(60_000).i64(17).i16(2).tags(),
        InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            producer_id: 17,
            producer_epoch: 2,
            ..Default::default()
        },
        unwrap,
    );
    check_response(
        INIT_PRODUCER_ID,
        4,
        B::default().i32(0).i16(0).i64(17).i16(3).tags(),
        InitProducerIdResponse { producer_id: 17, producer_epoch: 3, ..Default::default() },
    );
}

/// Kafka's defaults for fields absent in a version (`default` in the JSON definitions).
#[test]
fn absent_fields_decode_as_kafkas_defaults() {
    let (_, req) =
        decode_request(Bytes::from(request_header(JOIN_GROUP, 0).s("g").i32(1).s("").s("").arr(0).0)).unwrap();
    let Request::JoinGroup(j) = req else { panic!("not a JoinGroup") };
    assert_eq!((j.rebalance_timeout_ms, j.group_instance_id, j.reason), (-1, None, None));
    let (_, req) = decode_request(Bytes::from(
        request_header(OFFSET_COMMIT, 0).s("g").arr(1).s("t").arr(1).i32(0).i64(5).null_s().0,
    ))
    .unwrap();
    let Request::OffsetCommit(o) = req else { panic!("not an OffsetCommit") };
    assert_eq!((o.generation_id_or_member_epoch, o.retention_time_ms), (-1, -1));
    let p = &o.topics[0].partitions[0];
    assert_eq!((p.committed_leader_epoch, p.commit_timestamp, p.committed_metadata.clone()), (-1, -1, None));
    let header = RequestHeader { api_key: DESCRIBE_GROUPS, api_version: 0, ..Default::default() };
    let frame = B::default().i32(0).arr(1).i16(0).s("g").s("").s("").s("").arr(0).0;
    let (_, d): (i32, DescribeGroupsResponse) = decode_response(&header, Bytes::from(frame)).unwrap();
    assert_eq!(d.groups[0].authorized_operations, i32::MIN);
}

/// CreatePartitions: v0 (classic) and v2 (flexible) layouts from Kafka's JSON, null assignments.
#[test]
fn create_partitions_exact_bytes() {
    let unwrap = |r| if let Request::CreatePartitions(m) = r { Some(m) } else { None };
    let expected = CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic { name: "t".into(), count: 4, assignments: None, ..Default::default() }],
        timeout_ms: 30_000,
        validate_only: true,
        ..Default::default()
    };
    check_request(
        CREATE_PARTITIONS,
        0,
        B::default().arr(1).s("t").i32(4).i32(-1).i32(30_000).i8(1),
        expected.clone(),
        unwrap,
    );
    check_request(
        CREATE_PARTITIONS,
        2,
        B::default().carr(1).cs("t").i32(4).clen(None).tags().i32(30_000).i8(1).tags(),
        expected,
        unwrap,
    );
    check_response(
        CREATE_PARTITIONS,
        3,
        B::default().i32(0).carr(1).cs("t").i16(37).cs("no").tags().tags(),
        CreatePartitionsResponse {
            results: vec![CreatePartitionsTopicResult {
                name: "t".into(),
                error_code: ErrorCode(37),
                error_message: Some("no".into()),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

/// DeleteRecords v0 and v2: topics, partitions with their offsets, the timeout; the answer's
/// low watermark before the error code.
#[test]
fn delete_records_exact_bytes() {
    let unwrap = |r| if let Request::DeleteRecords(m) = r { Some(m) } else { None };
    let expected = DeleteRecordsRequest {
        topics: vec![DeleteRecordsTopic {
            name: "t".into(),
            partitions: vec![DeleteRecordsPartition { partition_index: 1, offset: -1, ..Default::default() }],
            ..Default::default()
        }],
        timeout_ms: 500,
        ..Default::default()
    };
    check_request(
        DELETE_RECORDS,
        0,
        B::default().arr(1).s("t").arr(1).i32(1).i64(-1).i32(500),
        expected.clone(),
        unwrap,
    );
    check_request(
        DELETE_RECORDS,
        2,
        B::default().carr(1).cs("t").carr(1).i32(1).i64(-1).tags().tags().i32(500).tags(),
        expected,
        unwrap,
    );
    check_response(
        DELETE_RECORDS,
        1,
        B::default().i32(0).arr(1).s("t").arr(1).i32(1).i64(42).i16(0),
        DeleteRecordsResponse {
            topics: vec![DeleteRecordsTopicResult {
                name: "t".into(),
                partitions: vec![DeleteRecordsPartitionResult {
                    partition_index: 1,
                    low_watermark: 42,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

/// DescribeLogDirs: a null topic list means every partition; v3 adds the top-level error code,
/// v4 the volume's total and usable bytes.
#[test]
fn describe_log_dirs_exact_bytes() {
    let unwrap = |r| if let Request::DescribeLogDirs(m) = r { Some(m) } else { None };
    check_request(DESCRIBE_LOG_DIRS, 1, B::default().i32(-1), DescribeLogDirsRequest::default(), unwrap);
    check_request(DESCRIBE_LOG_DIRS, 4, B::default().clen(None).tags(), DescribeLogDirsRequest::default(), unwrap);
    let one = DescribeLogDirsResult {
        log_dir: "/d".into(),
        topics: vec![DescribeLogDirsTopic {
            name: "t".into(),
            partitions: vec![DescribeLogDirsPartition { partition_index: 0, partition_size: 9, ..Default::default() }],
            ..Default::default()
        }],
        ..Default::default()
    };
    check_response(
        DESCRIBE_LOG_DIRS,
        0,
        B::default().i32(0).arr(1).i16(0).s("/d").arr(1).s("t").arr(1).i32(0).i64(9).i64(0).i8(0),
        DescribeLogDirsResponse { results: vec![one.clone()], ..Default::default() },
    );
    check_response(
        DESCRIBE_LOG_DIRS,
        4,
        B::default()
            .i32(0)
            .i16(0)
            .carr(1)
            .i16(0)
            .cs("/d")
            .carr(1)
            .cs("t")
            .carr(1)
            .i32(0)
            .i64(9)
            .i64(0)
            .i8(0)
            .tags()
            .tags()
            .i64(100)
            .i64(60)
            .tags()
            .tags(),
        DescribeLogDirsResponse {
            results: vec![DescribeLogDirsResult { total_bytes: 100, usable_bytes: 60, ..one }],
            ..Default::default()
        },
    );
}

/// DescribeCluster: flexible from v0; v1 adds the endpoint type (request and response), v2 the
/// fenced flags.
#[test]
fn describe_cluster_exact_bytes() {
    let unwrap = |r| if let Request::DescribeCluster(m) = r { Some(m) } else { None };
    check_request(DESCRIBE_CLUSTER, 0, B::default().i8(0).tags(), DescribeClusterRequest::default(), unwrap);
    check_request(
        DESCRIBE_CLUSTER,
        2,
        B::default().i8(1).i8(1).i8(1).tags(),
        DescribeClusterRequest {
            include_cluster_authorized_operations: true,
            include_fenced_brokers: true,
            ..Default::default()
        },
        unwrap,
    );
    let broker = DescribeClusterBroker { broker_id: 0, host: "h".into(), port: 9092, ..Default::default() };
    check_response(
        DESCRIBE_CLUSTER,
        1,
        B::default()
            .i32(0)
            .i16(0)
            .cnull()
            .i8(1)
            .cs("c")
            .i32(0)
            .carr(1)
            .i32(0)
            .cs("h")
            .i32(9092)
            .cnull()
            .tags()
            .i32(i32::MIN)
            .tags(),
        DescribeClusterResponse {
            cluster_id: "c".into(),
            controller_id: 0,
            brokers: vec![broker],
            ..Default::default()
        },
    );
}

/// DescribeProducers v0 (flexible): each active producer's id, epoch, last sequence and
/// timestamp, coordinator epoch and transaction start.
#[test]
fn describe_producers_exact_bytes() {
    check_request(
        DESCRIBE_PRODUCERS,
        0,
        B::default().carr(1).cs("t").carr(1).i32(2).tags().tags(),
        DescribeProducersRequest {
            topics: vec![DescribeProducersTopic { name: "t".into(), partition_indexes: vec![2], ..Default::default() }],
            ..Default::default()
        },
        |r| if let Request::DescribeProducers(m) = r { Some(m) } else { None },
    );
    check_response(
        DESCRIBE_PRODUCERS,
        0,
        B::default()
            .i32(0)
            .carr(1)
            .cs("t")
            .carr(1)
            .i32(2)
            .i16(0)
            .cnull()
            .carr(1)
            .i64(7)
            .i32(1)
            .i32(41)
            .i64(99)
            .i32(0)
            .i64(-1)
            .tags()
            .tags()
            .tags()
            .tags(),
        DescribeProducersResponse {
            topics: vec![DescribeProducersTopicResponse {
                name: "t".into(),
                partitions: vec![DescribeProducersPartition {
                    partition_index: 2,
                    active_producers: vec![ProducerStateEntry {
                        producer_id: 7,
                        producer_epoch: 1,
                        last_sequence: 41,
                        last_timestamp: 99,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

/// ApiVersions v3 response: the feature fields are tagged fields 0 (SupportedFeatures: name,
/// min, max), 1 (FinalizedFeaturesEpoch) and 2 (FinalizedFeatures: name, max level, min level),
/// in tag order, each written only when not its default.
#[test]
fn api_versions_features_exact_bytes() {
    let features = B::default().carr(1).cs("f").i16(1).i16(3).tags();
    let finalized = B::default().carr(1).cs("f").i16(3).i16(2).tags();
    let body = B::default().i16(0).carr(1).i16(18).i16(0).i16(4).tags().i32(0).i8(3).i8(0).i8(features.0.len() as i8);
    let mut body = body;
    body.0.extend_from_slice(&features.0);
    body = body.i8(1).i8(8).i64(5).i8(2).i8(finalized.0.len() as i8);
    body.0.extend_from_slice(&finalized.0);
    check_response(
        API_VERSIONS,
        3,
        body,
        ApiVersionsResponse {
            api_keys: vec![ApiVersion { api_key: 18, min_version: 0, max_version: 4, ..Default::default() }],
            supported_features: vec![FeatureRange { name: "f".into(), min: 1, max: 3, ..Default::default() }],
            finalized_features_epoch: 5,
            finalized_features: vec![FeatureRange { name: "f".into(), min: 2, max: 3, ..Default::default() }],
            ..Default::default()
        },
    );
    // Defaults are not written: no tagged fields at all.
    check_response(API_VERSIONS, 3, B::default().i16(0).carr(0).i32(0).tags(), ApiVersionsResponse::default());
}

#[test]
fn describe_groups_v6_and_metadata_v13_exact_bytes() {
    // DescribeGroups v6 (KIP-1043): each group's ErrorMessage (nullable compact string) comes
    // right after its ErrorCode, before GroupId.
    check_response(
        DESCRIBE_GROUPS,
        6,
        B::default()
            .i32(0)
            .carr(1)
            .i16(69)
            .cs("Group g not found.")
            .cs("g")
            .cs("Dead")
            .cs("")
            .cs("")
            .carr(0)
            .i32(i32::MIN)
            .tags()
            .tags(),
        DescribeGroupsResponse {
            groups: vec![DescribedGroup {
                error_code: ErrorCode(69),
                error_message: Some("Group g not found.".into()),
                group_id: "g".into(),
                group_state: "Dead".into(),
                authorized_operations: i32::MIN,
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    // Metadata v13 (KIP-1102): the top-level ErrorCode is the body's last field.
    check_response(
        METADATA,
        13,
        B::default().i32(0).carr(0).cnull().i32(-1).carr(0).i16(129).tags(),
        MetadataResponse { controller_id: -1, error_code: ErrorCode(129), ..Default::default() },
    );
}

#[test]
fn offset_delete_exact_bytes() {
    // v0 (not flexible): GroupId, Topics [Name, Partitions [PartitionIndex]].
    check_request(
        OFFSET_DELETE,
        0,
        B::default().s("g").arr(1).s("t").arr(2).i32(0).i32(3),
        OffsetDeleteRequest {
            group_id: "g".into(),
            topics: vec![OffsetDeleteRequestTopic {
                name: "t".into(),
                partitions: vec![
                    OffsetDeleteRequestPartition { partition_index: 0, ..Default::default() },
                    OffsetDeleteRequestPartition { partition_index: 3, ..Default::default() },
                ],
                ..Default::default()
            }],
            ..Default::default()
        },
        |r| if let Request::OffsetDelete(m) = r { Some(m) } else { None },
    );
    // ErrorCode, ThrottleTimeMs, then Topics [Name, Partitions [PartitionIndex, ErrorCode]].
    check_response(
        OFFSET_DELETE,
        0,
        B::default().i16(0).i32(5).arr(1).s("t").arr(1).i32(0).i16(86),
        OffsetDeleteResponse {
            throttle_time_ms: 5,
            topics: vec![OffsetDeleteResponseTopic {
                name: "t".into(),
                partitions: vec![OffsetDeleteResponsePartition {
                    partition_index: 0,
                    error_code: ErrorCode(86),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn list_config_resources_exact_bytes() {
    // v1 (flexible): ResourceTypes (compact int8 array).
    check_request(
        LIST_CONFIG_RESOURCES,
        1,
        B::default().carr(2).i8(2).i8(4).tags(),
        ListConfigResourcesRequest { resource_types: vec![2, 4], ..Default::default() },
        |r| if let Request::ListConfigResources(m) = r { Some(m) } else { None },
    );
    // ThrottleTimeMs, ErrorCode, ConfigResources [ResourceName, ResourceType (v1+)].
    check_response(
        LIST_CONFIG_RESOURCES,
        1,
        B::default().i32(0).i16(0).carr(1).cs("t").i8(2).tags().tags(),
        ListConfigResourcesResponse {
            config_resources: vec![ConfigResourceListed {
                resource_name: "t".into(),
                resource_type: 2,
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    // v0: the name only (a client metrics resource).
    check_response(
        LIST_CONFIG_RESOURCES,
        0,
        B::default().i32(0).i16(0).carr(1).cs("m").tags().tags(),
        ListConfigResourcesResponse {
            config_resources: vec![ConfigResourceListed { resource_name: "m".into(), ..Default::default() }],
            ..Default::default()
        },
    );
}

#[test]
fn unregister_broker_exact_bytes() {
    // v0 (flexible): BrokerId; the answer ThrottleTimeMs, ErrorCode, ErrorMessage.
    check_request(
        UNREGISTER_BROKER,
        0,
        B::default().i32(4).tags(),
        UnregisterBrokerRequest { broker_id: 4, ..Default::default() },
        |r| if let Request::UnregisterBroker(m) = r { Some(m) } else { None },
    );
    check_response(
        UNREGISTER_BROKER,
        0,
        B::default().i32(0).i16(102).cs("gone").tags(),
        UnregisterBrokerResponse {
            error_code: ErrorCode(102),
            error_message: Some("gone".into()),
            ..Default::default()
        },
    );
}

#[test]
fn raft_voter_changes_exact_bytes() {
    // AddRaftVoter v1 (flexible): ClusterId, TimeoutMs, VoterId, VoterDirectoryId, Listeners
    // [Name, Host, Port uint16], AckWhenCommitted (v1+); RemoveRaftVoter v0: ClusterId,
    // VoterId, VoterDirectoryId. Both answer ThrottleTimeMs, ErrorCode, ErrorMessage.
    let dir = [7u8; 16];
    let mut b = B::default().cnull().i32(30_000).i32(3);
    b.0.extend_from_slice(&dir);
    let b = b.carr(1).cs("CONTROLLER").cs("h").i16(9093).tags().i8(0).tags();
    check_request(
        ADD_RAFT_VOTER,
        1,
        b,
        AddRaftVoterRequest {
            timeout_ms: 30_000,
            voter_id: 3,
            voter_directory_id: dir,
            listeners: vec![QuorumListener {
                name: "CONTROLLER".into(),
                host: "h".into(),
                port: 9093,
                ..Default::default()
            }],
            ack_when_committed: false,
            ..Default::default()
        },
        |r| if let Request::AddRaftVoter(m) = r { Some(m) } else { None },
    );
    let mut b = B::default().cs("c").i32(3);
    b.0.extend_from_slice(&dir);
    check_request(
        REMOVE_RAFT_VOTER,
        0,
        b.tags(),
        RemoveRaftVoterRequest {
            cluster_id: Some("c".into()),
            voter_id: 3,
            voter_directory_id: dir,
            ..Default::default()
        },
        |r| if let Request::RemoveRaftVoter(m) = r { Some(m) } else { None },
    );
    check_response(
        REMOVE_RAFT_VOTER,
        0,
        B::default().i32(0).i16(127).cs("no").tags(),
        RemoveRaftVoterResponse { error_code: ErrorCode(127), error_message: Some("no".into()), ..Default::default() },
    );
    check_response(
        ADD_RAFT_VOTER,
        1,
        B::default().i32(0).i16(126).cnull().tags(),
        AddRaftVoterResponse { error_code: ErrorCode(126), ..Default::default() },
    );
}

#[test]
fn describe_quorum_exact_bytes() {
    // Flexible from v0: Topics [TopicName, Partitions [PartitionIndex]].
    check_request(
        DESCRIBE_QUORUM,
        2,
        B::default().carr(1).cs("__cluster_metadata").carr(1).i32(0).tags().tags().tags(),
        DescribeQuorumRequest {
            topics: vec![QuorumTopicRequest {
                topic_name: "__cluster_metadata".into(),
                partitions: vec![QuorumPartitionRequest { partition_index: 0, ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        },
        |r| if let Request::DescribeQuorum(m) = r { Some(m) } else { None },
    );
    // v2: ErrorCode, ErrorMessage, Topics [TopicName, Partitions [PartitionIndex, ErrorCode,
    // ErrorMessage, LeaderId, LeaderEpoch, HighWatermark, CurrentVoters [ReplicaId,
    // ReplicaDirectoryId, LogEndOffset, LastFetchTimestamp, LastCaughtUpTimestamp], Observers]],
    // Nodes [NodeId, Listeners [Name, Host, Port (uint16)]].
    let mut dir = B::default();
    dir.0.extend_from_slice(&[7; 16]);
    let voter = B::default().i32(1).0.into_iter().chain(dir.0).collect::<Vec<u8>>();
    let mut body = B::default().i16(0).cnull().carr(1).cs("m").carr(1).i32(0).i16(0).cnull().i32(1).i32(5).i64(9);
    body = body.carr(1);
    body.0.extend_from_slice(&voter);
    body = body.i64(9).i64(100).i64(-1).tags().carr(0).tags().tags();
    body = body.carr(1).i32(1).carr(1).cs("CONTROLLER").cs("h").i16(-7).tags().tags().tags();
    check_response(
        DESCRIBE_QUORUM,
        2,
        body,
        DescribeQuorumResponse {
            topics: vec![QuorumTopicData {
                topic_name: "m".into(),
                partitions: vec![QuorumPartitionData {
                    leader_id: 1,
                    leader_epoch: 5,
                    high_watermark: 9,
                    current_voters: vec![QuorumReplicaState {
                        replica_id: 1,
                        replica_directory_id: [7; 16],
                        log_end_offset: 9,
                        last_fetch_timestamp: 100,
                        last_caught_up_timestamp: -1,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            nodes: vec![QuorumNode {
                node_id: 1,
                listeners: vec![QuorumListener {
                    name: "CONTROLLER".into(),
                    host: "h".into(),
                    port: 65529,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    // v0: no messages, no directory ids, no timestamps, no nodes.
    check_response(
        DESCRIBE_QUORUM,
        0,
        B::default()
            .i16(0)
            .carr(1)
            .cs("m")
            .carr(1)
            .i32(0)
            .i16(0)
            .i32(1)
            .i32(5)
            .i64(9)
            .carr(1)
            .i32(1)
            .i64(9)
            .tags()
            .carr(0)
            .tags()
            .tags()
            .tags(),
        DescribeQuorumResponse {
            topics: vec![QuorumTopicData {
                topic_name: "m".into(),
                partitions: vec![QuorumPartitionData {
                    leader_id: 1,
                    leader_epoch: 5,
                    high_watermark: 9,
                    current_voters: vec![QuorumReplicaState { replica_id: 1, log_end_offset: 9, ..Default::default() }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
}

#[test]
fn update_features_exact_bytes() {
    // v1 (flexible): timeoutMs, FeatureUpdates [Feature, MaxVersionLevel, UpgradeType (v1+)],
    // ValidateOnly (v1+).
    check_request(
        UPDATE_FEATURES,
        1,
        B::default().i32(60000).carr(1).cs("transaction.version").i16(0).i8(2).tags().i8(1).tags(),
        UpdateFeaturesRequest {
            timeout_ms: 60000,
            feature_updates: vec![FeatureUpdateKey {
                feature: "transaction.version".into(),
                max_version_level: 0,
                upgrade_type: 2,
                ..Default::default()
            }],
            validate_only: true,
            ..Default::default()
        },
        |r| if let Request::UpdateFeatures(m) = r { Some(m) } else { None },
    );
    // v0: AllowDowngrade instead of UpgradeType, no ValidateOnly.
    check_request(
        UPDATE_FEATURES,
        0,
        B::default().i32(5).carr(1).cs("group.version").i16(1).i8(0).tags().tags(),
        UpdateFeaturesRequest {
            timeout_ms: 5,
            feature_updates: vec![FeatureUpdateKey {
                feature: "group.version".into(),
                max_version_level: 1,
                ..Default::default()
            }],
            ..Default::default()
        },
        |r| if let Request::UpdateFeatures(m) = r { Some(m) } else { None },
    );
    // ThrottleTimeMs, ErrorCode, ErrorMessage, Results (v0-1) [Feature, ErrorCode, ErrorMessage].
    let ok = UpdateFeaturesResponse {
        results: vec![UpdatableFeatureResult { feature: "group.version".into(), ..Default::default() }],
        ..Default::default()
    };
    check_response(
        UPDATE_FEATURES,
        1,
        B::default().i32(0).i16(0).cnull().carr(1).cs("group.version").i16(0).cnull().tags().tags(),
        ok,
    );
    // v2: no Results.
    check_response(
        UPDATE_FEATURES,
        2,
        B::default().i32(0).i16(95).cs("no").tags(),
        UpdateFeaturesResponse { error_code: ErrorCode(95), error_message: Some("no".into()), ..Default::default() },
    );
}

/// docs/protocol.md's table lists every API of `SUPPORTED` once, with its versions and its
/// first flexible version, so the page users read is the table ApiVersions advertises.
#[test]
fn the_protocol_docs_list_the_supported_table() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md")).unwrap();
    let mut listed = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(key), Some(versions), Some(flex)) = (cells.get(2), cells.get(3), cells.get(4)) else { continue };
        let Ok(key) = key.parse::<i16>() else { continue };
        let (lo, hi) = versions.split_once('-').unwrap_or((versions, versions));
        let flex = if *flex == "none" { i16::MAX } else { flex.parse().unwrap() };
        let row = (lo.parse::<i16>().unwrap(), hi.parse::<i16>().unwrap(), flex);
        assert!(listed.insert(key, row).is_none(), "API {key} listed twice");
    }
    let supported: std::collections::BTreeMap<i16, (i16, i16, i16)> =
        SUPPORTED.iter().map(|&(k, lo, hi, flex)| (k, (lo, hi, flex))).collect();
    assert_eq!(listed, supported, "docs/protocol.md against protocol::SUPPORTED");
}
