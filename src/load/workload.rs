//! The producing and consuming loops of `tidemark load`, one set per executor.

use super::{new_histogram, Interval, LoadArgs, Mode, Producing};
use crate::client::Conn;
use crate::protocol::errors as code;
use crate::protocol::groups::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::messages::*;
use crate::protocol::txn::*;
use crate::protocol::{ADD_PARTITIONS_TO_TXN, END_TXN, FETCH, INIT_PRODUCER_ID, PRODUCE};
use crate::storage::format::batch::{records_section, BatchBuilder, BatchHeader, Records, MAGIC_V2};
use crate::storage::format::{legacy, BatchWalk};
use anyhow::Context;
use bytes::Bytes;
use hdrhistogram::Histogram;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Connect once, create the topic if needed: its partition count.
pub fn prepare(args: &LoadArgs) -> anyhow::Result<i32> {
    let (addr, topic, partitions) = (args.bootstrap, args.topic.clone(), args.partitions);
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .spawn(move || async move {
            let conn = Conn::connect(addr).await?;
            conn.ensure_topic(&topic, partitions).await
        })
        .map_err(|e| anyhow::anyhow!("starting the setup executor: {e}"))?
        .join()
        .map_err(|e| anyhow::anyhow!("setup: {e:?}"))?
}

/// What one executor measures, shared by its tasks.
struct Meter {
    records: Cell<u64>,
    bytes: Cell<u64>,
    errors: Cell<u64>,
    latency: RefCell<Histogram<u64>>,
    /// EndTxn latencies (transactional runs).
    commits: RefCell<Histogram<u64>>,
    /// End-to-end runs: the producer's own latency (send to acknowledgement).
    produced: RefCell<Histogram<u64>>,
    /// Produce requests' round trips (sent to answered).
    requests: RefCell<Histogram<u64>>,
    /// Records the whole run may still produce (a `--records` budget), shared by connections.
    budget: Cell<Option<u64>>,
}

impl Meter {
    fn take(&self, n: u64) -> u64 {
        match self.budget.get() {
            None => n,
            Some(left) => {
                let t = n.min(left);
                self.budget.set(Some(left - t));
                t
            }
        }
    }

    fn record(&self, latency_us: u64, count: u64) {
        let _ = self.latency.borrow_mut().record_n(latency_us.max(1), count);
    }
}

fn micros_since_epoch() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// One executor's share: connections `t, t + threads, ...`, each with partitions `c, c +
/// connections, ...`; every second an [`Interval`] to the main thread.
pub async fn run_thread(
    args: &LoadArgs,
    t: usize,
    partitions: i32,
    start: Instant,
    tx: mpsc::Sender<Interval>,
) -> anyhow::Result<()> {
    let conns: Vec<usize> = (t..args.connections).step_by(args.threads).collect();
    let share = |n: u64| n * conns.len() as u64 / args.connections as u64;
    let meter = Rc::new(Meter {
        records: Cell::new(0),
        bytes: Cell::new(0),
        errors: Cell::new(0),
        latency: RefCell::new(new_histogram()),
        commits: RefCell::new(new_histogram()),
        produced: RefCell::new(new_histogram()),
        requests: RefCell::new(new_histogram()),
        budget: Cell::new(args.records.map(share)),
    });
    let deadline = args.duration.map(|d| start + d);
    let done = Rc::new(Cell::new(false));
    let reporter = glommio::spawn_local(report_each_second(meter.clone(), start, done.clone(), tx));
    let mut tasks = Vec::new();
    for &c in &conns {
        let mine: Vec<i32> = (c as i32..partitions).step_by(args.connections).collect();
        if !mine.is_empty() {
            tasks.push(start_connection(args, mine, partitions, deadline, &meter).await?);
        }
    }
    let mut first_err = None;
    for task in tasks {
        if let Err(e) = task.await {
            first_err.get_or_insert(e);
        }
    }
    done.set(true);
    reporter.await;
    first_err.map_or(Ok(()), Err)
}

