//! An in-memory [`Disk`] for tests: it remembers what was synced, so a test can crash it and
//! see what a power cut would leave, and it can fail operations on demand.
//!
//! Model: each file has its current bytes and its synced image. A write changes the current
//! bytes and is queued as pending; `sync` makes the bytes as they were when it was issued the
//! synced image (writes that complete while it runs stay pending, as io_uring orders nothing
//! between a write and an fdatasync), and two writes of one page may not be in flight at
//! once (a panic: on a real disk they would race). `crash`
//! rebuilds every file from its synced image plus some of its pending writes, as
//! [`CrashMode`] says (none, all, or a random subset with torn pages). Directory operations
//! (create, remove, rename) are durable at once; a file created but never synced survives a
//! crash empty. Faults are injected per operation kind and fire a given number of times.

use super::faults::{Fault, FaultOp, FaultPlan, FaultRule};
use super::{Disk, DiskFile, IoBuf, IoError, IoResult, PAGE};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What survives of unsynced writes at a crash.
#[derive(Clone, Copy, Debug)]
pub enum CrashMode {
    /// Only synced data survives.
    DropUnsynced,
    /// Every completed write survives (the kernel wrote it back before the power cut).
    KeepUnsynced,
    /// Each pending write survives whole, in part (a prefix of whole pages, the rest zero or
    /// old data) or not at all, chosen by a seeded generator.
    Torn { seed: u64 },
}

#[derive(Default, Debug)]
struct FileState {
    data: Vec<u8>,
    synced: Vec<u8>,
    /// Writes since the last sync: (position, bytes).
    pending: Vec<(u64, Vec<u8>)>,
    /// Page ranges of writes in flight: two writes of one page in flight together would race
    /// on a real disk, so the model refuses them.
    in_flight: Vec<(u64, u64)>,
    mtime_ms: i64,
}

#[derive(Default, Debug)]
struct State {
    files: BTreeMap<PathBuf, Rc<RefCell<FileState>>>,
    dirs: BTreeSet<PathBuf>,
    faults: FaultPlan,
    now_ms: i64,
    /// Changes (writes, syncs, truncations, creations, renames, removals) allowed before the
    /// "machine" dies: after them every operation fails until [`MemDisk::heal`].
    fuse: Option<u64>,
    syncs: u64,
    writes: u64,
    /// Writes made durable by themselves (`write_synced_at`), also counted in both above.
    synced_writes: u64,
    /// Syncs issued and not yet returned, and writes issued while one was.
    syncs_in_flight: u32,
    overlapped_writes: u64,
}

/// The in-memory disk. Clones share the same files.
#[derive(Clone, Default, Debug)]
pub struct MemDisk {
    state: Rc<RefCell<State>>,
}

fn err(op: &'static str, path: &Path, offset: Option<u64>, errno: i32) -> IoError {
    IoError::new(op, path, offset, std::io::Error::from_raw_os_error(errno))
}

impl MemDisk {
    pub fn new() -> MemDisk {
        MemDisk::default()
    }

    /// Fail the next `count` operations of kind `op` with `fault`.
    pub fn inject(&self, op: FaultOp, fault: Fault, count: u32) {
        self.inject_rule(FaultRule { op, path: String::new(), fault, count });
    }

    /// Add a rule (operations on paths containing `rule.path` only; count 0 = until healed).
    pub fn inject_rule(&self, rule: FaultRule) {
        self.state.borrow_mut().faults.add(rule);
    }

    /// Remove every injected fault (and a blown or armed fuse).
    pub fn heal(&self) {
        let mut st = self.state.borrow_mut();
        st.faults.clear();
        st.fuse = None;
    }

    /// Let `changes` more changing operations succeed, then fail every operation with EIO
    /// until [`MemDisk::heal`]: a machine that dies at that step (tests then `crash` it and
    /// reopen, for a kill at every step of a multi-file change).
    pub fn fail_after(&self, changes: u64) {
        self.state.borrow_mut().fuse = Some(changes);
    }

