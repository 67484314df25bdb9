//! Audit records (SPEC 4.13; record fields "not shown" there, decided in docs/api.md).

use serde::{Deserialize, Serialize};

use crate::Timestamp;

#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 3] = [Severity::Info, Severity::Warning, Severity::Critical];
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Severity::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// The area of the product an audit record belongs to (`categories=` filter of the audit log).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuditCategory {
    System,
    DataSources,
    Dashboards,
    Alerts,
    Webhooks,
    Telemetry,
    Stream,
    ApiKeys,
    Organization,
    Members,
    Users,
    Sessions,
    OAuth,
    Licenses,
    Fleet,
    Assets,
    Ml,
    Bi,
    Audit,
}

impl AuditCategory {
    pub const ALL: [AuditCategory; 19] = [
        AuditCategory::System,
        AuditCategory::DataSources,
        AuditCategory::Dashboards,
        AuditCategory::Alerts,
        AuditCategory::Webhooks,
        AuditCategory::Telemetry,
        AuditCategory::Stream,
        AuditCategory::ApiKeys,
        AuditCategory::Organization,
        AuditCategory::Members,
        AuditCategory::Users,
        AuditCategory::Sessions,
        AuditCategory::OAuth,
        AuditCategory::Licenses,
        AuditCategory::Fleet,
        AuditCategory::Assets,
        AuditCategory::Ml,
        AuditCategory::Bi,
        AuditCategory::Audit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditCategory::System => "system",
            AuditCategory::DataSources => "data_sources",
            AuditCategory::Dashboards => "dashboards",
            AuditCategory::Alerts => "alerts",
            AuditCategory::Webhooks => "webhooks",
            AuditCategory::Telemetry => "telemetry",
            AuditCategory::Stream => "stream",
            AuditCategory::ApiKeys => "api_keys",
            AuditCategory::Organization => "organization",
            AuditCategory::Members => "members",
            AuditCategory::Users => "users",
            AuditCategory::Sessions => "sessions",
            AuditCategory::OAuth => "oauth",
            AuditCategory::Licenses => "licenses",
            AuditCategory::Fleet => "fleet",
            AuditCategory::Assets => "assets",
            AuditCategory::Ml => "ml",
            AuditCategory::Bi => "bi",
            AuditCategory::Audit => "audit",
        }
    }
}

/// Declares [`AuditEvent`]: one line per event with its name, category, resource type and the
/// severity of a successful call.
macro_rules! audit_events {
    ($($variant:ident => $name:literal, $category:ident, $resource:literal, $severity:ident;)*) => {
        /// What a request attempted, as recorded in the audit log (`event_type`). Every route
        /// names one; its category, resource type and severity follow from it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum AuditEvent {
            $($variant,)*
        }

        impl AuditEvent {
            pub const ALL: &[AuditEvent] = &[$(AuditEvent::$variant,)*];

            /// The recorded name: `data_source.create`, `api_key.rotate`, ...
            pub fn name(self) -> &'static str {
                match self {
                    $(AuditEvent::$variant => $name,)*
                }
            }

            pub fn category(self) -> AuditCategory {
                match self {
                    $(AuditEvent::$variant => AuditCategory::$category,)*
                }
            }

            /// The kind of resource acted on (`resource_type`).
            pub fn resource_type(self) -> &'static str {
                match self {
                    $(AuditEvent::$variant => $resource,)*
                }
            }

            /// The severity of a successful call: `warning` for acts that take access away or
            /// change credentials; refusals are graded by [`Severity::of_refusal`].
            pub fn severity(self) -> Severity {
                match self {
                    $(AuditEvent::$variant => Severity::$severity,)*
                }
            }
        }
    };
}

