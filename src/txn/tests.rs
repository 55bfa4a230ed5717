//! The coordinator state machine against Kafka's: its transition table, each API in each
//! state, and a model test of random operation sequences checking Kafka's invariants after
//! every step; `__transaction_state` records round-trip in Kafka's layout.

use super::*;
use proptest::prelude::*;

fn tp(t: &str, p: i32) -> TopicPartition {
    (t.to_string(), p)
}

/// Run a transit as the coordinator does: persist (here: nothing), then apply.
fn apply(m: &mut TxnMetadata, t: Transit) {
    assert!(t.state.valid_previous().contains(&m.data.state), "{:?} -> {:?}", m.data.state, t.state);
    m.complete(t);
}

/// Kafka's `VALID_PREVIOUS_STATES`, spelled out (TransactionState.java, Kafka 4: an abort may
/// follow Empty or a completed transaction at transactions version 2).
#[test]
fn transition_table_is_kafkas() {
    use TxnState::*;
    let table = [
        (Empty, vec![Empty, CompleteCommit, CompleteAbort]),
        (Ongoing, vec![Ongoing, Empty, CompleteCommit, CompleteAbort]),
        (PrepareCommit, vec![Ongoing]),
        (PrepareAbort, vec![Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort]),
        (CompleteCommit, vec![PrepareCommit]),
        (CompleteAbort, vec![PrepareAbort]),
        (Dead, vec![Empty, CompleteAbort, CompleteCommit]),
        (PrepareEpochFence, vec![Ongoing]),
    ];
    for (state, previous) in table {
        assert_eq!(state.valid_previous(), previous.as_slice(), "{state:?}");
        assert_eq!(TxnState::from_id(state as i8), Some(state));
        assert_eq!(TxnState::from_name(state.name()), Some(state));
    }
    assert_eq!(TxnState::from_id(8), None);
}

/// A transaction's life: a new id gets epoch 0; partitions make it Ongoing; commit prepares,
/// markers complete it; a retried EndTxn is answered NONE, the other outcome is
/// INVALID_TXN_STATE; the next InitProducerId bumps the epoch; wrong producer ids, old
/// epochs and concurrent requests get Kafka's errors.
#[test]
fn a_transaction_from_start_to_end() {
    let mut next_pid = 100;
    let mut alloc = || {
        next_pid += 1;
        next_pid
    };
    let mut m = TxnMetadata::new("app-1", 7, 60_000, 0);
    let Ok(Init::Write(t)) = m.init_producer_id(60_000, None, &mut alloc, 1) else { panic!() };
    assert_eq!(m.init_producer_id(60_000, None, &mut alloc, 1), Err(TxnError::Concurrent), "pending");
    apply(&mut m, t);
    assert_eq!((m.data.producer_id, m.data.producer_epoch, m.data.state), (7, 0, TxnState::Empty));
    assert_eq!(m.add_partitions(8, 0, &[tp("a", 0)], 0, 2), Err(TxnError::NotThisProducer));
    assert_eq!(m.add_partitions(7, 1, &[tp("a", 0)], 0, 2), Err(TxnError::Fenced));
    assert_eq!(m.end(7, 0, true, 0, None, 2), Err(TxnError::InvalidState), "nothing to end");
    let t = m.add_partitions(7, 0, &[tp("a", 0), tp("b", 1)], 0, 2).unwrap().unwrap();
    apply(&mut m, t);
    assert_eq!((m.data.state, m.data.start_ms, m.data.partitions.len()), (TxnState::Ongoing, 2, 2));
    assert_eq!(m.add_partitions(7, 0, &[tp("a", 0)], 0, 3), Ok(None), "already in: nothing to write");
    let t = m.add_partitions(7, 0, &[tp("c", 0)], 0, 3).unwrap().unwrap();
    apply(&mut m, t);
    assert_eq!((m.data.partitions.len(), m.data.start_ms), (3, 2), "the start stays");
    let Ok(End::Prepare(t)) = m.end(7, 0, true, 0, None, 4) else { panic!() };
    apply(&mut m, t);
    assert_eq!(m.data.state, TxnState::PrepareCommit);
    assert_eq!(m.end(7, 0, true, 0, None, 4), Err(TxnError::Concurrent), "markers not written yet");
    assert_eq!(m.end(7, 0, false, 0, None, 4), Err(TxnError::InvalidState));
    assert_eq!(m.add_partitions(7, 0, &[tp("a", 0)], 0, 4), Err(TxnError::Concurrent));
    assert_eq!(m.init_producer_id(60_000, None, &mut alloc, 4), Err(TxnError::Concurrent));
    let t = m.markers_written(5).unwrap();
    apply(&mut m, t);
    assert_eq!((m.data.state, m.data.partitions.len()), (TxnState::CompleteCommit, 0));
    assert_eq!(
        m.end(7, 0, true, 0, None, 6),
        Ok(End::Done { producer_id: 7, producer_epoch: 0 }),
        "a retry of the commit"
    );
    assert_eq!(m.end(7, 0, false, 0, None, 6), Err(TxnError::InvalidState));
    // The next transaction, then the producer restarts.
    let t = m.add_partitions(7, 0, &[tp("a", 0)], 0, 7).unwrap().unwrap();
    apply(&mut m, t);
    assert_eq!(m.data.start_ms, 7, "a new transaction's start");
    let Ok(End::Prepare(t)) = m.end(7, 0, false, 0, None, 8) else { panic!() };
    apply(&mut m, t);
    let t = m.markers_written(9).unwrap();
    apply(&mut m, t);
    assert_eq!(m.data.state, TxnState::CompleteAbort);
    let Ok(Init::Write(t)) = m.init_producer_id(30_000, None, &mut alloc, 10) else { panic!() };
    apply(&mut m, t);
    assert_eq!(
        (m.data.producer_id, m.data.producer_epoch, m.data.timeout_ms, m.data.state),
        (7, 1, 30_000, TxnState::Empty)
    );
}

