//! The disk seam: the only code in tidemark that calls glommio's file APIs.
//!
//! Storage is written against [`Disk`] and [`DiskFile`], so the same segment, index and
//! recovery code runs on two disks:
//! - [`DmaDisk`]: glommio DMA files (O_DIRECT, io_uring) on a real filesystem;
//! - [`MemDisk`]: an in-memory disk that remembers what was synced, so tests can crash it
//!   (drop unsynced writes, tear them) and inject faults (EIO, ENOSPC, short writes).
//!
//! Both take faults from a [`faults::FaultPlan`]: the in-memory disk its own, the DMA disk
//! the process-wide one (`serve --fault-injection`; EIO, ENOSPC, short writes, slow I/O).
//!
//! Invariants every implementation keeps:
//! - writes go through buffers from [`Disk::alloc`], at positions and lengths aligned to
//!   [`PAGE`]; a buffer handed to a write is shared (`Rc`) and never modified while in flight;
//! - a write is durable only after a later [`DiskFile::sync`] returns Ok;
//! - reads may start and end anywhere; a read past the end of the file returns fewer bytes.
//!
//! Who calls it: `storage`; and, before any shard runs, the readers of the data directory's
//! small settings files ([`load_text`]). Futures are `!Send`: one shard, one thread.
#![allow(async_fn_in_trait)]

mod dma;
pub mod faults;
mod mem;

pub use dma::{DmaDisk, DmaDiskFile};
pub use faults::{Fault, FaultOp, FaultRule};
pub use mem::{CrashMode, MemBuf, MemDisk, MemFile};

use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Alignment of every DMA write: the physical sector of the disks we run on (PLATFORM.md:
/// glommio reports the 512 B logical sector, the device's physical sector is 4096).
pub const PAGE: u64 = 4096;

/// The length of [`Disk::zeros`]: one zero write ahead of a segment's data.
pub const ZEROS_BYTES: usize = 128 << 10;

/// Default of `tidemark.shard.io.memory.bytes`: each shard's pool of DMA buffers, registered
/// with io_uring (glommio's `io_memory`, whose own default is 10 MiB). Write-tail chunks and
/// disk reads come from it; past it they fall back to ordinary allocations, which io_uring
/// must pin page by page on every write. At 10 MiB a partition taking 1 MiB chunks ran out:
/// 128 MiB took `storage-load` (1 MiB writes, 8 in flight, one core) from 1,231-1,296 to
/// 1,652-1,700 MB/s and the protocol's CPU per GB down 13-15% (docs/benchmarks.md).
pub const DEFAULT_SHARD_IO_MEMORY: usize = 128 << 20;

/// Round `v` up to a multiple of [`PAGE`].
pub fn align_up(v: u64) -> u64 {
    v.div_ceil(PAGE) * PAGE
}

/// Round `v` down to a multiple of [`PAGE`].
pub fn align_down(v: u64) -> u64 {
    v / PAGE * PAGE
}

/// An I/O error with the operation, the path and (where one applies) the file offset.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path} at offset {offset:?}: {source}")]
pub struct IoError {
    pub op: &'static str,
    pub path: PathBuf,
    pub offset: Option<u64>,
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    pub fn new(op: &'static str, path: &Path, offset: Option<u64>, source: std::io::Error) -> Self {
        IoError { op, path: path.to_path_buf(), offset, source }
    }

    /// True when the disk is full (ENOSPC): writes may resume once space returns.
    pub fn is_no_space(&self) -> bool {
        self.source.raw_os_error() == Some(libc::ENOSPC)
    }
}

pub type IoResult<T> = Result<T, IoError>;

/// A buffer that can be handed to a DMA write.
pub trait IoBuf: AsRef<[u8]> + AsMut<[u8]> + 'static {
    /// Shrink the buffer to `len` bytes (a multiple of [`PAGE`]) before it is written.
    fn trim(&mut self, len: usize);
}

