//! ACL authorization as Kafka's StandardAuthorizer decides it, without I/O: bindings
//! (principal, host, operation, ALLOW/DENY on a LITERAL or PREFIXED resource pattern), the
//! filters CreateAcls, DescribeAcls and DeleteAcls use, the decision for one action, KIP-679's
//! "may it write to any topic", KIP-430's authorized-operations bit fields, and the file the
//! bindings are kept in.
//!
//! The decision, for a principal at a host wanting an operation on a named resource:
//! 1. a super user (`super.users`) may do anything;
//! 2. the bindings that apply: same resource type, and the name equal (LITERAL), `*`
//!    (LITERAL), or a prefix of it (PREFIXED); their principal the principal or `User:*`,
//!    their host the client's address or `*`;
//! 3. a DENY of the operation (or ALL) denies; else an ALLOW of it (or ALL, or for DESCRIBE any
//!    of READ, WRITE, DELETE, ALTER; for DESCRIBE_CONFIGS ALTER_CONFIGS) allows;
//! 4. else, if no binding at all names the resource (whoever it is for),
//!    `allow.everyone.if.no.acl.found`; else denied.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::collections::{BTreeSet, HashMap};

/// Kafka's resource types (codes as on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceType {
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

/// Kafka's ACL operations (codes as on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
}

/// ALLOW or DENY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    Deny = 2,
    Allow = 3,
}

/// How a binding's resource name applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PatternType {
    Literal = 3,
    Prefixed = 4,
}

/// The name of the cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

impl ResourceType {
    pub const ALL: [ResourceType; 6] = [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::Cluster,
        ResourceType::TransactionalId,
        ResourceType::DelegationToken,
        ResourceType::User,
    ];

    pub fn from_code(c: i8) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|r| *r as i8 == c)
    }

    /// The operations that mean something on this type (KIP-430's bit fields use these).
    pub fn operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => {
                &[Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe]
            }
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        }
    }
}

impl Operation {
    pub const ALL_OPS: [Operation; 13] = [
        Operation::All,
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
        Operation::CreateTokens,
        Operation::DescribeTokens,
    ];

    pub fn from_code(c: i8) -> Option<Operation> {
        Operation::ALL_OPS.into_iter().find(|o| *o as i8 == c)
    }

    /// Whether an ALLOW of `self` allows `wanted` (ALL allows everything; the implied
    /// DESCRIBE and DESCRIBE_CONFIGS).
    fn allows(self, wanted: Operation) -> bool {
        use Operation::*;
        self == All
            || self == wanted
            || (wanted == Describe && matches!(self, Read | Write | Delete | Alter))
            || (wanted == DescribeConfigs && self == AlterConfigs)
    }

    /// Whether a DENY of `self` denies `wanted` (only the operation itself, or ALL).
    fn denies(self, wanted: Operation) -> bool {
        self == Operation::All || self == wanted
    }
}

impl Permission {
    pub fn from_code(c: i8) -> Option<Permission> {
        match c {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }
}

impl PatternType {
    pub fn from_code(c: i8) -> Option<PatternType> {
        match c {
            3 => Some(PatternType::Literal),
            4 => Some(PatternType::Prefixed),
            _ => None,
        }
    }
}

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Binding {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern: PatternType,
    /// `Type:name`, e.g. `User:alice`; `User:*` is every user.
    pub principal: String,
    /// A client address, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl Binding {
    /// Whether it applies to the resource `name` of its type.
    fn covers(&self, name: &str) -> bool {
        match self.pattern {
            PatternType::Literal => self.name == name || self.name == "*",
            PatternType::Prefixed => name.starts_with(&self.name),
        }
    }

    /// Kafka's checks of a binding to create: the reason it is refused, if it is.
    pub fn invalid(&self) -> Option<&'static str> {
        if self.name.is_empty() {
            return Some("Resource name should not be empty");
        }
        if self.resource_type == ResourceType::Cluster && self.name != CLUSTER_NAME {
            return Some("The only valid name for the CLUSTER resource is kafka-cluster");
        }
        match self.principal.split_once(':') {
            Some((t, n)) if !t.is_empty() && !n.is_empty() => None,
            _ => Some("Principal must be of the form Type:name"),
        }
    }
}

/// A filter over bindings (DescribeAcls, DeleteAcls): each field a wire code, ANY (1) or a
/// value; names, principals and hosts `None` for any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub resource_type: i8,
    pub name: Option<String>,
    /// 1 ANY, 2 MATCH (the bindings that would apply to `name`), 3 LITERAL, 4 PREFIXED.
    pub pattern: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

