//! [`Disk`] on glommio DMA files: O_DIRECT reads and writes through io_uring.
//!
//! The IOPOLL probe trap (PLATFORM.md): the first DMA file an executor opens on a device is
//! used to probe polled I/O; if it is a new empty file glommio wrongly concludes the device is
//! pollable and every later DMA read fails with EOPNOTSUPP. [`DmaDisk::open`] therefore opens a
//! non-empty 4 KiB probe file in the data directory first, once per executor, and every data
//! file is opened read+write (never write-only).
//!
//! Directory operations (list, create, stat) use std::fs: they run at startup, at roll and at
//! retention, never per record.

use super::faults::{self, Fault, FaultOp};
use super::{Disk, DiskFile, IoBuf, IoError, IoResult, PAGE, ZEROS_BYTES};
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The probe file every executor opens before any other DMA file.
pub const PROBE_FILE: &str = ".tidemark-probe";

/// A data directory on a real filesystem, used from one executor.
#[derive(Clone, Debug)]
pub struct DmaDisk {
    root: Rc<PathBuf>,
    /// [`Disk::zeros`], made on first use (one per executor: the clones share it).
    zeros: Rc<std::cell::OnceCell<Rc<DmaBuffer>>>,
}

fn gerr<T>(op: &'static str, path: &Path, offset: Option<u64>, e: glommio::GlommioError<T>) -> IoError {
    IoError::new(op, path, offset, std::io::Error::from(e))
}

fn serr(op: &'static str, path: &Path, e: std::io::Error) -> IoError {
    IoError::new(op, path, None, e)
}

/// Apply an injected fault (`serve --fault-injection`) to an operation about to run: wait
/// for a slow one, fail with the errno of the others. Returns the fault for the caller's own
/// handling (a short write).
async fn injected(op: FaultOp, what: &'static str, path: &Path, offset: Option<u64>) -> IoResult<Option<Fault>> {
    match faults::take(op, path) {
        None => Ok(None),
        Some(Fault::Slow(ms)) => {
            glommio::timer::sleep(std::time::Duration::from_millis(ms as u64)).await;
            Ok(None)
        }
        Some(Fault::ShortWrite) => Ok(Some(Fault::ShortWrite)),
        Some(f) => {
            Err(IoError::new(what, path, offset, std::io::Error::from_raw_os_error(f.errno().unwrap_or(libc::EIO))))
        }
    }
}

