//! Kafka's primitive wire types, read and written by one bidirectional [`Codec`]: each message
//! is described once, by a function that takes `&mut impl Codec`, and that same function
//! decodes (with a [`Reader`]) and encodes (with a [`Writer`]). Round trips hold by
//! construction and every field is written in one place.
//!
//! Flexible versions (KIP-482) use compact strings, bytes and arrays (unsigned varint length
//! + 1) and end every struct with tagged fields; [`Codec::flexible`] says which.
//!
//! Byte fields and record sets are zero-copy slices of the request frame ([`Bytes`]).

use bytes::{BufMut, Bytes, BytesMut};

/// Why bytes are not a valid message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("message truncated")]
    Truncated,
    #[error("invalid {0}")]
    Invalid(&'static str),
    #[error("unsupported version {version} of API {api}")]
    UnsupportedVersion { api: i16, version: i16 },
    #[error("unknown API key {0}")]
    UnknownApi(i16),
}

pub type ProtoResult<T> = Result<T, ProtoError>;

/// Tagged fields this broker does not interpret, kept as (tag, raw bytes) so a message
/// round-trips unchanged. Encoded empty unless something put fields in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaggedFields(pub Vec<(u32, Bytes)>);

/// Reads or writes one message. `flexible` is set for flexible versions.
pub trait Codec {
    fn reading(&self) -> bool;
    fn flexible(&self) -> bool;
    /// Switch encodings mid-message (the request header's ClientId keeps the classic int16
    /// length even in flexible header v2).
    fn set_flexible(&mut self, flexible: bool);
    fn i8(&mut self, v: &mut i8) -> ProtoResult<()>;
    fn i16(&mut self, v: &mut i16) -> ProtoResult<()>;
    fn i32(&mut self, v: &mut i32) -> ProtoResult<()>;
    fn i64(&mut self, v: &mut i64) -> ProtoResult<()>;
    fn u32_varint(&mut self, v: &mut u32) -> ProtoResult<()>;
    fn raw(&mut self, v: &mut Bytes, len: usize) -> ProtoResult<()>;
    /// A length prefix: int32 (or int16 for strings) in classic versions, unsigned varint + 1
    /// in flexible ones; `None` is null.
    fn len_prefix(&mut self, v: &mut Option<usize>, classic_i16: bool) -> ProtoResult<()>;

    fn bool(&mut self, v: &mut bool) -> ProtoResult<()> {
        let mut b = *v as i8;
        self.i8(&mut b)?;
        *v = b != 0;
        Ok(())
    }

    fn uuid(&mut self, v: &mut [u8; 16]) -> ProtoResult<()> {
        let mut b = Bytes::copy_from_slice(v);
        self.raw(&mut b, 16)?;
        v.copy_from_slice(&b);
        Ok(())
    }

    fn nullable_bytes(&mut self, v: &mut Option<Bytes>) -> ProtoResult<()> {
        let mut len = v.as_ref().map(|b| b.len());
        self.len_prefix(&mut len, false)?;
        match len {
            None => *v = None,
            Some(n) => {
                let mut b = v.take().unwrap_or_default();
                self.raw(&mut b, n)?;
                *v = Some(b);
            }
        }
        Ok(())
    }

    fn bytes(&mut self, v: &mut Bytes) -> ProtoResult<()> {
        let mut o = Some(std::mem::take(v));
        self.nullable_bytes(&mut o)?;
        *v = o.ok_or(ProtoError::Invalid("null bytes"))?;
        Ok(())
    }

    fn nullable_string(&mut self, v: &mut Option<String>) -> ProtoResult<()> {
        let mut len = v.as_ref().map(|s| s.len());
        self.len_prefix(&mut len, true)?;
        match len {
            None => *v = None,
            Some(n) => {
                let mut b = v.as_ref().map(|s| Bytes::copy_from_slice(s.as_bytes())).unwrap_or_default();
                self.raw(&mut b, n)?;
                *v = Some(String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Invalid("UTF-8 string"))?);
            }
        }
        Ok(())
    }

    fn string(&mut self, v: &mut String) -> ProtoResult<()> {
        let mut o = Some(std::mem::take(v));
        self.nullable_string(&mut o)?;
        *v = o.ok_or(ProtoError::Invalid("null string"))?;
        Ok(())
    }

    /// Tagged fields at the end of a struct (flexible versions only; a no-op otherwise).
    fn tagged(&mut self, v: &mut TaggedFields) -> ProtoResult<()> {
        if !self.flexible() {
            return Ok(());
        }
        let mut n = v.0.len() as u32;
        self.u32_varint(&mut n)?;
        if self.reading() {
            v.0.clear();
            for _ in 0..n {
                let (mut tag, mut size) = (0u32, 0u32);
                self.u32_varint(&mut tag)?;
                self.u32_varint(&mut size)?;
                let mut b = Bytes::new();
                self.raw(&mut b, size as usize)?;
                v.0.push((tag, b));
            }
            // Kafka writes tags in ascending order but reads any order; kept in ascending order
            // (stable for repeated tags), a frame re-encodes to one that decodes to the same.
            v.0.sort_by_key(|t| t.0);
        } else {
            for (tag, b) in v.0.iter_mut() {
                let mut size = b.len() as u32;
                self.u32_varint(tag)?;
                self.u32_varint(&mut size)?;
                let n = b.len();
                self.raw(b, n)?;
            }
        }
        Ok(())
    }
}

