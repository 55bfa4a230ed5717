//! Compression codecs of record batches: gzip, snappy (raw or Java's xerial framing), lz4
//! (frame format) and zstd. The broker decompresses to check every record (SPEC T3.1) and to
//! find the exact record of a time lookup (T6.2); it never recompresses v2 batches.
//!
//! Decompression is bounded: output past `limit` bytes is an error, never an allocation.

use super::batch::{Compression, FormatError};
use std::io::Read;

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
            let d = zstd::stream::read::Decoder::new(data).map_err(|e| bad(codec, e))?;
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
        // Raw (unframed) snappy, as some clients send it.
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw, 1 << 20).unwrap(), data);
    }
}
