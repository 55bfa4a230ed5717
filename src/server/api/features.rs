//! Feature levels (KIP-584) as clients see them: ApiVersions' supported and finalized features,
//! and UpdateFeatures (57), which shard 0 applies ([`crate::server::control::features`]).

use crate::features::{UpgradeType, SUPPORTED};
use crate::protocol::admin::{UpdatableFeatureResult, UpdateFeaturesRequest, UpdateFeaturesResponse};
use crate::protocol::errors as code;
use crate::protocol::messages::{ApiVersionsResponse, FeatureRange};
use crate::security::acl::Operation;
use crate::server::api::Cx;
use crate::server::control::features::UpdateFeatures;
use crate::server::errors::call_code;

/// Fill ApiVersions' features (v3+): each supported feature's range (below v4 only those whose
/// lowest level is above 0: older clients cannot read a 0 there, Kafka's KAFKA-17492 rule), the
/// finalized levels above 0 (as `min = max = level`, as Kafka lists them) and their epoch.
pub fn advertise(cx: &Cx<'_>, r: &mut ApiVersionsResponse) {
    let v0_readable = cx.version() >= 4;
    r.supported_features = SUPPORTED
        .iter()
        .filter(|f| v0_readable || f.min > 0)
        .map(|f| FeatureRange { name: f.name.to_string(), min: f.min, max: f.max, ..Default::default() })
        .collect();
    let features = cx.shard.features();
    r.finalized_features = features
        .finalized()
        .map(|(name, level)| FeatureRange { name: name.to_string(), min: level, max: level, ..Default::default() })
        .collect();
    r.finalized_features_epoch = features.epoch;
}

/// UpdateFeatures: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka's
/// controller answers), then every update applied or none; an error is the request's (v0-1 list
/// no feature then), success lists every feature NONE (v0-1; v2 answers without the list).
pub async fn update(cx: &mut Cx<'_>, r: UpdateFeaturesRequest) -> UpdateFeaturesResponse {
    let refused = |error_code, message: String| UpdateFeaturesResponse {
        error_code,
        error_message: Some(message),
        ..Default::default()
    };
    if !cx.allowed_on_cluster(Operation::Alter) {
        cx.release_turn();
        return refused(code::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.".to_string());
    }
    let v0 = cx.version() == 0;
    let updates = r
        .feature_updates
        .iter()
        .map(|u| crate::features::Update {
            feature: u.feature.clone(),
            // v0: a level below 1 takes the feature out (level 0), with AllowDowngrade.
            level: if v0 { u.max_version_level.max(0) } else { u.max_version_level },
            kind: match (v0, u.allow_downgrade) {
                (true, true) => Some(UpgradeType::SafeDowngrade),
                (true, false) => Some(UpgradeType::Upgrade),
                (false, _) => UpgradeType::from_wire(u.upgrade_type),
            },
        })
        .collect();
    let outcome = cx.shard.call(0, UpdateFeatures { updates, validate_only: r.validate_only }).await;
    cx.release_turn();
    match outcome {
        Ok(Ok(())) => UpdateFeaturesResponse {
            results: r
                .feature_updates
                .into_iter()
                .map(|u| UpdatableFeatureResult { feature: u.feature, ..Default::default() })
                .collect(),
            ..Default::default()
        },
        Ok(Err((c, message))) => refused(c, message),
        Err(e) => refused(call_code(&e, code::REQUEST_TIMED_OUT), e.to_string()),
    }
}