/// Every second until `done`, the executor's [`Interval`] (its meter read and reset) to the
/// main thread; one last one when `done`.
async fn report_each_second(meter: Rc<Meter>, start: Instant, done: Rc<Cell<bool>>, tx: mpsc::Sender<Interval>) {
    let mut tick = 1u64;
    loop {
        let next = start + Duration::from_secs(tick);
        while Instant::now() < next && !done.get() {
            glommio::timer::sleep((next - Instant::now()).min(Duration::from_millis(50))).await;
        }
        let latency = std::mem::replace(&mut *meter.latency.borrow_mut(), new_histogram());
        let commits = std::mem::replace(&mut *meter.commits.borrow_mut(), new_histogram());
        let produced = std::mem::replace(&mut *meter.produced.borrow_mut(), new_histogram());
        let requests = std::mem::replace(&mut *meter.requests.borrow_mut(), new_histogram());
        let interval = Interval {
            commits,
            produced,
            requests,
            at: start.elapsed().as_secs_f64(),
            records: meter.records.replace(0),
            bytes: meter.bytes.replace(0),
            errors: meter.errors.replace(0),
            latency,
        };
        let _ = tx.send(interval);
        if done.get() {
            break;
        }
        tick += 1;
    }
}

/// Open one connection for partitions `mine` and start its work for the run's mode: a
/// producer, a consumer from the log start to today's end, or (end to end) a producer and a
/// consumer of what it writes, the consumer measuring.
async fn start_connection(
    args: &LoadArgs,
    mine: Vec<i32>,
    partitions: i32,
    deadline: Option<Instant>,
    meter: &Rc<Meter>,
) -> anyhow::Result<glommio::Task<anyhow::Result<()>>> {
    let conn = Conn::connect(args.bootstrap).await?;
    let per_conn_rate = args.rate.map(|r| r / args.connections as f64);
    Ok(match args.mode {
        Mode::Produce => {
            glommio::spawn_local(produce(args.clone(), conn, mine, per_conn_rate, deadline, meter.clone(), true))
        }
        Mode::Consume => {
            let from = conn.offsets(&args.topic, partitions, -2).await?;
            let until = conn.offsets(&args.topic, partitions, -1).await?;
            glommio::spawn_local(consume(args.clone(), conn, mine, from, Some(until), deadline, meter.clone(), false))
        }
        Mode::E2e => {
            let from = conn.offsets(&args.topic, partitions, -1).await?;
            let reader = Conn::connect(args.bootstrap).await?;
            let m = meter.clone();
            let prod =
                glommio::spawn_local(produce(args.clone(), conn, mine.clone(), per_conn_rate, deadline, m, false));
            let late = deadline.map(|d| d + Duration::from_secs(1));
            let cons = glommio::spawn_local(consume(args.clone(), reader, mine, from, None, late, meter.clone(), true));
            glommio::spawn_local(async move {
                let r = prod.await;
                // Let the consumer catch up with the last records for a moment.
                glommio::timer::sleep(Duration::from_millis(500)).await;
                drop(cons);
                r
            })
        }
    })
}

/// Random letters (they compress like text) that record values are cut from.
fn letters(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            b'a' + ((seed >> 59) as u8 % 26)
        })
        .collect()
}

/// Fill `value` with its send time `sent_us` (µs since the epoch) and a slice of `pool` starting
/// at `at` (a memcpy: the generator leaves the CPU to the broker it shares the machine with).
fn fill(value: &mut [u8], sent_us: u64, pool: &[u8], at: &mut usize) {
    value[..8].copy_from_slice(&sent_us.to_be_bytes());
    let n = value.len() - 8;
    if *at + n > pool.len() {
        *at = 0;
    }
    value[8..].copy_from_slice(&pool[*at..*at + n]);
    *at = (*at + 61) % pool.len().max(1);
}

/// Open loop: the intended send times of records due but not sent yet (coordinated omission
/// corrected: latency counts from these, not from when a batch went out).
struct Schedule {
    start: Instant,
    due_sent: u64,
    backlog: std::collections::VecDeque<Instant>,
}