/// A filesystem: directories and metadata files. Cloning is cheap (a handle).
pub trait Disk: Clone + 'static {
    type Buf: IoBuf;
    type File: DiskFile<Buf = Self::Buf>;

    /// An uninitialised buffer of `len` bytes (a multiple of [`PAGE`]) suitable for
    /// [`DiskFile::write_at`] on any file of this disk. Callers fill every byte they write.
    fn alloc(&self, len: usize) -> Self::Buf;

    /// A buffer of [`ZEROS_BYTES`] zeros, shared by every writer on this disk (the flusher
    /// writes it ahead of a segment's data: `tidemark.zero.ahead.bytes`). Never modified.
    fn zeros(&self) -> Rc<Self::Buf>;

    /// Open `path` for reading and writing, creating it if missing.
    async fn open_rw(&self, path: &Path) -> IoResult<Self::File>;
    /// Open an existing file for reading and writing (ENOENT when it is missing: a segment
    /// that retention or a compaction swap removed is never created again empty).
    async fn open_existing(&self, path: &Path) -> IoResult<Self::File>;
    /// Create a directory and its parents.
    async fn create_dir_all(&self, path: &Path) -> IoResult<()>;
    /// The names of the entries in a directory (files and directories), unsorted.
    async fn list_dir(&self, path: &Path) -> IoResult<Vec<String>>;
    /// True when `path` exists.
    async fn exists(&self, path: &Path) -> IoResult<bool>;
    /// Remove a file. Removing a missing file is not an error.
    async fn remove_file(&self, path: &Path) -> IoResult<()>;
    /// Remove a directory and everything in it.
    async fn remove_dir_all(&self, path: &Path) -> IoResult<()>;
    /// Atomically rename a file.
    async fn rename(&self, from: &Path, to: &Path) -> IoResult<()>;
    /// Make the directory's entries (creations, renames, removals) durable.
    async fn sync_dir(&self, path: &Path) -> IoResult<()>;
    /// The size of the file at `path`, without opening it.
    async fn file_size(&self, path: &Path) -> IoResult<u64>;
    /// The file's modification time in ms since the epoch.
    async fn mtime_ms(&self, path: &Path) -> IoResult<i64>;
    /// Set the file's modification time (a compacted segment keeps its originals' latest, which
    /// SPEC T5.5 entries and retention of segments without timestamps read).
    async fn set_mtime_ms(&self, path: &Path, ms: i64) -> IoResult<()>;

    /// Read a whole small file; `None` when it does not exist.
    async fn read_file(&self, path: &Path) -> IoResult<Option<Vec<u8>>> {
        if !self.exists(path).await? {
            return Ok(None);
        }
        let f = self.open_rw(path).await?;
        let size = f.size().await?;
        let data = f.read_at(0, size as usize).await?;
        f.close().await?;
        Ok(Some(data))
    }

    /// Replace `path` with exactly `data`, durably: written to [`tmp_path`], synced, renamed
    /// over `path`, directory synced. A crash leaves the old content or the new, never a mix.
    async fn write_file_atomic(&self, path: &Path, data: &[u8]) -> IoResult<()> {
        let tmp = tmp_path(path);
        let f = self.open_rw(&tmp).await?;
        write_exact(self, &f, data).await?;
        f.close().await?;
        self.rename(&tmp, path).await?;
        if let Some(dir) = path.parent() {
            self.sync_dir(dir).await?;
        }
        Ok(())
    }
}

/// Longest file name on the filesystems tidemark runs on (ext4, xfs: `NAME_MAX`).
const NAME_MAX: usize = 255;