/// InitProducerId on an open transaction fences it: the epoch is bumped and the abort
/// prepared in one step (its markers carry the new epoch); the client is told
/// CONCURRENT_TRANSACTIONS and its retry, once the abort completed, gets the epoch after.
/// The timeout abort fences the same way. KIP-360: a recovering producer naming its id and
/// epoch gets the next epoch; a retry of a bump that succeeded gets the same answer; an
/// unknown epoch is fenced.
#[test]
fn fences_and_kip_360() {
    let mut alloc = || 500;
    let mut m = TxnMetadata::new("t", 9, 1000, 0);
    let Ok(Init::Write(t)) = m.init_producer_id(1000, None, &mut alloc, 0) else { panic!() };
    apply(&mut m, t);
    let t = m.add_partitions(9, 0, &[tp("a", 0)], 0, 10).unwrap().unwrap();
    apply(&mut m, t);
    let Ok(Init::Fence(t)) = m.init_producer_id(1000, None, &mut alloc, 20) else { panic!() };
    assert_eq!((t.state, t.producer_epoch), (TxnState::PrepareAbort, 1));
    apply(&mut m, t);
    assert_eq!(m.end(9, 0, true, 0, None, 21), Err(TxnError::Fenced), "the zombie");
    let t = m.markers_written(22).unwrap();
    apply(&mut m, t);
    let Ok(Init::Write(t)) = m.init_producer_id(1000, None, &mut alloc, 23) else { panic!() };
    apply(&mut m, t);
    assert_eq!(m.data.producer_epoch, 2);
    // Timeout.
    let t = m.add_partitions(9, 2, &[tp("a", 0)], 0, 100).unwrap().unwrap();
    apply(&mut m, t);
    assert_eq!(m.timed_out(None, 1100), None, "not yet");
    let t = m.timed_out(None, 1101).unwrap();
    assert_eq!((t.state, t.producer_epoch), (TxnState::PrepareAbort, 3));
    apply(&mut m, t);
    let t = m.markers_written(1102).unwrap();
    apply(&mut m, t);
    // KIP-360.
    let Ok(Init::Write(t)) = m.init_producer_id(1000, Some((9, 3)), &mut alloc, 1200) else { panic!() };
    apply(&mut m, t);
    assert_eq!((m.data.producer_epoch, m.data.last_producer_epoch), (4, 3));
    let Ok(Init::Write(t)) = m.init_producer_id(1000, Some((9, 3)), &mut alloc, 1201) else { panic!() };
    apply(&mut m, t);
    assert_eq!(m.data.producer_epoch, 4, "a retried bump: the same answer");
    assert_eq!(m.init_producer_id(1000, Some((9, 1)), &mut alloc, 1202), Err(TxnError::Fenced));
    assert_eq!(m.init_producer_id(1000, Some((77, 4)), &mut alloc, 1202), Err(TxnError::Fenced));
}