impl Schedule {
    /// How many records to send now at `rate` records/s: a full batch when one is due, or what
    /// is due once the oldest has waited `linger`; 0 otherwise.
    fn due(&mut self, rate: f64, now: Instant, per_batch: u64, linger: Duration) -> u64 {
        let due = ((now - self.start).as_secs_f64() * rate) as u64;
        while self.due_sent < due {
            self.backlog.push_back(self.start + Duration::from_secs_f64(self.due_sent as f64 / rate));
            self.due_sent += 1;
        }
        let oldest_waited = self.backlog.front().is_some_and(|&t| now.duration_since(t) >= linger);
        if self.backlog.len() as u64 >= per_batch || oldest_waited {
            (self.backlog.len() as u64).min(per_batch)
        } else {
            0
        }
    }
}

/// A batch on its way: its records and bytes, and when its records were meant to go.
struct Sent {
    n: u64,
    bytes: u64,
    intended: Vec<Instant>,
    measure: bool,
    /// The Produce version to send at.
    version: i16,
    /// A transaction's first batch to its partition at transaction version 2: sent again while
    /// the broker answers CONCURRENT_TRANSACTIONS (the previous transaction's markers are still
    /// being written; no later batch of the partition is in flight meanwhile).
    first_in_txn: bool,
}

/// Send one produce request and record its outcome: an error, or (when measuring) its records,
/// bytes and latencies. The in-flight slot is held until the answer.
async fn send_batch(
    conn: Rc<Conn>,
    mut req: ProduceRequest,
    _permit: glommio::sync::StaticPermit,
    meter: Rc<Meter>,
    sent: Sent,
) {
    let (written, acked) = (Instant::now(), req.acks != 0);
    let ok = if !acked {
        conn.send_only_at(PRODUCE, sent.version, &mut req).await.is_ok()
    } else {
        loop {
            let codes: Vec<_> = match conn.call_at::<_, ProduceResponse>(PRODUCE, sent.version, &mut req).await {
                Ok(r) => r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect(),
                Err(_) => break false,
            };
            if sent.first_in_txn && codes.contains(&code::CONCURRENT_TRANSACTIONS) {
                glommio::timer::sleep(Duration::from_millis(2)).await;
                continue;
            }
            break codes.iter().all(|c| *c == code::NONE);
        }
    };
    if !ok {
        meter.errors.set(meter.errors.get() + 1);
        return;
    }
    if sent.measure {
        meter.records.set(meter.records.get() + sent.n);
        meter.bytes.set(meter.bytes.get() + sent.bytes);
        if acked {
            let _ = meter.requests.borrow_mut().record((written.elapsed().as_micros() as u64).max(1));
        }
    }
    // The run's latency, or (end to end) the producer's beside it.
    let mut h = if sent.measure { meter.latency.borrow_mut() } else { meter.produced.borrow_mut() };
    let done = Instant::now();
    if sent.intended.len() == 1 && sent.n > 1 {
        let _ = h.record_n((done.duration_since(sent.intended[0]).as_micros() as u64).max(1), sent.n);
    } else {
        for t in sent.intended {
            let _ = h.record((done.duration_since(t).as_micros() as u64).max(1));
        }
    }
}

