//! Message schemas as data: [`schema!`](crate::schema) declares a Kafka struct (a request or
//! response body, or a struct inside one) once, field by field, each with its wire type and
//! the versions it exists in, as Kafka's message JSON does; the macro makes the Rust struct,
//! its `Default` and its [`Message`] codec (one function for both directions, over
//! [`Codec`]). A field outside its versions keeps its default when decoding and is not
//! written when encoding; every struct ends with its tagged fields (flexible versions).
//!
//! ```ignore
//! schema! {
//!     /// Produce (0), one partition's records.
//!     pub struct ProducePartition {
//!         pub index: i32 => int32,
//!         pub records: Option<Bytes> => nullable_bytes,
//!     }
//! }
//! schema! {
//!     pub struct ProduceRequest {
//!         pub transactional_id: Option<String> => nullable_string if 3..,
//!         pub acks: i16 => int16,
//!         pub timeout_ms: i32 => int32,
//!         pub topics: Vec<ProduceTopic> => array,
//!     }
//! }
//! ```
//!
//! A field's wire type names a function of [`kind`]; `= value` after the type gives a default
//! other than `Default::default()`; `tag N` makes it a tagged field (flexible versions only:
//! written among the struct's tagged fields, under tag `N`, when it differs from its default;
//! read from them when present, its default otherwise); `if RANGE` (`3..`, `8..=10`, `..=4`)
//! the versions it exists in. Messages whose wire form is not a plain sequence of fields (tagged fields with meaning, a
//! field whose type changes with the version, a field that exists by API rather than by
//! version, an absent field read as something other than its default) keep a hand-written
//! [`Message`] impl beside the schemas, with a comment saying why; it reads its nested
//! schema structs through [`kind`].

use super::codec::{Codec, ProtoResult};

/// A message body of some API.
pub trait Message: Default + std::fmt::Debug + Clone + PartialEq {
    /// Read or write the body at `version` (the codec's `flexible` flag is already set).
    fn codec<C: Codec>(&mut self, c: &mut C, version: i16) -> ProtoResult<()>;
}

/// Declare a Kafka struct: see the [module docs](crate::protocol::schema).
#[macro_export]
macro_rules! schema {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty $(= $default:expr)? => $kind:ident $(tag $tag:literal)? $(if $versions:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
            /// Tagged fields this broker does not interpret (kept, so the struct round-trips).
            pub tags: $crate::protocol::codec::TaggedFields,
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $( $field: $crate::schema!(@default $($default)?), )*
                    tags: Default::default(),
                }
            }
        }

        impl $crate::protocol::messages::Message for $name {
            #[allow(unused_mut)]
            fn codec<C: $crate::protocol::codec::Codec>(
                &mut self,
                c: &mut C,
                v: i16,
            ) -> $crate::protocol::codec::ProtoResult<()> {
                // The tagged fields with meaning, to write (their tag and encoding).
                let mut tagged: Vec<(u32, bytes::Bytes)> = Vec::new();
                $(
                    if $crate::schema!(@in v $(, $versions)?) {
                        $crate::schema!(@field [$($tag)?] c v tagged self.$field, $kind, $ty, [$($default)?]);
                    }
                )*
                if tagged.is_empty() && !c.reading() {
                    return c.tagged(&mut self.tags);
                }
                if !c.reading() {
                    let mut all = $crate::protocol::codec::TaggedFields(tagged);
                    all.0.extend(self.tags.0.iter().cloned());
                    all.0.sort_by_key(|t| t.0);
                    return c.tagged(&mut all);
                }
                c.tagged(&mut self.tags)?;
                if self.tags.0.is_empty() {
                    return Ok(());
                }
                for (t, raw) in std::mem::take(&mut self.tags.0) {
                    let mut known = false;
                    $(
                        $crate::schema!(@untag [$($tag)?] t raw known v self.$field, $kind $(, $versions)?);
                    )*
                    if !known {
                        self.tags.0.push((t, raw));
                    }
                }
                Ok(())
            }
        }
    };
    (@default) => { Default::default() };
    (@default $default:expr) => { $default };
    (@in $v:ident) => { true };
    (@in $v:ident, $versions:expr) => { ($versions).contains(&$v) };
    // A plain field: read or written in place.
    (@field [] $c:ident $v:ident $tagged:ident $f:expr, $kind:ident, $ty:ty, [$($default:expr)?]) => {
        $crate::protocol::schema::kind::$kind($c, &mut $f, $v)?
    };
    // A tagged field: when writing a flexible version and it is not its default, encoded
    // apart to go among the tagged fields (read after them, in `@untag`).
    (@field [$tag:literal] $c:ident $v:ident $tagged:ident $f:expr, $kind:ident, $ty:ty, [$($default:expr)?]) => {
        if !$c.reading() && $c.flexible() && {
            let default: $ty = $crate::schema!(@default $($default)?);
            $f != default
        } {
            let mut w = $crate::protocol::codec::Writer::new(true);
            $crate::protocol::schema::kind::$kind(&mut w, &mut $f, $v)?;
            $tagged.push(($tag, w.buf.freeze()));
        }
    };
    (@untag [] $t:ident $raw:ident $known:ident $v:ident $f:expr, $kind:ident $(, $versions:expr)?) => {};
    (@untag [$tag:literal] $t:ident $raw:ident $known:ident $v:ident $f:expr, $kind:ident $(, $versions:expr)?) => {
        if !$known && $t == $tag && $crate::schema!(@in $v $(, $versions)?) {
            let mut r = $crate::protocol::codec::Reader::new($raw.clone(), true);
            $crate::protocol::schema::kind::$kind(&mut r, &mut $f, $v)?;
            $known = true;
        }
    };
}

