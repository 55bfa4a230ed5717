//! Pure encoding and decoding of what tidemark stores: record batches, index entries and
//! small metadata files. No I/O lives here; everything is a function of bytes, so it is unit-
//! and property-tested without a runtime and fuzzed without a disk. Byte layouts are in
//! `docs/format.md`.

pub mod batch;
pub mod compression;
pub mod convert;
pub mod error;
pub mod index;
pub mod legacy;
pub mod marker;
pub mod stored;
pub mod txn_index;
pub mod varint;

pub use batch::{BatchHeader, Compression, FormatError, TimestampType};
pub use stored::{BatchInfo, BatchWalk};