/// Produce to `partitions` over `conn`: open loop at `rate` (records/s) or closed loop.
/// With `measure`, each record's latency (from its intended send time) goes to the meter.
async fn produce(
    args: LoadArgs,
    conn: Rc<Conn>,
    partitions: Vec<i32>,
    rate: Option<f64>,
    deadline: Option<Instant>,
    meter: Rc<Meter>,
    measure: bool,
) -> anyhow::Result<()> {
    let per_batch = (args.batch_bytes / (args.record_size + 16)).max(1) as u64;
    let slots = Rc::new(glommio::sync::Semaphore::new(args.in_flight as u64));
    let start = Instant::now();
    let (mut next_partition, mut at) = (0usize, 0usize);
    let pool = letters(args.record_size.max(8) + (1 << 16), 0x9e37_79b9_7f4a_7c15 ^ partitions[0] as u64);
    let mut schedule = Schedule { start, due_sent: 0, backlog: std::collections::VecDeque::new() };
    let mut value = vec![0u8; args.record_size];
    // Each connection starts its key cycle elsewhere, so connections overwrite each other's keys.
    let mut next_key = partitions[0] as u64 * 7919;
    let mut producer = Producer::start(&args, &conn, &partitions).await?;
    let tv2 = producer.as_ref().is_some_and(|p| p.version >= 2);
    // By topic name (v13 names topics by id); v12 tells the broker the producer speaks
    // transactions version 2.
    let version = conn.version(PRODUCE)?.min(if tv2 { 12 } else { 11 });
    if tv2 && version < 12 {
        anyhow::bail!("the broker does not speak transactions version 2 (Produce v12)");
    }
    // Version 2: the transaction's first batches gathered so far, sent together.
    let mut first: Option<(ProduceRequest, Sent, glommio::sync::StaticPermit)> = None;
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let Some(p) = producer.as_mut() {
            if p.txn_records >= p.records_per_txn {
                // The first batches gathered so far go (the transaction is full before every
                // partition had one).
                if let Some((req, sent, permit)) = first.take() {
                    glommio::spawn_local(send_batch(conn.clone(), req, permit, meter.clone(), sent)).detach();
                }
                // Every batch of the transaction answered, then its commit.
                let _all = slots.acquire_permit(args.in_flight as u64).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
                p.commit(&conn, &meter).await?;
            }
            if !p.open {
                p.begin(&conn).await?;
            }
        }
        // A free slot first, then the batch: what falls due while every slot is taken goes
        // out with the next request (a batch chosen before the wait would leave those records
        // for the request after it, a second round trip).
        let permit = slots.acquire_static_permit(1).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let want = match rate {
            Some(r) => schedule.due(r, Instant::now(), per_batch, args.linger),
            None => per_batch,
        };
        if want == 0 {
            drop(permit);
            let next_due = rate.map_or(Duration::from_millis(1), |r| Duration::from_secs_f64(1.0 / r));
            glommio::timer::sleep(next_due.min(args.linger).max(Duration::from_micros(50))).await;
            continue;
        }
        let n = meter.take(want);
        if n == 0 {
            break; // the --records budget is spent
        }
        let intended: Vec<Instant> = match rate {
            Some(_) => schedule.backlog.drain(..n as usize).collect(),
            None => vec![Instant::now(); 1],
        };
        let partition = partitions[next_partition % partitions.len()];
        next_partition += 1;
        let b = match producer.as_mut() {
            Some(p) => p.builder(partition, n as i32),
            None => BatchBuilder::new(),
        };
        // A record's encoding adds at most 21 bytes to the value (and the key, 8 bytes).
        let mut b = b.reserve(n as usize * (args.record_size + 32));
        let ts = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        // Each record carries its intended send time (open loop: when it was due, as the
        // producer's latency counts it), so end-to-end latency counts from the same instant.
        let (now, now_us) = (Instant::now(), micros_since_epoch());
        for i in 0..n as usize {
            let due = intended.get(i).map_or(0, |t| now.saturating_duration_since(*t).as_micros() as u64);
            fill(&mut value, now_us.saturating_sub(due), &pool, &mut at);
            let key = args.keys.map(|k| {
                next_key = (next_key + 1) % k;
                next_key.to_be_bytes()
            });
            b.push(ts, key.as_ref().map(|k| &k[..]), Some(&value), &[]);
        }
        let batch = Bytes::from(b.finish_compressed(args.compression));
        let transactional_id = producer.as_ref().and_then(|p| p.transactional_id.clone());
        let req = produce_request(&args, transactional_id, partition, batch);
        let bytes = (n as usize * args.record_size) as u64;
        let first_in_txn = producer.as_mut().is_some_and(|p| p.first_round.remove(&partition));
        let round_done = first_in_txn && producer.as_ref().is_some_and(|p| p.first_round.is_empty());
        let sent = Sent { n, bytes, intended, measure, version, first_in_txn };
        if !first_in_txn {
            glommio::spawn_local(send_batch(conn.clone(), req, permit, meter.clone(), sent)).detach();
        } else {
            // Version 2: a transaction's first batches, one per partition, go in one request (as
            // a Kafka client sends a broker's partitions together), which enrols them at once.
            match first.as_mut() {
                None => first = Some((req, sent, permit)),
                Some((r, s, _)) => {
                    drop(permit); // one request, one slot
                    r.topics[0].partitions.extend(req.topics.into_iter().flat_map(|t| t.partitions));
                    (s.n, s.bytes) = (s.n + sent.n, s.bytes + sent.bytes);
                    if !(s.intended.len() == 1 && sent.intended.len() == 1) {
                        s.intended.extend(sent.intended);
                    }
                }
            }
            if round_done {
                let (req, sent, permit) = first.take().expect("a first batch");
                glommio::spawn_local(send_batch(conn.clone(), req, permit, meter.clone(), sent)).detach();
                // Answered before any second batch goes (it may be sent again, and must stay
                // first).
                let _all = slots.acquire_permit(args.in_flight as u64).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
            }
        }
        if conn.is_closed() {
            anyhow::bail!("the broker closed the connection");
        }
    }
    // First batches the run ended before sending.
    if let Some((req, sent, permit)) = first.take() {
        glommio::spawn_local(send_batch(conn.clone(), req, permit, meter.clone(), sent)).detach();
    }
    // Every request answered: all the permits are back.
    let _all = slots.acquire_permit(args.in_flight as u64).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    if let Some(p) = producer.as_mut().filter(|p| p.open) {
        p.commit(&conn, &meter).await?;
    }
    Ok(())
}

