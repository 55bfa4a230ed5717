//! The cluster (issue 20): a metadata quorum on openraft, as KRaft does it. Built so far: the
//! runtime openraft runs on ([`rt::GlommioRuntime`]); the quorum itself is not built yet
//! (docs/cluster-research.md has the plan).

pub mod rt;