/// glommio's directory operations fail on relative paths (EBADF): resolve every path against
/// the working directory first.
fn abs(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl DmaDisk {
    /// Prepare `root` for DMA I/O on the calling executor: create it, write the probe file
    /// once (4 KiB of non-zero bytes, synced) and open it with DMA so glommio's IOPOLL probe
    /// sees a non-empty, readable file. Must be called inside a glommio executor, once per
    /// executor, before storage opens anything under `root`.
    pub async fn open(root: &Path) -> IoResult<DmaDisk> {
        let root = &abs(root);
        std::fs::create_dir_all(root).map_err(|e| serr("create data dir", root, e))?;
        let probe = root.join(PROBE_FILE);
        let ok = std::fs::metadata(&probe).map(|m| m.len() == PAGE).unwrap_or(false);
        if !ok {
            use std::io::Write;
            // Several executors may start at once: each writes its own temporary file.
            let tmp = root.join(format!("{PROBE_FILE}.{}.{}.tmp", std::process::id(), glommio::executor().id()));
            let mut f = std::fs::File::create(&tmp).map_err(|e| serr("create probe", &tmp, e))?;
            f.write_all(&[0x7e; PAGE as usize]).map_err(|e| serr("write probe", &tmp, e))?;
            f.sync_all().map_err(|e| serr("sync probe", &tmp, e))?;
            std::fs::rename(&tmp, &probe).map_err(|e| serr("rename probe", &probe, e))?;
        }
        let f = DmaFile::open(&probe).await.map_err(|e| gerr("open probe", &probe, None, e))?;
        // Reading it proves DMA reads work on this device for this executor.
        f.read_at_aligned(0, PAGE as usize).await.map_err(|e| gerr("read probe", &probe, Some(0), e))?;
        f.close().await.map_err(|e| gerr("close probe", &probe, None, e))?;
        Ok(DmaDisk { root: Rc::new(root.to_path_buf()), zeros: Rc::default() })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// An open DMA file.
pub struct DmaDiskFile {
    file: DmaFile,
    path: PathBuf,
    /// Bytes reserved by fallocate so far (avoids repeating the syscall).
    allocated: Cell<u64>,
    /// The same file opened again with O_DSYNC, for [`DiskFile::write_synced_at`] (opened on
    /// its first use, dropped by [`DiskFile::writes_done`]).
    synced: std::cell::RefCell<Option<Rc<DmaFile>>>,
    /// Opening the O_DSYNC descriptor failed: synced writes are a write, then an fdatasync.
    no_synced: Cell<bool>,
}

impl IoBuf for DmaBuffer {
    fn trim(&mut self, len: usize) {
        self.trim_to_size(len)
    }
}

impl Disk for DmaDisk {
    type Buf = DmaBuffer;
    type File = DmaDiskFile;

    fn alloc(&self, len: usize) -> DmaBuffer {
        crate::invariant!((len as u64).is_multiple_of(PAGE));
        glommio::allocate_dma_buffer(len)
    }

    fn zeros(&self) -> Rc<DmaBuffer> {
        self.zeros
            .get_or_init(|| {
                let mut b = glommio::allocate_dma_buffer(ZEROS_BYTES);
                b.as_bytes_mut().fill(0);
                Rc::new(b)
            })
            .clone()
    }

    async fn open_rw(&self, path: &Path) -> IoResult<DmaDiskFile> {
        let path = &abs(path);
        injected(FaultOp::Open, "open", path, None).await?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .dma_open(path)
            .await
            .map_err(|e| gerr("open", path, None, e))?;
        Ok(DmaDiskFile::new(file, path))
    }

    async fn open_existing(&self, path: &Path) -> IoResult<DmaDiskFile> {
        let path = &abs(path);
        injected(FaultOp::Open, "open", path, None).await?;
        let file =
            OpenOptions::new().read(true).write(true).dma_open(path).await.map_err(|e| gerr("open", path, None, e))?;
        Ok(DmaDiskFile::new(file, path))
    }

    async fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        std::fs::create_dir_all(path).map_err(|e| serr("create dir", path, e))
    }

    async fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(path).map_err(|e| serr("list dir", path, e))? {
            let e = e.map_err(|e| serr("list dir", path, e))?;
            out.push(e.file_name().to_string_lossy().into_owned());
        }
        Ok(out)
    }

    async fn exists(&self, path: &Path) -> IoResult<bool> {
        match std::fs::symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(serr("stat", path, e)),
        }
    }

    async fn remove_file(&self, path: &Path) -> IoResult<()> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(serr("remove", path, e)),
        }
    }

    async fn remove_dir_all(&self, path: &Path) -> IoResult<()> {
        match std::fs::remove_dir_all(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(serr("remove dir", path, e)),
        }
    }

    async fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        glommio::io::rename(abs(from), abs(to)).await.map_err(|e| gerr("rename", from, None, e))
    }

    async fn sync_dir(&self, path: &Path) -> IoResult<()> {
        let path = &abs(path);
        let d = glommio::io::Directory::open(path).await.map_err(|e| gerr("open dir", path, None, e))?;
        d.sync().await.map_err(|e| gerr("sync dir", path, None, e))?;
        d.close().await.map_err(|e| gerr("close dir", path, None, e))
    }

    async fn file_size(&self, path: &Path) -> IoResult<u64> {
        Ok(std::fs::metadata(path).map_err(|e| serr("stat", path, e))?.len())
    }

    async fn mtime_ms(&self, path: &Path) -> IoResult<i64> {
        let m = std::fs::metadata(path).map_err(|e| serr("stat", path, e))?;
        let t = m.modified().map_err(|e| serr("stat mtime", path, e))?;
        Ok(t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0))
    }

    async fn set_mtime_ms(&self, path: &Path, ms: i64) -> IoResult<()> {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
        let f = std::fs::File::options().write(true).open(path).map_err(|e| serr("open", path, e))?;
        f.set_modified(t).map_err(|e| serr("set mtime", path, e))
    }
}

impl DmaDiskFile {
    fn new(file: DmaFile, path: &Path) -> DmaDiskFile {
        let path = path.to_path_buf();
        DmaDiskFile { file, path, allocated: Cell::new(0), synced: Default::default(), no_synced: Cell::new(false) }
    }

    /// A write of `want` bytes at `pos` that wrote `n`: an error unless whole.
    fn whole(&self, op: &'static str, pos: u64, n: usize, want: usize) -> IoResult<()> {
        if n == want {
            return Ok(());
        }
        let short = std::io::Error::new(std::io::ErrorKind::WriteZero, format!("short write: {n} of {want} bytes"));
        Err(IoError::new(op, &self.path, Some(pos), short))
    }

    /// The O_DSYNC descriptor, opened on first use through `/proc/self/fd` (the same inode as
    /// `file`, whatever became of its path). `None` once opening failed (EMFILE, say): a
    /// warning, and this file's synced writes are a write, then an fdatasync, from then on.
    async fn synced_file(&self) -> Option<Rc<DmaFile>> {
        if let Some(f) = self.synced.borrow().clone() {
            return Some(f);
        }
        if self.no_synced.get() {
            return None;
        }
        let same = PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        match OpenOptions::new().read(true).write(true).custom_flags(libc::O_DSYNC).dma_open(&same).await {
            Ok(f) => {
                // Two first uses at once: the first one's descriptor is dropped once its write
                // completes (glommio closes a dropped file).
                let f = Rc::new(f);
                *self.synced.borrow_mut() = Some(f.clone());
                Some(f)
            }
            Err(e) => {
                let error = std::io::Error::from(e);
                tracing::warn!(path = %self.path.display(), %error, "opening a segment again with O_DSYNC failed; its commits write, then fdatasync");
                self.no_synced.set(true);
                None
            }
        }
    }
}