    /// Count one changing operation against the fuse: `Err` when the machine is dead.
    fn change(&self, op: &'static str, path: &Path) -> IoResult<()> {
        let mut st = self.state.borrow_mut();
        match st.fuse {
            Some(0) => Err(err(op, path, None, libc::EIO)),
            Some(n) => {
                st.fuse = Some(n - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// `Err` once the fuse blew (reads fail on a dead machine too).
    fn alive(&self, op: &'static str, path: &Path) -> IoResult<()> {
        match self.state.borrow().fuse {
            Some(0) => Err(err(op, path, None, libc::EIO)),
            _ => Ok(()),
        }
    }

    /// The modification time given to files written from now on.
    pub fn set_now_ms(&self, now: i64) {
        self.state.borrow_mut().now_ms = now;
    }

    /// How many syncs and writes have been issued (for group-commit tests).
    pub fn counters(&self) -> (u64, u64) {
        let s = self.state.borrow();
        (s.syncs, s.writes)
    }

    /// How many writes were made durable by themselves ([`DiskFile::write_synced_at`]).
    pub fn synced_writes(&self) -> u64 {
        self.state.borrow().synced_writes
    }

    /// How many writes were issued while a sync was in flight (pipelined flushes).
    pub fn overlapped_writes(&self) -> u64 {
        self.state.borrow().overlapped_writes
    }

    /// Simulate a power cut: every file keeps its synced image plus what `mode` lets survive
    /// of its pending writes. Open handles keep working on the new contents.
    pub fn crash(&self, mode: CrashMode) {
        let mut rng = match mode {
            CrashMode::Torn { seed } => seed | 1,
            _ => 1,
        };
        let mut next = move || {
            // xorshift64*: deterministic, enough for choosing what survives.
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let st = self.state.borrow();
        for f in st.files.values() {
            let mut f = f.borrow_mut();
            let mut image = f.synced.clone();
            let pending = std::mem::take(&mut f.pending);
            for (pos, bytes) in pending {
                let keep = match mode {
                    CrashMode::DropUnsynced => 0,
                    CrashMode::KeepUnsynced => bytes.len(),
                    CrashMode::Torn { .. } => match next() % 3 {
                        0 => 0,
                        1 => bytes.len(),
                        _ => {
                            let pages = (bytes.len() as u64 / PAGE).max(1);
                            ((next() % pages) * PAGE) as usize
                        }
                    },
                };
                if keep > 0 {
                    write_into(&mut image, pos, &bytes[..keep]);
                }
            }
            f.data = image.clone();
            f.synced = image;
        }
    }

    /// The current bytes of a file (for tests that cut or corrupt files).
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.state.borrow().files.get(path).map(|f| f.borrow().data.clone())
    }

    /// Replace a file's bytes, durably (for tests that cut or corrupt files).
    pub fn set_file_bytes(&self, path: &Path, bytes: Vec<u8>) {
        let mut st = self.state.borrow_mut();
        let now = st.now_ms;
        let f = st.files.entry(path.to_path_buf()).or_default().clone();
        let mut f = f.borrow_mut();
        f.data = bytes.clone();
        f.synced = bytes;
        f.pending.clear();
        f.mtime_ms = now;
    }

    /// Every file path, sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.state.borrow().files.keys().cloned().collect()
    }

    /// The fault an operation meets (slow faults do not apply to this disk).
    fn take_fault(&self, op: FaultOp, path: &Path) -> Option<Fault> {
        self.state.borrow_mut().faults.take(op, path).filter(|f| !matches!(f, Fault::Slow(_)))
    }
}

fn write_into(image: &mut Vec<u8>, pos: u64, bytes: &[u8]) {
    let end = pos as usize + bytes.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[pos as usize..end].copy_from_slice(bytes);
}

/// Where a write of `len` bytes at `pos` meets the range `[a, b)`, if it does.
fn overlap(pos: usize, len: usize, a: usize, b: usize) -> Option<(usize, usize)> {
    let (c, d) = (pos.max(a), (pos + len).min(b));
    (c < d).then_some((c, d))
}

fn fault_errno(f: Fault) -> i32 {
    f.errno().unwrap_or(libc::EIO)
}

/// A file on a [`MemDisk`].
pub struct MemFile {
    disk: MemDisk,
    state: Rc<RefCell<FileState>>,
    path: PathBuf,
}

/// A plain heap buffer stands in for a DMA buffer.
pub struct MemBuf(Vec<u8>);

impl AsRef<[u8]> for MemBuf {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}
impl AsMut<[u8]> for MemBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}
impl IoBuf for MemBuf {
    fn trim(&mut self, len: usize) {
        self.0.truncate(len)
    }
}

impl Disk for MemDisk {
    type Buf = MemBuf;
    type File = MemFile;

    fn alloc(&self, len: usize) -> MemBuf {
        assert_eq!(len as u64 % PAGE, 0, "unaligned buffer");
        // Not zeroed on purpose: callers must fill what they write.
        MemBuf(vec![0xa5; len])
    }

    fn zeros(&self) -> Rc<MemBuf> {
        Rc::new(MemBuf(vec![0; super::ZEROS_BYTES]))
    }

    async fn open_rw(&self, path: &Path) -> IoResult<MemFile> {
        if let Some(f) = self.take_fault(FaultOp::Open, path) {
            return Err(err("open", path, None, fault_errno(f)));
        }
        if self.state.borrow().files.contains_key(path) {
            self.alive("open", path)?;
        } else {
            self.change("create", path)?;
        }
        let mut st = self.state.borrow_mut();
        if let Some(parent) = path.parent() {
            if !st.dirs.contains(parent) {
                return Err(err("open", path, None, libc::ENOENT));
            }
        }
        let now = st.now_ms;
        let state = st
            .files
            .entry(path.to_path_buf())
            .or_insert_with(|| Rc::new(RefCell::new(FileState { mtime_ms: now, ..Default::default() })))
            .clone();
        Ok(MemFile { disk: self.clone(), state, path: path.to_path_buf() })
    }

    async fn open_existing(&self, path: &Path) -> IoResult<MemFile> {
        if !self.state.borrow().files.contains_key(path) {
            return Err(err("open", path, None, libc::ENOENT));
        }
        self.open_rw(path).await
    }

    async fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.borrow_mut();
        for a in path.ancestors() {
            if !a.as_os_str().is_empty() {
                st.dirs.insert(a.to_path_buf());
            }
        }
        Ok(())
    }

    async fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        let st = self.state.borrow();
        if !st.dirs.contains(path) {
            return Err(err("list dir", path, None, libc::ENOENT));
        }
        let names = st
            .files
            .keys()
            .chain(st.dirs.iter())
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        Ok(names)
    }

