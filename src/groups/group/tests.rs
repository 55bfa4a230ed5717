//! The group state machine's tests: joins, syncs, rebalances, sessions, static members.
use super::*;

const S: i32 = 10_000; // session timeout
const R: i32 = 30_000; // rebalance timeout

fn limits() -> GroupLimits {
    GroupLimits { initial_rebalance_delay_ms: 0, ..GroupLimits::default() }
}

fn join(member: &str, instance: Option<&str>, protocols: &[&str]) -> Join {
    Join {
        member_id: member.to_string(),
        instance_id: instance.map(str::to_string),
        client_id: "c".to_string(),
        client_host: "/127.0.0.1".to_string(),
        session_timeout_ms: S,
        rebalance_timeout_ms: R,
        protocol_type: "consumer".to_string(),
        protocols: protocols.iter().map(|p| (p.to_string(), Bytes::from(format!("meta-{p}")))).collect(),
        require_known_member_id: true,
        skip_assignment_supported: true,
    }
}

fn ready<T>(rx: &mut Pending<T>) -> Option<T> {
    rx.try_recv().expect("not cancelled")
}

/// KIP-394: a member without an id gets one with MEMBER_ID_REQUIRED, then joins with it.
fn new_member(g: &mut Group, now: i64, protocols: &[&str]) -> (String, Pending<Joined>) {
    let first = ready(&mut g.join(join("", None, protocols), now)).expect("answered at once");
    assert_eq!(first.error, Some(GroupError::MemberIdRequired));
    assert!(first.member_id.starts_with("c-"));
    let rx = g.join(join(&first.member_id, None, protocols), now);
    (first.member_id, rx)
}

fn sync(g: &mut Group, member: &str, generation: i32, assignments: &[(&str, &str)], now: i64) -> Pending<Synced> {
    let s = Sync {
        generation,
        member_id: member.to_string(),
        assignments: assignments.iter().map(|(m, a)| (m.to_string(), Bytes::from(a.to_string()))).collect(),
        ..Default::default()
    };
    g.sync(s, now)
}

/// Two members: the first becomes leader, gets everyone's metadata, assigns; followers
/// wait for the leader's SyncGroup; the group is Stable with one generation.
#[test]
fn two_members_join_sync_and_rebalance_on_leave() {
    let mut g = Group::new("g", limits(), 1);
    let (a, mut ja) = new_member(&mut g, 0, &["range", "roundrobin"]);
    let ja = ready(&mut ja).expect("alone: the join completes at once");
    assert_eq!((ja.error, ja.generation, ja.leader.as_str()), (None, 1, a.as_str()));
    assert_eq!(ja.protocol_name.as_deref(), Some("range"));
    let mut sa = sync(&mut g, &a, 1, &[(&a, "all")], 0);
    assert_eq!(ready(&mut sa).unwrap().assignment, Bytes::from("all"));
    assert_eq!(g.state(), GroupState::Stable);
    // A second member: a rebalance; the first learns it from its heartbeat.
    let (b, mut jb) = new_member(&mut g, 100, &["roundrobin", "range"]);
    assert!(ready(&mut jb).is_none(), "waits for the others to rejoin");
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert_eq!(g.heartbeat(&a, None, 1, 200), Err(GroupError::RebalanceInProgress));
    let mut ja = g.join(join(&a, None, &["range", "roundrobin"]), 300);
    let (ja, jb) = (ready(&mut ja).unwrap(), ready(&mut jb).unwrap());
    assert_eq!((ja.generation, jb.generation), (2, 2));
    assert_eq!(ja.leader, a, "the leader stays");
    assert_eq!(ja.members.len(), 2, "the leader sees every member");
    assert!(jb.members.is_empty(), "a follower sees none");
    // Votes: a prefers range, b roundrobin: a tie, broken by name.
    assert_eq!(ja.protocol_name.as_deref(), Some("range"));
    let mut sb = sync(&mut g, &b, 2, &[], 300);
    assert!(ready(&mut sb).is_none(), "the follower waits for the leader");
    let mut sa = sync(&mut g, &a, 2, &[(&a, "p0"), (&b, "p1")], 310);
    assert_eq!(ready(&mut sb).unwrap().assignment, Bytes::from("p1"));
    assert_eq!(ready(&mut sa).unwrap().assignment, Bytes::from("p0"));
    assert_eq!(g.heartbeat(&b, None, 2, 400), Ok(()));
    assert_eq!(g.heartbeat(&b, None, 1, 400), Err(GroupError::IllegalGeneration));
    // b leaves: a rebalance with a alone, completed when a rejoins.
    assert_eq!(g.leave(&b, None, 500), Ok(()));
    assert_eq!(g.heartbeat(&a, None, 2, 600), Err(GroupError::RebalanceInProgress));
    let mut ja = g.join(join(&a, None, &["range"]), 700);
    assert_eq!(ready(&mut ja).unwrap().generation, 3);
    assert_eq!(g.leave(&a, None, 800), Ok(()));
    assert_eq!(g.state(), GroupState::Empty);
    assert_eq!(g.leave("nobody", None, 800), Err(GroupError::UnknownMemberId));
}