impl DiskFile for DmaDiskFile {
    type Buf = DmaBuffer;

    fn path(&self) -> &Path {
        &self.path
    }

    async fn write_at(&self, buf: Rc<DmaBuffer>, pos: u64) -> IoResult<()> {
        crate::invariant!(pos.is_multiple_of(PAGE), "unaligned DMA write position");
        let want = buf.len();
        crate::invariant!((want as u64).is_multiple_of(PAGE), "unaligned DMA write length");
        if let Some(Fault::ShortWrite) = injected(FaultOp::Write, "write", &self.path, Some(pos)).await? {
            // The first page lands, then the error.
            let mut first = glommio::allocate_dma_buffer(PAGE as usize);
            first.as_bytes_mut().copy_from_slice(&buf.as_bytes()[..PAGE as usize]);
            let _ = self.file.write_at(first, pos).await;
            return Err(IoError::new("write", &self.path, Some(pos), std::io::Error::from_raw_os_error(libc::EIO)));
        }
        let n = self.file.write_rc_at(buf, pos).await.map_err(|e| gerr("write", &self.path, Some(pos), e))?;
        self.whole("write", pos, n, want)
    }

    /// One write through an O_DSYNC descriptor: the kernel writes, then makes it durable
    /// (fdatasync's work, flushing the device's cache) before the write completes, with no
    /// round trip through this executor and no io_uring worker thread between the two. On a
    /// device with FUA and a block with nothing else to sync, it is one FUA write, which does
    /// not flush earlier writes: hence the trait's caveat. While a fault rule is installed, and
    /// once the O_DSYNC descriptor could not be opened, it is a write, then an fdatasync (each
    /// meets its own fault).
    async fn write_synced_at(&self, buf: Rc<DmaBuffer>, pos: u64) -> IoResult<()> {
        let file = match faults::armed() {
            true => None,
            false => self.synced_file().await,
        };
        let Some(file) = file else {
            self.write_at(buf, pos).await?;
            return self.sync().await;
        };
        let want = buf.len();
        crate::invariant!(pos.is_multiple_of(PAGE), "unaligned DMA write position");
        crate::invariant!((want as u64).is_multiple_of(PAGE), "unaligned DMA write length");
        let n = file.write_rc_at(buf, pos).await.map_err(|e| gerr("write O_DSYNC", &self.path, Some(pos), e))?;
        self.whole("write O_DSYNC", pos, n, want)
    }

    fn writes_done(&self) {
        // Dropped, glommio closes it (a write still in flight holds its own reference).
        self.synced.borrow_mut().take();
    }

    async fn read_at(&self, pos: u64, len: usize) -> IoResult<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        injected(FaultOp::Read, "read", &self.path, Some(pos)).await?;
        let r = self.file.read_at(pos, len).await.map_err(|e| gerr("read", &self.path, Some(pos), e))?;
        Ok(r.to_vec())
    }

    async fn sync(&self) -> IoResult<()> {
        injected(FaultOp::Sync, "fdatasync", &self.path, None).await?;
        self.file.fdatasync().await.map_err(|e| gerr("fdatasync", &self.path, None, e))
    }

    async fn allocate(&self, len: u64) -> IoResult<()> {
        if len <= self.allocated.get() {
            return Ok(());
        }
        injected(FaultOp::Allocate, "fallocate", &self.path, Some(len)).await?;
        self.file.pre_allocate(len, false).await.map_err(|e| gerr("fallocate", &self.path, Some(len), e))?;
        self.allocated.set(len);
        Ok(())
    }

    async fn truncate(&self, len: u64) -> IoResult<()> {
        self.file.truncate(len).await.map_err(|e| gerr("truncate", &self.path, Some(len), e))?;
        self.allocated.set(self.allocated.get().min(len));
        Ok(())
    }

    async fn size(&self) -> IoResult<u64> {
        self.file.file_size().await.map_err(|e| gerr("stat", &self.path, None, e))
    }

    async fn close(self) -> IoResult<()> {
        let path = self.path;
        let synced = self.synced.into_inner().and_then(|f| Rc::try_unwrap(f).ok());
        let closed = self.file.close().await.map_err(|e| gerr("close", &path, None, e));
        if let Some(f) = synced {
            f.close().await.map_err(|e| gerr("close O_DSYNC", &path, None, e))?;
        }
        closed
    }
}
