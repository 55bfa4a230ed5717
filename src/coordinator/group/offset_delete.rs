//! OffsetDelete (KIP-496): a group's committed offsets of some partitions removed, as Kafka's
//! `OffsetMetadataManager.deleteOffsets` does it. The group must exist; a classic group with
//! members must be of consumers (NON_EMPTY_GROUP otherwise); a topic the group is subscribed to
//! keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC on each of its partitions); every other
//! partition asked is answered with no error, and those with an offset (committed, or staged
//! by an open transaction) get a tombstone in the group's offsets partition, durable before
//! the answer.

use super::Coordinator;
use crate::groups::consumer::embedded::{self, Subscription};
use crate::groups::group::Group;
use crate::groups::offsets::{Committed, Tp};
use crate::protocol::errors::{self as code, ErrorCode};
use std::collections::BTreeSet;

/// Each topic asked with its partitions' outcomes.
pub type Deleted = Vec<(String, Vec<(i32, ErrorCode)>)>;

impl Coordinator {
    pub async fn delete_offsets(&self, group: &str, topics: Vec<(String, Vec<i32>)>) -> Result<Deleted, ErrorCode> {
        if let Some(e) = self.unavailable(group, false) {
            return Err(e);
        }
        let subscribed = self.subscribed_among(group, topics.iter().map(|(t, _)| t.as_str()))?;
        let mut answers = Vec::with_capacity(topics.len());
        let mut tombstones: Vec<(Tp, Option<Committed>)> = Vec::new();
        {
            let table = self.offsets.borrow();
            for (topic, partitions) in topics {
                let refused = subscribed.contains(&topic);
                let mut outcomes = Vec::with_capacity(partitions.len());
                for p in partitions {
                    if refused {
                        outcomes.push((p, code::GROUP_SUBSCRIBED_TO_TOPIC));
                        continue;
                    }
                    let tp = (topic.clone(), p);
                    if table.get(group, &tp).is_some() || table.has_pending(group, &tp) {
                        tombstones.push((tp, None));
                    }
                    outcomes.push((p, code::NONE));
                }
                answers.push((topic, outcomes));
            }
        }
        if !tombstones.is_empty() {
            self.persist(group, tombstones, false).await?;
        }
        Ok(answers)
    }

    /// Which of `topics` the group is subscribed to, or why its offsets cannot be deleted:
    /// GROUP_ID_NOT_FOUND for a group this coordinator does not know, NON_EMPTY_GROUP for a
    /// classic group with members that are not consumers.
    fn subscribed_among<'a>(
        &self,
        group: &str,
        topics: impl Iterator<Item = &'a str>,
    ) -> Result<BTreeSet<String>, ErrorCode> {
        if let Some(g) = self.consumer_groups.borrow().get(group).filter(|g| !g.is_empty()) {
            return Ok(topics.filter(|t| g.subscribed_to(t)).map(str::to_string).collect());
        }
        if let Some(g) = self.groups.borrow().get(group) {
            if g.is_empty() {
                return Ok(BTreeSet::new());
            }
            if g.protocol_type() != Some(embedded::PROTOCOL_TYPE) {
                return Err(code::NON_EMPTY_GROUP);
            }
            return Ok(match classic_subscriptions(g) {
                Some(names) => topics.filter(|t| names.contains(*t)).map(str::to_string).collect(),
                // Kafka: a group of consumers whose subscriptions it cannot read counts as
                // subscribed to every topic.
                None => topics.map(str::to_string).collect(),
            });
        }
        if self.offsets.borrow().group(group).is_some() {
            return Ok(BTreeSet::new());
        }
        Err(code::GROUP_ID_NOT_FOUND)
    }
}

/// The topics a classic group of consumers subscribes to: the union of its members'
/// subscriptions in the chosen protocol (Kafka's `ClassicGroup.computeSubscribedTopics`), or
/// `None` when there is no chosen protocol yet or a subscription does not decode.
fn classic_subscriptions(g: &Group) -> Option<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for metadata in g.member_metadata()? {
        let s: Subscription = embedded::decode(&metadata)?;
        names.extend(s.topics);
    }
    Some(names)
}
