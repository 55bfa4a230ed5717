//! The ACL APIs: DescribeAcls from this shard's copy of the bindings, CreateAcls and
//! DeleteAcls on shard 0 ([`crate::server::control::acls`]). Without an authorizer
//! (`authorizer.class.name` unset) they answer SECURITY_DISABLED, as Kafka does; with one,
//! DescribeAcls needs DESCRIBE on the cluster, the others ALTER.

use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::security::*;
use crate::security::acl::{Binding, Filter, Operation, PatternType, Permission, ResourceType};
use crate::server::api::Cx;
use crate::server::control::acls::{AclChange, ChangeAcls};
use crate::server::errors::call_code;
use std::collections::BTreeMap;

const DISABLED: &str = "No Authorizer is configured on the broker";

/// Why the ACL APIs refuse this client, if they do: no authorizer (SECURITY_DISABLED), or not
/// allowed `op` on the cluster.
fn refused(cx: &Cx<'_>, op: Operation) -> Option<(ErrorCode, &'static str)> {
    if !cx.shard.config().authorizer_enabled {
        return Some((code::SECURITY_DISABLED, DISABLED));
    }
    (!cx.allowed_on_cluster(op)).then_some((code::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."))
}

fn filter(f: &AclFilter) -> Filter {
    Filter {
        resource_type: f.resource_type_filter,
        name: f.resource_name_filter.clone(),
        pattern: f.pattern_type_filter,
        principal: f.principal_filter.clone(),
        host: f.host_filter.clone(),
        operation: f.operation,
        permission: f.permission_type,
    }
}

pub fn describe(cx: &mut Cx<'_>, f: AclFilter) -> DescribeAclsResponse {
    cx.release_turn();
    let fail = |error_code: ErrorCode, message: &str| DescribeAclsResponse {
        error_code,
        error_message: Some(message.to_string()),
        ..Default::default()
    };
    if let Some((error_code, message)) = refused(cx, Operation::Describe) {
        return fail(error_code, message);
    }
    let f = filter(&f);
    if let Some(why) = f.invalid() {
        return fail(code::INVALID_REQUEST, why);
    }
    let mut by: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for b in cx.shard.acls().describe(&f) {
        by.entry((b.resource_type as i8, b.name.clone(), b.pattern as i8)).or_default().push(AclDescription {
            principal: b.principal,
            host: b.host,
            operation: b.operation as i8,
            permission_type: b.permission as i8,
            ..Default::default()
        });
    }
    let resources = by
        .into_iter()
        .map(|((resource_type, resource_name, pattern_type), acls)| DescribeAclsResource {
            resource_type,
            resource_name,
            pattern_type,
            acls,
            ..Default::default()
        })
        .collect();
    DescribeAclsResponse { resources, ..Default::default() }
}

/// A creation as a binding, or why it is refused.
fn binding(c: &AclCreation) -> Result<Binding, String> {
    let b = Binding {
        resource_type: ResourceType::from_code(c.resource_type).ok_or("Invalid resource type")?,
        name: c.resource_name.clone(),
        pattern: PatternType::from_code(c.resource_pattern_type).ok_or("Invalid pattern type")?,
        principal: c.principal.clone(),
        host: c.host.clone(),
        operation: Operation::from_code(c.operation).ok_or("Invalid operation")?,
        permission: Permission::from_code(c.permission_type).ok_or("Invalid permission type")?,
    };
    match b.invalid() {
        Some(why) => Err(why.to_string()),
        None => Ok(b),
    }
}

pub async fn create(cx: &mut Cx<'_>, req: CreateAclsRequest) -> CreateAclsResponse {
    let n = req.creations.len();
    let all = |error_code: ErrorCode, message: &str| CreateAclsResponse {
        results: (0..n)
            .map(|_| AclCreationResult { error_code, error_message: Some(message.to_string()), ..Default::default() })
            .collect(),
        ..Default::default()
    };
    if let Some((error_code, message)) = refused(cx, Operation::Alter) {
        cx.release_turn();
        return all(error_code, message);
    }
    let checked: Vec<Result<Binding, String>> = req.creations.iter().map(binding).collect();
    let valid: Vec<Binding> = checked.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
    let outcome = cx.shard.call(0, ChangeAcls(AclChange::Create(valid))).await;
    cx.release_turn();
    let mut applied = match outcome {
        Ok(o) => o.into_iter(),
        Err(e) => return all(call_code(&e, code::REQUEST_TIMED_OUT), "the ACLs could not be changed"),
    };
    let results = checked
        .into_iter()
        .map(|c| match c {
            Ok(_) => {
                let (error_code, error_message, _) =
                    applied.next().unwrap_or((code::UNKNOWN_SERVER_ERROR, None, Vec::new()));
                AclCreationResult { error_code, error_message, ..Default::default() }
            }
            Err(why) => {
                AclCreationResult { error_code: code::INVALID_REQUEST, error_message: Some(why), ..Default::default() }
            }
        })
        .collect();
    CreateAclsResponse { results, ..Default::default() }
}

pub async fn delete(cx: &mut Cx<'_>, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let n = req.filters.len();
    let all = |error_code: ErrorCode, message: &str| DeleteAclsResponse {
        filter_results: (0..n)
            .map(|_| DeleteAclsFilterResult {
                error_code,
                error_message: Some(message.to_string()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    if let Some((error_code, message)) = refused(cx, Operation::Alter) {
        cx.release_turn();
        return all(error_code, message);
    }
    let filters: Vec<Filter> = req.filters.iter().map(filter).collect();
    let valid: Vec<Filter> = filters.iter().filter(|f| f.invalid().is_none()).cloned().collect();
    let outcome = cx.shard.call(0, ChangeAcls(AclChange::Delete(valid))).await;
    cx.release_turn();
    let mut applied = match outcome {
        Ok(o) => o.into_iter(),
        Err(e) => return all(call_code(&e, code::REQUEST_TIMED_OUT), "the ACLs could not be changed"),
    };
    let filter_results = filters
        .iter()
        .map(|f| match f.invalid() {
            Some(why) => DeleteAclsFilterResult {
                error_code: code::INVALID_REQUEST,
                error_message: Some(why.to_string()),
                ..Default::default()
            },
            None => {
                let (error_code, error_message, gone) =
                    applied.next().unwrap_or((code::UNKNOWN_SERVER_ERROR, None, Vec::new()));
                DeleteAclsFilterResult {
                    error_code,
                    error_message,
                    matching_acls: gone
                        .into_iter()
                        .map(|b| DeleteAclsMatchingAcl {
                            resource_type: b.resource_type as i8,
                            resource_name: b.name,
                            pattern_type: b.pattern as i8,
                            principal: b.principal,
                            host: b.host,
                            operation: b.operation as i8,
                            permission_type: b.permission as i8,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }
            }
        })
        .collect();
    DeleteAclsResponse { filter_results, ..Default::default() }
}
