//! Writes the seed corpora of the fuzz targets: `cargo run --manifest-path
//! fuzz/seedgen/Cargo.toml -- fuzz/seeds` (each target's seeds in `seeds/<target>/`). Seeds are
//! valid inputs built with tidemark's own encoders, so the fuzzer starts past the CRCs and
//! framing it would otherwise take long to find; each is in the input form its target
//! documents.

use bytes::Bytes;
use futures_lite::future::block_on;
use std::path::{Path, PathBuf};
use tidemark::config::LogConfig;
use tidemark::io::MemDisk;
use tidemark::protocol::messages::*;
use tidemark::protocol::admin::*;
use tidemark::protocol::groups::*;
use tidemark::protocol::messages::Message;
use tidemark::protocol::{encode_request, RequestHeader, SUPPORTED};
use tidemark::storage::format::batch::{BatchBuilder, Compression};
use tidemark::storage::format::legacy::{LegacyBuilder, MAGIC_V0, MAGIC_V1};
use tidemark::storage::Log;

const CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join(name), bytes).expect("write seed");
}

fn frame<M: Message>(api: i16, version: i16, mut m: M) -> Option<Vec<u8>> {
    let h = RequestHeader { api_key: api, api_version: version, correlation_id: 7, client_id: Some("seed".into()), ..Default::default() };
    encode_request(&h, &mut m).ok().map(|b| b[4..].to_vec())
}

