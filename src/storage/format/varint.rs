//! Kafka's zig-zag variable-length integers (protobuf style), as used inside v2 records.

/// Decode a zig-zag varint (at most 5 bytes) from `buf[*pos..]`, advancing `pos`.
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Option<i32> {
    let v = read_unsigned(buf, pos, 5)?;
    if v > u32::MAX as u64 {
        return None;
    }
    let v = v as u32;
    Some(((v >> 1) as i32) ^ -((v & 1) as i32))
}

/// Decode a zig-zag varlong (at most 10 bytes) from `buf[*pos..]`, advancing `pos`.
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let v = read_unsigned(buf, pos, 10)?;
    Some(((v >> 1) as i64) ^ -((v & 1) as i64))
}

fn read_unsigned(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..max_bytes {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Append a zig-zag varint.
pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    write_unsigned(out, ((v << 1) ^ (v >> 31)) as u32 as u64)
}

/// Append a zig-zag varlong.
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    write_unsigned(out, ((v << 1) ^ (v >> 63)) as u64)
}

/// The bytes [`write_varint`] writes for `v`.
pub fn varint_len(v: i32) -> usize {
    unsigned_len(((v << 1) ^ (v >> 31)) as u32 as u64)
}

/// The bytes [`write_varlong`] writes for `v`.
pub fn varlong_len(v: i64) -> usize {
    unsigned_len(((v << 1) ^ (v >> 63)) as u64)
}

fn unsigned_len(v: u64) -> usize {
    // 7 bits a byte, at least one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn write_unsigned(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Round trip of every varint and varlong value.
        #[test]
        fn varint_round_trip(a: i32, b: i64) {
            let mut out = Vec::new();
            write_varint(&mut out, a);
            prop_assert_eq!(out.len(), varint_len(a));
            let mut long = Vec::new();
            write_varlong(&mut long, b);
            prop_assert_eq!(long.len(), varlong_len(b));
            write_varlong(&mut out, b);
            let mut pos = 0;
            prop_assert_eq!(read_varint(&out, &mut pos), Some(a));
            prop_assert_eq!(read_varlong(&out, &mut pos), Some(b));
            prop_assert_eq!(pos, out.len());
        }
    }

    #[test]
    fn truncated_and_overlong_varints_are_refused() {
        let mut pos = 0;
        assert_eq!(read_varint(&[0x80, 0x80], &mut pos), None);
        let mut pos = 0;
        assert_eq!(read_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], &mut pos), None);
        let mut pos = 0;
        assert_eq!(read_varint(&[0x01], &mut pos), Some(-1));
    }
}
