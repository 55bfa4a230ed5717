//! Authentication, authorization and TLS.

use super::*;

/// Authentication and authorization.
pub const AUTH: &[Setting] = &[
    Setting {
        kind: ConfigType::List,
        default: Some(DEFAULT_SASL_MECHANISMS),
        valid: "`SCRAM-SHA-256`, `SCRAM-SHA-512`, `PLAIN`",
        per_listener: true,
        take: |_, v| sasl_mechanisms(v.value).map(|_| ()),
        ..Setting::text(
            "sasl.enabled.mechanisms",
            "What SASL listeners offer (per listener: `listener.name.<l>.sasl.enabled.mechanisms`). See docs/security.md.",
        )
    },
    Setting {
        valid: "`SCRAM-SHA-256`, `SCRAM-SHA-512`, `PLAIN`",
        take: take_login_mechanism,
        ..Setting::text(
            "sasl.mechanism.inter.broker.protocol",
            "How this broker logs in to the others when the inter-broker listener is SASL (no default: Kafka's, \
             GSSAPI, is not served). The login: the listener's `sasl.jaas.config`.",
        )
    },
    Setting {
        valid: "`SCRAM-SHA-256`, `SCRAM-SHA-512`, `PLAIN`",
        take: take_login_mechanism,
        ..Setting::text(
            "sasl.mechanism.controller.protocol",
            "How this node logs in to the controllers when the controller listener is SASL (no default: \
             Kafka's, GSSAPI, is not served). The login: the controller listener's `sasl.jaas.config`.",
        )
    },
    Setting {
        change: Change::PerBroker,
        per_listener: true,
        sensitive: true,
        valid: "Kafka's JAAS text: `<LoginModule> required username=\"...\" password=\"...\";`",
        take: |_, v| match crate::client::security::Jaas::parse(v.value) {
            Ok(_) => Ok(()),
            Err(e) => bail!("{}: {e}", v.key),
        },
        ..Setting::text(
            "sasl.jaas.config",
            "This node's own SASL login on its links to other nodes, per listener and mechanism as Kafka \
             reads it: `listener.name.<l>.<mechanism>.sasl.jaas.config`, else `listener.name.<l>.sasl.jaas.config`, \
             else this. ScramLoginModule or PlainLoginModule with `username` and `password`.",
        )
    },
    Setting {
        per_listener: true,
        valid: "`https://...`, `http://...` or `file://...`",
        ..Setting::text(
            "sasl.oauthbearer.jwks.endpoint.url",
            "OAUTHBEARER (KIP-768): where the identity provider's signing keys (a JWKS document) are; fetched at \
             startup and every `sasl.oauthbearer.jwks.endpoint.refresh.ms`. Needed when a listener offers OAUTHBEARER.",
        )
    },
    Setting {
        per_listener: true,
        ..Setting::long(
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            1000,
            i64::MAX,
            "3600000",
            "How often the JWKS is fetched again (a failure keeps the keys in force).",
        )
    },
    Setting {
        per_listener: true,
        kind: ConfigType::List,
        ..Setting::text(
            "sasl.oauthbearer.expected.audience",
            "A token's `aud` must name one of these (empty: any audience).",
        )
    },
    Setting {
        per_listener: true,
        ..Setting::text("sasl.oauthbearer.expected.issuer", "A token's `iss` must be this (empty: any issuer).")
    },
    Setting {
        per_listener: true,
        ..Setting::int(
            "sasl.oauthbearer.clock.skew.seconds",
            0,
            I32,
            "30",
            "How far the broker's clock and the identity provider's may differ when `exp`, `iat` and `nbf` are checked.",
        )
    },
    Setting {
        per_listener: true,
        default: Some("sub"),
        ..Setting::text("sasl.oauthbearer.sub.claim.name", "The claim whose value is the principal (`User:<value>`).")
    },
    Setting {
        per_listener: true,
        default: Some("scope"),
        inert: true,
        ..Setting::text("sasl.oauthbearer.scope.claim.name", "Accepted; scopes are not checked (Kafka checks none either).")
    },
    Setting {
        per_listener: true,
        valid: "empty, or Kafka's `OAuthBearerValidatorCallbackHandler`",
        take: |_, v| match v.text() {
            "" | "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            | "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler" => Ok(()),
            other => bail!(
                "{}={other}: tidemark validates OAUTHBEARER tokens as Kafka's OAuthBearerValidatorCallbackHandler \
                 (OIDC JWTs against sasl.oauthbearer.jwks.endpoint.url); other handlers are not served",
                v.key
            ),
        },
        ..Setting::text(
            "sasl.server.callback.handler.class",
            "OAUTHBEARER's token check: Kafka's OAuthBearerValidatorCallbackHandler, which tidemark always is.",
        )
    },
    Setting {
        take: |c, v| {
            c.sasl.max_receive_size = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.sasl.max_receive_size.to_string()),
        ..Setting::int("sasl.server.max.receive.size", 1024, I32, "524288", "The largest frame before authentication.")
    },
    Setting {
        take: |c, v| {
            c.sasl.failed_authentication_delay = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.sasl.failed_authentication_delay.as_millis().to_string()),
        ..Setting::int(
            "connection.failed.authentication.delay.ms",
            0,
            60_000,
            "100",
            "How long a client that failed to authenticate waits for its answer and the close.",
        )
    },
    Setting {
        take: |c, v| {
            let ms = v.ms()?;
            c.sasl.max_reauth = (!ms.is_zero()).then_some(ms);
            Ok(())
        },
        show: Some(|c, _| c.sasl.max_reauth.map_or(0, |d| d.as_millis()).to_string()),
        ..Setting::long(
            "connections.max.reauth.ms",
            0,
            i64::MAX,
            "0",
            "KIP-368: a SASL session's lifetime (0: sessions never end); the client re-authenticates on its \
             connection before it ends, or the connection closes at its next request.",
        )
    },
    Setting {
        default: Some(""),
        valid: "empty, `org.apache.kafka.metadata.authorizer.StandardAuthorizer`, \
                `kafka.security.authorizer.AclAuthorizer`",
        take: |c, v| {
            c.authorizer_enabled = match v.text() {
                "" => false,
                AUTHORIZER | LEGACY_AUTHORIZER => true,
                other => bail!(
                    "{}={other}: tidemark authorizes as Kafka's {AUTHORIZER} (or {LEGACY_AUTHORIZER}); name one of \
                     them, or nothing",
                    v.key
                ),
            };
            Ok(())
        },
        ..Setting::text(
            "authorizer.class.name",
            "Check every request against the ACLs (Kafka's rules; docs/security.md). Empty: no authorization.",
        )
    },
    Setting {
        kind: ConfigType::List,
        default: Some(""),
        valid: "`Type:name;Type:name`",
        take: |c, v| {
            let mut users = Vec::new();
            for u in v.value.split(';').map(str::trim).filter(|u| !u.is_empty()) {
                if !u.split_once(':').is_some_and(|(t, n)| !t.is_empty() && !n.is_empty()) {
                    bail!("{}: {u} is not a principal (Type:name, e.g. User:admin)", v.key);
                }
                users.push(u.to_string());
            }
            c.authorizer.super_users = users;
            Ok(())
        },
        ..Setting::text("super.users", "Principals allowed everything.")
    },
    Setting {
        take: |c, v| {
            c.authorizer.allow_if_no_acl = v.flag()?;
            Ok(())
        },
        show: Some(|c, _| c.authorizer.allow_if_no_acl.to_string()),
        ..Setting::flag("allow.everyone.if.no.acl.found", "false", "Whether a resource no ACL names is open to all.")
    },
];