/// An array of structs (nullable: `None` is null), each read or written by `f`.
pub fn nullable_array<C: Codec + ?Sized, T: Default>(
    c: &mut C,
    v: &mut Option<Vec<T>>,
    mut f: impl FnMut(&mut C, &mut T) -> ProtoResult<()>,
) -> ProtoResult<()> {
    let mut len = v.as_ref().map(|a| a.len());
    c.len_prefix(&mut len, false)?;
    match len {
        None => *v = None,
        Some(n) if c.reading() => {
            let mut out = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let mut t = T::default();
                f(c, &mut t)?;
                out.push(t);
            }
            *v = Some(out);
        }
        Some(_) => {
            for t in v.as_mut().expect("length came from it").iter_mut() {
                f(c, t)?;
            }
        }
    }
    Ok(())
}

/// A non-null array.
pub fn array<C: Codec + ?Sized, T: Default>(
    c: &mut C,
    v: &mut Vec<T>,
    f: impl FnMut(&mut C, &mut T) -> ProtoResult<()>,
) -> ProtoResult<()> {
    let mut o = Some(std::mem::take(v));
    nullable_array(c, &mut o, f)?;
    *v = o.unwrap_or_default();
    Ok(())
}

/// Decodes from a frame.
pub struct Reader {
    buf: Bytes,
    pos: usize,
    flexible: bool,
}