/// The wire types a schema field can have: each reads or writes one field at version `v`.
pub mod kind {
    use super::*;
    use bytes::Bytes;

    pub fn int8<C: Codec>(c: &mut C, f: &mut i8, _: i16) -> ProtoResult<()> {
        c.i8(f)
    }

    pub fn int16<C: Codec>(c: &mut C, f: &mut i16, _: i16) -> ProtoResult<()> {
        c.i16(f)
    }

    pub fn int32<C: Codec>(c: &mut C, f: &mut i32, _: i16) -> ProtoResult<()> {
        c.i32(f)
    }

    /// A Kafka error code (an int16 on the wire).
    pub fn error_code<C: Codec>(c: &mut C, f: &mut crate::protocol::errors::ErrorCode, _: i16) -> ProtoResult<()> {
        c.i16(&mut f.0)
    }

    /// Kafka's float64: the IEEE 754 bits, big-endian.
    pub fn float64<C: Codec>(c: &mut C, f: &mut f64, _: i16) -> ProtoResult<()> {
        let mut bits = f.to_bits() as i64;
        c.i64(&mut bits)?;
        *f = f64::from_bits(bits as u64);
        Ok(())
    }

    /// Kafka's uint16 (a port): two bytes, big-endian, unsigned.
    pub fn uint16<C: Codec>(c: &mut C, f: &mut u16, _: i16) -> ProtoResult<()> {
        let mut v = *f as i16;
        c.i16(&mut v)?;
        *f = v as u16;
        Ok(())
    }

    pub fn int64<C: Codec>(c: &mut C, f: &mut i64, _: i16) -> ProtoResult<()> {
        c.i64(f)
    }

    pub fn boolean<C: Codec>(c: &mut C, f: &mut bool, _: i16) -> ProtoResult<()> {
        c.bool(f)
    }

    pub fn uuid<C: Codec>(c: &mut C, f: &mut [u8; 16], _: i16) -> ProtoResult<()> {
        c.uuid(f)
    }

    pub fn string<C: Codec>(c: &mut C, f: &mut String, _: i16) -> ProtoResult<()> {
        c.string(f)
    }

    pub fn nullable_string<C: Codec>(c: &mut C, f: &mut Option<String>, _: i16) -> ProtoResult<()> {
        c.nullable_string(f)
    }

    pub fn bytes<C: Codec>(c: &mut C, f: &mut Bytes, _: i16) -> ProtoResult<()> {
        c.bytes(f)
    }

    /// Also record sets: zero-copy slices of the frame.
    pub fn nullable_bytes<C: Codec>(c: &mut C, f: &mut Option<Bytes>, _: i16) -> ProtoResult<()> {
        c.nullable_bytes(f)
    }

