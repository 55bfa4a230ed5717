//! Fault injection, one mechanism for both disks: a [`FaultPlan`] is a list of rules ("the
//! next N operations of this kind on paths containing this text fail so"). [`MemDisk`] keeps
//! its own plan (tests call `inject`); [`DmaDisk`] consults the process-wide plan, which is
//! empty and disarmed unless the broker runs with `--fault-injection` and a rule is installed
//! over its metrics endpoint (`/faults`, docs/operations.md). Disarmed, the check is one
//! relaxed atomic load per I/O.
//!
//! [`MemDisk`]: super::MemDisk
//! [`DmaDisk`]: super::DmaDisk

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A failure to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// EIO.
    Eio,
    /// ENOSPC: the disk is full.
    NoSpace,
    /// A write that stores only its first page and reports EIO.
    ShortWrite,
    /// The operation succeeds after this many milliseconds (a slow disk; DMA disk only, the
    /// in-memory disk ignores it).
    Slow(u32),
}

impl Fault {
    /// The errno an operation hit by this fault fails with (`None` for [`Fault::Slow`]).
    pub fn errno(self) -> Option<i32> {
        match self {
            Fault::NoSpace => Some(libc::ENOSPC),
            Fault::Eio | Fault::ShortWrite => Some(libc::EIO),
            Fault::Slow(_) => None,
        }
    }
}

/// The operations faults can target: the disk's, and one of the cluster's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultOp {
    Write,
    Sync,
    Read,
    Allocate,
    Open,
    /// An ISR change a partition leader sends to the metadata quorum; its "path" is the
    /// partition's name, `<topic>-<partition>`. Slow delays the send; the others lose it (its
    /// outcome unknown, as when the quorum never answers).
    Propose,
}

impl FaultOp {
    pub fn parse(s: &str) -> Option<FaultOp> {
        Some(match s {
            "write" => FaultOp::Write,
            "sync" => FaultOp::Sync,
            "read" => FaultOp::Read,
            "allocate" => FaultOp::Allocate,
            "open" => FaultOp::Open,
            "propose" => FaultOp::Propose,
            _ => return None,
        })
    }
}

/// One rule: the next `count` operations of kind `op` on a path containing `path` (every
/// path when empty) fail with `fault`; `count` 0 means until the rule is removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRule {
    pub op: FaultOp,
    pub path: String,
    pub fault: Fault,
    pub count: u32,
}

/// The rules in force; the first matching rule fires.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    rules: Vec<FaultRule>,
}

