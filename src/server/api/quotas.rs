//! Client quotas (KIP-546): DescribeClientQuotas from the quotas in force, AlterClientQuotas
//! on shard 0 ([`crate::server::control::quotas`]); both need the cluster's DESCRIBE_CONFIGS
//! or ALTER_CONFIGS when an authorizer is on. Enforcement is in Produce and Fetch (byte rates:
//! the answer carries `throttle_time_ms` and the connection reads nothing more that long,
//! KIP-219).

use crate::protocol::errors::{self as code};
use crate::protocol::security::*;
use crate::security::acl::Operation;
use crate::security::quota::{Entity, CLIENT_ID, USER};
use crate::server::api::Cx;
use crate::server::control::quotas::AlterQuotas;
use crate::server::errors::call_code;

fn entity_of(parts: &[QuotaEntityData]) -> Entity {
    parts.iter().map(|p| (p.entity_type.clone(), p.entity_name.clone())).collect()
}

fn wire(entity: &Entity) -> Vec<QuotaEntityData> {
    entity
        .iter()
        .map(|(t, n)| QuotaEntityData { entity_type: t.clone(), entity_name: n.clone(), ..Default::default() })
        .collect()
}

pub fn describe(cx: &mut Cx<'_>, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse {
    cx.release_turn();
    let fail = |error_code, message: String| DescribeClientQuotasResponse {
        error_code,
        error_message: Some(message),
        ..Default::default()
    };
    if !cx.allowed_on_cluster(Operation::DescribeConfigs) {
        return fail(code::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.".into());
    }
    let mut components = Vec::new();
    for (i, c) in req.components.iter().enumerate() {
        if c.entity_type.is_empty() || req.components[..i].iter().any(|d| d.entity_type == c.entity_type) {
            return fail(code::INVALID_REQUEST, format!("Invalid entity type {:?}", c.entity_type));
        }
        if c.entity_type != USER && c.entity_type != CLIENT_ID {
            return fail(code::UNSUPPORTED_VERSION, format!("Custom entity type {} not supported", c.entity_type));
        }
        let well_formed = match c.match_type {
            0 => c.match_name.is_some(),
            1 | 2 => c.match_name.is_none(),
            _ => false,
        };
        if !well_formed {
            return fail(code::INVALID_REQUEST, format!("Invalid match for entity type {}", c.entity_type));
        }
        components.push((c.entity_type.clone(), c.match_type, c.match_name.clone()));
    }
    let entries = cx
        .shard
        .connections()
        .quotas()
        .describe(&components, req.strict)
        .into_iter()
        .map(|(e, values)| QuotaEntry {
            entity: wire(&e),
            values: values.into_iter().map(|(key, value)| QuotaValue { key, value, ..Default::default() }).collect(),
            ..Default::default()
        })
        .collect();
    DescribeClientQuotasResponse { entries: Some(entries), ..Default::default() }
}

pub async fn alter(cx: &mut Cx<'_>, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let result = |error_code, error_message: Option<String>, entity: &[QuotaEntityData]| QuotaAlterationResult {
        error_code,
        error_message,
        entity: entity.to_vec(),
        ..Default::default()
    };
    if !cx.allowed_on_cluster(Operation::AlterConfigs) {
        cx.release_turn();
        let message = Some("Cluster authorization failed.".to_string());
        let entries = req
            .entries
            .iter()
            .map(|e| result(code::CLUSTER_AUTHORIZATION_FAILED, message.clone(), &e.entity))
            .collect();
        return AlterClientQuotasResponse { entries, ..Default::default() };
    }
    let changes = req
        .entries
        .iter()
        .map(|e| {
            let ops = e.ops.iter().map(|o| (o.key.clone(), (!o.remove).then_some(o.value))).collect();
            (entity_of(&e.entity), ops)
        })
        .collect();
    let outcome = cx.shard.call(0, AlterQuotas { changes, validate_only: req.validate_only }).await;
    cx.release_turn();
    let entries = match outcome {
        Ok(o) => req.entries.iter().zip(o).map(|(e, (c, m))| result(c, m, &e.entity)).collect(),
        Err(err) => {
            let c = call_code(&err, code::REQUEST_TIMED_OUT);
            req.entries.iter().map(|e| result(c, None, &e.entity)).collect()
        }
    };
    AlterClientQuotasResponse { entries, ..Default::default() }
}
