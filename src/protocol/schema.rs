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
//! other than `Default::default()`; `if RANGE` (`3..`, `8..=10`, `..=4`) the versions it exists
//! in. Messages whose wire form is not a plain sequence of fields (tagged fields with meaning, a
//! field whose type changes with the version, a field that exists by API rather than by
//! version, an absent field read as something other than its default) keep a hand-written
//! [`Message`] impl beside the schemas, with a comment saying why; it reads its nested
//! schema structs through [`kind`].

use super::codec::{Codec, ProtoResult};
use super::messages::Message;

/// Declare a Kafka struct: see the [module docs](crate::protocol::schema).
#[macro_export]
macro_rules! schema {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty $(= $default:expr)? => $kind:ident $(if $versions:expr)?
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
            fn codec<C: $crate::protocol::codec::Codec>(
                &mut self,
                c: &mut C,
                v: i16,
            ) -> $crate::protocol::codec::ProtoResult<()> {
                $(
                    if $crate::schema!(@in v $(, $versions)?) {
                        $crate::protocol::schema::kind::$kind(c, &mut self.$field, v)?;
                    }
                )*
                c.tagged(&mut self.tags)
            }
        }
    };
    (@default) => { Default::default() };
    (@default $default:expr) => { $default };
    (@in $v:ident) => { true };
    (@in $v:ident, $versions:expr) => { ($versions).contains(&$v) };
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

    /// An array of structs, each with its own schema.
    pub fn array<C: Codec, T: Message>(c: &mut C, f: &mut Vec<T>, v: i16) -> ProtoResult<()> {
        super::super::codec::array(c, f, |c, t| t.codec(c, v))
    }

    /// An array of structs that may be null.
    pub fn nullable_array<C: Codec, T: Message>(c: &mut C, f: &mut Option<Vec<T>>, v: i16) -> ProtoResult<()> {
        super::super::codec::nullable_array(c, f, |c, t| t.codec(c, v))
    }

    pub fn int32_array<C: Codec>(c: &mut C, f: &mut Vec<i32>, _: i16) -> ProtoResult<()> {
        super::super::codec::array(c, f, |c, x| c.i32(x))
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
