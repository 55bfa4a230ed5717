//! Codec round trips for every API and version tidemark implements: random messages encoded,
//! decoded and encoded again give the same bytes and consume the whole frame; arbitrary
//! bytes never panic the request decoder; headers follow the flexible-version rules.

use bytes::Bytes;
use proptest::prelude::*;
use tidemark::protocol::codec::{Reader, TaggedFields, Writer};
use tidemark::protocol::messages::*;
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
        self.next() % 2 == 0
    }
    fn len(&mut self) -> usize {
        (self.next() % 4) as usize
    }
    fn string(&mut self) -> String {
        (0..self.next() % 12).map(|i| (b'a' + ((self.next() + i) % 26) as u8) as char).collect()
    }
    fn opt_string(&mut self) -> Option<String> {
        if self.next() % 4 == 0 {
            None
        } else {
            Some(self.string())
        }
    }
    fn bytes(&mut self) -> Option<Bytes> {
        if self.next() % 5 == 0 {
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
    fn ints(&mut self) -> Vec<i32> {
        (0..self.len()).map(|_| self.i32()).collect()
    }
}

fn gen_request(api: i16, g: &mut Gen) -> Request {
    match api {
        PRODUCE => Request::Produce(ProduceRequest {
            transactional_id: g.opt_string(),
            acks: g.i16(),
            timeout_ms: g.i32(),
            topics: (0..g.len())
                .map(|_| ProduceTopic {
                    name: g.string(),
                    partitions: (0..g.len())
                        .map(|_| ProducePartition { index: g.i32(), records: g.bytes(), tags: g.tags() })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            tags: g.tags(),
        }),
        FETCH => Request::Fetch(FetchRequest {
            replica_id: g.i32(),
            max_wait_ms: g.i32(),
            min_bytes: g.i32(),
            max_bytes: g.i32(),
            isolation_level: g.i8(),
            session_id: g.i32(),
            session_epoch: g.i32(),
            topics: (0..g.len())
                .map(|_| FetchTopic {
                    topic: g.string(),
                    partitions: (0..g.len())
                        .map(|_| FetchPartition {
                            partition: g.i32(),
                            current_leader_epoch: g.i32(),
                            fetch_offset: g.i64(),
                            last_fetched_epoch: g.i32(),
                            log_start_offset: g.i64(),
                            partition_max_bytes: g.i32(),
                            tags: g.tags(),
                        })
                        .collect(),
                    tags: g.tags(),
                })
                .collect(),
            forgotten_topics: (0..g.len())
                .map(|_| ForgottenTopic { topic: g.string(), partitions: g.ints(), tags: g.tags() })
                .collect(),
            rack_id: g.string(),
            tags: g.tags(),
        }),
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
        _ => unreachable!(),
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
        api_key: api_of(&req),
        api_version: version,
        correlation_id: 7,
        client_id: Some("t".into()),
        tags: TaggedFields::default(),
    };
    let frame = match req.clone() {
        Request::Produce(mut m) => encode_request(&header, &mut m),
        Request::Fetch(mut m) => encode_request(&header, &mut m),
        Request::ListOffsets(mut m) => encode_request(&header, &mut m),
        Request::Metadata(mut m) => encode_request(&header, &mut m),
        Request::ApiVersions(mut m) => encode_request(&header, &mut m),
        Request::CreateTopics(mut m) => encode_request(&header, &mut m),
        Request::DeleteTopics(mut m) => encode_request(&header, &mut m),
        Request::DescribeConfigs(mut m) => encode_request(&header, &mut m),
        Request::AlterConfigs(mut m) => encode_request(&header, &mut m),
    }
    .unwrap();
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
        Request::AlterConfigs(mut m) => {
            let api = if m.incremental { INCREMENTAL_ALTER_CONFIGS } else { ALTER_CONFIGS };
            let back = AlterConfigsRequest { incremental: m.incremental, ..Default::default() };
            round_trip_from(&mut m, back, api, version)
        }
    }
}

fn api_of(r: &Request) -> i16 {
    match r {
        Request::Produce(_) => PRODUCE,
        Request::Fetch(_) => FETCH,
        Request::ListOffsets(_) => LIST_OFFSETS,
        Request::Metadata(_) => METADATA,
        Request::ApiVersions(_) => API_VERSIONS,
        Request::CreateTopics(_) => CREATE_TOPICS,
        Request::DeleteTopics(_) => DELETE_TOPICS,
        Request::DescribeConfigs(_) => DESCRIBE_CONFIGS,
        Request::AlterConfigs(m) if m.incremental => INCREMENTAL_ALTER_CONFIGS,
        Request::AlterConfigs(_) => ALTER_CONFIGS,
    }
}

fn gen_responses(api: i16, version: i16, g: &mut Gen) {
    match api {
        PRODUCE => round_trip(
            &mut ProduceResponse {
                topics: (0..g.len())
                    .map(|_| ProduceTopicResponse {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| ProducePartitionResponse {
                                index: g.i32(),
                                error_code: g.i16(),
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
                                tags: g.tags(),
                            })
                            .collect(),
                        tags: g.tags(),
                    })
                    .collect(),
                throttle_time_ms: g.i32(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        FETCH => round_trip(
            &mut FetchResponse {
                throttle_time_ms: g.i32(),
                error_code: g.i16(),
                session_id: g.i32(),
                topics: (0..g.len())
                    .map(|_| FetchTopicResponse {
                        topic: g.string(),
                        partitions: (0..g.len())
                            .map(|_| FetchPartitionResponse {
                                partition_index: g.i32(),
                                error_code: g.i16(),
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
        LIST_OFFSETS => round_trip(
            &mut ListOffsetsResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| ListOffsetsTopicResponse {
                        name: g.string(),
                        partitions: (0..g.len())
                            .map(|_| ListOffsetsPartitionResponse {
                                partition_index: g.i32(),
                                error_code: g.i16(),
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
        METADATA => round_trip(
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
                        error_code: g.i16(),
                        name: Some(g.string()),
                        topic_id: g.uuid(),
                        is_internal: g.bool(),
                        partitions: (0..g.len())
                            .map(|_| MetadataPartition {
                                error_code: g.i16(),
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
                tags: g.tags(),
            },
            api,
            version,
        ),
        API_VERSIONS => round_trip(
            &mut ApiVersionsResponse {
                error_code: g.i16(),
                api_keys: (0..g.len())
                    .map(|_| ApiVersion {
                        api_key: g.i16(),
                        min_version: g.i16(),
                        max_version: g.i16(),
                        tags: g.tags(),
                    })
                    .collect(),
                throttle_time_ms: g.i32(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        CREATE_TOPICS => round_trip(
            &mut CreateTopicsResponse {
                throttle_time_ms: g.i32(),
                topics: (0..g.len())
                    .map(|_| CreatableTopicResult {
                        name: g.string(),
                        topic_id: g.uuid(),
                        error_code: g.i16(),
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
        DELETE_TOPICS => round_trip(
            &mut DeleteTopicsResponse {
                throttle_time_ms: g.i32(),
                responses: (0..g.len())
                    .map(|_| DeletableTopicResult {
                        name: Some(g.string()),
                        topic_id: g.uuid(),
                        error_code: g.i16(),
                        error_message: g.opt_string(),
                        tags: g.tags(),
                    })
                    .collect(),
                tags: g.tags(),
            },
            api,
            version,
        ),
        DESCRIBE_CONFIGS => round_trip(
            &mut DescribeConfigsResponse {
                throttle_time_ms: g.i32(),
                results: (0..g.len())
                    .map(|_| DescribeConfigsResult {
                        error_code: g.i16(),
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
        ALTER_CONFIGS | INCREMENTAL_ALTER_CONFIGS => round_trip(
            &mut AlterConfigsResponse {
                throttle_time_ms: g.i32(),
                responses: (0..g.len())
                    .map(|_| AlterConfigsResourceResponse {
                        error_code: g.i16(),
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
                round_trip_request(gen_request(api, &mut g), version);
                gen_responses(api, version, &mut g);
            }
        }
    }

    /// Arbitrary bytes (and arbitrary bytes behind a valid header) never panic the decoder.
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), api in 0usize..10, version in 0i16..14) {
        let _ = decode_request(Bytes::from(bytes.clone()));
        let mut framed = Vec::new();
        framed.extend_from_slice(&SUPPORTED[api].0.to_be_bytes());
        framed.extend_from_slice(&version.to_be_bytes());
        framed.extend_from_slice(&1i32.to_be_bytes());
        framed.extend_from_slice(&bytes);
        let _ = decode_request(Bytes::from(framed));
    }
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
    // kafka-python asks ApiVersions v4 first (flexible header v2): answered with the header.
    let header = RequestHeader {
        api_key: API_VERSIONS,
        api_version: 4,
        correlation_id: 9,
        client_id: Some("kafka-python".into()),
        tags: TaggedFields::default(),
    };
    let mut w = Writer::new(true);
    w.buf.extend_from_slice(&API_VERSIONS.to_be_bytes());
    w.buf.extend_from_slice(&4i16.to_be_bytes());
    w.buf.extend_from_slice(&9i32.to_be_bytes());
    w.buf.extend_from_slice(&12i16.to_be_bytes());
    w.buf.extend_from_slice(b"kafka-python");
    w.buf.extend_from_slice(&[0, 1, 1, 0]); // tags, name "", version "", tags
    let e = decode_request(w.buf.freeze()).unwrap_err();
    assert_eq!(e.header.as_ref().map(|h| h.correlation_id), Some(9));
    assert_eq!(e.error, ProtoError::UnsupportedVersion { api: API_VERSIONS, version: 4 });
    // The answer: a v0 response (header v0, error 35) listing what we support.
    let mut resp = api_versions_response(errors::UNSUPPORTED_VERSION);
    let v0 = RequestHeader { api_version: 0, ..header };
    let frame = encode_response(&v0, &mut resp).unwrap();
    let (cid, back): (i32, ApiVersionsResponse) = decode_response(&v0, frame.slice(4..)).unwrap();
    assert_eq!((cid, back.error_code), (9, 35));
    assert_eq!(back.api_keys.len(), SUPPORTED.len());
}