/// At epoch 32766 InitProducerId rotates to a new producer id at epoch 0, keeping the old
/// one as the previous (a KIP-360 retry naming it is accepted); 32767 is only for a fence.
#[test]
fn epoch_exhaustion_rotates_the_producer_id() {
    let mut alloc = || 1234;
    let mut m = TxnMetadata::new("t", 5, 1000, 0);
    m.data.producer_epoch = MAX_CLIENT_EPOCH;
    let Ok(Init::Write(t)) = m.init_producer_id(1000, None, &mut alloc, 1) else { panic!() };
    apply(&mut m, t);
    assert_eq!((m.data.producer_id, m.data.producer_epoch, m.data.previous_producer_id), (1234, 0, 5));
    let mut m = TxnMetadata::new("t", 5, 1000, 0);
    m.data.producer_epoch = MAX_CLIENT_EPOCH;
    m.data.state = TxnState::Ongoing;
    let Ok(Init::Fence(t)) = m.init_producer_id(1000, None, &mut alloc, 1) else { panic!() };
    assert_eq!(t.producer_epoch, i16::MAX, "the fence may use the last epoch");
}

/// Transactions version 2 (Kafka's `endTransaction` for TV2): every end bumps the epoch, and
/// the answer is the epoch to go on with; a retry is told from the next end by its epoch (the
/// one before the bump): a retried commit or abort is answered again, the other outcome is
/// INVALID_TXN_STATE; an abort needs no partitions (from Empty or a completed transaction,
/// starting now); an older epoch is fenced; while the markers are written a retry is told
/// CONCURRENT_TRANSACTIONS and a newer epoch is fenced.
#[test]
fn version_2_bumps_the_epoch_at_every_end() {
    let mut alloc = || 900;
    let mut m = TxnMetadata::new("t2", 7, 60_000, 0);
    let Ok(Init::Write(t)) = m.init_producer_id(60_000, None, &mut alloc, 1) else { panic!() };
    apply(&mut m, t);
    assert_eq!(m.end(7, 0, true, TV2, None, 2), Err(TxnError::InvalidState), "nothing to commit");
    assert_eq!(m.end(7, 1, false, TV2, None, 2), Err(TxnError::Fenced), "a future epoch");
    let t = m.add_partitions(7, 0, &[tp("a", 0)], TV2, 3).unwrap().unwrap();
    apply(&mut m, t);
    let Ok(End::Prepare(t)) = m.end(7, 0, true, TV2, None, 4) else { panic!() };
    assert_eq!(
        (t.state, t.producer_epoch, t.last_producer_epoch, t.after_end()),
        (TxnState::PrepareCommit, 1, 0, (7, 1))
    );
    assert_eq!(t.partitions, [tp("a", 0)].into(), "the markers go where the writes went");
    apply(&mut m, t);
    assert_eq!(m.end(7, 0, true, TV2, None, 5), Err(TxnError::Concurrent), "a retry while the markers are written");
    assert_eq!(m.end(7, 1, true, TV2, None, 5), Err(TxnError::Fenced));
    assert_eq!(m.add_partitions(7, 1, &[tp("a", 0)], TV2, 5), Err(TxnError::Concurrent), "the next one waits");
    let t = m.markers_written(6).unwrap();
    assert_eq!((t.producer_id, t.producer_epoch, t.next_producer_id), (7, 1, -1));
    apply(&mut m, t);
    assert_eq!(m.end(7, 0, true, TV2, None, 7), Ok(End::Done { producer_id: 7, producer_epoch: 1 }), "retried");
    assert_eq!(m.end(7, 0, false, TV2, None, 7), Err(TxnError::InvalidState), "the other outcome");
    assert_eq!(m.end(7, 1, true, TV2, None, 7), Err(TxnError::InvalidState), "no transaction to commit");
    // An abort with nothing added still bumps, and starts now.
    let Ok(End::Prepare(t)) = m.end(7, 1, false, TV2, None, 8) else { panic!() };
    assert_eq!((t.state, t.producer_epoch, t.start_ms, t.partitions.len()), (TxnState::PrepareAbort, 2, 8, 0));
    apply(&mut m, t);
    let t = m.markers_written(9).unwrap();
    apply(&mut m, t);
    assert_eq!(m.end(7, 1, false, TV2, None, 10), Ok(End::Done { producer_id: 7, producer_epoch: 2 }));
    assert_eq!(m.end(7, 0, false, TV2, None, 10), Err(TxnError::Fenced), "two epochs back");
    assert_eq!(m.end(8, 2, false, TV2, None, 10), Err(TxnError::NotThisProducer));
    // The next transaction at the bumped epoch; the old epoch is fenced from it.
    assert_eq!(m.add_partitions(7, 1, &[tp("a", 0)], TV2, 11), Err(TxnError::Fenced));
    let t = m.add_partitions(7, 2, &[tp("b", 0)], TV2, 11).unwrap().unwrap();
    apply(&mut m, t);
    assert_eq!(m.end(7, 1, true, TV2, None, 12), Err(TxnError::Fenced), "an old retry on the open transaction");
    let Ok(End::Prepare(t)) = m.end(7, 2, false, TV2, None, 12) else { panic!() };
    assert_eq!((t.producer_epoch, t.start_ms), (3, 11), "the open transaction's start stays");
}