/// One batch for one partition of the load's topic, as a Produce request.
fn produce_request(args: &LoadArgs, transactional_id: Option<String>, partition: i32, batch: Bytes) -> ProduceRequest {
    ProduceRequest {
        transactional_id,
        acks: args.acks,
        timeout_ms: 30_000,
        topics: vec![ProduceTopic {
            name: args.topic.clone(),
            partitions: vec![ProducePartition { index: partition, records: Some(batch), ..Default::default() }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// An idempotent or transactional producer's state on one connection.
struct Producer {
    id: i64,
    epoch: i16,
    /// The next sequence per partition.
    sequences: std::collections::HashMap<i32, i32>,
    transactional_id: Option<String>,
    topic: String,
    partitions: Vec<i32>,
    records_per_txn: u64,
    /// Records in the open transaction.
    txn_records: u64,
    open: bool,
    /// Kafka's transaction version: 0 or 2.
    version: i16,
    /// Version 2: the partitions the open transaction has not written yet (their first batch
    /// adds them to the transaction).
    first_round: std::collections::BTreeSet<i32>,
}

impl Producer {
    /// A producer id (and for a transactional run, this connection's transactional id), or
    /// `None` for a plain producer.
    async fn start(args: &LoadArgs, conn: &Rc<Conn>, partitions: &[i32]) -> anyhow::Result<Option<Producer>> {
        let (transactional_id, records_per_txn, version) = match args.producing {
            Producing::Plain => return Ok(None),
            Producing::Idempotent => (None, u64::MAX, 0),
            Producing::Transactional { records_per_txn, version } => {
                let id = format!("tidemark-load-{}-{}", std::process::id(), partitions[0]);
                (Some(id), records_per_txn, version)
            }
        };
        // The coordinator may still be creating its topic: retried for a while.
        let mut tries = 0;
        let (id, epoch) = loop {
            let mut req = InitProducerIdRequest {
                transactional_id: transactional_id.clone(),
                transaction_timeout_ms: 60_000,
                ..Default::default()
            };
            let r: InitProducerIdResponse = conn.call(INIT_PRODUCER_ID, &mut req).await?;
            if r.error_code == code::NONE {
                break (r.producer_id, r.producer_epoch);
            }
            tries += 1;
            if tries > 50 {
                anyhow::bail!("InitProducerId: error code {}", r.error_code.0);
            }
            glommio::timer::sleep(Duration::from_millis(200)).await;
        };
        let sequences = partitions.iter().map(|&p| (p, 0)).collect();
        let partitions = partitions.to_vec();
        Ok(Some(Producer {
            id,
            epoch,
            sequences,
            transactional_id,
            topic: args.topic.clone(),
            partitions,
            records_per_txn,
            txn_records: 0,
            open: records_per_txn == u64::MAX,
            version,
            first_round: Default::default(),
        }))
    }

    /// A batch builder for `n` records to `partition`, its sequences taken.
    fn builder(&mut self, partition: i32, n: i32) -> BatchBuilder {
        let seq = self.sequences.entry(partition).or_insert(0);
        let base = *seq;
        *seq = seq.wrapping_add(n) & i32::MAX;
        self.txn_records += n as u64;
        let b = BatchBuilder::new().producer(self.id, self.epoch, base);
        if self.transactional_id.is_some() {
            b.transactional()
        } else {
            b
        }
    }

    /// AddPartitionsToTxn (v3: a client's) for every partition of this connection; at version 2
    /// nothing (the first batch to each partition adds it).
    async fn begin(&mut self, conn: &Rc<Conn>) -> anyhow::Result<()> {
        let Some(id) = self.transactional_id.clone() else { return Ok(()) };
        if self.version >= 2 {
            self.first_round = self.partitions.iter().copied().collect();
            self.open = true;
            self.txn_records = 0;
            return Ok(());
        }
        let mut req = AddPartitionsToTxnRequest {
            v3_and_below_transactional_id: id,
            v3_and_below_producer_id: self.id,
            v3_and_below_producer_epoch: self.epoch,
            v3_and_below_topics: vec![AddPartitionsToTxnTopic {
                name: self.topic.clone(),
                partitions: self.partitions.clone(),
                ..Default::default()
            }],
            ..Default::default()
        };
        loop {
            let r: AddPartitionsToTxnResponse = conn.call_at(ADD_PARTITIONS_TO_TXN, 3, &mut req).await?;
            let codes: Vec<_> = r
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| &t.results_by_partition)
                .map(|p| p.partition_error_code)
                .collect();
            if codes.iter().all(|c| *c == code::NONE) {
                break;
            }
            // The previous transaction's markers are still being written.
            if !codes.contains(&code::CONCURRENT_TRANSACTIONS) {
                anyhow::bail!("AddPartitionsToTxn: error codes {:?}", codes.iter().map(|c| c.0).collect::<Vec<_>>());
            }
            glommio::timer::sleep(Duration::from_millis(2)).await;
        }
        self.open = true;
        self.txn_records = 0;
        Ok(())
    }

    /// EndTxn (commit), its latency measured: v4 at version 0; v5 at version 2, whose answer is
    /// the producer id and epoch to go on with (sequences start again at 0).
    async fn commit(&mut self, conn: &Rc<Conn>, meter: &Meter) -> anyhow::Result<()> {
        let Some(id) = self.transactional_id.clone() else { return Ok(()) };
        if self.version >= 2 && self.txn_records == 0 {
            // Nothing written: no partition joined, nothing to end (as Kafka's clients skip it).
            self.open = false;
            return Ok(());
        }
        let mut req = EndTxnRequest {
            transactional_id: id,
            producer_id: self.id,
            producer_epoch: self.epoch,
            committed: true,
            ..Default::default()
        };
        let version = if self.version >= 2 { 5 } else { conn.version(END_TXN)?.min(4) };
        let t0 = Instant::now();
        let r: EndTxnResponse = conn.call_at(END_TXN, version, &mut req).await?;
        if r.error_code != code::NONE {
            anyhow::bail!("EndTxn: error code {}", r.error_code.0);
        }
        let _ = meter.commits.borrow_mut().record((t0.elapsed().as_micros() as u64).max(1));
        if self.version >= 2 {
            if (r.producer_id, r.producer_epoch) != (self.id, self.epoch) {
                self.sequences.values_mut().for_each(|s| *s = 0);
            }
            (self.id, self.epoch) = (r.producer_id, r.producer_epoch);
        }
        self.open = false;
        Ok(())
    }
}

/// Fetch `partitions` from `from` (per partition of the topic) until `until` (consume) or
/// the deadline. With `e2e`, each record's latency is now minus the send time it carries;
/// otherwise each fetch's round trip is measured.
#[allow(clippy::too_many_arguments)]
async fn consume(
    args: LoadArgs,
    conn: Rc<Conn>,
    partitions: Vec<i32>,
    from: Vec<i64>,
    until: Option<Vec<i64>>,
    deadline: Option<Instant>,
    meter: Rc<Meter>,
    e2e: bool,
) -> anyhow::Result<()> {
    let mut next: Vec<(i32, i64)> = partitions.iter().map(|&p| (p, from[p as usize])).collect();
    // Fetch v13+ names topics by id.
    let (_, topic_id) = conn.describe_topic(&args.topic).await?.with_context(|| format!("no topic {}", args.topic))?;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if let Some(until) = &until {
            if next.iter().all(|&(p, o)| o >= until[p as usize]) {
                break;
            }
        }
        if !e2e && meter.budget.get() == Some(0) {
            break;
        }
        let mut req = fetch_request(&args.topic, topic_id, &next);
        let sent = Instant::now();
        let resp: FetchResponse = match conn.call(FETCH, &mut req).await {
            Ok(r) => r,
            Err(e) if conn.is_closed() => return Err(e),
            Err(_) => {
                meter.errors.set(meter.errors.get() + 1);
                continue;
            }
        };
        let arrived = micros_since_epoch();
        let (mut n_records, mut n_bytes) = (0u64, 0u64);
        for p in resp.topics.iter().flat_map(|t| &t.partitions) {
            if p.error_code != code::NONE {
                meter.errors.set(meter.errors.get() + 1);
                continue;
            }
            let Some(records) = &p.records else { continue };
            let slot = next.iter_mut().find(|(q, _)| *q == p.partition_index).expect("asked for");
            let (records, bytes) = count_records(records, &mut slot.1, e2e.then_some((arrived, &*meter)))?;
            n_records += records;
            n_bytes += bytes;
        }
        if n_records > 0 {
            meter.records.set(meter.records.get() + n_records);
            meter.bytes.set(meter.bytes.get() + n_bytes);
            if !e2e {
                meter.take(n_records);
                meter.record(sent.elapsed().as_micros() as u64, 1);
            }
        }
    }
    Ok(())
}

/// A fetch of every partition of `next` from its next offset, 100 ms of long poll, 1 MiB each
/// (the topic by name and by id: each version sends the one it has).
fn fetch_request(topic: &str, topic_id: [u8; 16], next: &[(i32, i64)]) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms: 100,
        min_bytes: 1,
        max_bytes: 50 << 20,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: topic.to_string(),
            topic_id,
            partitions: next
                .iter()
                .map(|&(p, o)| FetchPartition {
                    partition: p,
                    current_leader_epoch: -1,
                    fetch_offset: o,
                    log_start_offset: -1,
                    last_fetched_epoch: -1,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The records at or past `*next` in one partition's fetched `records` (any format) and their
/// value bytes; moves `*next` past the last batch. End to end, `(arrived, meter)` records each
/// record's latency from the send time its value starts with.
fn count_records(records: &[u8], next: &mut i64, e2e: Option<(u64, &Meter)>) -> anyhow::Result<(u64, u64)> {
    let limit = 4 << 20;
    let (mut n_records, mut n_bytes) = (0u64, 0u64);
    for item in BatchWalk::new(records, usize::MAX >> 1) {
        let Ok((_, info, batch)) = item else { break };
        let wanted = *next;
        if info.last_offset < wanted {
            continue;
        }
        *next = info.next_offset();
        if info.magic == MAGIC_V2 {
            let h = BatchHeader::parse(batch)?;
            let section = records_section(&h, batch, limit)?;
            for r in Records::new(&section, h.record_count) {
                let r = r?;
                if h.base_offset + (r.offset_delta as i64) < wanted {
                    continue; // before the fetch offset: already seen
                }
                let v = r.value.unwrap_or_default();
                n_records += 1;
                n_bytes += v.len() as u64;
                if let Some((arrived, meter)) = e2e.filter(|_| v.len() >= 8) {
                    let sent_us = u64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
                    meter.record(arrived.saturating_sub(sent_us), 1);
                }
            }
        } else {
            let mut scratch = Vec::new();
            for r in legacy::records(batch, &mut scratch, limit)?.into_iter().filter(|r| r.offset >= wanted) {
                n_records += 1;
                n_bytes += r.value.map_or(0, |v| v.len()) as u64;
            }
        }
    }
    Ok((n_records, n_bytes))
}