    /// One struct with its own schema (in Kafka's JSON, a field whose type is a struct).
    pub fn structure<C: Codec, T: Message>(c: &mut C, f: &mut T, v: i16) -> ProtoResult<()> {
        f.codec(c, v)
    }

    /// A struct that may be null (Kafka's `nullableVersions` on a struct field): an int8, -1
    /// for null or 1 then the struct.
    pub fn nullable_structure<C: Codec, T: Message>(c: &mut C, f: &mut Option<T>, v: i16) -> ProtoResult<()> {
        let mut present: i8 = if f.is_some() { 1 } else { -1 };
        c.i8(&mut present)?;
        if present < 0 {
            *f = None;
            return Ok(());
        }
        f.get_or_insert_with(T::default).codec(c, v)
    }

    /// An array of structs, each with its own schema.
    pub fn array<C: Codec, T: Message>(c: &mut C, f: &mut Vec<T>, v: i16) -> ProtoResult<()> {
        super::super::codec::array(c, f, |c, t| t.codec(c, v))
    }

    /// An array of structs that may be null.
    pub fn nullable_array<C: Codec, T: Message>(c: &mut C, f: &mut Option<Vec<T>>, v: i16) -> ProtoResult<()> {
        super::super::codec::nullable_array(c, f, |c, t| t.codec(c, v))
    }

    pub fn int8_array<C: Codec>(c: &mut C, f: &mut Vec<i8>, _: i16) -> ProtoResult<()> {
        super::super::codec::array(c, f, |c, x| c.i8(x))
    }

    pub fn int32_array<C: Codec>(c: &mut C, f: &mut Vec<i32>, _: i16) -> ProtoResult<()> {
        super::super::codec::array(c, f, |c, x| c.i32(x))
    }

    pub fn nullable_int32_array<C: Codec>(c: &mut C, f: &mut Option<Vec<i32>>, _: i16) -> ProtoResult<()> {
        super::super::codec::nullable_array(c, f, |c, x| c.i32(x))
    }

    pub fn int64_array<C: Codec>(c: &mut C, f: &mut Vec<i64>, _: i16) -> ProtoResult<()> {
        super::super::codec::array(c, f, |c, x| c.i64(x))
    }

    pub fn string_array<C: Codec>(c: &mut C, f: &mut Vec<String>, _: i16) -> ProtoResult<()> {
        super::super::codec::array(c, f, |c, x| c.string(x))
    }

    pub fn nullable_string_array<C: Codec>(c: &mut C, f: &mut Option<Vec<String>>, _: i16) -> ProtoResult<()> {
        super::super::codec::nullable_array(c, f, |c, x| c.string(x))
    }
}

#[cfg(test)]
mod tests {
    use crate::protocol::codec::{Reader, Writer};
    use crate::protocol::messages::Message;

    crate::schema! {
        /// A struct of the tests' own.
        pub struct Inner {
            pub id: i32 => int32,
            pub name: Option<String> => nullable_string if 2..,
        }
    }

    crate::schema! {
        pub struct Outer {
            pub epoch: i32 = -1 => int32 if 1..=3,
            pub items: Vec<Inner> => array,
            pub ids: Vec<i32> => int32_array if 4..,
        }
    }

    crate::schema! {
        /// Tagged fields with meaning beside plain ones (as ProduceResponse v10's CurrentLeader).
        pub struct WithTags {
            pub id: i32 => int32,
            pub leader: Inner => structure tag 0 if 2..,
            pub epoch: i64 = -1 => int64 tag 3,
        }
    }