/// request_decoder: a request of every API and version, each with default fields (Produce
/// also with a record batch).
fn requests(out: &Path) {
    let batch = v2(3, Compression::None, false);
    for &(api, lo, hi, _) in SUPPORTED {
        for v in lo..=hi {
            let f = match api {
                0 => frame(api, v, ProduceRequest {
                    acks: -1,
                    timeout_ms: 1000,
                    topics: vec![ProduceTopic {
                        name: "t".into(),
                        partitions: vec![ProducePartition {
                            index: 0,
                            records: Some(Bytes::from(batch.clone())),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                1 => frame(api, v, FetchRequest {
                    max_wait_ms: 100,
                    min_bytes: 1,
                    cluster_id: Some("c".into()),
                    replica_state: ReplicaState { replica_id: 1, replica_epoch: 2, ..Default::default() },
                    topics: vec![FetchTopic {
                        topic: "t".into(),
                        topic_id: [7; 16],
                        partitions: vec![FetchPartition {
                            partition_max_bytes: 1 << 20,
                            replica_directory_id: [9; 16],
                            high_watermark: 42,
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                2 => frame(api, v, ListOffsetsRequest::default()),
                3 => frame(api, v, MetadataRequest::default()),
                8 => frame(api, v, OffsetCommitRequest::default()),
                9 => frame(api, v, OffsetFetchRequest::default()),
                10 => frame(api, v, FindCoordinatorRequest::default()),
                11 => frame(api, v, JoinGroupRequest::default()),
                12 => frame(api, v, HeartbeatRequest::default()),
                13 => frame(api, v, LeaveGroupRequest::default()),
                14 => frame(api, v, SyncGroupRequest::default()),
                15 => frame(api, v, DescribeGroupsRequest::default()),
                16 => frame(api, v, ListGroupsRequest::default()),
                18 => frame(api, v, ApiVersionsRequest::default()),
                19 => frame(api, v, CreateTopicsRequest::default()),
                20 => frame(api, v, DeleteTopicsRequest::default()),
                22 => frame(api, v, InitProducerIdRequest::default()),
                32 => frame(api, v, DescribeConfigsRequest::default()),
                33 => frame(api, v, AlterConfigsRequest::default()),
                42 => frame(api, v, DeleteGroupsRequest::default()),
                47 => frame(api, v, OffsetDeleteRequest {
                    group_id: "g".into(),
                    topics: vec![OffsetDeleteRequestTopic {
                        name: "t".into(),
                        partitions: vec![OffsetDeleteRequestPartition { partition_index: 0, ..Default::default() }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                44 => frame(api, v, AlterConfigsRequest { incremental: true, ..Default::default() }),
                21 => frame(api, v, DeleteRecordsRequest {
                    topics: vec![DeleteRecordsTopic {
                        name: "t".into(),
                        partitions: vec![DeleteRecordsPartition { partition_index: 0, offset: 5, ..Default::default() }],
                        ..Default::default()
                    }],
                    timeout_ms: 1000,
                    ..Default::default()
                }),
                35 => frame(api, v, DescribeLogDirsRequest {
                    topics: Some(vec![DescribableLogDirTopic { topic: "t".into(), partitions: vec![0, 1], ..Default::default() }]),
                    ..Default::default()
                }),
                37 => frame(api, v, CreatePartitionsRequest {
                    topics: vec![CreatePartitionsTopic {
                        name: "t".into(),
                        count: 3,
                        assignments: Some(vec![CreatePartitionsAssignment { broker_ids: vec![0], ..Default::default() }]),
                        ..Default::default()
                    }],
                    timeout_ms: 1000,
                    ..Default::default()
                }),
                60 => frame(api, v, DescribeClusterRequest::default()),
                55 => frame(api, v, DescribeQuorumRequest {
                    topics: vec![QuorumTopicRequest {
                        topic_name: "__cluster_metadata".into(),
                        partitions: vec![QuorumPartitionRequest { partition_index: 0, ..Default::default() }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                64 => frame(api, v, UnregisterBrokerRequest { broker_id: 2, ..Default::default() }),
                80 => frame(api, v, AddRaftVoterRequest {
                    timeout_ms: 30_000,
                    voter_id: 3,
                    voter_directory_id: [9; 16],
                    listeners: vec![QuorumListener {
                        name: "CONTROLLER".into(),
                        host: "127.0.0.1".into(),
                        port: 9093,
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                81 => frame(api, v, RemoveRaftVoterRequest { voter_id: 3, voter_directory_id: [9; 16], ..Default::default() }),
                57 => frame(api, v, UpdateFeaturesRequest {
                    feature_updates: vec![FeatureUpdateKey {
                        feature: "transaction.version".into(),
                        max_version_level: 2,
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                74 => frame(api, v, ListConfigResourcesRequest { resource_types: vec![2, 4], ..Default::default() }),
                68 => frame(api, v, ConsumerGroupHeartbeatRequest {
                    group_id: "g".into(),
                    member_id: "m".into(),
                    rebalance_timeout_ms: 30_000,
                    subscribed_topic_names: Some(vec!["t".into()]),
                    subscribed_topic_regex: Some(String::new()),
                    server_assignor: Some("uniform".into()),
                    topic_partitions: Some(vec![TopicPartitions { topic_id: [3; 16], partitions: vec![0, 1], ..Default::default() }]),
                    ..Default::default()
                }),
                69 => frame(api, v, ConsumerGroupDescribeRequest { group_ids: vec!["g".into()], ..Default::default() }),
                75 => frame(api, v, DescribeTopicPartitionsRequest {
                    topics: vec![DescribeTopicPartitionsTopic { name: "t".into(), ..Default::default() }],
                    cursor: Some(DescribeTopicPartitionsCursor { topic_name: "t".into(), partition_index: 1, ..Default::default() }),
                    ..Default::default()
                }),
                61 => frame(api, v, DescribeProducersRequest {
                    topics: vec![DescribeProducersTopic { name: "t".into(), partition_indexes: vec![0], ..Default::default() }],
                    ..Default::default()
                }),
                _ => None,
            };
            if let Some(f) = f {
                write(out, &format!("api{api}-v{v}"), &f);
            }
        }
    }
}

/// A v2 batch of `n` records.
fn v2(n: usize, codec: Compression, headers: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        let h: &[(&[u8], Option<&[u8]>)] = if headers { &[(b"h", Some(b"x")), (b"n", None)] } else { &[] };
        b.push(1000 + i as i64, (i % 2 == 0).then_some(&b"key"[..]), Some(format!("value-{i}").as_bytes()), h);
    }
    if codec == Compression::None {
        b.finish()
    } else {
        b.finish_compressed(codec)
    }
}

fn legacy(magic: i8, codec: Compression, n: usize) -> Vec<u8> {
    let mut b = LegacyBuilder::new(magic, codec);
    for i in 0..n {
        b.push(1000 + i as i64, (i % 2 == 1).then_some(&b"key"[..]), Some(format!("value-{i}").as_bytes()));
    }
    b.finish()
}

/// batch_parser: mode byte then bytes (see its doc).
fn batches(out: &Path) {
    let mut mixed = Vec::new();
    for (i, &c) in CODECS.iter().enumerate() {
        let b = v2(1 + i, c, i % 2 == 0);
        write(out, &format!("v2-{}", c.name()), &[&[0u8][..], &b].concat());
        mixed.extend_from_slice(&b);
        for magic in [MAGIC_V0, MAGIC_V1] {
            let l = legacy(magic, c, 2 + i);
            write(out, &format!("magic{magic}-{}", c.name()), &[&[0u8][..], &l].concat());
            mixed.extend_from_slice(&l);
            if c != Compression::None {
                // Mode 3: a synthesized wrapper around plain inner messages.
                let mode = 3 | if magic == MAGIC_V1 { 4 } else { 0 } | ((i as u8) << 3);
                write(out, &format!("wrap{magic}-{}", c.name()), &[&[mode][..], &legacy(magic, Compression::None, 3)].concat());
            }
        }
    }
    write(out, "mixed", &[&[0u8][..], &mixed].concat());
    // Mode 2: a v2 header then uncompressed records (compressed by the harness).
    let plain = v2(3, Compression::None, true);
    write(out, "synth-v2", &[&[2u8][..], &plain].concat());
}

fn dir() -> PathBuf {
    PathBuf::from("/data/topic-0")
}

/// A MemDisk partition directory in the recovery target's input form.
fn encode_dir(disk: &MemDisk) -> Vec<u8> {
    let mut out = vec![0x07u8]; // fix CRCs, marker, snapshots (no-ops on valid files)
    for path in disk.paths() {
        if path.parent() != Some(dir().as_path()) {
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let (kind, base) = match name.split_once('.') {
            Some((stem, ext)) if stem.len() == 20 => {
                let base: u32 = stem.parse().expect("segment base fits u32 in seeds");
                let kind = match ext {
                    "log" => 0u8,
                    "index" => 1,
                    "timeindex" => 2,
                    "snapshot" => 3,
                    _ => continue,
                };
                (kind, base)
            }
            _ if name == tidemark::storage::log::CLEAN_MARKER => (4, 0),
            _ => continue,
        };
        let mut bytes = disk.file_bytes(&path).unwrap();
        if kind == 0 {
            // Preallocated zeros past the data: keep one page of them.
            let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            bytes.truncate((end + 4096).min(bytes.len()));
        }
        assert!(bytes.len() <= u16::MAX as usize, "seed file too large: {name}");
        out.push(kind);
        out.extend_from_slice(&base.to_be_bytes());
        out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

fn append_mixed(log: &mut Log<MemDisk>, n: usize, producer: Option<i64>) {
    let mut seq = 0;
    for i in 0..n {
        let c = CODECS[i % CODECS.len()];
        let b = match i % 4 {
            0 | 1 => {
                let mut b = BatchBuilder::new();
                if let Some(id) = producer {
                    b = b.producer(id, 0, seq);
                }
                for r in 0..1 + i % 3 {
                    b.push(10_000 + (i * 10 + r) as i64, Some(b"k"), Some(format!("v{i}-{r}").as_bytes()), &[]);
                }
                seq += b.len();
                if c == Compression::None { b.finish() } else { b.finish_compressed(c) }
            }
            2 => legacy(MAGIC_V1, c, 2),
            _ => legacy(MAGIC_V0, c, 1 + i % 2),
        };
        log.append(&b, 10_000 + i as i64 * 10).expect("append");
    }
}

/// recovery: partition directories as real logs leave them.
fn logs(out: &Path) {
    let base = LogConfig {
        index_interval_bytes: 150,
        write_chunk_bytes: 8192,
        preallocate_bytes: 8192,
        flush_messages: u64::MAX,
        time_index_interval_ms: 20,
        ..LogConfig::default()
    };
    let cases: [(&str, u64, bool, Option<i64>); 4] = [
        ("one-segment-unclean", 1 << 30, false, None),
        ("one-segment-clean", 1 << 30, true, None),
        ("segments-unclean", 1500, false, Some(42)),
        ("segments-clean", 1500, true, Some(42)),
    ];
    for (name, segment_bytes, clean, producer) in cases {
        let disk = MemDisk::new();
        let config = LogConfig { segment_bytes, ..base.clone() };
        let (mut log, _) = block_on(Log::open(disk.clone(), &dir(), config)).expect("open");
        append_mixed(&mut log, 16, producer);
        block_on(log.flush_all()).expect("flush");
        if clean {
            block_on(log.close()).expect("close");
        }
        write(out, name, &encode_dir(&disk));
    }
}

fn main() {
    let root = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "fuzz/seeds".into()));
    requests(&root.join("request_decoder"));
    batches(&root.join("batch_parser"));
    logs(&root.join("recovery"));
}