/// Version 2 past the last client epoch (32766): the end is prepared at 32767 (the markers'
/// epoch) with the next producer id, and completes at that id, epoch 0, the old id kept as the
/// previous; a retry with the old id and epoch 32766 is answered with the new pair. A fence
/// of a version 2 transaction rotates the same way, so its client goes on at epoch 0.
#[test]
fn version_2_rotates_the_producer_id_when_the_epochs_run_out() {
    let mut m = TxnMetadata::new("t2", 5, 60_000, 0);
    m.data.producer_epoch = MAX_CLIENT_EPOCH;
    m.data.state = TxnState::Ongoing;
    m.data.partitions = [tp("a", 0)].into();
    m.data.start_ms = 1;
    assert!(m.epoch_exhausted());
    assert_eq!(m.end(5, MAX_CLIENT_EPOCH, true, TV2, None, 2), Err(TxnError::Concurrent), "no new id: try again");
    let Ok(End::Prepare(t)) = m.end(5, MAX_CLIENT_EPOCH, true, TV2, Some(900), 2) else { panic!() };
    assert_eq!((t.producer_id, t.producer_epoch, t.next_producer_id, t.after_end()), (5, i16::MAX, 900, (900, 0)));
    apply(&mut m, t);
    let t = m.markers_written(3).unwrap();
    apply(&mut m, t);
    assert_eq!((m.data.producer_id, m.data.producer_epoch, m.data.previous_producer_id), (900, 0, 5));
    assert_eq!(m.data.next_producer_id, -1);
    let retry = m.end(5, MAX_CLIENT_EPOCH, true, TV2, None, 4);
    assert_eq!(retry, Ok(End::Done { producer_id: 900, producer_epoch: 0 }));
    let t = m.add_partitions(900, 0, &[tp("a", 0)], TV2, 5).unwrap().unwrap();
    apply(&mut m, t);
    let Ok(End::Prepare(t)) = m.end(900, 0, true, TV2, None, 6) else { panic!() };
    assert_eq!(t.after_end(), (900, 1));
    // A fence (InitProducerId from a new instance, or the timeout) at the last epoch.
    let mut alloc = || 901;
    let mut f = TxnMetadata::new("t3", 6, 1000, 0);
    (f.data.producer_epoch, f.data.state, f.data.client_version) = (MAX_CLIENT_EPOCH, TxnState::Ongoing, TV2);
    assert!(f.rotates_at_fence());
    let Ok(Init::Fence(t)) = f.init_producer_id(1000, None, &mut alloc, 1) else { panic!() };
    assert_eq!((t.producer_epoch, t.next_producer_id), (i16::MAX, 901));
    apply(&mut f, t);
    let t = f.markers_written(2).unwrap();
    assert_eq!((t.producer_id, t.producer_epoch), (901, 0));
    let mut late = TxnMetadata::new("t4", 6, 1000, 0);
    (late.data.producer_epoch, late.data.state, late.data.client_version) = (MAX_CLIENT_EPOCH, TxnState::Ongoing, TV2);
    late.data.start_ms = 0;
    let t = late.timed_out(Some(902), 5000).unwrap();
    assert_eq!((t.state, t.after_end()), (TxnState::PrepareAbort, (902, 0)));
}