    /// A tagged field is written only in flexible versions and only when not its default,
    /// sorted by tag among the uninterpreted tagged fields; it is read back into its field,
    /// while unknown tags stay in `tags`; outside its versions it is neither written nor read.
    #[test]
    fn tagged_fields_with_meaning_round_trip() {
        let mut m = WithTags { id: 9, ..Default::default() };
        let mut w = Writer::new(true);
        m.codec(&mut w, 2).unwrap();
        assert_eq!(w.buf.to_vec(), [0, 0, 0, 9, 0], "all defaults: no tagged field");
        m.leader = Inner { id: 4, ..Default::default() };
        m.epoch = 7;
        m.tags.0.push((1, bytes::Bytes::from_static(&[0xAA])));
        let mut w = Writer::new(true);
        m.codec(&mut w, 2).unwrap();
        let bytes = w.buf.to_vec();
        // id, then 3 tagged fields: tag 0 (Inner: id, null name, no tags), tag 1, tag 3.
        assert_eq!(bytes[..6], [0, 0, 0, 9, 3, 0]);
        let mut back = WithTags::default();
        back.codec(&mut Reader::new(bytes.clone().into(), true), 2).unwrap();
        assert_eq!(back, m);
        // v1: `leader` does not exist: its tag stays uninterpreted; `epoch` is read.
        let mut v1 = WithTags::default();
        v1.codec(&mut Reader::new(bytes.into(), true), 1).unwrap();
        assert_eq!(v1.leader, Inner::default());
        assert_eq!(v1.epoch, 7);
        assert_eq!(v1.tags.0.iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1]);
        // Classic (not flexible) versions have no tagged fields at all.
        let mut w = Writer::new(false);
        m.codec(&mut w, 2).unwrap();
        assert_eq!(w.buf.to_vec(), [0, 0, 0, 9]);
    }

    /// Tagged fields in any order (Kafka reads them so) decode in ascending order, so a frame
    /// re-encoded decodes to the same message, meaningful tags among them or not (a request
    /// the fuzz target found: Fetch v17 with unordered unknown tags beside ClusterId).
    #[test]
    fn unordered_tags_decode_in_order_and_round_trip() {
        let raw = |t: u32| (t, bytes::Bytes::from_static(&[0x07]));
        // Written as given (no meaningful field set): unknown tags out of order, and tag 3 (the
        // epoch) among them, which the decoder takes as the field.
        let mut m = WithTags { id: 1, ..Default::default() };
        let epoch = (3, bytes::Bytes::copy_from_slice(&7i64.to_be_bytes()));
        m.tags.0 = vec![raw(9), raw(2), epoch, raw(9), raw(1)];
        let mut w = Writer::new(true);
        m.codec(&mut w, 2).unwrap();
        let first = w.buf.to_vec();
        let mut once = WithTags::default();
        once.codec(&mut Reader::new(first.into(), true), 2).unwrap();
        assert_eq!(once.epoch, 7);
        assert_eq!(once.tags.0.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 2, 9, 9]);
        let mut w = Writer::new(true);
        once.clone().codec(&mut w, 2).unwrap();
        let mut twice = WithTags::default();
        twice.codec(&mut Reader::new(w.buf.freeze(), true), 2).unwrap();
        assert_eq!(twice, once);
    }

    fn encode(m: &mut Outer, v: i16, flexible: bool) -> Vec<u8> {
        let mut w = Writer::new(flexible);
        m.codec(&mut w, v).unwrap();
        w.buf.to_vec()
    }

    /// A schema's fields exist in their versions only (absent: default when read, not
    /// written), defaults come from the schema, nested arrays use their own schemas, and
    /// every version round-trips (classic and flexible encodings).
    #[test]
    fn schema_fields_follow_their_versions() {
        assert_eq!(Outer::default().epoch, -1);
        let mut m = Outer {
            epoch: 7,
            items: vec![Inner { id: 1, name: Some("a".into()), ..Default::default() }],
            ids: vec![5],
            ..Default::default()
        };
        // v0: only the array of (id) structs.
        assert_eq!(encode(&mut m, 0, false), [0, 0, 0, 1, 0, 0, 0, 1]);
        // v2: the epoch, then (id, name).
        assert_eq!(encode(&mut m, 2, false), [0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, b'a']);
        for v in 0..6 {
            for flexible in [false, true] {
                let bytes = encode(&mut m, v, flexible);
                let mut back = Outer::default();
                back.codec(&mut Reader::new(bytes.into(), flexible), v).unwrap();
                assert_eq!(back.epoch, if (1..=3).contains(&v) { 7 } else { -1 }, "v{v}");
                assert_eq!(back.items[0].name.is_some(), v >= 2, "v{v}");
                assert_eq!(back.ids.len(), if v >= 4 { 1 } else { 0 }, "v{v}");
            }
        }
    }
}
