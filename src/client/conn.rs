//! One TCP connection to a broker with pipelined requests (responses come back in request
//! order, as Kafka sends them), version negotiation through ApiVersions, and a few calls of
//! general use (a topic's metadata, its offsets).

use crate::protocol::errors as code;
use crate::protocol::messages::*;
use crate::protocol::{self, RequestHeader};
use anyhow::{bail, Context};
use bytes::Bytes;
use futures_channel::oneshot;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalSender};
use glommio::net::TcpStream;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::rc::Rc;

/// Largest response frame accepted (a fetch answer is bounded by the request's max_bytes).
pub const MAX_RESPONSE: usize = 256 << 20;

/// Correlation ids awaiting an answer, in the order sent, with where the answer goes.
type Waiting = Rc<RefCell<VecDeque<(i32, oneshot::Sender<Bytes>)>>>;

/// One connection to a broker.
pub struct Conn {
    frames: LocalSender<Bytes>,
    /// Correlation ids awaiting an answer, in the order sent.
    waiting: Waiting,
    next: Cell<i32>,
    /// The broker's (min, max) version per API key.
    versions: RefCell<HashMap<i16, (i16, i16)>>,
    closed: Rc<Cell<bool>>,
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Rc<Conn>> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(std::io::Error::from)
            .with_context(|| format!("connecting to {addr}"))?;
        let _ = stream.set_nodelay(true);
        Conn::open(addr, stream).await
    }

    /// A connection to `host` at `addr`, secured by `security` (TLS, SASL), within `limit`.
    pub async fn connect_with(
        host: &str,
        addr: SocketAddr,
        security: &super::Security,
        limit: std::time::Duration,
    ) -> anyhow::Result<Rc<Conn>> {
        let stream = security.connect(host, addr, limit).await?;
        Conn::open(addr, stream).await
    }

    /// Requests over `stream` (connected, and secured if it is to be), starting with ApiVersions.
    pub async fn open<S: AsyncRead + AsyncWrite + Unpin + 'static>(
        addr: SocketAddr,
        stream: S,
    ) -> anyhow::Result<Rc<Conn>> {
        let (mut reader, mut writer) = futures_lite::io::split(stream);
        let (tx, rx) = local_channel::new_bounded::<Bytes>(64);
        let waiting: Waiting = Rc::new(RefCell::new(VecDeque::new()));
        let closed = Rc::new(Cell::new(false));
        glommio::spawn_local(async move {
            while let Some(frame) = rx.recv().await {
                if writer.write_all(&frame).await.is_err() {
                    break;
                }
            }
            let _ = writer.close().await;
        })
        .detach();
        let (w, c) = (waiting.clone(), closed.clone());
        glommio::spawn_local(async move {
            loop {
                let mut len = [0u8; 4];
                if reader.read_exact(&mut len).await.is_err() {
                    break;
                }
                let n = i32::from_be_bytes(len);
                if n < 4 || n as usize > MAX_RESPONSE {
                    break;
                }
                let mut buf = vec![0u8; n as usize];
                if reader.read_exact(&mut buf).await.is_err() {
                    break;
                }
                let corr = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                let next = w.borrow_mut().pop_front();
                match next {
                    Some((id, tx)) if id == corr => {
                        let _ = tx.send(Bytes::from(buf));
                    }
                    _ => break, // out of order: not a Kafka broker's behaviour
                }
            }
            c.set(true);
            w.borrow_mut().clear(); // pending callers see a closed connection
        })
        .detach();
        let conn =
            Rc::new(Conn { frames: tx, waiting, next: Cell::new(1), versions: RefCell::new(HashMap::new()), closed });
        let mut req = protocol::messages::ApiVersionsRequest::default();
        let resp: ApiVersionsResponse = conn.call_at(protocol::API_VERSIONS, 0, &mut req).await?;
        if resp.error_code != code::NONE {
            bail!("{addr}: ApiVersions error {}", resp.error_code);
        }
        *conn.versions.borrow_mut() =
            resp.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        Ok(conn)
    }

    /// The version to use for `api`: the newest both sides support.
    pub fn version(&self, api: i16) -> anyhow::Result<i16> {
        let &(_, lo, ours, _) = protocol::SUPPORTED.iter().find(|s| s.0 == api).expect("an API tidemark knows");
        let (their_lo, theirs) =
            *self.versions.borrow().get(&api).with_context(|| format!("the broker does not support API {api}"))?;
        let v = ours.min(theirs);
        if v < lo.max(their_lo) {
            bail!("no common version of API {api}");
        }
        Ok(v)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    fn header(&self, api: i16, version: i16) -> RequestHeader {
        let id = self.next.get();
        self.next.set(id.wrapping_add(1).max(1));
        RequestHeader {
            api_key: api,
            api_version: version,
            correlation_id: id,
            client_id: Some("tidemark-load".into()),
            ..Default::default()
        }
    }

    /// Send a request at `version` and wait for its answer.
    pub async fn call_at<Q: Message, A: Message>(&self, api: i16, version: i16, req: &mut Q) -> anyhow::Result<A> {
        let header = self.header(api, version);
        let frame = protocol::encode_request(&header, req)?;
        let (tx, rx) = oneshot::channel();
        self.waiting.borrow_mut().push_back((header.correlation_id, tx));
        self.frames.send(frame).await.map_err(|_| anyhow::anyhow!("connection closed"))?;
        let bytes = rx.await.map_err(|_| anyhow::anyhow!("connection closed"))?;
        let (_, resp) = protocol::decode_response(&header, bytes)?;
        Ok(resp)
    }

    /// Send a request at the negotiated version.
    pub async fn call<Q: Message, A: Message>(&self, api: i16, req: &mut Q) -> anyhow::Result<A> {
        let v = self.version(api)?;
        self.call_at(api, v, req).await
    }

    /// A request without an answer (Produce with acks=0).
    pub async fn send_only<Q: Message>(&self, api: i16, req: &mut Q) -> anyhow::Result<()> {
        self.send_only_at(api, self.version(api)?, req).await
    }

    /// A request without an answer, at `version`.
    pub async fn send_only_at<Q: Message>(&self, api: i16, version: i16, req: &mut Q) -> anyhow::Result<()> {
        let header = self.header(api, version);
        let frame = protocol::encode_request(&header, req)?;
        self.frames.send(frame).await.map_err(|_| anyhow::anyhow!("connection closed"))
    }

    /// The partition count of `topic`, creating it with `partitions` if it does not exist.
    pub async fn ensure_topic(&self, topic: &str, partitions: i32) -> anyhow::Result<i32> {
        let mut create = CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: topic.to_string(),
                num_partitions: partitions,
                replication_factor: 1,
                ..Default::default()
            }],
            timeout_ms: 30_000,
            ..Default::default()
        };
        let created: CreateTopicsResponse = self.call(protocol::CREATE_TOPICS, &mut create).await?;
        if let Some(t) = created.topics.first() {
            if t.error_code != code::NONE && t.error_code != code::TOPIC_ALREADY_EXISTS {
                bail!("creating {topic}: error {} {}", t.error_code, t.error_message.clone().unwrap_or_default());
            }
        }
        for _ in 0..50 {
            if let Some((partitions, _)) = self.describe_topic(topic).await? {
                if partitions > 0 {
                    return Ok(partitions);
                }
            }
            glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        }
        bail!("{topic}: no metadata after creating it")
    }

    /// A topic's partition count and id (zero from a broker without topic ids), if it exists.
    pub async fn describe_topic(&self, topic: &str) -> anyhow::Result<Option<(i32, [u8; 16])>> {
        let mut m = MetadataRequest {
            topics: Some(vec![MetadataRequestTopic { name: Some(topic.to_string()), ..Default::default() }]),
            allow_auto_topic_creation: false,
            ..Default::default()
        };
        let meta: MetadataResponse = self.call(protocol::METADATA, &mut m).await?;
        let found = meta.topics.iter().find(|t| t.name.as_deref() == Some(topic) && t.error_code == code::NONE);
        Ok(found.map(|t| (t.partitions.len() as i32, t.topic_id)))
    }

    /// The latest (-1) or earliest (-2) offset of each partition.
    pub async fn offsets(&self, topic: &str, partitions: i32, which: i64) -> anyhow::Result<Vec<i64>> {
        let mut req = ListOffsetsRequest {
            replica_id: -1,
            topics: vec![ListOffsetsTopic {
                name: topic.to_string(),
                partitions: (0..partitions)
                    .map(|p| ListOffsetsPartition {
                        partition_index: p,
                        timestamp: which,
                        max_num_offsets: 1,
                        current_leader_epoch: -1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let resp: ListOffsetsResponse = self.call(protocol::LIST_OFFSETS, &mut req).await?;
        let mut out = vec![0i64; partitions as usize];
        for t in resp.topics {
            for p in t.partitions {
                let off = if p.old_style_offsets.is_empty() { p.offset } else { p.old_style_offsets[0] };
                if let Some(slot) = out.get_mut(p.partition_index as usize) {
                    *slot = off.max(0);
                }
            }
        }
        Ok(out)
    }
}