/// Version 2: the producer's next transaction may begin while the markers of its previous
/// one are written (Kafka answers its enrolment CONCURRENT_TRANSACTIONS and the partition
/// leader retries; tidemark's coordinator holds it). A held enrolment is accepted as it would
/// be after the completion: the completion and the next Ongoing are written together, in
/// order; the old epoch or another producer is refused as after the completion; a version 0
/// end or a change in flight holds nothing. Across a rotation the new id at epoch 0 is held.
#[test]
fn version_2_enrolments_held_during_the_markers_join_the_completion() {
    let mut alloc = || 900;
    let mut m = TxnMetadata::new("h", 7, 60_000, 0);
    let Ok(Init::Write(t)) = m.init_producer_id(60_000, None, &mut alloc, 1) else { panic!() };
    apply(&mut m, t);
    let t = m.add_partitions(7, 0, &[tp("a", 0)], TV2, 2).unwrap().unwrap();
    apply(&mut m, t);
    let Ok(End::Prepare(t)) = m.end(7, 0, true, TV2, None, 3) else { panic!() };
    assert!(!m.enrols_after_markers(7, 1), "the prepare itself is in flight");
    apply(&mut m, t);
    assert_eq!(m.add_partitions(7, 1, &[tp("b", 0)], TV2, 4), Err(TxnError::Concurrent));
    assert!(m.enrols_after_markers(7, 1));
    assert!(!m.enrols_after_markers(7, 0), "the old epoch");
    assert!(!m.enrols_after_markers(8, 1), "another producer");
    let held = [(7, 1, vec![tp("b", 0)]), (7, 0, vec![tp("c", 0)]), (7, 1, vec![tp("b", 1), tp("b", 0)])];
    let (records, answers) = m.markers_written_and_enrol(5, &held).unwrap();
    assert_eq!(answers, [Ok(()), Err(TxnError::Fenced), Ok(())]);
    assert_eq!(records.len(), 2, "the completion and the next transaction, one write");
    assert_eq!((records[0].state, records[0].producer_epoch), (TxnState::CompleteCommit, 1));
    assert_eq!((records[1].state, records[1].start_ms), (TxnState::Ongoing, 5));
    assert_eq!(records[1].partitions, [tp("b", 0), tp("b", 1)].into());
    assert_eq!(m.pending, Some(TxnState::CompleteCommit), "applied once written");
    m.complete(records[1].clone());
    assert_eq!((m.data.state, m.data.producer_id, m.data.producer_epoch), (TxnState::Ongoing, 7, 1));
    // Nothing held: the completion alone, as markers_written.
    let Ok(End::Prepare(t)) = m.end(7, 1, false, TV2, None, 6) else { panic!() };
    apply(&mut m, t);
    let (records, answers) = m.markers_written_and_enrol(7, &[]).unwrap();
    assert_eq!((records.len(), records[0].state, answers.len()), (1, TxnState::CompleteAbort, 0));
    m.complete(records[0].clone());
    // Version 0 ends are not held (their clients add partitions themselves, and retry).
    let t = m.add_partitions(7, 2, &[tp("a", 0)], 0, 8).unwrap().unwrap();
    apply(&mut m, t);
    let Ok(End::Prepare(t)) = m.end(7, 2, true, 0, None, 9) else { panic!() };
    apply(&mut m, t);
    assert!(!m.enrols_after_markers(7, 2));
    // A rotation: the held enrolment comes with the next producer id at epoch 0.
    let mut r = TxnMetadata::new("r", 5, 60_000, 0);
    (r.data.producer_epoch, r.data.state, r.data.start_ms) = (MAX_CLIENT_EPOCH, TxnState::Ongoing, 1);
    r.data.partitions = [tp("a", 0)].into();
    let Ok(End::Prepare(t)) = r.end(5, MAX_CLIENT_EPOCH, true, TV2, Some(900), 2) else { panic!() };
    apply(&mut r, t);
    assert!(r.enrols_after_markers(900, 0));
    assert_eq!(r.add_partitions(900, 0, &[tp("a", 1)], TV2, 3), Err(TxnError::NotThisProducer), "hold first");
    let (records, answers) = r.markers_written_and_enrol(3, &[(900, 0, vec![tp("a", 1)])]).unwrap();
    assert_eq!(answers, [Ok(())]);
    assert_eq!((records[1].producer_id, records[1].producer_epoch, records[1].state), (900, 0, TxnState::Ongoing));
}