audit_events! {
    HealthRead => "health.read", System, "health", Info;
    RegionList => "region.list", System, "region", Info;
    RegionRead => "region.read", System, "region", Info;
    RegionHealthRead => "region.health", System, "region", Info;
    RegionReplicationRead => "region.replication", System, "region", Info;
    OrganizationRegionRead => "organization.region_read", Organization, "organization", Info;
    OrganizationRegionChange => "organization.region_change", Organization, "organization", Warning;
    OpenapiRead => "openapi.read", System, "openapi", Info;
    DocsRead => "docs.read", System, "docs", Info;
    StatusRead => "status.read", System, "status", Info;

    DataSourceList => "data_source.list", DataSources, "data_source", Info;
    DataSourceCreate => "data_source.create", DataSources, "data_source", Info;
    DataSourceRead => "data_source.read", DataSources, "data_source", Info;
    DataSourceUpdate => "data_source.update", DataSources, "data_source", Info;
    DataSourceDelete => "data_source.delete", DataSources, "data_source", Info;
    DataSourceTest => "data_source.test", DataSources, "data_source", Info;
    DataSourceBrowse => "data_source.browse", DataSources, "data_source", Info;
    ProvisioningImport => "provisioned_asset.import", DataSources, "provisioned_asset", Info;
    ProvisioningList => "provisioned_asset.list", DataSources, "provisioned_asset", Info;
    UsbWatchStart => "usb_watch.start", DataSources, "usb_watch", Warning;
    UsbWatchRead => "usb_watch.read", DataSources, "usb_watch", Info;
    EdgeConfigRead => "edge.config_read", System, "edge", Info;
    EdgeEnroll => "edge.enroll", System, "edge", Warning;
    EdgeSetupRead => "edge.setup_read", System, "edge", Info;
    EdgeSetup => "edge.setup", System, "edge", Warning;
    EdgeNetworkRead => "edge.network_read", System, "edge", Info;
    EdgeNetworkChange => "edge.network_change", System, "edge", Critical;
    EdgeTemplatesRead => "edge.templates_read", System, "edge", Info;
    ProvisioningCloudSync => "provisioned_asset.cloud_sync", DataSources, "provisioned_asset", Info;
    DiscoveryScan => "discovery.scan", DataSources, "discovery", Warning;
    ProvisioningClone => "provisioned_asset.clone", DataSources, "provisioned_asset", Info;

    DashboardList => "dashboard.list", Dashboards, "dashboard", Info;
    DashboardCreate => "dashboard.create", Dashboards, "dashboard", Info;
    DashboardRead => "dashboard.read", Dashboards, "dashboard", Info;
    DashboardUpdate => "dashboard.update", Dashboards, "dashboard", Info;
    DashboardDelete => "dashboard.delete", Dashboards, "dashboard", Info;
    DashboardDuplicate => "dashboard.duplicate", Dashboards, "dashboard", Info;
    DashboardExport => "dashboard.export", Dashboards, "dashboard", Info;
    DashboardImport => "dashboard.import", Dashboards, "dashboard", Info;

    AlertRuleList => "alert_rule.list", Alerts, "alert_rule", Info;
    AlertRuleCreate => "alert_rule.create", Alerts, "alert_rule", Info;
    AlertRuleRead => "alert_rule.read", Alerts, "alert_rule", Info;
    AlertRuleUpdate => "alert_rule.update", Alerts, "alert_rule", Info;
    AlertRuleDelete => "alert_rule.delete", Alerts, "alert_rule", Info;
    AlertRuleEnable => "alert_rule.enable", Alerts, "alert_rule", Info;
    AlertRuleDisable => "alert_rule.disable", Alerts, "alert_rule", Info;
    AlertList => "alert.list", Alerts, "alert", Info;
    AlertCreate => "alert.create", Alerts, "alert", Info;
    AlertAcknowledge => "alert.acknowledge", Alerts, "alert", Info;
    AlertResolve => "alert.resolve", Alerts, "alert", Info;
    NotificationList => "notification.list", Alerts, "notification", Info;

    WebhookList => "webhook.list", Webhooks, "webhook", Info;
    WebhookCreate => "webhook.create", Webhooks, "webhook", Info;
    WebhookRead => "webhook.read", Webhooks, "webhook", Info;
    WebhookUpdate => "webhook.update", Webhooks, "webhook", Info;
    WebhookDelete => "webhook.delete", Webhooks, "webhook", Info;
    WebhookDeliveries => "webhook.deliveries", Webhooks, "webhook", Info;

    TelemetryIngest => "telemetry.ingest", Telemetry, "telemetry", Info;
    TelemetryQuery => "telemetry.query", Telemetry, "telemetry", Info;
    TelemetryLatest => "telemetry.latest", Telemetry, "telemetry", Info;
    TelemetrySeries => "telemetry.series", Telemetry, "telemetry", Info;
    TelemetryExport => "telemetry.export", Telemetry, "telemetry", Info;
    StreamOpen => "stream.open", Stream, "stream", Info;

    ApiKeyList => "api_key.list", ApiKeys, "api_key", Info;
    ApiKeyCreate => "api_key.create", ApiKeys, "api_key", Info;
    ApiKeyRevoke => "api_key.revoke", ApiKeys, "api_key", Warning;
    ApiKeyRotate => "api_key.rotate", ApiKeys, "api_key", Warning;
    ApiKeyUsage => "api_key.usage", ApiKeys, "api_key", Info;

    OrganizationRead => "organization.read", Organization, "organization", Info;
    OrganizationUpdate => "organization.update", Organization, "organization", Info;
    OrganizationUsage => "organization.usage", Organization, "organization", Info;
    NotificationSettingsRead => "notification_settings.read", Organization, "notification_settings", Info;
    NotificationSettingsUpdate => "notification_settings.update", Organization, "notification_settings", Info;
    MemberList => "member.list", Members, "member", Info;
    MemberInvite => "member.invite", Members, "member", Info;
    MemberRemove => "member.remove", Members, "member", Warning;

    UserRead => "user.read", Users, "user", Info;
    UserUpdate => "user.update", Users, "user", Info;
    UserPasswordChange => "user.password_change", Users, "user", Warning;
    InvitationAccept => "invitation.accept", Members, "invitation", Info;
    PasswordResetRequest => "user.password_reset_request", Users, "user", Info;
    PasswordResetConfirm => "user.password_reset", Users, "user", Warning;

    SessionLogin => "session.login", Sessions, "session", Info;
    SessionLogout => "session.logout", Sessions, "session", Info;
    SessionList => "session.list", Sessions, "session", Info;
    SessionEnd => "session.end", Sessions, "session", Warning;

    OAuthApplicationList => "oauth_application.list", OAuth, "oauth_application", Info;
    OAuthApplicationCreate => "oauth_application.create", OAuth, "oauth_application", Info;
    OAuthApplicationRead => "oauth_application.read", OAuth, "oauth_application", Info;
    OAuthApplicationUpdate => "oauth_application.update", OAuth, "oauth_application", Info;
    OAuthApplicationDelete => "oauth_application.delete", OAuth, "oauth_application", Warning;
    OAuthApplicationRotateSecret => "oauth_application.rotate_secret", OAuth, "oauth_application", Warning;
    OAuthAuthorize => "oauth.authorize", OAuth, "oauth_grant", Info;
    OAuthToken => "oauth.token", OAuth, "oauth_grant", Info;
    OAuthRevoke => "oauth.revoke", OAuth, "oauth_grant", Warning;
    OAuthIntrospect => "oauth.introspect", OAuth, "oauth_grant", Info;

    ProductList => "product.list", Licenses, "product", Info;
    ProductCreate => "product.create", Licenses, "product", Info;
    ProductRead => "product.read", Licenses, "product", Info;
    ProductUpdate => "product.update", Licenses, "product", Info;
    ProductDelete => "product.delete", Licenses, "product", Warning;
    LicenseList => "license.list", Licenses, "license", Info;
    LicenseCreate => "license.create", Licenses, "license", Info;
    LicenseRead => "license.read", Licenses, "license", Info;
    LicenseActivations => "license.activations", Licenses, "license", Info;
    LicensePublicKey => "license.public_key", Licenses, "license", Info;
    LicenseSuspend => "license.suspend", Licenses, "license", Warning;
    LicenseReinstate => "license.reinstate", Licenses, "license", Info;
    LicenseRevoke => "license.revoke", Licenses, "license", Warning;
    LicenseRenew => "license.renew", Licenses, "license", Info;
    LicenseActivate => "license.activate", Licenses, "license", Info;
    LicenseValidate => "license.validate", Licenses, "license", Info;
    LicenseDeactivate => "license.deactivate", Licenses, "license", Info;

    DeviceList => "device.list", Fleet, "device", Info;
    DeviceRegister => "device.register", Fleet, "device", Info;
    DeviceRead => "device.read", Fleet, "device", Info;
    DeviceUpdate => "device.update", Fleet, "device", Info;
    DeviceDelete => "device.delete", Fleet, "device", Warning;
    DeviceHealth => "device.health", Fleet, "device", Info;
    DeviceCommand => "device.command", Fleet, "device", Info;
    DeviceCommands => "device.commands", Fleet, "device", Info;
    DeviceAssetsSet => "device.assets_set", Fleet, "device", Info;
    DeviceAssetsRead => "device.assets_read", Fleet, "device", Info;
    DeviceConnect => "device.connect", Fleet, "device", Info;
    DeviceGroupList => "device_group.list", Fleet, "device_group", Info;
    DeviceGroupCreate => "device_group.create", Fleet, "device_group", Info;
    DeviceGroupRead => "device_group.read", Fleet, "device_group", Info;
    DeviceGroupUpdate => "device_group.update", Fleet, "device_group", Info;
    DeviceGroupDelete => "device_group.delete", Fleet, "device_group", Warning;
    EnrollmentTokenCreate => "enrollment_token.create", Fleet, "enrollment_token", Info;
    EnrollmentTokenList => "enrollment_token.list", Fleet, "enrollment_token", Info;
    EnrollmentTokenRevoke => "enrollment_token.revoke", Fleet, "enrollment_token", Warning;
    OtaPackageList => "ota_package.list", Fleet, "ota_package", Info;
    OtaPackageUpload => "ota_package.upload", Fleet, "ota_package", Info;
    OtaPackageRead => "ota_package.read", Fleet, "ota_package", Info;
    OtaPackageRelease => "ota_package.release", Fleet, "ota_package", Warning;
    OtaPackageDownload => "ota_package.download", Fleet, "ota_package", Info;
    OtaPublicKey => "ota.public_key", Fleet, "ota_package", Info;
    OtaDeploymentList => "ota_deployment.list", Fleet, "ota_deployment", Info;
    OtaDeploymentCreate => "ota_deployment.create", Fleet, "ota_deployment", Warning;
    OtaDeploymentRead => "ota_deployment.read", Fleet, "ota_deployment", Info;
    OtaDeploymentDevices => "ota_deployment.devices", Fleet, "ota_deployment", Info;
    OtaDeploymentCancel => "ota_deployment.cancel", Fleet, "ota_deployment", Warning;
    OtaDeploymentRollback => "ota_deployment.rollback", Fleet, "ota_deployment", Warning;
    OtaDeploymentContinue => "ota_deployment.continue", Fleet, "ota_deployment", Info;
    OtaDeploymentAdvance => "ota_deployment.advance", Fleet, "ota_deployment", Info;
    MlDatasetList => "ml_dataset.list", Ml, "ml_dataset", Info;
    MlDatasetCreate => "ml_dataset.create", Ml, "ml_dataset", Info;
    MlDatasetRead => "ml_dataset.read", Ml, "ml_dataset", Info;
    MlDatasetUpload => "ml_dataset.upload", Ml, "ml_dataset", Info;
    MlDatasetPreview => "ml_dataset.preview", Ml, "ml_dataset", Info;
    MlLabelClassList => "ml_label_class.list", Ml, "ml_label_class", Info;
    MlLabelClassCreate => "ml_label_class.create", Ml, "ml_label_class", Info;
    MlRowLabel => "ml_dataset.label_row", Ml, "ml_dataset", Info;
    MlRowUnlabel => "ml_dataset.unlabel_row", Ml, "ml_dataset", Info;
    MlRowSkip => "ml_dataset.skip_row", Ml, "ml_dataset", Info;
    MlRowFlag => "ml_dataset.flag_row", Ml, "ml_dataset", Info;
    MlLabelsImport => "ml_dataset.import_labels", Ml, "ml_dataset", Info;
    MlLabelsExport => "ml_dataset.export_labels", Ml, "ml_dataset", Info;
    MlVersionList => "ml_dataset_version.list", Ml, "ml_dataset_version", Info;
    MlVersionCreate => "ml_dataset_version.create", Ml, "ml_dataset_version", Info;
    MlVersionRead => "ml_dataset_version.read", Ml, "ml_dataset_version", Info;
    MlVersionCompare => "ml_dataset_version.compare", Ml, "ml_dataset_version", Info;
    MlVersionRollback => "ml_dataset_version.rollback", Ml, "ml_dataset_version", Warning;
    MlRuleList => "ml_validation_rule.list", Ml, "ml_validation_rule", Info;
    MlRuleCreate => "ml_validation_rule.create", Ml, "ml_validation_rule", Info;
    MlDatasetValidate => "ml_dataset.validate", Ml, "ml_dataset", Info;
    MlDatasetQuality => "ml_dataset.quality", Ml, "ml_dataset", Info;
    MlTrainingList => "ml_training_job.list", Ml, "ml_training_job", Info;
    MlTrainingCreate => "ml_training_job.create", Ml, "ml_training_job", Info;
    MlTrainingRead => "ml_training_job.read", Ml, "ml_training_job", Info;
    MlTrainingCancel => "ml_training_job.cancel", Ml, "ml_training_job", Warning;
    MlModelList => "ml_model.list", Ml, "ml_model", Info;
    MlModelRead => "ml_model.read", Ml, "ml_model", Info;
    MlModelTest => "ml_model.test", Ml, "ml_model", Info;
    MlModelDeploy => "ml_model.deploy", Ml, "ml_model", Warning;
    MlModelUndeploy => "ml_model.undeploy", Ml, "ml_model", Warning;
    MlModelDownload => "ml_model.download", Ml, "ml_model", Info;

    BiConfigRead => "bi_config.read", Bi, "bi_config", Info;
    BiConfigUpdate => "bi_config.update", Bi, "bi_config", Info;
    BiQueryExecute => "bi_query.execute", Bi, "bi_query", Info;
    BiSavedQueryCreate => "bi_saved_query.create", Bi, "bi_saved_query", Info;
    BiSavedQueryList => "bi_saved_query.list", Bi, "bi_saved_query", Info;
    BiSavedQueryRead => "bi_saved_query.read", Bi, "bi_saved_query", Info;
    BiSavedQueryUpdate => "bi_saved_query.update", Bi, "bi_saved_query", Info;
    BiSavedQueryDelete => "bi_saved_query.delete", Bi, "bi_saved_query", Warning;
    BiHistoryList => "bi_query.history", Bi, "bi_query", Info;
    BiRlsRuleList => "bi_rls_rule.list", Bi, "bi_rls_rule", Info;
    BiRlsRuleCreate => "bi_rls_rule.create", Bi, "bi_rls_rule", Warning;
    BiRlsRuleUpdate => "bi_rls_rule.update", Bi, "bi_rls_rule", Warning;
    BiRlsRuleDelete => "bi_rls_rule.delete", Bi, "bi_rls_rule", Warning;
    BiRlsTest => "bi_rls_rule.test", Bi, "bi_rls_rule", Info;
    BiEmbedList => "bi_embed.list", Bi, "bi_embed", Info;
    BiGuestTokenCreate => "bi_guest_token.create", Bi, "bi_guest_token", Warning;
    BiEmbedView => "bi_embed.view", Bi, "bi_embed", Info;
    BiEmbedData => "bi_embed.data", Bi, "bi_embed", Info;
    BiReportList => "bi_report.list", Bi, "bi_report", Info;
    BiReportCreate => "bi_report.create", Bi, "bi_report", Info;
    BiReportRead => "bi_report.read", Bi, "bi_report", Info;
    BiReportUpdate => "bi_report.update", Bi, "bi_report", Info;
    BiReportDelete => "bi_report.delete", Bi, "bi_report", Warning;
    BiReportRun => "bi_report.run", Bi, "bi_report", Info;
    BiReportRuns => "bi_report.runs", Bi, "bi_report", Info;

    TagList => "tag.list", Assets, "tag", Info;
    TagRead => "tag.read", Assets, "tag", Info;
    TagUpdate => "tag.update", Assets, "tag", Info;

    AuditList => "audit.list", Audit, "audit_log", Info;
    AuditRead => "audit.read", Audit, "audit_log", Info;
    AuditSummary => "audit.summary", Audit, "audit_log", Info;
    AuditExport => "audit.export", Audit, "audit_log", Info;
}