/// A member that stops heartbeating is removed after its session timeout and the others
/// rebalance; a member that does not rejoin within the rebalance timeout is dropped.
#[test]
fn sessions_and_rebalance_timeouts_expire() {
    let mut g = Group::new("g", limits(), 2);
    let (a, mut ja) = new_member(&mut g, 0, &["range"]);
    ready(&mut ja).unwrap();
    ready(&mut sync(&mut g, &a, 1, &[], 0)).unwrap();
    let (b, mut jb) = new_member(&mut g, 0, &["range"]);
    let mut ja = g.join(join(&a, None, &["range"]), 0);
    ready(&mut ja).unwrap();
    ready(&mut jb).unwrap();
    ready(&mut sync(&mut g, &a, 2, &[], 0)).unwrap();
    ready(&mut sync(&mut g, &b, 2, &[], 0)).unwrap();
    // a heartbeats, b does not.
    assert_eq!(g.heartbeat(&a, None, 2, S as i64 - 1), Ok(()));
    g.tick(S as i64 - 1);
    assert_eq!(g.state(), GroupState::Stable);
    g.tick(S as i64);
    assert_eq!(g.state(), GroupState::PreparingRebalance, "b expired");
    assert_eq!(g.heartbeat(&b, None, 2, S as i64), Err(GroupError::UnknownMemberId));
    // a keeps heartbeating but never rejoins: at the rebalance deadline it is dropped and
    // the group is empty.
    for t in (S as i64..S as i64 + R as i64).step_by(5_000) {
        assert_eq!(g.heartbeat(&a, None, 2, t), Err(GroupError::RebalanceInProgress));
        g.tick(t);
    }
    g.tick(S as i64 + R as i64 - 1);
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    g.tick(S as i64 + R as i64);
    assert_eq!(g.state(), GroupState::Empty);
    assert!(g.is_empty());
}

/// group.initial.rebalance.delay.ms: the first rebalance of an empty group waits for more
/// members, each join extending the wait.
#[test]
fn the_initial_rebalance_waits_for_more_members() {
    let mut g = Group::new("g", GroupLimits { initial_rebalance_delay_ms: 3000, ..GroupLimits::default() }, 3);
    let (_, mut ja) = new_member(&mut g, 0, &["range"]);
    g.tick(2000);
    assert!(ready(&mut ja).is_none());
    let (_, mut jb) = new_member(&mut g, 2000, &["range"]);
    g.tick(4999);
    assert!(ready(&mut ja).is_none(), "extended by the second join");
    g.tick(5000);
    assert_eq!(ready(&mut ja).unwrap().generation, 1);
    assert_eq!(ready(&mut jb).unwrap().generation, 1);
}

/// KIP-345: a static member restarting (no member id, same instance id) gets a new id and
/// its old assignment at once, without a rebalance; the old id is fenced.
#[test]
fn static_members_rejoin_without_a_rebalance() {
    let mut g = Group::new("g", limits(), 4);
    let mut j1 = g.join(join("", Some("i1"), &["range"]), 0);
    let j1 = ready(&mut j1).expect("static members need no MEMBER_ID_REQUIRED");
    assert_eq!(j1.error, None);
    let old = j1.member_id.clone();
    ready(&mut sync(&mut g, &old, 1, &[(&old, "mine")], 0)).unwrap();
    let mut again = g.join(join("", Some("i1"), &["range"]), 100);
    let again = ready(&mut again).unwrap();
    assert_eq!((again.error, again.generation), (None, 1), "no new generation");
    assert_ne!(again.member_id, old);
    assert!(again.skip_assignment, "the leader keeps its assignment");
    assert_eq!(g.state(), GroupState::Stable);
    assert_eq!(ready(&mut sync(&mut g, &again.member_id, 1, &[], 100)).unwrap().assignment, Bytes::from("mine"));
    assert_eq!(g.heartbeat(&old, Some("i1"), 1, 100), Err(GroupError::FencedInstanceId));
    let mut fenced = g.join(join(&old, Some("i1"), &["range"]), 100);
    assert_eq!(ready(&mut fenced).unwrap().error, Some(GroupError::FencedInstanceId));
    // Leaving by instance id.
    assert_eq!(g.leave("", Some("i1"), 200), Ok(()));
    assert_eq!(g.state(), GroupState::Empty);
}