const ANY: i8 = 1;
const MATCH: i8 = 2;

impl Filter {
    /// Why the filter cannot be used (a code no value has), if it cannot.
    pub fn invalid(&self) -> Option<&'static str> {
        let known = |c: i8, ok: bool| c == ANY || ok;
        if !known(self.resource_type, ResourceType::from_code(self.resource_type).is_some()) {
            return Some("unknown resource type");
        }
        if !(self.pattern == MATCH || known(self.pattern, PatternType::from_code(self.pattern).is_some())) {
            return Some("unknown pattern type");
        }
        if !known(self.operation, Operation::from_code(self.operation).is_some()) {
            return Some("unknown operation");
        }
        if !known(self.permission, Permission::from_code(self.permission).is_some()) {
            return Some("unknown permission type");
        }
        None
    }

    pub fn matches(&self, b: &Binding) -> bool {
        let code_ok = |c: i8, v: i8| c == ANY || c == v;
        if !code_ok(self.resource_type, b.resource_type as i8)
            || !code_ok(self.operation, b.operation as i8)
            || !code_ok(self.permission, b.permission as i8)
        {
            return false;
        }
        if self.principal.as_ref().is_some_and(|p| *p != b.principal)
            || self.host.as_ref().is_some_and(|h| *h != b.host)
        {
            return false;
        }
        match (self.pattern, &self.name) {
            (MATCH, None) => true,
            (MATCH, Some(n)) => b.covers(n),
            (p, name) => (p == ANY || p == b.pattern as i8) && name.as_ref().is_none_or(|n| *n == b.name),
        }
    }
}

/// Every binding, with an index for checks (built at the first check after a change).
#[derive(Debug, Clone, Default)]
pub struct Acls {
    bindings: BTreeSet<Binding>,
    index: std::sync::OnceLock<Index>,
}

impl PartialEq for Acls {
    fn eq(&self, other: &Acls) -> bool {
        self.bindings == other.bindings
    }
}

impl Eq for Acls {}

/// The bindings by resource type and pattern type, then by name: a check looks up its
/// resource's name, `*`, and each prefix of the name, as Kafka's StandardAuthorizer does,
/// instead of reading every binding.
#[derive(Debug, Clone, Default)]
struct Index {
    by_name: HashMap<(ResourceType, PatternType), HashMap<String, Vec<Binding>>>,
    /// The lengths (bytes) of the prefixed bindings' names per resource type, ascending: a
    /// check looks up only the prefixes of the name that long.
    prefix_lengths: HashMap<ResourceType, Vec<usize>>,
}

/// The bindings file in the data directory.
pub const ACLS_FILE: &str = "acls";

impl Acls {
    pub fn bindings(&self) -> &BTreeSet<Binding> {
        &self.bindings
    }

    /// Add a binding (false if it was there).
    pub fn insert(&mut self, b: Binding) -> bool {
        self.index = Default::default();
        self.bindings.insert(b)
    }

    fn index(&self) -> &Index {
        self.index.get_or_init(|| {
            let mut index = Index::default();
            for b in &self.bindings {
                let by_name = index.by_name.entry((b.resource_type, b.pattern)).or_default();
                by_name.entry(b.name.clone()).or_default().push(b.clone());
                if b.pattern == PatternType::Prefixed {
                    index.prefix_lengths.entry(b.resource_type).or_default().push(b.name.len());
                }
            }
            for lengths in index.prefix_lengths.values_mut() {
                lengths.sort_unstable();
                lengths.dedup();
            }
            index
        })
    }

