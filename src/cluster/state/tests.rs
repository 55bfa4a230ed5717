//! The metadata image's rules: placement, fencing, elections, reassignments, documents and
//! ISR changes, applied to images built by hand.

use super::*;
use crate::cluster::types::Endpoint;

fn register(image: &mut MetaImage, index: u64, id: i32) {
    let r = BrokerRegistration {
        id,
        incarnation: format!("{id}-{index}"),
        listeners: vec![Endpoint {
            name: "PLAINTEXT".into(),
            host: "h".into(),
            port: 1,
            security_protocol: "PLAINTEXT".into(),
        }],
        rack: None,
    };
    assert_eq!(image.apply(index, &MetaCommand::RegisterBroker(r)), MetaResponse::BrokerEpoch(index));
    assert_eq!(image.apply(index + 1, &MetaCommand::UnfenceBroker { id, epoch: index }), MetaResponse::Done);
}

fn three_brokers() -> MetaImage {
    let mut image = MetaImage::default();
    for (i, id) in [1, 2, 3].into_iter().enumerate() {
        register(&mut image, 10 * (i as u64 + 1), id);
    }
    image
}

fn create(image: &mut MetaImage, name: &str, partitions: Vec<PartitionState>) {
    let topic = TopicState { id: format!("id-{name}"), partitions, configs: BTreeMap::new() };
    assert_eq!(image.apply(100, &MetaCommand::CreateTopic { name: name.into(), topic }), MetaResponse::Done);
}

/// Placement spreads replicas over distinct brokers and leaders evenly, refuses a factor
/// above the unfenced brokers (INVALID_REPLICATION_FACTOR) and moves its start with the
/// partitions already placed.
#[test]
fn placement_spreads_replicas_and_leaders() {
    let mut image = three_brokers();
    let placed = image.place(6, 3).unwrap();
    for p in &placed {
        let mut r = p.replicas.clone();
        r.sort();
        r.dedup();
        assert_eq!(r.len(), 3, "distinct replicas: {p:?}");
        assert_eq!(p.isr, p.replicas, "a new partition is empty: every replica is in sync");
        assert_eq!((p.leader, p.leader_epoch), (p.replicas[0], 0));
    }
    for b in [1, 2, 3] {
        assert_eq!(placed.iter().filter(|p| p.leader == b).count(), 2, "leaders balanced");
    }
    assert_eq!(image.place(1, 4).unwrap_err().0, Refusal::InvalidReplicationFactor);
    assert_eq!(image.place(1, 0).unwrap_err().0, Refusal::InvalidReplicationFactor);
    let placed = image.place(1, 1).unwrap();
    create(&mut image, "a", placed);
    let first = image.topics["a"].partitions[0].leader;
    let placed = image.place(1, 1).unwrap();
    create(&mut image, "b", placed);
    assert_ne!(image.topics["b"].partitions[0].leader, first, "one-partition topics do not pile up");
}

/// Explicit assignments are checked as Kafka does and keep their order; fenced replicas
/// are left out of the ISR.
#[test]
fn assignments_are_checked() {
    let mut image = three_brokers();
    let placed = image.assign(&[vec![3, 1], vec![2, 3]]).unwrap();
    assert_eq!((placed[0].leader, placed[1].leader), (3, 2));
    let err = |a: &[Vec<i32>]| image.assign(a).unwrap_err().0;
    assert_eq!(err(&[vec![1, 1]]), Refusal::InvalidReplicaAssignment);
    assert_eq!(err(&[vec![1, 9]]), Refusal::InvalidReplicaAssignment);
    assert_eq!(err(&[vec![1], vec![1, 2]]), Refusal::InvalidReplicaAssignment);
    assert_eq!(err(&[vec![]]), Refusal::InvalidReplicaAssignment);
    image.apply(50, &MetaCommand::FenceBroker { id: 3, epoch: 30 });
    let placed = image.assign(&[vec![3, 1]]).unwrap();
    assert_eq!((placed[0].leader, placed[0].isr.clone()), (1, vec![1]));
    assert_eq!(image.assign(&[vec![3]]).unwrap_err().0, Refusal::InvalidReplicationFactor);
}

