//! Compression codecs of record batches and legacy wrapper messages (SPEC T1.3): gzip, snappy
//! (raw or Java's xerial framing), lz4 (frame format) and zstd. The broker decompresses to
//! check every record (SPEC T3.1) and to find the exact record of a time lookup (T6.2); it
//! never recompresses v2 batches. It compresses only legacy wrappers it must rebuild (T3.2)
//! and batches it down-converts for old fetch versions (T1.1).
//!
//! Kafka's magic-0 lz4 quirk (KAFKA-3160): magic-0 clients computed the lz4 frame's header
//! checksum over the 4 magic bytes too. Magic-0 wrappers are decoded with the checksum
//! corrected first (whichever way the sender computed it) and written with the broken one,
//! which is what magic-0 readers expect.
//!
//! Decompression is bounded: output past `limit` bytes is an error, never an allocation.

use super::error::FormatError;
use std::io::Read;

/// The bits of a batch's (or a legacy message's) attributes that name its codec.
pub const ATTR_COMPRESSION_MASK: i16 = 0x07;

/// The compression codec in a batch's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    pub fn from_attributes(attributes: i16) -> Result<Compression, FormatError> {
        Ok(match attributes & ATTR_COMPRESSION_MASK {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(FormatError::UnknownCompression(other)),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// log2 of the largest zstd window a frame may ask the decoder for.
const ZSTD_WINDOW_LOG_MAX: u32 = 25;

/// The xerial snappy stream header Java clients write: magic, version 1, compatible 1.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

fn bad(codec: Compression, why: impl std::fmt::Display) -> FormatError {
    FormatError::BadCompressed(codec.name(), why.to_string())
}

fn read_bounded(codec: Compression, r: impl Read, limit: usize) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::new();
    r.take(limit as u64 + 1).read_to_end(&mut out).map_err(|e| bad(codec, e))?;
    if out.len() > limit {
        return Err(bad(codec, format!("decompresses to more than {limit} bytes")));
    }
    Ok(out)
}

/// Decompress a batch's records section.
pub fn decompress(codec: Compression, data: &[u8], limit: usize) -> Result<Vec<u8>, FormatError> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_bounded(codec, flate2::read::GzDecoder::new(data), limit),
        Compression::Lz4 => read_bounded(codec, lz4_flex::frame::FrameDecoder::new(data), limit),
        Compression::Zstd => {
            let mut d = zstd::stream::read::Decoder::new(data).map_err(|e| bad(codec, e))?;
            // The decoder's window is memory too: at most 32 MiB (clients use far less).
            d.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(|e| bad(codec, e))?;
            read_bounded(codec, d, limit)
        }
        Compression::Snappy => {
            if data.starts_with(&XERIAL_MAGIC) {
                let mut out = Vec::new();
                let mut pos = 16; // magic, version i32, compatible i32
                while pos < data.len() {
                    let len = data.get(pos..pos + 4).ok_or_else(|| bad(codec, "truncated xerial block length"))?;
                    let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
                    pos += 4;
                    let block = data.get(pos..pos + len).ok_or_else(|| bad(codec, "truncated xerial block"))?;
                    pos += len;
                    let n = snap::raw::decompress_len(block).map_err(|e| bad(codec, e))?;
                    if out.len() + n > limit {
                        return Err(bad(codec, format!("decompresses to more than {limit} bytes")));
                    }
                    out.extend_from_slice(&snap::raw::Decoder::new().decompress_vec(block).map_err(|e| bad(codec, e))?);
                }
                Ok(out)
            } else {
                let n = snap::raw::decompress_len(data).map_err(|e| bad(codec, e))?;
                if n > limit {
                    return Err(bad(codec, format!("decompresses to more than {limit} bytes")));
                }
                snap::raw::Decoder::new().decompress_vec(data).map_err(|e| bad(codec, e))
            }
        }
    }
}

