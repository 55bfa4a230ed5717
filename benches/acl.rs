//! ACL check cost: tidemark's indexed check against a scan of every binding (what it did
//! before the index, and what a naive authorizer does), side by side in one run, with 10,
//! 1,000 and 10,000 bindings: one literal ALLOW per user-topic pair plus a few prefixed and
//! wildcard bindings, checked for topics that exist, that a prefix covers, and that nobody
//! names.
//!
//! `cargo bench --bench acl` runs it in full; without `--bench` (as `cargo test --all-targets`
//! runs it) it does a small smoke run that also checks both ways decide alike.

use std::hint::black_box;
use std::time::Instant;
use tidemark::security::acl::{
    Acls, Asker, AuthorizerConfig, Binding, Operation, PatternType, Permission, ResourceType,
};

fn bindings(n: usize) -> Acls {
    let mut acls = Acls::default();
    let bind = |name: String, pattern, principal: String, op, permission| Binding {
        resource_type: ResourceType::Topic,
        name,
        pattern,
        principal,
        host: "*".into(),
        operation: op,
        permission,
    };
    for i in 0..n {
        acls.insert(bind(
            format!("topic-{i}"),
            PatternType::Literal,
            format!("User:u{}", i % 97),
            Operation::Read,
            Permission::Allow,
        ));
    }
    acls.insert(bind("orders-".into(), PatternType::Prefixed, "User:*".into(), Operation::Write, Permission::Allow));
    acls.insert(bind(
        "orders-secret".into(),
        PatternType::Literal,
        "User:u1".into(),
        Operation::Write,
        Permission::Deny,
    ));
    acls.insert(bind("*".into(), PatternType::Literal, "User:ops".into(), Operation::Describe, Permission::Allow));
    acls
}

/// The decision from every binding, without the index (StandardAuthorizer's rules).
fn scan(acls: &Acls, who: Asker<'_>, op: Operation, name: &str) -> bool {
    let mut allowed = false;
    for b in acls.bindings().iter().filter(|b| b.resource_type == ResourceType::Topic) {
        let covers = match b.pattern {
            PatternType::Literal => b.name == name || b.name == "*",
            PatternType::Prefixed => name.starts_with(&b.name),
        };
        if !covers || !(b.principal == who.principal || b.principal == "User:*") {
            continue;
        }
        let same = b.operation == op || b.operation == Operation::All;
        match b.permission {
            Permission::Deny if same => return false,
            Permission::Allow if same || (op == Operation::Describe && b.operation == Operation::Read) => {
                allowed = true
            }
            _ => {}
        }
    }
    allowed
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let config = AuthorizerConfig::default();
    let checks: Vec<(Asker<'static>, Operation, String)> = vec![
        (Asker { principal: "User:u5", host: "10.0.0.1" }, Operation::Read, "topic-5".into()),
        (Asker { principal: "User:u5", host: "10.0.0.1" }, Operation::Read, "topic-6".into()),
        (Asker { principal: "User:u1", host: "10.0.0.1" }, Operation::Write, "orders-secret".into()),
        (Asker { principal: "User:u2", host: "10.0.0.1" }, Operation::Write, "orders-eu-west-1".into()),
        (Asker { principal: "User:ops", host: "10.0.0.1" }, Operation::Describe, "anything-at-all".into()),
    ];
    let sizes: &[usize] = if full { &[10, 1000, 10_000] } else { &[10, 200] };
    let rounds = if full { 200_000 } else { 2_000 };
    println!("bindings  indexed ns/check  scan ns/check  scan/indexed");
    for &n in sizes {
        let acls = bindings(n);
        for (who, op, name) in &checks {
            let indexed = acls.authorize(&config, *who, *op, ResourceType::Topic, name);
            assert_eq!(indexed, scan(&acls, *who, *op, name), "{n} bindings, {} {op:?} {name}", who.principal);
        }
        let time = |f: &dyn Fn(&(Asker<'static>, Operation, String)) -> bool| {
            let start = Instant::now();
            for i in 0..rounds {
                black_box(f(&checks[i % checks.len()]));
            }
            start.elapsed().as_nanos() as f64 / rounds as f64
        };
        let indexed = time(&|(who, op, name)| acls.authorize(&config, *who, *op, ResourceType::Topic, name));
        let scanned = time(&|(who, op, name)| scan(&acls, *who, *op, name));
        println!("{n:>8}  {indexed:>16.0}  {scanned:>13.0}  {:>12.1}", scanned / indexed);
    }
}