/// A fenced broker leaves the ISRs (but the last member stays), its leaderships move to
/// the next ISR member with a new leader epoch, a partition with no other member has no
/// leader until the broker is unfenced again; a new registration fences the old
/// incarnation's leaderships the same way.
#[test]
fn fencing_moves_leaders() {
    let mut image = three_brokers();
    create(&mut image, "r3", vec![PartitionState::new(vec![1, 2, 3], vec![1, 2, 3])]);
    create(&mut image, "r1", vec![PartitionState::new(vec![1], vec![1])]);
    image.apply(200, &MetaCommand::FenceBroker { id: 1, epoch: 10 });
    let p = &image.topics["r3"].partitions[0];
    assert_eq!((p.leader, p.leader_epoch, p.isr.clone()), (2, 1, vec![2, 3]));
    let p = &image.topics["r1"].partitions[0];
    assert_eq!((p.leader, p.leader_epoch, p.isr.clone()), (-1, 1, vec![1]));
    // A stale epoch changes nothing.
    assert!(matches!(image.apply(201, &MetaCommand::UnfenceBroker { id: 1, epoch: 3 }), MetaResponse::Refused { .. }));
    image.apply(202, &MetaCommand::UnfenceBroker { id: 1, epoch: 10 });
    let p = &image.topics["r1"].partitions[0];
    assert_eq!((p.leader, p.leader_epoch), (1, 2));
    // Broker 1 is not back in r3's ISR (replication puts it back): 2 still leads.
    assert_eq!(image.topics["r3"].partitions[0].leader, 2);
    // Broker 2 restarts: a new registration, fenced; 3 leads r3.
    register(&mut image, 300, 2);
    let p = &image.topics["r3"].partitions[0];
    assert_eq!((p.leader, p.isr.clone()), (3, vec![3]));
}

/// UnregisterBroker (a broker gone for good): its registration is removed, its leaderships
/// move and it leaves the ISRs as when fenced; it is no longer a broker new topics are placed
/// on; unregistering it again, or an id never registered, is BROKER_ID_NOT_REGISTERED; it may
/// register again (a broker still alive does at its next heartbeat).
#[test]
fn unregistering_a_broker() {
    let mut image = three_brokers();
    create(&mut image, "r3", vec![PartitionState::new(vec![1, 2, 3], vec![1, 2, 3])]);
    assert_eq!(image.apply(200, &MetaCommand::UnregisterBroker { id: 1 }), MetaResponse::Done);
    assert!(!image.brokers.contains_key(&1));
    let p = &image.topics["r3"].partitions[0];
    assert_eq!((p.leader, p.leader_epoch, p.isr.clone()), (2, 1, vec![2, 3]));
    assert_eq!(image.place(1, 3).unwrap_err().0, Refusal::InvalidReplicationFactor, "two brokers left");
    let refused = |r: MetaResponse| matches!(r, MetaResponse::Refused { reason: Refusal::BrokerIdNotRegistered, .. });
    assert!(refused(image.apply(201, &MetaCommand::UnregisterBroker { id: 1 })));
    assert!(refused(image.apply(202, &MetaCommand::UnregisterBroker { id: 9 })));
    register(&mut image, 300, 1);
    assert!(image.brokers.contains_key(&1));
}

/// Preferred-leader election: the first replica leads again where it can; otherwise
/// Kafka's codes.
#[test]
fn preferred_election() {
    let mut image = three_brokers();
    create(
        &mut image,
        "t",
        vec![PartitionState::new(vec![1, 2], vec![1, 2]), PartitionState::new(vec![2, 3], vec![2, 3])],
    );
    image.topics.get_mut("t").unwrap().partitions[0].set_leader(2);
    let asked = vec![("t".to_string(), 0), ("t".to_string(), 1), ("t".to_string(), 7), ("u".to_string(), 0)];
    let codes: Vec<Option<Refusal>> =
        match image.apply(300, &MetaCommand::ElectLeaders { unclean: false, partitions: asked }) {
            MetaResponse::Partitions(c) => c.into_iter().map(|r| r.err().map(|e| e.0)).collect(),
            other => panic!("{other:?}"),
        };
    let unknown = Some(Refusal::UnknownTopicOrPartition);
    assert_eq!(codes, vec![None, Some(Refusal::ElectionNotNeeded), unknown, unknown]);
    assert_eq!(image.topics["t"].partitions[0].leader, 1);
    image.topics.get_mut("t").unwrap().partitions[1].isr = vec![3];
    image.topics.get_mut("t").unwrap().partitions[1].set_leader(3);
    let codes = image.apply(301, &MetaCommand::ElectLeaders { unclean: false, partitions: vec![("t".to_string(), 1)] });
    assert!(
        matches!(&codes, MetaResponse::Partitions(c) if matches!(c[0], Err((Refusal::PreferredLeaderNotAvailable, _)))),
        "{codes:?}"
    );
}