impl FaultPlan {
    pub fn add(&mut self, rule: FaultRule) {
        self.rules.push(rule);
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[FaultRule] {
        &self.rules
    }

    /// The fault an operation of kind `op` on `path` meets now, counting it against its rule.
    pub fn take(&mut self, op: FaultOp, path: &Path) -> Option<Fault> {
        let i = self.rules.iter().position(|r| {
            r.op == op && (r.path.is_empty() || path.to_str().is_some_and(|p| p.contains(r.path.as_str())))
        })?;
        let fault = self.rules[i].fault;
        match self.rules[i].count {
            0 => {}
            1 => {
                self.rules.remove(i);
            }
            _ => self.rules[i].count -= 1,
        }
        Some(fault)
    }
}

static ARMED: AtomicBool = AtomicBool::new(false);
static GLOBAL: Mutex<FaultPlan> = Mutex::new(FaultPlan { rules: Vec::new() });

/// Install a rule in the process-wide plan (the DMA disk's).
pub fn install(rule: FaultRule) {
    let mut plan = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    plan.add(rule);
    ARMED.store(true, Ordering::Release);
}

/// Remove every process-wide rule.
pub fn clear() {
    let mut plan = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    plan.clear();
    ARMED.store(false, Ordering::Release);
}

/// The process-wide rules in force.
pub fn installed() -> Vec<FaultRule> {
    GLOBAL.lock().unwrap_or_else(|e| e.into_inner()).rules().to_vec()
}

/// True while any process-wide rule is installed.
pub fn armed() -> bool {
    ARMED.load(Ordering::Relaxed)
}

/// The process-wide fault an operation meets now (the DMA disk calls this before each one).
pub fn take(op: FaultOp, path: &Path) -> Option<Fault> {
    if !ARMED.load(Ordering::Relaxed) {
        return None;
    }
    let mut plan = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    let fault = plan.take(op, path);
    if plan.is_empty() {
        ARMED.store(false, Ordering::Release);
    }
    fault
}

/// Parse a rule from `key=value` pairs: `op=write|sync|read|allocate|open|propose`,
/// `fault=eio|enospc|short|slow`, `ms=N` (for slow), `count=N` (0 = until cleared, the
/// default), `path=TEXT` (a substring of the file's path; default every path).
pub fn parse_rule<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<FaultRule, String> {
    let (mut op, mut fault, mut ms, mut count, mut path) = (None, None, 0u32, 0u32, String::new());
    for (k, v) in pairs {
        match k {
            "op" => {
                op = Some(
                    FaultOp::parse(v)
                        .ok_or_else(|| format!("op={v}: expected write, sync, read, allocate, open or propose"))?,
                )
            }
            "fault" => fault = Some(v.to_string()),
            "ms" => ms = v.parse().map_err(|_| format!("ms={v}: not a number"))?,
            "count" => count = v.parse().map_err(|_| format!("count={v}: not a number"))?,
            "path" => path = v.to_string(),
            _ => return Err(format!("{k}: unknown parameter")),
        }
    }
    let op = op.ok_or("op is required")?;
    let fault = match fault.as_deref() {
        Some("eio") => Fault::Eio,
        Some("enospc") => Fault::NoSpace,
        Some("short") => Fault::ShortWrite,
        Some("slow") => Fault::Slow(ms),
        Some(f) => return Err(format!("fault={f}: expected eio, enospc, short or slow")),
        None => return Err("fault is required".into()),
    };
    Ok(FaultRule { op, path, fault, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Rules match by operation and path text, count down and expire; count 0 persists.
    #[test]
    fn plan_matches_counts_and_expires() {
        let mut plan = FaultPlan::default();
        plan.add(FaultRule { op: FaultOp::Write, path: "/a-0/".into(), fault: Fault::NoSpace, count: 2 });
        plan.add(FaultRule { op: FaultOp::Sync, path: String::new(), fault: Fault::Eio, count: 0 });
        let a = Path::new("/d/a-0/00000000000000000000.log");
        let b = Path::new("/d/b-0/00000000000000000000.log");
        assert_eq!(plan.take(FaultOp::Write, b), None);
        assert_eq!(plan.take(FaultOp::Write, a), Some(Fault::NoSpace));
        assert_eq!(plan.take(FaultOp::Write, a), Some(Fault::NoSpace));
        assert_eq!(plan.take(FaultOp::Write, a), None);
        for _ in 0..5 {
            assert_eq!(plan.take(FaultOp::Sync, b), Some(Fault::Eio));
        }
        assert_eq!(plan.rules().len(), 1);
    }

    // The endpoint's parameters parse into rules; bad ones are refused with a reason.
    #[test]
    fn rules_parse_from_parameters() {
        let r = parse_rule([("op", "sync"), ("fault", "slow"), ("ms", "250"), ("path", "t-1")]).unwrap();
        assert_eq!(r, FaultRule { op: FaultOp::Sync, path: "t-1".into(), fault: Fault::Slow(250), count: 0 });
        assert!(parse_rule([("op", "fsync"), ("fault", "eio")]).unwrap_err().contains("op=fsync"));
        assert!(parse_rule([("op", "write")]).unwrap_err().contains("fault"));
        let r = parse_rule([("op", "propose"), ("fault", "slow"), ("ms", "9000"), ("path", "t-0")]).unwrap();
        assert_eq!(r.op, FaultOp::Propose);
        assert!(parse_rule([("op", "write"), ("fault", "eio"), ("when", "now")]).is_err());
    }
}