impl Severity {
    /// The severity of a refused request: failed authentication or authorization is critical,
    /// any other refusal a warning.
    pub fn of_refusal(status: u16) -> Severity {
        match status {
            401 | 403 => Severity::Critical,
            _ => Severity::Warning,
        }
    }
}

/// Who made an audited request (`actor_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorType {
    ApiKey,
    Session,
    OAuthToken,
    /// An OAuth client authenticating with its own credentials (token, revocation and
    /// introspection requests).
    OAuthClient,
    /// A device presenting a license key (activate, validate, deactivate).
    LicenseKey,
    /// A device presenting an enrollment token (registration) or its MQTT credentials.
    Device,
    /// A connector of the platform (not audited per batch; named where a record needs it).
    Connector,
    /// The platform acting on its own (an OTA deployment advancing, stopping, rolling back).
    Platform,
    Anonymous,
}

impl ActorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorType::ApiKey => "api_key",
            ActorType::Session => "session",
            ActorType::OAuthToken => "oauth_token",
            ActorType::OAuthClient => "oauth_client",
            ActorType::LicenseKey => "license_key",
            ActorType::Device => "device",
            ActorType::Connector => "connector",
            ActorType::Platform => "platform",
            ActorType::Anonymous => "anonymous",
        }
    }
}