impl Reader {
    pub fn new(buf: Bytes, flexible: bool) -> Self {
        Reader { buf, pos: 0, flexible }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> ProtoResult<&[u8]> {
        if self.remaining() < n {
            return Err(ProtoError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
}

macro_rules! read_int {
    ($self:ident, $v:ident, $t:ty) => {{
        let b = $self.take(std::mem::size_of::<$t>())?;
        *$v = <$t>::from_be_bytes(b.try_into().expect("sized"));
        Ok(())
    }};
}

impl Codec for Reader {
    fn reading(&self) -> bool {
        true
    }
    fn flexible(&self) -> bool {
        self.flexible
    }
    fn set_flexible(&mut self, flexible: bool) {
        self.flexible = flexible;
    }
    fn i8(&mut self, v: &mut i8) -> ProtoResult<()> {
        read_int!(self, v, i8)
    }
    fn i16(&mut self, v: &mut i16) -> ProtoResult<()> {
        read_int!(self, v, i16)
    }
    fn i32(&mut self, v: &mut i32) -> ProtoResult<()> {
        read_int!(self, v, i32)
    }
    fn i64(&mut self, v: &mut i64) -> ProtoResult<()> {
        read_int!(self, v, i64)
    }
    fn u32_varint(&mut self, v: &mut u32) -> ProtoResult<()> {
        let mut out: u32 = 0;
        for i in 0..5 {
            let b = self.take(1)?[0];
            if i == 4 && b > 0x0f {
                return Err(ProtoError::Invalid("varint"));
            }
            out |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                *v = out;
                return Ok(());
            }
        }
        Err(ProtoError::Invalid("varint"))
    }
    fn raw(&mut self, v: &mut Bytes, len: usize) -> ProtoResult<()> {
        if self.remaining() < len {
            return Err(ProtoError::Truncated);
        }
        *v = self.buf.slice(self.pos..self.pos + len);
        self.pos += len;
        Ok(())
    }
    fn len_prefix(&mut self, v: &mut Option<usize>, classic_i16: bool) -> ProtoResult<()> {
        let n: i64 = if self.flexible {
            let mut u = 0u32;
            self.u32_varint(&mut u)?;
            u as i64 - 1
        } else if classic_i16 {
            let mut s = 0i16;
            self.i16(&mut s)?;
            s as i64
        } else {
            let mut s = 0i32;
            self.i32(&mut s)?;
            s as i64
        };
        *v = match n {
            -1 => None,
            n if n < 0 => return Err(ProtoError::Invalid("negative length")),
            // Every element or byte takes at least one byte: refuse lengths the frame cannot
            // hold before allocating anything.
            n if n as usize > self.remaining() => return Err(ProtoError::Truncated),
            n => Some(n as usize),
        };
        Ok(())
    }
}

/// Encodes into a buffer.
pub struct Writer {
    pub buf: BytesMut,
    flexible: bool,
}

impl Writer {
    pub fn new(flexible: bool) -> Self {
        Writer { buf: BytesMut::with_capacity(256), flexible }
    }

    pub fn with_buf(buf: BytesMut, flexible: bool) -> Self {
        Writer { buf, flexible }
    }
}

impl Codec for Writer {
    fn reading(&self) -> bool {
        false
    }
    fn flexible(&self) -> bool {
        self.flexible
    }
    fn set_flexible(&mut self, flexible: bool) {
        self.flexible = flexible;
    }
    fn i8(&mut self, v: &mut i8) -> ProtoResult<()> {
        self.buf.put_i8(*v);
        Ok(())
    }
    fn i16(&mut self, v: &mut i16) -> ProtoResult<()> {
        self.buf.put_i16(*v);
        Ok(())
    }
    fn i32(&mut self, v: &mut i32) -> ProtoResult<()> {
        self.buf.put_i32(*v);
        Ok(())
    }
    fn i64(&mut self, v: &mut i64) -> ProtoResult<()> {
        self.buf.put_i64(*v);
        Ok(())
    }
    fn u32_varint(&mut self, v: &mut u32) -> ProtoResult<()> {
        let mut x = *v;
        while x >= 0x80 {
            self.buf.put_u8((x as u8) | 0x80);
            x >>= 7;
        }
        self.buf.put_u8(x as u8);
        Ok(())
    }
    fn raw(&mut self, v: &mut Bytes, len: usize) -> ProtoResult<()> {
        crate::invariant!(v.len() == len);
        self.buf.put_slice(v);
        Ok(())
    }
    fn len_prefix(&mut self, v: &mut Option<usize>, classic_i16: bool) -> ProtoResult<()> {
        match (*v, self.flexible) {
            (None, true) => self.buf.put_u8(0),
            (Some(n), true) => {
                let mut u = n as u32 + 1;
                self.u32_varint(&mut u)?;
            }
            (None, false) if classic_i16 => self.buf.put_i16(-1),
            (None, false) => self.buf.put_i32(-1),
            (Some(n), false) if classic_i16 => {
                let n = i16::try_from(n).map_err(|_| ProtoError::Invalid("string longer than 32767 bytes"))?;
                self.buf.put_i16(n)
            }
            (Some(n), false) => self.buf.put_i32(n as i32),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_and_compact_primitives_round_trip() {
        for flexible in [false, true] {
            let mut w = Writer::new(flexible);
            let (mut a, mut b, mut c) = (Some("héllo".to_string()), None::<String>, Some(Bytes::from_static(b"xyz")));
            let mut arr = vec![1i32, -2, 3];
            let mut tags = TaggedFields(vec![(3, Bytes::from_static(b"ab"))]);
            w.nullable_string(&mut a).unwrap();
            w.nullable_string(&mut b).unwrap();
            w.nullable_bytes(&mut c).unwrap();
            array(&mut w, &mut arr, |c, x| c.i32(x)).unwrap();
            w.tagged(&mut tags).unwrap();
            let mut r = Reader::new(w.buf.freeze(), flexible);
            let (mut a2, mut b2, mut c2, mut arr2, mut tags2) =
                (None, Some(String::new()), None, Vec::<i32>::new(), TaggedFields::default());
            r.nullable_string(&mut a2).unwrap();
            r.nullable_string(&mut b2).unwrap();
            r.nullable_bytes(&mut c2).unwrap();
            array(&mut r, &mut arr2, |c, x| c.i32(x)).unwrap();
            r.tagged(&mut tags2).unwrap();
            assert_eq!((a2, b2, c2, arr2), (a, b, c, arr));
            assert_eq!(tags2, if flexible { tags } else { TaggedFields::default() });
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn absurd_lengths_are_refused_before_allocating() {
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]), false);
        let mut v: Vec<i32> = Vec::new();
        assert_eq!(array(&mut r, &mut v, |c, x| c.i32(x)), Err(ProtoError::Truncated));
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x7f]), true);
        let mut s = String::new();
        assert!(r.string(&mut s).is_err());
    }
}