    async fn exists(&self, path: &Path) -> IoResult<bool> {
        let st = self.state.borrow();
        Ok(st.files.contains_key(path) || st.dirs.contains(path))
    }

    async fn remove_file(&self, path: &Path) -> IoResult<()> {
        self.change("remove", path)?;
        self.state.borrow_mut().files.remove(path);
        Ok(())
    }

    async fn remove_dir_all(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.borrow_mut();
        st.files.retain(|p, _| !p.starts_with(path));
        st.dirs.retain(|p| !p.starts_with(path));
        Ok(())
    }

    async fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        self.change("rename", from)?;
        let mut st = self.state.borrow_mut();
        match st.files.remove(from) {
            Some(f) => {
                st.files.insert(to.to_path_buf(), f);
                Ok(())
            }
            None => Err(err("rename", from, None, libc::ENOENT)),
        }
    }

    async fn sync_dir(&self, path: &Path) -> IoResult<()> {
        self.change("sync dir", path)
    }

    async fn file_size(&self, path: &Path) -> IoResult<u64> {
        let st = self.state.borrow();
        match st.files.get(path) {
            Some(f) => Ok(f.borrow().data.len() as u64),
            None => Err(err("stat", path, None, libc::ENOENT)),
        }
    }

    async fn mtime_ms(&self, path: &Path) -> IoResult<i64> {
        let st = self.state.borrow();
        match st.files.get(path) {
            Some(f) => Ok(f.borrow().mtime_ms),
            None => Err(err("stat", path, None, libc::ENOENT)),
        }
    }

    async fn set_mtime_ms(&self, path: &Path, ms: i64) -> IoResult<()> {
        self.change("set mtime", path)?;
        match self.state.borrow().files.get(path) {
            Some(f) => {
                f.borrow_mut().mtime_ms = ms;
                Ok(())
            }
            None => Err(err("set mtime", path, None, libc::ENOENT)),
        }
    }
}