/// KIP-455 reassignments: a reorder or a removal completes at once (every target replica
/// in sync), a removed leader handing over; an addition stays under way, with the target
/// then the removed replicas as replicas, until the new replica is in the ISR; a
/// cancellation restores the original replicas; an unknown broker or a broker twice is
/// refused.
#[test]
fn reassignments() {
    let mut image = three_brokers();
    create(&mut image, "t", vec![PartitionState::new(vec![1, 2], vec![1, 2])]);
    let reassign = |image: &mut MetaImage, target: Option<Vec<i32>>| match image
        .apply(400, &MetaCommand::Reassign { partitions: vec![("t".into(), 0, target)] })
    {
        MetaResponse::Partitions(r) => r[0].clone().err().map(|e| e.0),
        other => panic!("{other:?}"),
    };
    assert_eq!(reassign(&mut image, Some(vec![2, 1])), None);
    let p = image.topics["t"].partitions[0].clone();
    assert_eq!((p.replicas, p.leader, p.adding.is_empty()), (vec![2, 1], 1, true));
    assert_eq!(reassign(&mut image, Some(vec![2])), None);
    let p = image.topics["t"].partitions[0].clone();
    assert_eq!((p.replicas, p.isr, p.leader), (vec![2], vec![2], 2));
    assert_eq!(reassign(&mut image, Some(vec![3, 2])), None);
    let p = image.topics["t"].partitions[0].clone();
    assert_eq!((p.replicas.clone(), p.adding.clone(), p.removing.clone(), p.leader), (vec![3, 2], vec![3], vec![], 2));
    assert_eq!(reassign(&mut image, Some(vec![3])), None, "a new target replaces the one under way");
    let p = image.topics["t"].partitions[0].clone();
    assert_eq!((p.replicas, p.adding, p.removing), (vec![3, 2], vec![3], vec![2]));
    assert_eq!(reassign(&mut image, None), None);
    let p = image.topics["t"].partitions[0].clone();
    assert_eq!((p.replicas, p.adding.is_empty(), p.removing.is_empty(), p.leader), (vec![2], true, true, 2));
    assert_eq!(reassign(&mut image, None), Some(Refusal::NoReassignmentInProgress));
    assert_eq!(reassign(&mut image, Some(vec![2, 9])), Some(Refusal::InvalidReplicaAssignment));
    assert_eq!(reassign(&mut image, Some(vec![2, 2])), Some(Refusal::InvalidReplicaAssignment));
    // In sync at last (replication's ISR expansion): the move completes.
    create(&mut image, "u", vec![PartitionState::new(vec![1], vec![1])]);
    let p = image.topics.get_mut("u").unwrap().partitions.get_mut(0).unwrap();
    p.reassign(Some(vec![2]), &[1, 2, 3]).unwrap();
    assert_eq!((p.replicas.clone(), p.leader), (vec![2, 1], 1));
    p.isr.push(2);
    p.complete_reassignment(&[1, 2, 3]);
    assert_eq!((p.replicas.clone(), p.isr.clone(), p.leader), (vec![2], vec![2], 2));
}

/// A document change based on an older version than the current one is refused with the
/// current version (so that concurrent changes from two nodes are never lost); one based
/// on the current version takes the entry's index as its version.
#[test]
fn documents_refuse_changes_based_on_old_versions() {
    let mut image = MetaImage::default();
    let set = |text: &str, based_on| MetaCommand::SetDocument { name: "acls".into(), text: text.into(), based_on };
    assert_eq!(image.apply(7, &set("a", 0)), MetaResponse::Done);
    assert_eq!(image.apply(8, &set("b", 0)), MetaResponse::Conflict { version: 7 });
    assert_eq!(image.documents["acls"], Document { version: 7, text: "a".into() });
    assert_eq!(image.apply(9, &set("b", 7)), MetaResponse::Done);
    assert_eq!(image.documents["acls"], Document { version: 9, text: "b".into() });
}