/// Expiry: only idle Empty or Complete ids, never with a change pending.
#[test]
fn expiry() {
    let mut m = TxnMetadata::new("t", 5, 1000, 0);
    assert!(!m.expire(999, 1000));
    assert!(m.expire(1000, 1000));
    assert_eq!(m.pending, Some(TxnState::Dead));
    let mut o = TxnMetadata::new("t", 5, 1000, 0);
    o.data.state = TxnState::Ongoing;
    assert!(!o.expire(i64::MAX, 1000), "an open transaction is aborted by its timeout, never expired");
}

/// Java's `String.hashCode` and Kafka's `Utils.abs`: "hello" is 99162322; a hash of
/// i32::MIN ("polygenelubricants") maps to partition 0; characters beyond the BMP count as
/// two UTF-16 units.
#[test]
fn partitions_as_kafka_picks_them() {
    assert_eq!(partition_for("hello", 50), 99162322 % 50);
    assert_eq!(partition_for("polygenelubricants", 50), 0);
    assert_eq!(partition_for("", 50), 0);
    let h = "😀".encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
    assert_eq!(partition_for("😀", 50), h.abs() % 50);
}

/// Records round-trip in Kafka's version 0 layout (Empty has null partitions); a version 1
/// (flexible) value is read, its previous producer id from tagged field 0; version 1 as written
/// round-trips with its tagged ids; version 0 is chosen only when nothing would be lost; damage
/// is an error, never a panic.
#[test]
fn transaction_log_records() {
    let mut m = TxnMetadata::new("app", 42, 60_000, 5);
    m.data.producer_epoch = 3;
    assert_eq!(log::read_key(&log::key("app")), Ok(Some("app".to_string())));
    assert_eq!(log::read_value("app", &log::value(&m, 0)), Ok(m.clone()));
    assert_eq!(log::value(&m, 0).len(), 2 + 8 + 2 + 4 + 1 + 4 + 8 + 8);
    m.data.state = TxnState::Ongoing;
    m.data.partitions = [tp("a", 0), tp("a", 3), tp("b", 1)].into();
    m.data.start_ms = 9;
    assert_eq!(log::read_value("app", &log::value(&m, 0)), Ok(m.clone()));
    let mut v1 = Vec::new();
    v1.extend_from_slice(&1i16.to_be_bytes());
    v1.extend_from_slice(&42i64.to_be_bytes());
    v1.extend_from_slice(&3i16.to_be_bytes());
    v1.extend_from_slice(&60_000i32.to_be_bytes());
    v1.push(1);
    log::uvarint(&mut v1, 2); // one topic
    log::uvarint(&mut v1, 2);
    v1.push(b'a');
    log::uvarint(&mut v1, 2);
    v1.extend_from_slice(&7i32.to_be_bytes());
    v1.push(0); // the topic's tagged fields
    v1.extend_from_slice(&5i64.to_be_bytes());
    v1.extend_from_slice(&9i64.to_be_bytes());
    log::uvarint(&mut v1, 1);
    log::uvarint(&mut v1, 0);
    log::uvarint(&mut v1, 8);
    v1.extend_from_slice(&41i64.to_be_bytes());
    let r = log::read_value("app", &v1).unwrap();
    assert_eq!((r.data.state, r.data.previous_producer_id), (TxnState::Ongoing, 41));
    assert_eq!(r.data.partitions, [tp("a", 7)].into());
    let bytes = log::value(&m, 0);
    for n in 0..bytes.len() {
        assert!(log::read_value("app", &bytes[..n]).is_err(), "cut at {n}");
    }
    assert_eq!(log::read_key(&[0, 1, 0, 0]), Ok(None), "another key version is skipped");
    // Version 1 as written: the same fields, flexible, with the tagged ids and version.
    (m.data.previous_producer_id, m.data.next_producer_id, m.data.client_version) = (41, 43, TV2);
    let v1 = log::value(&m, 1);
    assert_eq!(&v1[..2], &[0, 1]);
    assert_eq!(log::read_value("app", &v1), Ok(m.clone()));
    m.data.state = TxnState::Empty;
    m.data.partitions.clear();
    assert_eq!(log::read_value("app", &log::value(&m, 1)), Ok(m.clone()), "Empty: an empty topic array");
    let bytes = log::value(&m, 1);
    for n in 0..bytes.len() {
        assert!(log::read_value("app", &bytes[..n]).is_err(), "version 1 cut at {n}");
    }
    // Version 0 only while the cluster is at level 0 and nothing needs version 1's fields.
    assert_eq!(log::version_for(&m, 1), 1);
    assert_eq!(log::version_for(&m, 0), 1, "the tagged ids would be lost");
    (m.data.previous_producer_id, m.data.next_producer_id, m.data.client_version) = (-1, -1, 0);
    assert_eq!((log::version_for(&m, 0), log::version_for(&m, 2)), (0, 1));
    m.data.next_producer_id = 44;
    assert_eq!(log::version_for(&m, 0), 1, "a rotation under way");
}

