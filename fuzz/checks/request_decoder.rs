//! The Kafka request decoder on arbitrary frames: never a panic (STYLE house rule 3: bad
//! input from a client is a Kafka error code or a closed connection).
//!
//! Each input is decoded twice: as it is, and with its first 4 bytes (API key and version)
//! replaced by a supported pair picked from its first two bytes, so most inputs reach a body
//! decoder of every API and version instead of stopping at UNKNOWN_API or
//! UNSUPPORTED_VERSION. A frame that decodes is encoded again and must decode to the same
//! header and request (the codec is one description read both ways). The ConsumerProtocol
//! payloads inside JoinGroup and SyncGroup, which the broker reads for classic members of
//! consumer groups, are decoded and re-encoded the same way.

use bytes::Bytes;
use tidemark::groups::consumer::embedded::{self, Assignment, Subscription};
use tidemark::protocol::messages::Message;
use tidemark::protocol::{decode_request, Request, RequestHeader, SUPPORTED};

/// Every supported (API key, version), in table order.
fn pairs() -> Vec<(i16, i16)> {
    SUPPORTED.iter().flat_map(|&(api, lo, hi, _)| (lo..=hi).map(move |v| (api, v))).collect()
}

fn encode(h: &RequestHeader, req: Request) -> Option<Bytes> {
    let frame = req.encode(h);
    // A decoded value the encoder refuses is not a decoder bug; only what it writes is checked.
    frame.ok()
}

/// A ConsumerProtocol payload that decodes is encoded again in its version and decodes to the
/// same value.
fn embedded_round_trip<M: Message + Clone + PartialEq + std::fmt::Debug>(payload: &[u8]) {
    let Some(m) = embedded::decode::<M>(payload) else { return };
    let again = embedded::encode(m.clone(), embedded::version(payload));
    assert_eq!(embedded::decode::<M>(&again), Some(m), "a re-encoded ConsumerProtocol payload changed");
}

fn decode(frame: Vec<u8>) {
    let Ok((h, req)) = decode_request(Bytes::from(frame)) else { return };
    // The client payloads the broker reads for classic members of consumer groups (KIP-848
    // migration): their ConsumerProtocol subscriptions and assignments.
    match &req {
        Request::JoinGroup(j) => j.protocols.iter().for_each(|p| embedded_round_trip::<Subscription>(&p.metadata)),
        Request::SyncGroup(s) => s.assignments.iter().for_each(|a| embedded_round_trip::<Assignment>(&a.assignment)),
        _ => {}
    }
    let Some(again) = encode(&h, req.clone()) else { return };
    assert!(again.len() >= 4, "encode_request writes a size prefix");
    match decode_request(again.slice(4..)) {
        Ok((h2, req2)) => {
            assert_eq!(h2, h, "header changed by a re-encoding");
            // Compared by their Debug text: a float64 field (AlterClientQuotas' values) may be
            // NaN, which is never equal to itself though it re-encodes to the same bits.
            if req2 != req {
                assert_eq!(format!("{req2:?}"), format!("{req:?}"), "request changed by a re-encoding");
            }
        }
        Err(e) => panic!("a re-encoded request does not decode: {e:?}"),
    }
}

/// One input: what the fuzz target and the seed-replay test both run.
pub fn run(data: &[u8]) {
    decode(data.to_vec());
    if data.len() >= 2 {
        let pairs = pairs();
        let (api, version) = pairs[u16::from_be_bytes([data[0], data[1]]) as usize % pairs.len()];
        let mut frame = data.to_vec();
        frame.resize(frame.len().max(4), 0);
        frame[0..2].copy_from_slice(&api.to_be_bytes());
        frame[2..4].copy_from_slice(&version.to_be_bytes());
        if frame != data {
            decode(frame);
        }
    }
}
