//! Producer ids for idempotent producers (InitProducerId), handed out on shard 0 in blocks.
//!
//! `<data-dir>/producer-ids` (docs/format.md): `tidemark-producer-ids 1`, then `next <id>`: no
//! id at or above it was ever handed out. The end of a block is persisted before its first id
//! is used, so no id is given twice, across restarts too.

use crate::cluster::member::Member;
use crate::cluster::types::{MetaCommand, MetaResponse};
use crate::io::{Disk, DmaDisk};
use crate::protocol::errors::{self as code, ErrorCode};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

/// Producer ids are handed out in blocks this large (each block's end persisted once).
const PRODUCER_ID_BLOCK: i64 = 1000;
const PRODUCER_IDS_FILE: &str = "producer-ids";

pub struct ProducerIds {
    disk: DmaDisk,
    path: PathBuf,
    /// The next id to hand out, and the end of the block persisted.
    next: Cell<i64>,
    end: Cell<i64>,
    lock: glommio::sync::Semaphore,
}

impl ProducerIds {
    /// The first id to hand out: past every id the file says was handed out, and past
    /// `now_ms × 1024`, so ids stay unique across restarts even if the file is lost or
    /// damaged (as long as the clock does not run back further than the ids handed out
    /// since).
    pub async fn open(disk: DmaDisk, data_dir: &Path, now_ms: i64) -> anyhow::Result<ProducerIds> {
        let floor = now_ms.max(0).saturating_mul(1024);
        let path = data_dir.join(PRODUCER_IDS_FILE);
        let next = match disk.read_file(&path).await? {
            None => floor,
            Some(bytes) => match decode(&bytes) {
                Some(n) => n.max(floor),
                None => {
                    tracing::warn!(path = %path.display(), "not a producer-ids file; ids continue from the clock");
                    floor
                }
            },
        };
        Ok(ProducerIds {
            disk,
            path,
            next: Cell::new(next),
            end: Cell::new(next),
            lock: glommio::sync::Semaphore::new(1),
        })
    }

    /// The next producer id, or Kafka's error code when the next block cannot be had. On a
    /// clustered node (`quorum`) blocks come from the metadata quorum (KRaft's
    /// ProducerIdsRecord), so ids are unique across the cluster; standalone, from the file.
    pub async fn allocate(&self, quorum: Option<Rc<Member<DmaDisk>>>) -> Result<i64, ErrorCode> {
        let _permit = self.lock.acquire_permit(1).await.map_err(|_| code::UNKNOWN_SERVER_ERROR)?;
        let next = self.next.get();
        if let (true, Some(quorum)) = (next >= self.end.get(), quorum) {
            let now =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
            let ask = MetaCommand::AllocateProducerIds {
                broker: quorum.node_id() as i32,
                count: PRODUCER_ID_BLOCK,
                floor: now.saturating_mul(1024),
            };
            return match quorum.write(ask, Duration::from_secs(10)).await {
                Ok(MetaResponse::ProducerIds { first, count }) => {
                    self.end.set(first + count);
                    self.next.set(first + 1);
                    Ok(first)
                }
                Ok(other) => {
                    tracing::warn!(?other, "the quorum answered a producer-id block oddly");
                    Err(code::COORDINATOR_NOT_AVAILABLE)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no producer-id block from the metadata quorum");
                    Err(code::COORDINATOR_NOT_AVAILABLE)
                }
            };
        }
        if next >= self.end.get() {
            let end = next.checked_add(PRODUCER_ID_BLOCK).ok_or(code::UNKNOWN_SERVER_ERROR)?;
            if let Err(e) = self.disk.write_file_atomic(&self.path, encode(end).as_bytes()).await {
                tracing::error!(error = %e, "cannot persist producer ids");
                return Err(code::KAFKA_STORAGE_ERROR);
            }
            self.end.set(end);
        }
        self.next.set(next + 1);
        Ok(next)
    }
}

fn encode(next: i64) -> String {
    format!("tidemark-producer-ids 1\nnext {next}\n")
}

fn decode(bytes: &[u8]) -> Option<i64> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.lines();
    match (lines.next(), lines.next().and_then(|l| l.strip_prefix("next "))) {
        (Some("tidemark-producer-ids 1"), Some(n)) => n.trim().parse::<i64>().ok().filter(|&n| n >= 0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file round-trips; anything else is not a producer-ids file.
    #[test]
    fn producer_ids_file_round_trips() {
        assert_eq!(decode(encode(42_000).as_bytes()), Some(42_000));
        assert_eq!(decode(b"tidemark-producer-ids 2\nnext 5\n"), None);
        assert_eq!(decode(b"tidemark-producer-ids 1\nnext -5\n"), None);
        assert_eq!(decode(b""), None);
    }
}
