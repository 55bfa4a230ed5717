//! Helpers shared by the integration tests.
#![allow(dead_code)]

use tidemark::storage::format::batch::{BatchBuilder, BatchHeader};
use tidemark::storage::format::{BatchInfo, BatchWalk};

/// A batch of `n` records whose values encode `tag` and the record index, so every batch in a
/// test is distinct and a wrong or shifted read cannot pass.
pub fn tagged_batch(tag: u64, n: usize, value_len: usize, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        let mut v = format!("{tag}:{i}:").into_bytes();
        v.resize(value_len.max(v.len()), b'a' + (tag % 26) as u8);
        b.push(ts + i as i64, Some(&tag.to_be_bytes()), Some(&v), &[]);
    }
    b.finish()
}

/// The batch as the log stores it: baseOffset rewritten to `base`.
pub fn with_base(batch: &[u8], base: i64) -> Vec<u8> {
    let mut b = batch.to_vec();
    b[0..8].copy_from_slice(&base.to_be_bytes());
    b
}

/// Split stored bytes into (header, bytes) per v2 batch; panics on anything but whole v2
/// batches.
pub fn batches(bytes: &[u8]) -> Vec<(BatchHeader, Vec<u8>)> {
    let mut walk = BatchWalk::new(bytes, usize::MAX >> 1);
    let out: Vec<_> = walk
        .by_ref()
        .map(|r| {
            let (_, _, b) = r.expect("whole batches");
            (BatchHeader::parse(b).expect("a v2 batch"), b.to_vec())
        })
        .collect();
    assert_eq!(walk.pos(), bytes.len(), "a read returned a partial batch");
    out
}

/// Split stored bytes into (header, bytes) per batch of any magic; panics on anything but
/// whole batches.
pub fn stored_batches(bytes: &[u8]) -> Vec<(BatchInfo, Vec<u8>)> {
    let mut walk = BatchWalk::new(bytes, usize::MAX >> 1);
    let out: Vec<_> = walk.by_ref().map(|r| r.map(|(_, h, b)| (h, b.to_vec())).expect("whole batches")).collect();
    assert_eq!(walk.pos(), bytes.len(), "a read returned a partial batch");
    out
}

/// The entries of a legacy message set, each as its own bytes.
pub fn legacy_entries(set: &[u8]) -> Vec<Vec<u8>> {
    stored_batches(set).into_iter().map(|(_, b)| b).collect()
}

/// Run a future on a fresh glommio executor (storage's DMA disk and flusher need one).
pub fn run_glommio<T: Send + 'static>(
    f: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T>>> + Send + 'static,
) -> T {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .spawn(move || async move { f().await })
        .expect("executor")
        .join()
        .expect("join")
}

/// A fixed clock near the timestamps test batches carry (so nothing rolls by time).
pub fn test_clock() -> tidemark::storage::Clock {
    std::rc::Rc::new(|| 10_000)
}