/// The temporary file of an atomic write of `path`: its name with `.tmp` appended, or, when
/// that would pass `NAME_MAX` (a 249-character topic's `.topic` file), the first 200 bytes of
/// the name, a dot, the CRC-32C of the whole name in hex and `.tmp`. Either way it ends in
/// `.tmp`, which recovery removes.
/// A small text file of the data directory, read at startup (plain `std::fs`, before any
/// shard runs): `decode`d, or `T::default()` when there is none. Errors name the file.
pub fn load_text<T: Default>(path: &Path, decode: impl FnOnce(&str) -> Result<T, String>) -> anyhow::Result<T> {
    match std::fs::read_to_string(path) {
        Ok(text) => decode(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

pub fn tmp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(std::os::unix::ffi::OsStrExt::as_bytes).unwrap_or_default();
    let mut tmp = if name.len() + 4 <= NAME_MAX {
        name.to_vec()
    } else {
        let mut short = name[..200].to_vec();
        short.extend_from_slice(format!(".{:08x}", crc32c::crc32c(name)).as_bytes());
        short
    };
    tmp.extend_from_slice(b".tmp");
    // A Unix file name is any bytes, so a cut inside a UTF-8 sequence is still a name.
    path.with_file_name(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(tmp))
}

/// Make `f` hold exactly `data` and sync it: one aligned DMA write, then a truncate to the
/// exact length (the padding never remains in the file).
pub async fn write_exact<D: Disk>(disk: &D, f: &D::File, data: &[u8]) -> IoResult<()> {
    f.truncate(0).await?;
    if !data.is_empty() {
        let padded = align_up(data.len() as u64) as usize;
        let mut buf = disk.alloc(padded);
        let b = buf.as_mut();
        b[..data.len()].copy_from_slice(data);
        b[data.len()..].fill(0);
        f.write_at(Rc::new(buf), 0).await?;
    }
    f.truncate(data.len() as u64).await?;
    f.sync().await
}

/// An open file.
pub trait DiskFile: 'static {
    type Buf: IoBuf;

    /// The path it was opened with (for errors).
    fn path(&self) -> &Path;
    /// Write the whole buffer at `pos` (both aligned to [`PAGE`]). A short write is an error.
    async fn write_at(&self, buf: Rc<Self::Buf>, pos: u64) -> IoResult<()>;
    /// Read up to `len` bytes at `pos`; fewer only at the end of the file.
    async fn read_at(&self, pos: u64, len: usize) -> IoResult<Vec<u8>>;
    /// Make every completed write durable (fdatasync).
    async fn sync(&self) -> IoResult<()>;
    /// Write the whole buffer at `pos` and make it durable, with what is needed to read it
    /// back (its allocation, the file's size): `write_at`, then `sync`. A disk may do both in
    /// one operation (the DMA disk: a write through an O_DSYNC descriptor); then writes
    /// completed before it and not yet synced may not be made durable by it, so callers use it
    /// only when no such write needs to be.
    async fn write_synced_at(&self, buf: Rc<Self::Buf>, pos: u64) -> IoResult<()> {
        self.write_at(buf, pos).await?;
        self.sync().await
    }
    /// No more writes will come (a sealed segment, kept open for reads): release what writing
    /// needed (the DMA disk's O_DSYNC descriptor).
    fn writes_done(&self) {}
    /// Reserve space up to `len` bytes (fallocate); the file's size becomes at least `len` and
    /// the new space reads as zeros.
    async fn allocate(&self, len: u64) -> IoResult<()>;
    /// Set the file's size.
    async fn truncate(&self, len: u64) -> IoResult<()>;
    /// The file's size in bytes.
    async fn size(&self) -> IoResult<u64>;
    /// Close the file. Dropping without closing is allowed (the descriptor is released).
    async fn close(self) -> IoResult<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    // The temporary name of an atomic write is the name plus `.tmp` while that fits NAME_MAX,
    // and a shortened, still unique name ending in `.tmp` beyond (a 249-character topic).
    #[test]
    fn tmp_path_fits_name_max() {
        assert_eq!(
            tmp_path(Path::new("/d/t-0/00000000000000000000.index")),
            Path::new("/d/t-0/00000000000000000000.index.tmp")
        );
        assert_eq!(tmp_path(Path::new("/d/clean-shutdown")), Path::new("/d/clean-shutdown.tmp"));
        let fits = format!("{}.topic", "a".repeat(245));
        assert_eq!(tmp_path(&Path::new("/d/topics").join(&fits)).file_name().unwrap().len(), 255);
        let a = tmp_path(&Path::new("/d/topics").join(format!("{}.topic", "a".repeat(249))));
        let b = tmp_path(&Path::new("/d/topics").join(format!("{}.topic", "a".repeat(248))));
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.len() <= 255 && name.ends_with(".tmp") && name.starts_with(&"a".repeat(200)), "{name}");
        assert_eq!(a.parent(), Some(Path::new("/d/topics")));
        assert_ne!(a, b);
    }
}