/// A write's page range, registered while it is in flight (also when its future is dropped).
struct InFlight<'a> {
    file: &'a RefCell<FileState>,
    range: (u64, u64),
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut f = self.file.borrow_mut();
        if let Some(i) = f.in_flight.iter().position(|r| *r == self.range) {
            f.in_flight.swap_remove(i);
        }
    }
}

/// A sync in flight (also when its future is dropped).
struct SyncInFlight<'a>(&'a RefCell<State>);

impl Drop for SyncInFlight<'_> {
    fn drop(&mut self) {
        self.0.borrow_mut().syncs_in_flight -= 1;
    }
}

impl DiskFile for MemFile {
    type Buf = MemBuf;

    fn path(&self) -> &Path {
        &self.path
    }

    async fn write_at(&self, buf: Rc<MemBuf>, pos: u64) -> IoResult<()> {
        assert_eq!(pos % PAGE, 0, "unaligned write position");
        assert_eq!(buf.0.len() as u64 % PAGE, 0, "unaligned write length");
        let range = (pos, pos + buf.0.len() as u64);
        {
            let mut f = self.state.borrow_mut();
            if let Some(other) = f.in_flight.iter().find(|(a, b)| *a < range.1 && range.0 < *b) {
                panic!("{}: write {range:?} overlaps write {other:?} still in flight", self.path.display());
            }
            f.in_flight.push(range);
        }
        {
            let mut st = self.disk.state.borrow_mut();
            st.overlapped_writes += u64::from(st.syncs_in_flight > 0);
        }
        let in_flight = InFlight { file: &self.state, range };
        // Real I/O takes time: yield once so other tasks run meanwhile (as they would while
        // io_uring works); group commit depends on it.
        futures_lite::future::yield_now().await;
        drop(in_flight);
        self.disk.change("write", &self.path)?;
        let fault = self.disk.take_fault(FaultOp::Write, &self.path);
        self.disk.state.borrow_mut().writes += 1;
        let now = self.disk.state.borrow().now_ms;
        let mut f = self.state.borrow_mut();
        let bytes: &[u8] = match fault {
            None => &buf.0,
            Some(Fault::ShortWrite) => &buf.0[..PAGE as usize],
            Some(other) => return Err(err("write", &self.path, Some(pos), fault_errno(other))),
        };
        write_into(&mut f.data, pos, bytes);
        f.pending.push((pos, bytes.to_vec()));
        f.mtime_ms = now;
        match fault {
            Some(Fault::ShortWrite) => Err(err("write", &self.path, Some(pos), libc::EIO)),
            _ => Ok(()),
        }
    }

    async fn read_at(&self, pos: u64, len: usize) -> IoResult<Vec<u8>> {
        self.disk.alive("read", &self.path)?;
        if let Some(f) = self.disk.take_fault(FaultOp::Read, &self.path) {
            return Err(err("read", &self.path, Some(pos), fault_errno(f)));
        }
        let f = self.state.borrow();
        let start = (pos as usize).min(f.data.len());
        let end = (pos as usize).saturating_add(len).min(f.data.len());
        Ok(f.data[start..end].to_vec())
    }

    async fn sync(&self) -> IoResult<()> {
        // A sync covers the writes completed when it is issued, not those that complete while
        // it runs (io_uring orders nothing between them).
        let (image, covered) = {
            let f = self.state.borrow();
            (f.data.clone(), f.pending.len())
        };
        self.disk.state.borrow_mut().syncs_in_flight += 1;
        let syncing = SyncInFlight(&self.disk.state);
        futures_lite::future::yield_now().await;
        drop(syncing);
        self.disk.change("fdatasync", &self.path)?;
        if let Some(fault) = self.disk.take_fault(FaultOp::Sync, &self.path) {
            // A failed fdatasync may have lost what it covered, and a later one that succeeds
            // does not bring it back (Linux marks the pages clean): those writes are gone.
            let mut f = self.state.borrow_mut();
            let covered = covered.min(f.pending.len());
            let lost: Vec<_> = f.pending.drain(..covered).collect();
            for (pos, bytes) in lost {
                let (a, b) = (pos as usize, pos as usize + bytes.len());
                let mut old = vec![0u8; b - a];
                let have = f.synced.len().clamp(a, b);
                old[..have - a].copy_from_slice(&f.synced[a..have]);
                write_into(&mut f.data, pos, &old);
            }
            let later = std::mem::take(&mut f.pending);
            for (pos, bytes) in &later {
                write_into(&mut f.data, *pos, bytes);
            }
            f.pending = later;
            return Err(err("fdatasync", &self.path, None, fault_errno(fault)));
        }
        self.disk.state.borrow_mut().syncs += 1;
        let mut f = self.state.borrow_mut();
        // A fallocate while the sync ran is durable at once (see `allocate`).
        let len = image.len().max(f.synced.len());
        f.synced = image;
        f.synced.resize(len, 0);
        let covered = covered.min(f.pending.len());
        f.pending.drain(..covered);
        Ok(())
    }