/// A random operation, as clients and the coordinator's timers issue them.
#[derive(Debug, Clone)]
enum Op {
    Init { expected: Option<i16> },
    Add { epoch_delta: i16, partition: i32, v2: bool },
    End { epoch_delta: i16, commit: bool, v2: bool },
    Markers,
    Timeout { after_ms: i64 },
    WriteFails,
    Reload,
}

fn op() -> impl Strategy<Value = Op> {
    // Mostly the producer's own epoch, so that transactions get far; now and then a stale or
    // a future one.
    let delta = || prop_oneof![8 => Just(0i16), 1 => Just(-1i16), 1 => Just(1i16)];
    prop_oneof![
        2 => (proptest::option::of(-1i16..3)).prop_map(|expected| Op::Init { expected }),
        4 => (delta(), 0..3i32, any::<bool>()).prop_map(|(epoch_delta, partition, v2)| Op::Add { epoch_delta, partition, v2 }),
        3 => (delta(), any::<bool>(), any::<bool>()).prop_map(|(epoch_delta, commit, v2)| Op::End { epoch_delta, commit, v2 }),
        3 => Just(Op::Markers),
        1 => (0..1500i64).prop_map(|after_ms| Op::Timeout { after_ms }),
        1 => Just(Op::WriteFails),
        1 => Just(Op::Reload),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    /// Random sequences of client requests, marker completions, timeouts, failed writes and
    /// reloads from the log: every applied change is one Kafka's table allows; the client is
    /// never handed epoch 32767 nor an epoch below one it had; Empty and Complete states hold
    /// no partitions, Empty no start time; a commit completes only what was prepared with the
    /// same partitions; every applied state survives its log record; a change pending blocks
    /// every other request (CONCURRENT_TRANSACTIONS).
    #[test]
    fn model_follows_kafkas_state_machine(ops in proptest::collection::vec(op(), 1..60)) {
        let mut pids = 1000;
        let mut alloc = || { pids += 1; pids };
        let mut m = TxnMetadata::new("model", 1, 1000, 0);
        let mut now = 0i64;
        let mut handed: Option<(i64, i16)> = None;
        let mut prepared: Option<BTreeSet<TopicPartition>> = None;
        let mut fail_next = false;
        for op in ops {
            now += 10;
            let epoch = |d: i16| m.data.producer_epoch.saturating_add(d);
            let transit: Option<Transit> = match op {
                Op::Init { expected } => {
                    let exp = expected.map(|d| (m.data.producer_id, m.data.producer_epoch.saturating_add(d - 1)));
                    match m.init_producer_id(1000, exp, &mut alloc, now) {
                        Ok(Init::Write(t)) | Ok(Init::Fence(t)) => Some(t),
                        Err(_) => None,
                    }
                }
                Op::Add { epoch_delta, partition, v2 } => {
                    let e = epoch(epoch_delta);
                    let version = if v2 { TV2 } else { 0 };
                    m.add_partitions(m.data.producer_id, e, &[tp("t", partition)], version, now).ok().flatten()
                }
                Op::End { epoch_delta, commit, v2 } => {
                    let version = if v2 { TV2 } else { 0 };
                    let next = (v2 && m.epoch_exhausted()).then(&mut alloc);
                    match m.end(m.data.producer_id, epoch(epoch_delta), commit, version, next, now) {
                        Ok(End::Prepare(t)) => {
                            // What the client goes on with: never the fence's epoch.
                            prop_assert!(t.after_end().1 <= MAX_CLIENT_EPOCH);
                            if v2 {
                                prop_assert_eq!(t.after_end(), (m.data.producer_id, m.data.producer_epoch + 1), "bumped");
                            }
                            Some(t)
                        }
                        _ => None,
                    }
                }
                Op::Markers => m.markers_written(now),
                Op::Timeout { after_ms } => {
                    now += after_ms;
                    let next = m.rotates_at_fence().then(&mut alloc);
                    m.timed_out(next, now)
                }
                Op::WriteFails => { fail_next = true; None }
                Op::Reload => {
                    if m.pending.is_none() {
                        let back = log::read_value("model", &log::value(&m, 1)).unwrap();
                        prop_assert_eq!(&back.data.state, &m.data.state);
                        prop_assert_eq!(&back.data.partitions, &m.data.partitions);
                        prop_assert_eq!(back.data.client_version, m.data.client_version);
                        m = back;
                    }
                    None
                }
            };
            let Some(t) = transit else { continue };
            prop_assert_eq!(m.pending, Some(t.state));
            prop_assert_eq!(m.init_producer_id(1000, None, &mut alloc, now), Err(TxnError::Concurrent));
            if fail_next {
                fail_next = false;
                m.abandon();
                continue;
            }
            prop_assert!(t.state.valid_previous().contains(&m.data.state), "{:?} -> {:?}", m.data.state, t.state);
            match t.state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => prepared = Some(t.partitions.clone()),
                TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    prop_assert_eq!(prepared.take(), Some(m.data.partitions.clone()), "completes what was prepared");
                }
                _ => {}
            }
            if matches!(t.state, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort) {
                prop_assert!(t.partitions.is_empty());
            }
            if t.state == TxnState::Empty {
                prop_assert_eq!(t.start_ms, -1);
                prop_assert!(t.producer_epoch <= MAX_CLIENT_EPOCH, "a client epoch");
                if let Some((pid, e)) = handed {
                    prop_assert!(t.producer_id != pid || t.producer_epoch >= e, "epochs only go up");
                }
                handed = Some((t.producer_id, t.producer_epoch));
            }
            m.complete(t);
            for version in [0, 1] {
                let back = log::read_value("model", &log::value(&m, version)).unwrap();
                prop_assert_eq!(back.data.producer_epoch, m.data.producer_epoch);
            }
        }
    }
}
