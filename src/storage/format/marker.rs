//! Transaction markers (KIP-98): the control batches a transaction coordinator writes to every
//! partition of a transaction when it ends. One batch, transactional and control attribute
//! bits set, the producer's id and epoch, base sequence -1, one record whose key is
//! `version i16 = 0, type i16` (0 ABORT, 1 COMMIT) and whose value is
//! `version i16 = 0, coordinator epoch i32`: 78 bytes in all (docs/format.md).
//!
//! Kafka's other control types (KRaft's leader change and snapshot records, 2-6) are not
//! transaction markers; a control batch of such a type, or of a type unknown, is read as no
//! marker, as Kafka's consumers skip it.

use super::batch::{records_section, BatchBuilder, BatchHeader, Records};
use super::FormatError;

/// A transaction's outcome at a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// COMMIT (true) or ABORT.
    pub commit: bool,
    /// The coordinator's epoch: a partition refuses markers from an older coordinator.
    pub coordinator_epoch: i32,
}

const ABORT: i16 = 0;
const COMMIT: i16 = 1;

impl Marker {
    /// The marker's control batch for producer `pid` at `epoch`, stamped `ts`, offset 0 (the
    /// log assigns it).
    pub fn batch(&self, pid: i64, epoch: i16, ts: i64) -> Vec<u8> {
        let mut key = [0u8; 4];
        key[2..].copy_from_slice(&(if self.commit { COMMIT } else { ABORT }).to_be_bytes());
        let mut value = [0u8; 6];
        value[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        let mut b = BatchBuilder::new().control().producer(pid, epoch, -1);
        b.push(ts, Some(&key), Some(&value), &[]);
        b.finish()
    }

    /// The marker a stored control batch holds (`None`: a control batch of another type).
    /// A key or value too short, or of a negative version, is an error (Kafka's
    /// INVALID_RECORD).
    pub fn read(h: &BatchHeader, batch: &[u8]) -> Result<Option<Marker>, FormatError> {
        let records = records_section(h, batch, 1 << 16)?;
        let bad = |what| FormatError::BadRecords(what);
        let r = Records::new(&records, h.record_count).next().ok_or(bad("a control batch without a record"))??;
        let key = r.key.ok_or(bad("a control record without a key"))?;
        if key.len() < 4 || i16::from_be_bytes([key[0], key[1]]) < 0 {
            return Err(bad("a control record key that is not version and type"));
        }
        let commit = match i16::from_be_bytes([key[2], key[3]]) {
            ABORT => false,
            COMMIT => true,
            _ => return Ok(None),
        };
        let value = r.value.ok_or(bad("a transaction marker without a value"))?;
        if value.len() < 6 || i16::from_be_bytes([value[0], value[1]]) < 0 {
            return Err(bad("a transaction marker value that is not version and coordinator epoch"));
        }
        let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
        Ok(Some(Marker { commit, coordinator_epoch }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::format::batch::check_stored;

    /// Kafka's layout: 78 bytes, control and transactional bits, base sequence -1, one
    /// record; reads back; a data batch or a short key is not a marker.
    #[test]
    fn markers_round_trip() {
        for m in [Marker { commit: true, coordinator_epoch: 7 }, Marker { commit: false, coordinator_epoch: 0 }] {
            let b = m.batch(42, 3, 1_700_000_000_000);
            assert_eq!(b.len(), 78);
            let h = check_stored(&b).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence, h.record_count), (42, 3, -1, 1));
            assert_eq!(Marker::read(&h, &b).unwrap(), Some(m));
        }
        let mut other = BatchBuilder::new().control().producer(1, 0, -1);
        other.push(0, Some(&[0, 0, 0, 3]), Some(&[0; 8]), &[]);
        let b = other.finish();
        assert_eq!(Marker::read(&check_stored(&b).unwrap(), &b).unwrap(), None, "KRaft's leader change");
        let mut short = BatchBuilder::new().control().producer(1, 0, -1);
        short.push(0, Some(&[0, 0]), Some(&[0; 6]), &[]);
        let b = short.finish();
        assert!(Marker::read(&check_stored(&b).unwrap(), &b).is_err());
    }
}