/// AlterPartition: the leader's ISR change applies only at the leadership and partition
/// epochs it was made from, keeps the leader, names replicas only and adds no fenced
/// broker; each change moves the partition epoch; a reassignment completes once its new
/// replica joins.
#[test]
fn isr_changes_from_the_leader() {
    let mut image = three_brokers();
    let placed = image.assign(&[vec![1, 2, 3]]).unwrap();
    create(&mut image, "t", placed);
    let alter = |isr: Vec<i32>, leader_epoch, partition_epoch| MetaCommand::AlterPartition {
        topic: "t".into(),
        partition: 0,
        leader: 1,
        leader_epoch,
        partition_epoch,
        isr,
        broker_epochs: BTreeMap::new(),
    };
    let p0 = |image: &MetaImage| image.topics["t"].partitions[0].clone();
    assert_eq!(image.apply(200, &alter(vec![1, 2], 0, 0)), MetaResponse::Done);
    assert_eq!((p0(&image).isr, p0(&image).partition_epoch), (vec![1, 2], 1));
    let code = |r: MetaResponse| match r {
        MetaResponse::Refused { reason, .. } => reason,
        other => panic!("not refused: {other:?}"),
    };
    assert_eq!(code(image.apply(201, &alter(vec![1], 0, 0))), Refusal::InvalidUpdateVersion, "stale");
    assert_eq!(code(image.apply(202, &alter(vec![1], 1, 1))), Refusal::FencedLeaderEpoch);
    assert_eq!(code(image.apply(203, &alter(vec![2, 3], 0, 1))), Refusal::InvalidRequest, "no leader");
    assert_eq!(code(image.apply(204, &alter(vec![1, 4], 0, 1))), Refusal::InvalidRequest, "not a replica");
    image.apply(205, &MetaCommand::FenceBroker { id: 3, epoch: 30 });
    assert_eq!(code(image.apply(206, &alter(vec![1, 2, 3], 0, 1))), Refusal::IneligibleReplica);
    assert_eq!(image.apply(207, &alter(vec![1], 0, 1)), MetaResponse::Done);
    // A reassignment to [1, 2] with 2 out of the ISR completes when 2 joins.
    let target = Some(vec![2, 1]);
    image.apply(208, &MetaCommand::Reassign { partitions: vec![("t".into(), 0, target)] });
    let p = p0(&image);
    assert_eq!(image.apply(209, &alter(vec![1, 2], p.leader_epoch, p.partition_epoch)), MetaResponse::Done);
    let p = p0(&image);
    assert_eq!((p.replicas, p.isr, p.adding.len() + p.removing.len()), (vec![2, 1], vec![1, 2], 0));
}

/// KIP-903: an ISR change naming a member at a broker epoch other than its registration's
/// now (it restarted since its fetches told the leader it caught up, perhaps with an empty
/// disk) is INELIGIBLE_REPLICA; at the registered epoch, or without one, it applies.
#[test]
fn isr_changes_check_broker_epochs() {
    let mut image = three_brokers();
    let placed = image.assign(&[vec![1, 2, 3]]).unwrap();
    create(&mut image, "t", placed);
    image.topics.get_mut("t").unwrap().partitions[0].isr = vec![1, 2];
    let alter = |epochs: &[(i32, i64)], partition_epoch| MetaCommand::AlterPartition {
        topic: "t".into(),
        partition: 0,
        leader: 1,
        leader_epoch: 0,
        partition_epoch,
        isr: vec![1, 2, 3],
        broker_epochs: epochs.iter().copied().collect(),
    };
    // Broker 3 registered at index 30, restarts: registered again at 400, unfenced.
    register(&mut image, 400, 3);
    let refused = image.apply(500, &alter(&[(3, 30)], 0));
    assert!(matches!(&refused, MetaResponse::Refused { reason: Refusal::IneligibleReplica, .. }), "{refused:?}");
    assert_eq!(image.topics["t"].partitions[0].isr, vec![1, 2], "unchanged");
    assert_eq!(image.apply(501, &alter(&[(2, 20), (3, 400)], 0)), MetaResponse::Done);
    assert_eq!(image.topics["t"].partitions[0].isr, vec![1, 2, 3]);
}