    /// The weakest durability the trait allows (one FUA write): this write is durable when it
    /// returns, and writes completed before it and not synced stay pending (a crash may drop
    /// them). A sync fault loses this write, as a failed fdatasync loses what it covered.
    async fn write_synced_at(&self, buf: Rc<MemBuf>, pos: u64) -> IoResult<()> {
        self.write_at(buf, pos).await?;
        self.disk.change("fdatasync", &self.path)?;
        let fault = self.disk.take_fault(FaultOp::Sync, &self.path);
        let mut f = self.state.borrow_mut();
        // Nothing awaited since the write completed: it is the last pending one.
        let (at, bytes) = f.pending.pop().expect("the write just completed");
        let (a, b) = (at as usize, at as usize + bytes.len());
        if let Some(fault) = fault {
            // Lost: the range reads as before the write (the synced image, then the writes
            // still pending over it).
            let mut old = vec![0u8; b - a];
            let have = f.synced.len().clamp(a, b);
            old[..have - a].copy_from_slice(&f.synced[a..have]);
            for (p, w) in &f.pending {
                if let Some((c, d)) = overlap(*p as usize, w.len(), a, b) {
                    old[c - a..d - a].copy_from_slice(&w[c - *p as usize..d - *p as usize]);
                }
            }
            write_into(&mut f.data, at, &old);
            return Err(err("fdatasync", &self.path, None, fault_errno(fault)));
        }
        // Durable. Earlier pending writes to the same bytes carry the new ones from now on, so
        // a crash that replays them does not bring older bytes back over durable ones.
        for (p, w) in f.pending.iter_mut() {
            if let Some((c, d)) = overlap(*p as usize, w.len(), a, b) {
                w[c - *p as usize..d - *p as usize].copy_from_slice(&bytes[c - a..d - a]);
            }
        }
        write_into(&mut f.synced, at, &bytes);
        drop(f);
        let mut st = self.disk.state.borrow_mut();
        st.syncs += 1;
        st.synced_writes += 1;
        Ok(())
    }

    async fn allocate(&self, len: u64) -> IoResult<()> {
        self.disk.change("fallocate", &self.path)?;
        if let Some(f) = self.disk.take_fault(FaultOp::Allocate, &self.path) {
            return Err(err("fallocate", &self.path, Some(len), fault_errno(f)));
        }
        let mut f = self.state.borrow_mut();
        if (f.data.len() as u64) < len {
            f.data.resize(len as usize, 0);
            // Allocation is metadata: durable at once in this model (as ext4 journals it).
            let synced_len = f.synced.len().max(len as usize);
            f.synced.resize(synced_len, 0);
        }
        Ok(())
    }

    async fn truncate(&self, len: u64) -> IoResult<()> {
        self.disk.change("truncate", &self.path)?;
        let mut f = self.state.borrow_mut();
        f.data.resize(len as usize, 0);
        // Truncation is durable at once in this model; pending writes past it are gone.
        f.synced.resize(len as usize, 0);
        let mut pending = std::mem::take(&mut f.pending);
        pending.retain_mut(|(pos, bytes)| {
            if *pos >= len {
                return false;
            }
            bytes.truncate((len - *pos) as usize);
            true
        });
        f.pending = pending;
        Ok(())
    }

    async fn size(&self) -> IoResult<u64> {
        Ok(self.state.borrow().data.len() as u64)
    }

    async fn close(self) -> IoResult<()> {
        Ok(())
    }
}