/// Whether an audited request succeeded (`outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
        }
    }
}

#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct AuditRecord {
    pub id: String,
    pub timestamp: Timestamp,
    /// `api_key`, `user` or `anonymous`.
    pub actor_type: String,
    /// The API key id (or user id) that made the request, when known.
    pub actor_id: Option<String>,
    /// The user the key acts for, when known.
    pub user_id: Option<String>,
    /// Area of the product: `data_sources`, `api_keys`, `organization`, `members`, `users`, ...
    pub category: String,
    /// What was attempted: `data_source.create`, `api_key.rotate`, ...
    pub event_type: String,
    pub severity: Severity,
    /// `success` or `failure`.
    pub outcome: String,
    pub resource_type: String,
    pub resource_id: Option<String>,
    pub method: String,
    pub path: String,
    pub status_code: u16,
    /// The error code of a refused request (`validation_error`, `authorization_error`, ...).
    pub error_code: Option<String>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn event_names_are_unique_and_name_their_resource() {
        let names: HashSet<_> = AuditEvent::ALL.iter().map(|e| e.name()).collect();
        assert_eq!(names.len(), AuditEvent::ALL.len());
        for e in AuditEvent::ALL {
            let (resource, action) = e.name().split_once('.').expect("resource.action");
            assert!(!action.is_empty(), "{}", e.name());
            // The name starts with its resource (audit reads are `audit.*` on `audit_log`).
            assert!(
                e.resource_type().starts_with(resource),
                "{} / {}",
                e.name(),
                e.resource_type()
            );
        }
        assert_eq!(AuditEvent::ApiKeyRevoke.severity(), Severity::Warning);
        assert_eq!(
            AuditEvent::DataSourceCreate.category().as_str(),
            "data_sources"
        );
        assert_eq!(Severity::of_refusal(403), Severity::Critical);
        assert_eq!(Severity::of_refusal(409), Severity::Warning);
    }
}