/// A placement proposed before a broker was fenced is settled as the image stands when it
/// applies: a fenced leader does not lead; a retried CreatePartitions is answered Done and
/// one made from a stale count refused; a topic-settings change made from a stale set is a
/// conflict; a reassignment that would leave no in-sync replica is refused.
#[test]
fn stale_proposals_are_settled_or_refused() {
    let mut image = three_brokers();
    let placed = image.assign(&[vec![3, 1]]).unwrap();
    assert_eq!((placed[0].leader, placed[0].isr.clone()), (3, vec![3, 1]));
    image.apply(50, &MetaCommand::FenceBroker { id: 3, epoch: 30 });
    create(&mut image, "t", placed.clone());
    // Broker 1, also a replica, is live: the new (empty) partition is led there.
    assert_eq!((image.topics["t"].partitions[0].leader, image.topics["t"].partitions[0].isr.clone()), (1, vec![1]));
    let grow = MetaCommand::CreatePartitions { name: "t".into(), from: 1, partitions: placed.clone() };
    assert_eq!(image.apply(60, &grow), MetaResponse::Done);
    assert_eq!(image.apply(61, &grow), MetaResponse::Done, "a retry");
    assert_eq!(image.topics["t"].partitions.len(), 2);
    let stale = MetaCommand::CreatePartitions { name: "t".into(), from: 1, partitions: vec![placed[0].clone(); 3] };
    assert!(matches!(image.apply(62, &stale), MetaResponse::Refused { reason: Refusal::InvalidPartitions, .. }));
    let set = |k: &str, based_on: BTreeMap<String, String>| MetaCommand::AlterTopicConfigs {
        name: "t".into(),
        configs: BTreeMap::from([(k.to_string(), "1".to_string())]),
        based_on,
    };
    assert_eq!(image.apply(63, &set("a", BTreeMap::new())), MetaResponse::Done);
    assert_eq!(image.apply(64, &set("b", BTreeMap::new())), MetaResponse::Conflict { version: 0 });
    assert_eq!(image.apply(65, &set("a", BTreeMap::new())), MetaResponse::Done, "a retry");
    let mut p = PartitionState::new(vec![1, 2], vec![3]);
    assert_eq!(p.reassign(Some(vec![1, 2]), &[1, 2]).unwrap_err().0, Refusal::InvalidReplicaAssignment);
    assert_eq!(p.replicas, vec![1, 2], "unchanged");
}

/// An observer's apply (a broker-only node following the quorum): committed entries in order
/// change the image and the applied index (which its publisher watches); entries already
/// applied are skipped, a gap is refused (it fetches again from where it stands); an installed
/// snapshot counts only when it is ahead.
#[test]
fn an_observer_applies_committed_entries_in_order() {
    use crate::cluster::types::{Entry, EntryPayload, LogId};
    let entry = |index: u64, command: Option<MetaCommand>| Entry {
        log_id: LogId::new(openraft::impls::leader_id_adv::LeaderId { term: 1, node_id: 1 }, index),
        payload: command.map_or(EntryPayload::Blank, EntryPayload::Normal),
    };
    futures_lite::future::block_on(async {
        let disk = crate::io::MemDisk::new();
        let dir = std::path::Path::new("/observer/__cluster_metadata-0");
        disk.create_dir_all(dir).await.unwrap();
        let sm = MetaStateMachine::open(disk, dir).await.unwrap();
        let mut watch = sm.watch_applied();
        let cluster = |id: &str| Some(MetaCommand::SetClusterId { id: id.into() });
        assert_eq!(sm.apply_committed(&[entry(0, None), entry(1, cluster("c1"))]).unwrap(), 2);
        assert_eq!(sm.cluster_id().as_deref(), Some("c1"));
        assert!(watch.has_changed().unwrap());
        assert_eq!(*watch.borrow_and_update(), Some(1));
        // A repeat of what it has, then what follows: only the new one applies.
        assert_eq!(sm.apply_committed(&[entry(1, cluster("c1")), entry(2, None)]).unwrap(), 1);
        assert_eq!(sm.last_applied().map(|l| l.index), Some(2));
        // A gap: refused, nothing applied.
        assert!(sm.apply_committed(&[entry(4, None)]).is_err());
        assert_eq!(sm.last_applied().map(|l| l.index), Some(2));
        // A snapshot behind what it applied is not installed.
        let meta = SnapshotMeta { last_log_id: Some(entry(1, None).log_id), last_membership: Default::default() };
        let bytes = serde_json::to_vec(&SnapshotFile { meta: meta.clone(), image: MetaImage::default() }).unwrap();
        assert!(!sm.install_fetched(&meta, bytes).await.unwrap());
        assert_eq!(sm.cluster_id().as_deref(), Some("c1"));
    });
}