/// Decompress the value of a legacy wrapper message of `magic` (0 or 1).
pub fn decompress_legacy(codec: Compression, magic: i8, data: &[u8], limit: usize) -> Result<Vec<u8>, FormatError> {
    if codec == Compression::Lz4 && magic == 0 {
        let mut fixed = data.to_vec();
        let hc = lz4_header_checksum_at(&fixed).ok_or_else(|| bad(codec, "truncated lz4 frame header"))?;
        fixed[hc] = lz4_header_checksum(&fixed[4..hc]);
        return decompress(codec, &fixed, limit);
    }
    decompress(codec, data, limit)
}

/// Compress the inner messages of a legacy wrapper of `magic` (0 or 1).
pub fn compress_legacy(codec: Compression, magic: i8, data: &[u8]) -> Vec<u8> {
    let mut out = compress(codec, data);
    if codec == Compression::Lz4 && magic == 0 {
        let hc = lz4_header_checksum_at(&out).expect("a frame we wrote has a header");
        out[hc] = lz4_header_checksum(&out[..hc]);
    }
    out
}

/// Position of the header checksum byte of the lz4 frame in `frame`: after the magic, FLG,
/// BD and the optional content size (FLG bit 3) and dictionary id (FLG bit 0).
fn lz4_header_checksum_at(frame: &[u8]) -> Option<usize> {
    const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
    if frame.len() < 7 || frame[..4] != LZ4_MAGIC {
        return None;
    }
    let flg = frame[4];
    let at = 6 + if flg & 0x08 != 0 { 8 } else { 0 } + if flg & 0x01 != 0 { 4 } else { 0 };
    (at < frame.len()).then_some(at)
}

/// The lz4 frame header checksum of `descriptor`: the second byte of its xxHash32.
fn lz4_header_checksum(descriptor: &[u8]) -> u8 {
    (twox_hash::XxHash32::oneshot(0, descriptor) >> 8) as u8
}

/// Compress a records section (for tests, benches and the load generator). Snappy uses the
/// xerial framing, as the Java client does.
pub fn compress(codec: Compression, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match codec {
        Compression::None => data.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).expect("in-memory write");
            e.finish().expect("in-memory write")
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data).expect("in-memory write");
            e.finish().expect("in-memory write")
        }
        Compression::Zstd => zstd::stream::encode_all(data, 1).expect("in-memory write"),
        Compression::Snappy => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            for chunk in data.chunks(32 * 1024) {
                let block = snap::raw::Encoder::new().compress_vec(chunk).expect("in-memory write");
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 5] =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

    #[test]
    fn every_codec_round_trips_and_is_bounded() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for codec in ALL {
            let c = compress(codec, &data);
            assert_eq!(decompress(codec, &c, data.len()).unwrap(), data, "{codec:?}");
            if codec != Compression::None {
                assert!(decompress(codec, &c, data.len() - 1).is_err(), "{codec:?} bound");
                assert!(decompress(codec, &c[..c.len() / 2], 1 << 20).is_err(), "{codec:?} truncated");
            }
        }
        // Legacy wrappers: every codec round trips at both magics; magic 0 lz4 carries the
        // broken header checksum (KAFKA-3160) and is read back whether broken or correct.
        for codec in ALL {
            for magic in [0, 1] {
                let c = compress_legacy(codec, magic, &data);
                assert_eq!(decompress_legacy(codec, magic, &c, data.len()).unwrap(), data, "{codec:?} magic {magic}");
            }
        }
        let broken = compress_legacy(Compression::Lz4, 0, &data);
        assert!(decompress(Compression::Lz4, &broken, 1 << 20).is_err(), "the standard decoder refuses it");
        let proper = compress(Compression::Lz4, &data);
        assert_eq!(decompress_legacy(Compression::Lz4, 0, &proper, 1 << 20).unwrap(), data);
        assert!(decompress_legacy(Compression::Lz4, 0, &proper[..5], 1 << 20).is_err());
        // Raw (unframed) snappy, as some clients send it.
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw, 1 << 20).unwrap(), data);
    }
}