/// TLS, per listener (`listener.name.<l>.<setting>`) or for every TLS listener.
pub const TLS: &[Setting] = &[
    Setting {
        change: Change::PerBroker,
        default: Some("PEM"),
        valid: "`PEM`",
        ..Setting::tls("ssl.keystore.type", "The only store type (KIP-651); JKS and PKCS12 are refused.")
    },
    Setting {
        change: Change::PerBroker,
        valid: "a file",
        ..Setting::tls(
            "ssl.keystore.location",
            "PEM: the unencrypted private key and the certificate chain (required on a TLS listener, or inline \
             `ssl.keystore.key` and `ssl.keystore.certificate.chain`).",
        )
    },
    Setting {
        change: Change::PerBroker,
        sensitive: true,
        ..Setting::tls("ssl.keystore.key", "The private key, PEM inline.")
    },
    Setting {
        change: Change::PerBroker,
        ..Setting::tls("ssl.keystore.certificate.chain", "The certificate chain, PEM inline.")
    },
    Setting { sensitive: true, ..Setting::tls(
            "ssl.key.password",
            "Accepted; not used: an encrypted key is refused with a message (give the key unencrypted).",
        ) },
    Setting {
        sensitive: true,
        inert: true,
        ..Setting::tls("ssl.keystore.password", "Accepted; not used: PEM stores have no password.")
    },
    Setting {
        change: Change::PerBroker,
        default: Some("PEM"),
        valid: "`PEM`",
        ..Setting::tls("ssl.truststore.type", "The only store type (KIP-651).")
    },
    Setting {
        change: Change::PerBroker,
        valid: "a file",
        ..Setting::tls(
            "ssl.truststore.location",
            "PEM CA certificates that sign client certificates (or inline `ssl.truststore.certificates`); needed \
             with `ssl.client.auth` requested or required.",
        )
    },
    Setting {
        change: Change::PerBroker,
        ..Setting::tls("ssl.truststore.certificates", "CA certificates, PEM inline.")
    },
    Setting {
        sensitive: true,
        inert: true,
        ..Setting::tls("ssl.truststore.password", "Accepted; not used: PEM stores have no password.")
    },
    Setting {
        default: Some("none"),
        valid: "`none`, `requested`, `required`",
        ..Setting::tls("ssl.client.auth", "Client certificates: not asked, asked (a client without one is `User:ANONYMOUS`), required.")
    },
    Setting {
        kind: ConfigType::List,
        default: Some("TLSv1.2,TLSv1.3"),
        valid: "`TLSv1.2`, `TLSv1.3`",
        ..Setting::tls("ssl.enabled.protocols", "The TLS versions offered.")
    },
    Setting {
        default: Some("TLSv1.3"),
        inert: true,
        ..Setting::tls("ssl.protocol", "Accepted; `ssl.enabled.protocols` decides.")
    },
    Setting {
        kind: ConfigType::List,
        default: Some("DEFAULT"),
        valid: "Kafka's rules (`RULE:pattern/replacement/[LU]`, `DEFAULT`)",
        ..Setting::tls("ssl.principal.mapping.rules", "The principal of a client certificate: its subject in Java's RFC 2253 form through the first rule that applies; none applying refuses the connection.")
    },
    Setting {
        default: Some("https"),
        valid: "`https`, or empty",
        ..Setting::tls(
            "ssl.endpoint.identification.algorithm",
            "On this node's own links to other nodes: `https` checks that the other node's certificate names \
             the host dialled; empty checks its chain only. (No client's host name is checked.)",
        )
    },
];

/// Check a SASL mechanism this node logs in with.
fn take_login_mechanism(_: &mut BrokerConfig, v: &Given<'_>) -> anyhow::Result<()> {
    match crate::client::LoginMechanism::parse(v.text()) {
        Some(_) => Ok(()),
        None => bail!(
            "{}={}: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (GSSAPI and OAUTHBEARER are not served)",
            v.key,
            v.text()
        ),
    }
}