/// Bad joins: session timeout out of bounds, no common protocol, unknown member id.
#[test]
fn bad_joins_are_refused() {
    let mut g = Group::new("g", limits(), 5);
    let mut j = join("", None, &["range"]);
    j.session_timeout_ms = 10;
    assert_eq!(ready(&mut g.join(j, 0)).unwrap().error, Some(GroupError::InvalidSessionTimeout));
    let (_, mut ja) = new_member(&mut g, 0, &["range"]);
    ready(&mut ja).unwrap();
    let (id, _) = {
        let first = ready(&mut g.join(join("", None, &["sticky"]), 0)).unwrap();
        (first.member_id, ())
    };
    assert_eq!(
        ready(&mut g.join(join(&id, None, &["sticky"]), 0)).unwrap().error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    assert_eq!(
        ready(&mut g.join(join("made-up", None, &["range"]), 0)).unwrap().error,
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(
        g.check_commit("", None, -1, 0),
        Some(GroupError::UnknownMemberId),
        "members exist: no standalone commit"
    );
}

/// A member keeps its instance id: a later JoinGroup under the same member id with another
/// instance id, or none, is refused; after it leaves, its instance id can join again (the
/// mapping never points at a removed member).
#[test]
fn a_members_instance_id_cannot_change() {
    let mut g = Group::new("g", limits(), 6);
    let m = ready(&mut g.join(join("", Some("a"), &["range"]), 0)).unwrap().member_id;
    let mut again = join(&m, None, &["range"]);
    again.require_known_member_id = false;
    assert_eq!(ready(&mut g.join(again, 10)).unwrap().error, Some(GroupError::UnknownMemberId));
    assert_eq!(
        ready(&mut g.join(join(&m, Some("b"), &["range"]), 10)).unwrap().error,
        Some(GroupError::FencedInstanceId)
    );
    assert_eq!(g.leave(&m, None, 20), Ok(()));
    let back = ready(&mut g.join(join("", Some("a"), &["range"]), 30)).unwrap();
    assert_eq!(back.error, None);
}

/// KIP-345 details: a static member that misses a rebalance stays a member (until its
/// session expires); a static leader rejoining a stable group before JoinGroup v9 is
/// answered as a follower; new metadata with the same protocol names is no rebalance.
#[test]
fn static_members_keep_their_place() {
    let mut g = Group::new("g", limits(), 7);
    // Its session outlasts the rebalance timeout (a restart takes a while).
    let long = Join { session_timeout_ms: 3 * R, ..join("", Some("s1"), &["range"]) };
    let s1 = ready(&mut g.join(long, 0)).unwrap();
    ready(&mut sync(&mut g, &s1.member_id, 1, &[(&s1.member_id, "x")], 0)).unwrap();
    let (d, _jd) = new_member(&mut g, 10, &["range"]);
    // s1 (restarting, say) does not rejoin: at the deadline it stays, d is alone to answer.
    g.tick(10 + R as i64);
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    assert_eq!(g.describe().members.len(), 2, "the static member kept its place");
    let _ = d;
    // A stable group again, then s1 restarts with other metadata for the same protocol.
    let mut g = Group::new("g", limits(), 8);
    let s1 = ready(&mut g.join(join("", Some("s1"), &["range"]), 0)).unwrap();
    ready(&mut sync(&mut g, &s1.member_id, 1, &[], 0)).unwrap();
    let mut restart = join("", Some("s1"), &["range"]);
    restart.protocols = vec![("range".to_string(), Bytes::from("owned-nothing"))];
    restart.skip_assignment_supported = false;
    let back = ready(&mut g.join(restart, 100)).unwrap();
    assert_eq!((back.error, back.generation), (None, 1), "no rebalance");
    assert_eq!(back.leader, s1.member_id, "answered as a follower: the old leader id");
    assert!(back.members.is_empty() && !back.skip_assignment);
    assert_eq!(g.state(), GroupState::Stable);
}

/// A member rejoining unchanged while the group completes (it missed its answer) gets the
/// current generation at once; members that never send SyncGroup are removed after the
/// rebalance timeout, and the rest rebalance.
#[test]
fn completing_rebalance_rejoin_and_sync_timeout() {
    let mut g = Group::new("g", limits(), 9);
    let (a, mut ja) = new_member(&mut g, 0, &["range"]);
    assert_eq!(ready(&mut ja).unwrap().generation, 1);
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    let mut again = g.join(join(&a, None, &["range"]), 5);
    let again = ready(&mut again).expect("answered at once");
    assert_eq!((again.generation, again.leader.as_str()), (1, a.as_str()));
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    // It heartbeats but never syncs: after the rebalance timeout it is removed.
    for t in (1000..R as i64).step_by(5000) {
        assert_eq!(g.heartbeat(&a, None, 1, t), Ok(()));
        g.tick(t);
    }
    g.tick(R as i64 - 1);
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    g.tick(R as i64);
    assert_eq!(g.state(), GroupState::Empty);
}

/// More protocols than a client ever sends are refused (choosing one stays cheap).
#[test]
fn too_many_protocols_are_refused() {
    let mut g = Group::new("g", limits(), 10);
    let names: Vec<String> = (0..=MAX_PROTOCOLS).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        ready(&mut g.join(join("", None, &refs), 0)).unwrap().error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    let long_client = Join { client_id: "c".repeat(40_000), ..join("", None, &["range"]) };
    let id = ready(&mut g.join(long_client, 0)).unwrap().member_id;
    assert!(id.len() < 200, "member ids stay short");
}
