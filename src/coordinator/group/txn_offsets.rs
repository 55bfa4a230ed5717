//! Offsets committed inside transactions (KIP-98, TxnOffsetCommit): written to the group's
//! offsets partition as a transactional batch of the producer, staged in the offset table
//! until the producer's marker on that partition commits or drops them
//! ([`Coordinator::complete_txn_offsets`]).

use super::{Batching, Coordinator};
use crate::groups::offsets::{self, Committed, Tp};
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::groups::OffsetCommitRequest;
use crate::protocol::txn::*;

impl Coordinator {
    /// TxnOffsetCommit: the offsets written to the group's offsets partition as a
    /// transactional batch of producer `pid` at `epoch` (checked by the partition's producer
    /// state like any transactional write: a fenced epoch is refused), staged until the
    /// transaction's marker commits or drops them; answered once durable.
    pub async fn txn_commit(
        &self,
        req: TxnOffsetCommitRequest,
        partitions_of: impl Fn(&str) -> Option<u32>,
    ) -> TxnOffsetCommitResponse {
        let refused = self.unavailable(&req.group_id, false).or_else(|| {
            // KIP-447 (v3+): a member's commit is checked as an OffsetCommit's is.
            if req.member_id.is_empty() && req.generation_id < 0 {
                return None;
            }
            let as_commit = OffsetCommitRequest {
                group_id: req.group_id.clone(),
                generation_id_or_member_epoch: req.generation_id,
                member_id: req.member_id.clone(),
                group_instance_id: req.group_instance_id.clone(),
                ..Default::default()
            };
            self.check_committer(&as_commit, 8)
        });
        let mut answers: Vec<(String, Vec<(i32, ErrorCode)>)> = Vec::new();
        let mut accepted: Vec<(Tp, Committed)> = Vec::new();
        let now = self.now();
        for t in &req.topics {
            let partitions = partitions_of(&t.name);
            let mut codes = Vec::new();
            for p in &t.partitions {
                let metadata = p.committed_metadata.clone().unwrap_or_default();
                let e = if let Some(e) = refused {
                    e
                } else if partitions.is_none_or(|n| p.partition_index < 0 || p.partition_index as u32 >= n) {
                    code::UNKNOWN_TOPIC_OR_PARTITION
                } else if metadata.len() > self.config.metadata_max_bytes {
                    code::OFFSET_METADATA_TOO_LARGE
                } else {
                    let committed = Committed {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata,
                        commit_timestamp: now,
                    };
                    accepted.push(((t.name.clone(), p.partition_index), committed));
                    code::NONE
                };
                codes.push((p.partition_index, e));
            }
            answers.push((t.name.clone(), codes));
        }
        if !accepted.is_empty() {
            if let Err(e) = self.persist_txn(&req.group_id, req.producer_id, req.producer_epoch, accepted).await {
                for (_, codes) in answers.iter_mut() {
                    codes.iter_mut().filter(|c| c.1 == code::NONE).for_each(|c| c.1 = e);
                }
            }
        }
        TxnOffsetCommitResponse { topics: txn_commit_topics(answers), ..Default::default() }
    }

    /// Append `pid`'s transactional commits of `group` as one batch and stage them.
    async fn persist_txn(
        &self,
        group: &str,
        pid: i64,
        epoch: i16,
        commits: Vec<(Tp, Committed)>,
    ) -> Result<(), ErrorCode> {
        let records = commits.iter().map(|(tp, c)| offsets::record(group, tp, Some(c))).collect();
        self.append(group, records, Batching::Transactional { pid, epoch }, |index, _, _| {
            let mut table = self.offsets.borrow_mut();
            for (tp, c) in commits {
                table.stage(index, pid, group, tp, c);
            }
        })
        .await
    }

    /// A transaction marker of `pid` was appended to offsets partition `index`: its staged
    /// offsets become committed (or are dropped).
    pub fn complete_txn_offsets(&self, index: i32, pid: i64, commit: bool) {
        let n = self.offsets.borrow_mut().complete(index, pid, commit);
        if n > 0 {
            tracing::debug!(partition = index, pid, commit, offsets = n, "transactional offsets completed");
        }
    }
}

/// A TxnOffsetCommit response's topics: each topic's partitions with their codes.
pub fn txn_commit_topics(answers: Vec<(String, Vec<(i32, ErrorCode)>)>) -> Vec<TxnOffsetCommitResponseTopic> {
    answers
        .into_iter()
        .map(|(name, codes)| TxnOffsetCommitResponseTopic {
            name,
            partitions: codes
                .into_iter()
                .map(|(partition_index, error_code)| TxnOffsetCommitResponsePartition {
                    partition_index,
                    error_code,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}