    /// The bindings that apply to the resource `name` of type `rt`.
    fn covering<'a>(&'a self, rt: ResourceType, name: &'a str) -> impl Iterator<Item = &'a Binding> + 'a {
        let index = self.index();
        let literal = index.by_name.get(&(rt, PatternType::Literal));
        let prefixed = index.by_name.get(&(rt, PatternType::Prefixed));
        let wildcard = (name != "*").then_some("*");
        let literals = [Some(name), wildcard].into_iter().flatten().filter_map(move |n| literal?.get(n));
        let lengths = index.prefix_lengths.get(&rt).map_or(&[][..], Vec::as_slice);
        let prefixes = lengths.iter().take_while(move |l| **l <= name.len()).filter_map(move |l| name.get(..*l));
        let prefixed = prefixes.filter_map(move |p| prefixed?.get(p));
        literals.chain(prefixed).flatten()
    }

    pub fn describe(&self, f: &Filter) -> Vec<Binding> {
        self.bindings.iter().filter(|b| f.matches(b)).cloned().collect()
    }

    /// Remove what `f` matches; the bindings removed.
    pub fn delete(&mut self, f: &Filter) -> Vec<Binding> {
        let gone = self.describe(f);
        self.index = Default::default();
        for b in &gone {
            self.bindings.remove(b);
        }
        gone
    }

    /// The file's text: a version line, then one binding per line: type, pattern, operation,
    /// permission codes, then name, principal and host in base64.
    pub fn encode(&self) -> String {
        let mut out = String::from("version=1\n");
        for b in &self.bindings {
            out.push_str(&format!(
                "{} {} {} {} {} {} {}\n",
                b.resource_type as i8,
                b.pattern as i8,
                b.operation as i8,
                b.permission as i8,
                B64.encode(&b.name),
                B64.encode(&b.principal),
                B64.encode(&b.host)
            ));
        }
        out
    }

    pub fn decode(text: &str) -> Result<Acls, String> {
        let mut lines = text.lines();
        if lines.next() != Some("version=1") {
            return Err("the first line is not version=1".into());
        }
        let mut out = Acls::default();
        for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let bad = |what: &str| format!("line {}: {what}", i + 2);
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() != 7 {
                return Err(bad("expected 7 fields"));
            }
            let code = |s: &str| s.parse::<i8>().map_err(|_| bad("not a code"));
            let text = |s: &str| {
                B64.decode(s).ok().and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| bad("not base64 text"))
            };
            out.insert(Binding {
                resource_type: ResourceType::from_code(code(f[0])?).ok_or_else(|| bad("resource type"))?,
                pattern: PatternType::from_code(code(f[1])?).ok_or_else(|| bad("pattern type"))?,
                operation: Operation::from_code(code(f[2])?).ok_or_else(|| bad("operation"))?,
                permission: Permission::from_code(code(f[3])?).ok_or_else(|| bad("permission"))?,
                name: text(f[4])?,
                principal: text(f[5])?,
                host: text(f[6])?,
            });
        }
        Ok(out)
    }

    pub fn load(data_dir: &std::path::Path) -> anyhow::Result<Acls> {
        crate::io::load_text(&data_dir.join(ACLS_FILE), Acls::decode)
    }
}

/// The authorizer's settings (`authorizer.class.name` set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals allowed everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

/// Who asks: its principal and address.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

impl Acls {
    /// May `who` do `op` on the resource `name` of type `rt`?
    pub fn authorize(
        &self,
        config: &AuthorizerConfig,
        who: Asker<'_>,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        if config.super_users.iter().any(|s| s == who.principal) {
            return true;
        }
        let mut named = false;
        let mut allowed = false;
        for b in self.covering(rt, name) {
            named = true;
            let applies =
                (b.principal == who.principal || b.principal == "User:*") && (b.host == "*" || b.host == who.host);
            if !applies {
                continue;
            }
            match b.permission {
                Permission::Deny if b.operation.denies(op) => return false,
                Permission::Allow if b.operation.allows(op) => allowed = true,
                _ => {}
            }
        }
        allowed || (!named && config.allow_if_no_acl)
    }

    /// KIP-679: may `who` do `op` on some resource of type `rt` (Kafka's
    /// `authorizeByResourceType`)? An ALLOW that no DENY of the same or a wider pattern
    /// cancels; implied operations do not count here.
    pub fn authorize_any(&self, config: &AuthorizerConfig, who: Asker<'_>, op: Operation, rt: ResourceType) -> bool {
        if self.authorize(config, who, op, rt, "hardcode") {
            return true;
        }
        let mine: Vec<&Binding> = self
            .bindings
            .iter()
            .filter(|b| {
                b.resource_type == rt
                    && (b.principal == who.principal || b.principal == "User:*")
                    && (b.host == "*" || b.host == who.host)
                    && (b.operation == op || b.operation == Operation::All)
            })
            .collect();
        let denies = |b: &Binding| {
            mine.iter().any(|d| {
                d.permission == Permission::Deny
                    && ((d.pattern == PatternType::Literal && (d.name == "*" || d.name == b.name))
                        || (d.pattern == PatternType::Prefixed && b.name.starts_with(&d.name)))
            })
        };
        mine.iter().any(|b| b.permission == Permission::Allow && !denies(b))
    }

    /// KIP-430: the operations `who` may do on the resource, as a bit field (`1 << code`).
    pub fn authorized_operations(
        &self,
        config: &AuthorizerConfig,
        who: Asker<'_>,
        rt: ResourceType,
        name: &str,
    ) -> i32 {
        rt.operations()
            .iter()
            .filter(|op| self.authorize(config, who, **op, rt, name))
            .fold(0, |m, op| m | 1 << (*op as i32))
    }
}

