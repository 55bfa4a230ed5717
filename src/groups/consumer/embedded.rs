//! Kafka's embedded consumer protocol (`ConsumerProtocol`): what a classic consumer puts in its
//! JoinGroup protocol metadata (its subscription) and receives in its SyncGroup assignment.
//! The classic coordinator never reads them; a consumer group reads them for its classic
//! members (KIP-848 online migration): their subscribed topics, rack and owned partitions in,
//! their assigned partitions out.
//!
//! Both are an int16 version then a non-flexible struct (versions 0-3). A newer version is read
//! as version 3, as Kafka's clients do (new versions only add fields at the end).

use crate::protocol::codec::{Codec, Reader, Writer};
use crate::protocol::messages::Message;
use bytes::Bytes;

/// The protocol type of classic groups whose members are consumers.
pub const PROTOCOL_TYPE: &str = "consumer";
const MAX_VERSION: i16 = 3;

crate::schema! {
    pub struct TopicPartition {
        pub topic: String => string,
        pub partitions: Vec<i32> => int32_array,
    }
}

crate::schema! {
    /// A classic consumer's subscription (JoinGroup protocol metadata).
    pub struct Subscription {
        pub topics: Vec<String> => string_array,
        pub user_data: Option<Bytes> => nullable_bytes,
        /// v1+: the partitions it owns (cooperative clients; eager ones revoked everything).
        pub owned_partitions: Vec<TopicPartition> => array if 1..,
        pub generation_id: i32 = -1 => int32 if 2..,
        pub rack_id: Option<String> => nullable_string if 3..,
    }
}

crate::schema! {
    /// A classic consumer's assignment (SyncGroup).
    pub struct Assignment {
        pub assigned_partitions: Vec<TopicPartition> => array,
        pub user_data: Option<Bytes> => nullable_bytes,
    }
}

/// The version a payload was written in (0 when it is too short to say).
pub fn version(payload: &[u8]) -> i16 {
    match payload {
        [a, b, ..] => i16::from_be_bytes([*a, *b]).max(0),
        _ => 0,
    }
}

/// Decode a subscription or an assignment; `None` if it is malformed.
pub fn decode<M: Message>(payload: &[u8]) -> Option<M> {
    let mut r = Reader::new(Bytes::copy_from_slice(payload), false);
    let mut v = 0i16;
    r.i16(&mut v).ok()?;
    if v < 0 {
        return None;
    }
    let mut m = M::default();
    m.codec(&mut r, v.min(MAX_VERSION)).ok()?;
    Some(m)
}

/// Encode a subscription or an assignment in `version` (as the member's own payloads are).
pub fn encode<M: Message>(mut m: M, version: i16) -> Bytes {
    let mut w = Writer::new(false);
    let mut v = version.clamp(0, MAX_VERSION);
    let _ = w.i16(&mut v);
    let _ = m.codec(&mut w, v);
    w.buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v3 subscription as Kafka's Java client writes it (topics, no user data, owned
    /// partitions, generation, rack) decodes field by field, and encodes back to the same bytes.
    #[test]
    fn subscription_v3_round_trip() {
        let mut b = vec![0, 3]; // version
        b.extend([0, 0, 0, 1, 0, 1, b't']); // topics ["t"]
        b.extend([0xff, 0xff, 0xff, 0xff]); // user data null
        b.extend([0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3]); // owned t:[0,3]
        b.extend([0, 0, 0, 7]); // generation 7
        b.extend([0, 2, b'r', b'1']); // rack "r1"
        let s: Subscription = decode(&b).expect("decodes");
        assert_eq!(s.topics, vec!["t"]);
        assert_eq!(
            s.owned_partitions,
            vec![TopicPartition { topic: "t".into(), partitions: vec![0, 3], ..Default::default() }]
        );
        assert_eq!((s.generation_id, s.rack_id.as_deref()), (7, Some("r1")));
        assert_eq!(encode(s, 3).as_ref(), &b[..]);
    }

    /// Versions the broker does not know are read as version 3 (their extra fields ignored);
    /// a v0 subscription has no owned partitions; garbage is `None`.
    #[test]
    fn versions_and_garbage() {
        let mut v0 = vec![0, 0, 0, 0, 0, 1, 0, 1, b'x', 0, 0, 0, 0];
        let s: Subscription = decode(&v0).expect("v0");
        assert_eq!((s.topics, s.owned_partitions.len(), s.generation_id), (vec!["x".to_string()], 0, -1));
        v0[1] = 9; // "version 9": read as 3, runs out of bytes
        assert!(decode::<Subscription>(&v0).is_none());
        assert!(decode::<Assignment>(&[0xff, 0xff]).is_none());
        assert_eq!(version(&[0, 2, 1]), 2);
    }

    /// An assignment encoded in a member's version decodes to the same partitions.
    #[test]
    fn assignment_round_trip() {
        let a = Assignment {
            assigned_partitions: vec![TopicPartition {
                topic: "a".into(),
                partitions: vec![1, 2],
                ..Default::default()
            }],
            ..Default::default()
        };
        for v in 0..=3 {
            let back: Assignment = decode(&encode(a.clone(), v)).expect("decodes");
            assert_eq!(back, a);
            assert_eq!(version(&encode(a.clone(), v)), v);
        }
    }
}