/// Every operation of a resource type, as a bit field (no authorizer: everything is allowed).
pub fn all_operations(rt: ResourceType) -> i32 {
    rt.operations().iter().fold(0, |m, op| m | 1 << (*op as i32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(
        rt: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: Operation,
        p: Permission,
    ) -> Binding {
        Binding {
            resource_type: rt,
            name: name.into(),
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: p,
        }
    }

    fn acls(bs: Vec<Binding>) -> Acls {
        Acls { bindings: bs.into_iter().collect(), index: Default::default() }
    }

    const ALICE: Asker<'static> = Asker { principal: "User:alice", host: "10.0.0.1" };
    const BOB: Asker<'static> = Asker { principal: "User:bob", host: "10.0.0.2" };

    /// Kafka's rules: DENY beats ALLOW; implied DESCRIBE (from READ) and DESCRIBE_CONFIGS
    /// (from ALTER_CONFIGS) for ALLOW only; prefixed and `*` patterns; `User:*`; hosts; a
    /// resource nobody named falls to allow.everyone.if.no.acl.found, one named by any
    /// binding does not; super users pass everything.
    #[test]
    fn decisions() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let a = acls(vec![
            bind(Topic, "orders", Literal, "User:alice", Read, Allow),
            bind(Topic, "pay-", Prefixed, "User:*", Write, Allow),
            bind(Topic, "pay-secret", Literal, "User:bob", Write, Deny),
            bind(Topic, "*", Literal, "User:alice", AlterConfigs, Allow),
            bind(Group, "g", Literal, "User:alice", All, Allow),
            bind(Topic, "audit", Literal, "User:alice", Read, Deny),
            Binding { host: "10.0.0.9".into(), ..bind(Topic, "hosted", Literal, "User:alice", Read, Allow) },
        ]);
        let strict = AuthorizerConfig::default();
        let open = AuthorizerConfig { allow_if_no_acl: true, ..Default::default() };
        let ok = |who, op, rt, name: &str| a.authorize(&strict, who, op, rt, name);
        assert!(ok(ALICE, Read, Topic, "orders"));
        assert!(ok(ALICE, Describe, Topic, "orders"), "READ implies DESCRIBE");
        assert!(!ok(ALICE, Write, Topic, "orders"));
        assert!(!ok(BOB, Read, Topic, "orders"));
        assert!(ok(BOB, Write, Topic, "pay-in") && ok(ALICE, Write, Topic, "pay-out"), "prefix, User:*");
        assert!(!ok(BOB, Write, Topic, "pay-secret") && ok(ALICE, Write, Topic, "pay-secret"), "DENY beats ALLOW");
        assert!(ok(ALICE, DescribeConfigs, Topic, "anything"), "ALTER_CONFIGS on * implies DESCRIBE_CONFIGS");
        assert!(ok(ALICE, Delete, Group, "g"), "ALL");
        // DENY READ does not deny DESCRIBE, but nothing allows it: the topic is named, so denied.
        assert!(!ok(ALICE, Read, Topic, "audit") && !ok(ALICE, Describe, Topic, "audit"));
        assert!(
            !ok(ALICE, Read, Topic, "hosted")
                && a.authorize(&strict, Asker { host: "10.0.0.9", ..ALICE }, Read, Topic, "hosted")
        );
        assert!(!a.authorize(&strict, BOB, Read, Group, "other"));
        assert!(a.authorize(&open, BOB, Read, Group, "other"), "nobody named it");
        assert!(!a.authorize(&open, BOB, Read, Topic, "orders"), "named by alice's binding: no fallback");
        let sup = AuthorizerConfig { super_users: vec!["User:bob".into()], ..Default::default() };
        assert!(a.authorize(&sup, BOB, Read, Topic, "audit"));
        assert_eq!(
            a.authorized_operations(&strict, ALICE, Topic, "orders"),
            (1 << 3) | (1 << 8) | (1 << 10) | (1 << 11)
        );
        assert_eq!(all_operations(Topic), 3576);
        assert_eq!(all_operations(Cluster), 8096);
    }

    proptest::proptest! {
        /// The index finds exactly the bindings a scan of every binding finds: random
        /// bindings (literal, prefixed, `*`, multi-byte names) and random checks decide alike.
        #[test]
        fn index_decides_as_a_scan(
            bs in proptest::collection::vec(
                (0..3usize, "(\\*|[abé]{1,4})", proptest::bool::ANY, 0..2usize, 0..4usize, proptest::bool::ANY),
                0..40,
            ),
            checks in proptest::collection::vec((0..3usize, "[abé*]{1,5}", 0..2usize, 0..4usize), 1..30),
        ) {
            use Operation::*;
            let rts = [ResourceType::Topic, ResourceType::Group, ResourceType::TransactionalId];
            let ops = [Read, Write, Describe, All];
            let who = ["User:alice", "User:*"];
            let a = acls(bs.iter().map(|(rt, name, prefixed, p, op, deny)| bind(
                rts[*rt],
                name,
                if *prefixed { PatternType::Prefixed } else { PatternType::Literal },
                who[*p],
                ops[*op],
                if *deny { Permission::Deny } else { Permission::Allow },
            )).collect());
            for (rt, name, p, op) in checks {
                let asker = Asker { principal: if p == 0 { "User:alice" } else { "User:bob" }, host: "h" };
                let configs = [AuthorizerConfig::default(), AuthorizerConfig { allow_if_no_acl: true, ..Default::default() }];
                for config in configs {
                    let covering: Vec<&Binding> =
                        a.bindings.iter().filter(|b| b.resource_type == rts[rt] && b.covers(&name)).collect();
                    let mine: Vec<&Binding> = covering
                        .iter()
                        .copied()
                        .filter(|b| b.principal == asker.principal || b.principal == "User:*")
                        .collect();
                    let scan = if mine.iter().any(|b| b.permission == Permission::Deny && b.operation.denies(ops[op])) {
                        false
                    } else {
                        mine.iter().any(|b| b.permission == Permission::Allow && b.operation.allows(ops[op]))
                            || (covering.is_empty() && config.allow_if_no_acl)
                    };
                    let decided = a.authorize(&config, asker, ops[op], rts[rt], &name);
                    proptest::prop_assert_eq!(decided, scan, "{} {:?}", name, ops[op]);
                }
            }
        }
    }

    /// KIP-679: an ALLOW WRITE on some topic lets a principal write to "any" topic unless a
    /// DENY covers that ALLOW's name.
    #[test]
    fn any_topic() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let strict = AuthorizerConfig::default();
        let a = acls(vec![bind(Topic, "t", Literal, "User:alice", Write, Allow)]);
        assert!(a.authorize_any(&strict, ALICE, Write, Topic) && !a.authorize_any(&strict, BOB, Write, Topic));
        let d = acls(vec![
            bind(Topic, "t", Literal, "User:alice", Write, Allow),
            bind(Topic, "t", Prefixed, "User:alice", Write, Deny),
        ]);
        assert!(!d.authorize_any(&strict, ALICE, Write, Topic));
    }

    /// Filters: ANY matches every pattern with that exact name; MATCH the bindings that apply
    /// to a name; unknown codes are refused; delete removes and returns what matched; the
    /// file round-trips.
    #[test]
    fn filters_and_file() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let mut a = acls(vec![
            bind(Topic, "pay-", Prefixed, "User:*", Write, Allow),
            bind(Topic, "pay-in", Literal, "User:bob", Read, Allow),
            bind(Topic, "*", Literal, "User:bob", Describe, Allow),
            bind(Group, "pay-in", Literal, "User:bob", Read, Allow),
        ]);
        let f = |rt: i8, name: Option<&str>, pattern: i8| Filter {
            resource_type: rt,
            name: name.map(str::to_string),
            pattern,
            principal: None,
            host: None,
            operation: 1,
            permission: 1,
        };
        assert_eq!(a.describe(&f(2, Some("pay-in"), MATCH)).len(), 3);
        assert_eq!(a.describe(&f(2, Some("pay-in"), ANY)).len(), 1);
        assert_eq!(a.describe(&f(1, Some("pay-in"), ANY)).len(), 2);
        assert_eq!(a.describe(&f(1, None, ANY)).len(), 4);
        assert!(f(9, None, ANY).invalid().is_some() && f(2, None, 7).invalid().is_some());
        assert_eq!(Acls::decode(&a.encode()), Ok(a.clone()));
        let gone = a.delete(&f(3, None, ANY));
        assert_eq!((gone.len(), a.bindings.len()), (1, 3));
        assert!(bind(Cluster, "x", Literal, "User:a", Alter, Allow).invalid().is_some());
        assert!(bind(Topic, "x", Literal, "alice", Alter, Allow).invalid().is_some());
        assert!(bind(Cluster, CLUSTER_NAME, Literal, "User:a", Alter, Allow).invalid().is_none());
    }
}
