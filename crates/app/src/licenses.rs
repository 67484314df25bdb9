//! Licenses (SPEC 2.11, 3, 4.12; issue 16): issuing signed keys, the states a license moves
//! through (suspend, reinstate, revoke, renew), and what devices do with a key alone: activate,
//! validate, deactivate. Keys are signed with the organization's Ed25519 key
//! (`plantd_auth::license_key`), made on first use and kept in the database; the decisions are
//! in docs/api.md ("Licenses").

use plantd_auth::license_key::{self, KeyError, LicenseClaims, LicenseSigner};
use plantd_model::audit::ActorType;
use plantd_model::event::EventType;
use plantd_model::license::{Activation, License, LicenseStatus, LicenseType, ValidationCode};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_model::{Timestamp, new_id};
pub use plantd_store::LicenseFilter;
use plantd_store::{Activated, StoreError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::access::{Actor, AuditTrail};
use crate::app::App;
use crate::error::{AppError, AppResult};
use crate::rate_limit::{Bucket, Decision, Window};

const DAY_MS: i64 = 86_400_000;
/// The longest subscription term and renewal: 100 years.
const MAX_DAYS: i64 = 36_500;
const MAX_ACTIVATIONS: i64 = 1_000_000;

/// A license to issue (SPEC 2.11 "License create request").
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewLicense {
    pub product_id: String,
    /// Default: the product's license type.
    pub license_type: Option<LicenseType>,
    /// Devices that may hold an activation at once, 1 to 1,000,000 (default 1).
    pub max_activations: Option<i64>,
    /// Days a subscription runs, 1 to 36,500; required for a subscription, absent for a
    /// perpetual license.
    pub validity_days: Option<i64>,
    pub customer_email: String,
}

/// A renewal of a subscription.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Renewal {
    /// Days added, 1 to 36,500 (default: the license's `validity_days`), from its expiry or,
    /// if that has passed, from now.
    pub days: Option<i64>,
}

/// A device activating a license (SPEC 2.11 "Activate request").
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActivationRequest {
    pub license_key: String,
    /// The device's own id, up to 200 characters.
    pub device_id: String,
    /// A digest of the device's hardware, up to 500 characters.
    pub hardware_fingerprint: String,
}

/// A device checking its license (SPEC 2.11 "Validate request"; device and fingerprint are
/// this API's additions).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidationRequest {
    pub license_key: String,
    /// When given, the license must be activated on this device.
    pub device_id: Option<String>,
    /// When given with `device_id`, it must be the activation's fingerprint.
    pub hardware_fingerprint: Option<String>,
}

/// An administrator freeing an activation (SPEC 2.11 "Deactivate request").
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Deactivation {
    pub activation_id: String,
}

/// A device freeing its own activation with its key.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceDeactivation {
    pub license_key: String,
    pub activation_id: String,
}

/// The answer to an activation (SPEC 2.11).
#[derive(Serialize, utoipa::ToSchema)]
pub struct ActivationAnswer {
    pub activation_id: String,
    pub license_id: String,
    pub device_id: String,
    pub activated_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub features: Vec<String>,
    /// False for a new activation, true when the device was already activated (idempotent).
    pub existing: bool,
}

/// The answer to a validation (SPEC 2.18 "not shown"; decided in docs/api.md).
#[derive(Serialize, utoipa::ToSchema)]
pub struct ValidationAnswer {
    pub valid: bool,
    pub code: ValidationCode,
    /// What the code means for this key, in words.
    pub detail: String,
    /// The fields below are null when no license matches the key.
    pub license_id: Option<String>,
    pub status: Option<LicenseStatus>,
    pub expires_at: Option<Timestamp>,
    pub features: Option<Vec<String>>,
    pub current_activations: Option<i64>,
    pub max_activations: Option<i64>,
    /// The device's activation, when `device_id` was given and is activated.
    pub activation_id: Option<String>,
    /// The license's current key, when the key presented was superseded by a renewal (its
    /// offline expiry is older): a device stores this one.
    pub license_key: Option<String>,
}

/// The public half of an organization's license signing key.
pub struct PublicKey {
    pub bytes: [u8; 32],
    pub pem: String,
}

/// Why a presented key matches no license.
enum Unmatched {
    Invalid(KeyError),
    NotFound,
}

fn device_fields(v: &mut Validator, key: &str, device: Option<&str>, fingerprint: Option<&str>) {
    v.check(!key.trim().is_empty(), "license_key", "is required");
    v.check(
        key.len() <= 8192,
        "license_key",
        "must be at most 8192 characters",
    );
    if let Some(d) = device {
        v.text("device_id", d, 200);
    }
    if let Some(f) = fingerprint {
        v.text("hardware_fingerprint", f, 500);
    }
}

fn internal(context: &'static str) -> impl Fn(KeyError) -> AppError {
    move |e| AppError::internal(context, e)
}

fn uuid_of(id: &str) -> AppResult<Uuid> {
    Uuid::parse_str(id).map_err(|e| AppError::internal("an id is not a UUID", e))
}

/// Milliseconds rounded down to whole seconds: the key carries seconds, the record the same.
fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_millis(t.millis() - t.millis().rem_euclid(1000))
}

/// What a license's status means to a device: its validation code and the words for it.
fn standing(status: LicenseStatus) -> (ValidationCode, &'static str) {
    match status {
        LicenseStatus::Active => (ValidationCode::Valid, "the license is in force"),
        LicenseStatus::Expired => (ValidationCode::Expired, "the license has expired"),
        LicenseStatus::Suspended => (ValidationCode::Suspended, "the license is suspended"),
        LicenseStatus::Revoked => (ValidationCode::Revoked, "the license is revoked"),
    }
}

/// The refusal of an activation for a license not in force.
fn not_in_force(status: LicenseStatus) -> Option<AppError> {
    let code = match status {
        LicenseStatus::Active => return None,
        LicenseStatus::Expired => "license_expired",
        LicenseStatus::Suspended => "license_suspended",
        LicenseStatus::Revoked => "license_revoked",
    };
    Some(AppError::Refused {
        code,
        message: standing(status).1.into(),
    })
}

/// The refusal of a key presented to activate or deactivate that matches no license: invalid
/// input (not a key) or not found (no license of this server).
fn refuse_unmatched<T>(unmatched: Unmatched) -> AppResult<T> {
    match unmatched {
        Unmatched::Invalid(e) => Err(AppError::invalid("license_key", e.to_string())),
        Unmatched::NotFound => Err(AppError::NotFound("license")),
    }
}

/// A license key for the given license fields.
fn sign(
    signer: &LicenseSigner,
    id: &str,
    product_id: &str,
    expires_at: Option<Timestamp>,
    features: &[String],
) -> AppResult<String> {
    signer
        .sign(&LicenseClaims {
            license_id: uuid_of(id)?,
            product_id: uuid_of(product_id)?,
            expires_at: expires_at.map(|t| t.unix_seconds()),
            features: features.to_vec(),
        })
        .map_err(internal("signing a license key"))
}

impl App {
    /// The organization's signer, made and stored on first use.
    pub(crate) async fn license_signer(&self, org_id: &str) -> AppResult<LicenseSigner> {
        let (seed, _) = match self.store().license_signing_key(org_id).await? {
            Some(k) => k,
            None => {
                let new = LicenseSigner::generate();
                self.store()
                    .add_license_signing_key(
                        org_id,
                        &hex::encode(new.seed()),
                        &hex::encode(new.public_key()),
                    )
                    .await?
            }
        };
        let seed = hex::decode(seed).map_err(|e| AppError::internal("stored signing seed", e))?;
        LicenseSigner::from_seed(&seed).map_err(internal("stored signing seed"))
    }

    /// The public key devices check keys with (made with the signing key on first use).
    pub async fn license_public_key(&self, org_id: &str) -> AppResult<PublicKey> {
        let bytes = self.license_signer(org_id).await?.public_key();
        let pem = license_key::public_key_pem(&bytes).map_err(internal("public key"))?;
        Ok(PublicKey { bytes, pem })
    }

    /// Issues a license for a product of the organization, with its signed key.
    pub async fn create_license(&self, org_id: &str, new: NewLicense) -> AppResult<License> {
        let mut v = Validator::new();
        v.check(
            !new.product_id.trim().is_empty(),
            "product_id",
            "is required",
        );
        v.email("customer_email", new.customer_email.trim());
        let max = new.max_activations.unwrap_or(1);
        v.check(
            (1..=MAX_ACTIVATIONS).contains(&max),
            "max_activations",
            format!("must be 1 to {MAX_ACTIVATIONS}"),
        );
        v.finish()?;
        let product = match self.store().product(org_id, new.product_id.trim()).await {
            Ok(p) => p,
            Err(StoreError::NotFound) => {
                return Err(AppError::invalid(
                    "product_id",
                    "no product with this id in the organization",
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let license_type = new.license_type.unwrap_or(product.license_type);
        match (license_type, new.validity_days) {
            (LicenseType::Perpetual, Some(_)) => {
                return Err(AppError::invalid(
                    "validity_days",
                    "must be absent for a perpetual license",
                ));
            }
            (LicenseType::Subscription, None) => {
                return Err(AppError::invalid(
                    "validity_days",
                    "is required for a subscription",
                ));
            }
            (_, Some(d)) if !(1..=MAX_DAYS).contains(&d) => {
                return Err(AppError::invalid(
                    "validity_days",
                    format!("must be 1 to {MAX_DAYS}"),
                ));
            }
            _ => {}
        }
        let id = new_id();
        let now = Timestamp::now().millis();
        let expires_at = new
            .validity_days
            .map(|d| whole_seconds(Timestamp::from_millis(now + d * DAY_MS)));
        let signer = self.license_signer(org_id).await?;
        let license_key = sign(&signer, &id, &product.id, expires_at, &product.features)?;
        let new = plantd_store::NewLicense {
            id,
            product_id: product.id,
            license_key,
            license_type,
            max_activations: max,
            validity_days: new.validity_days,
            features: product.features,
            customer_email: new.customer_email.trim().to_string(),
            expires_at,
        };
        Ok(self.store().create_license(org_id, &new).await?)
    }

    pub async fn license(&self, org_id: &str, id: &str) -> AppResult<License> {
        self.store()
            .license(org_id, id)
            .await
            .map_err(AppError::missing("license"))
    }

    pub async fn licenses(
        &self,
        org_id: &str,
        filter: &LicenseFilter,
        page: Page,
    ) -> AppResult<Paged<License>> {
        let (items, total) = self
            .store()
            .licenses(org_id, filter, page.limit(), page.offset())
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn license_activations(&self, org_id: &str, id: &str) -> AppResult<Vec<Activation>> {
        self.license(org_id, id).await?;
        Ok(self.store().license_activations(org_id, id).await?)
    }

    async fn move_license(
        &self,
        org_id: &str,
        id: &str,
        from: &[LicenseStatus],
        to: LicenseStatus,
        event: EventType,
        verb: &str,
    ) -> AppResult<License> {
        let moved = match self
            .store()
            .set_license_status(org_id, id, from, to, event)
            .await
        {
            Err(StoreError::Conflict(state)) => {
                Err(AppError::Conflict(format!("cannot {verb}: {state}")))
            }
            other => other.map_err(AppError::missing("license")),
        };
        self.forget_license(id);
        moved
    }

    /// A device's activation of a license, kept for a while once found. A device without one
    /// is looked up each time, so that an activation made on another node counts at once.
    async fn device_activation(
        &self,
        license_id: &str,
        device: &str,
    ) -> AppResult<Option<Activation>> {
        let key = format!("{license_id}/{device}");
        let lookup = match self
            .activation_cache()
            .get(&key, self.config().key_cache_ttl)
        {
            Ok(activation) => return Ok(Some(activation)),
            Err(lookup) => lookup,
        };
        let found = self.store().device_activation(license_id, device).await?;
        if let Some(a) = &found {
            self.activation_cache().put(lookup, key, a.clone());
        }
        Ok(found)
    }

    /// Suspends an active (or expired) license: devices are refused until it is reinstated.
    pub async fn suspend_license(&self, org_id: &str, id: &str) -> AppResult<License> {
        let from = [LicenseStatus::Active];
        self.move_license(
            org_id,
            id,
            &from,
            LicenseStatus::Suspended,
            EventType::LicenseSuspended,
            "suspend",
        )
        .await
    }

    pub async fn reinstate_license(&self, org_id: &str, id: &str) -> AppResult<License> {
        let from = [LicenseStatus::Suspended];
        self.move_license(
            org_id,
            id,
            &from,
            LicenseStatus::Active,
            EventType::LicenseReinstated,
            "reinstate",
        )
        .await
    }

    /// Revokes a license for good.
    pub async fn revoke_license(&self, org_id: &str, id: &str) -> AppResult<License> {
        let from = [LicenseStatus::Active, LicenseStatus::Suspended];
        self.move_license(
            org_id,
            id,
            &from,
            LicenseStatus::Revoked,
            EventType::LicenseRevoked,
            "revoke",
        )
        .await
    }

    /// Extends a subscription and signs its key again with the new expiry.
    pub async fn renew_license(
        &self,
        org_id: &str,
        id: &str,
        renewal: Renewal,
    ) -> AppResult<License> {
        let license = self.license(org_id, id).await?;
        let (Some(expires_at), Some(validity)) = (license.expires_at, license.validity_days) else {
            return Err(AppError::Conflict(
                "a perpetual license does not expire; only subscriptions are renewed".into(),
            ));
        };
        if license.status == LicenseStatus::Revoked {
            return Err(AppError::Conflict(
                "cannot renew: the license is revoked".into(),
            ));
        }
        let days = renewal.days.unwrap_or(validity);
        if !(1..=MAX_DAYS).contains(&days) {
            return Err(AppError::invalid(
                "days",
                format!("must be 1 to {MAX_DAYS}"),
            ));
        }
        let from = expires_at.max(Timestamp::now());
        let until = whole_seconds(Timestamp::from_millis(from.millis() + days * DAY_MS));
        let signer = self.license_signer(org_id).await?;
        let key = sign(
            &signer,
            id,
            &license.product_id,
            Some(until),
            &license.features,
        )?;
        let renewed = self
            .store()
            .renew_license(org_id, id, expires_at, until, &key)
            .await
            .map_err(AppError::missing("license"));
        self.forget_license(id);
        renewed
    }

    /// Frees an activation's slot (an administrator's call).
    pub async fn deactivate_license(
        &self,
        org_id: &str,
        id: &str,
        d: Deactivation,
    ) -> AppResult<License> {
        self.license(org_id, id).await?;
        let freed = self
            .store()
            .deactivate_license(org_id, id, d.activation_id.trim())
            .await
            .map_err(AppError::missing("activation"));
        self.forget_license(id);
        freed
    }

    /// The license a key names: its current key, or an earlier one (before a renewal) whose
    /// signature checks with its organization's public key.
    async fn license_of_key(&self, key: &str) -> AppResult<Result<License, Unmatched>> {
        let unverified = match license_key::decode(key) {
            Ok(u) => u,
            Err(e) => return Ok(Err(Unmatched::Invalid(e))),
        };
        let id = unverified.claims.license_id.to_string();
        let ttl = self.config().key_cache_ttl;
        let (mut license, public_hex) = match self.license_cache().get(&id, ttl) {
            Ok(hit) => hit,
            Err(lookup) => match self.store().license_for_key(&id).await? {
                Some(found) => {
                    self.license_cache().put(lookup, id, found.clone());
                    found
                }
                None => return Ok(Err(Unmatched::NotFound)),
            },
        };
        // A license kept for a while may have reached its expiry since.
        license.status = license
            .status
            .effective(license.expires_at, Timestamp::now());
        // The license's current key was signed here: the same text needs no signature check
        // (compared as digests, so the comparison's time tells nothing of the stored key).
        if Sha256::digest(key.as_bytes()) == Sha256::digest(license.license_key.as_bytes()) {
            return Ok(Ok(license));
        }
        let public: [u8; 32] = hex::decode(&public_hex)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                AppError::internal("stored public key", StoreError::Corrupt(public_hex))
            })?;
        Ok(match unverified.verify(&public) {
            Ok(_) => Ok(license),
            // Signed by someone else, or altered: no license of ours.
            Err(_) => Err(Unmatched::NotFound),
        })
    }

    /// Counts a call of a license key against its per-minute limit.
    fn count_key_call(&self, license_id: &str) -> AppResult<()> {
        let bucket = Bucket {
            name: format!("license:{license_id}"),
            label: "license key",
            windows: vec![Window {
                limit: self.config().license_key_per_minute,
                window_secs: 60,
            }],
        };
        match self
            .limiter()
            .check(&[bucket], Timestamp::now().unix_seconds())
        {
            Decision::Allowed(_) => Ok(()),
            Decision::Refused { retry_after, .. } => Err(AppError::LimitReached {
                message: format!(
                    "license key limit of {} calls per minute reached; retry in {retry_after} s",
                    self.config().license_key_per_minute
                ),
                retry_after,
            }),
        }
    }

    /// A device call: checks the fields (`v`), finds the license `key` names (`unmatched`
    /// answers a key that names none), counts the call against the key's limit and runs `call`.
    /// A key that names a license acts in the call's audit record (`trail`) in the license's
    /// organization (actor `license_key`, the license's id).
    async fn device_call<T>(
        &self,
        v: Validator,
        key: &str,
        trail: &AuditTrail,
        unmatched: impl FnOnce(Unmatched) -> AppResult<T>,
        call: impl AsyncFnOnce(License) -> AppResult<T>,
    ) -> AppResult<T> {
        v.finish()?;
        let license = match self.license_of_key(key.trim()).await? {
            Err(u) => return unmatched(u),
            Ok(l) => l,
        };
        trail.act_as(Actor {
            org_id: Some(license.org_id.clone()),
            actor_type: ActorType::LicenseKey,
            actor_id: Some(license.id.clone()),
            user_id: None,
        });
        trail.resource(&license.id);
        self.count_key_call(&license.id)?;
        call(license).await
    }

    /// Activates a device (no API key: the license key is the credential).
    pub async fn activate_license(
        &self,
        req: ActivationRequest,
        trail: &AuditTrail,
    ) -> AppResult<ActivationAnswer> {
        let mut v = Validator::new();
        device_fields(
            &mut v,
            &req.license_key,
            Some(&req.device_id),
            Some(&req.hardware_fingerprint),
        );
        self.device_call(v, &req.license_key, trail, refuse_unmatched, async |l| {
            self.activate(l, &req).await
        })
        .await
    }

    async fn activate(
        &self,
        license: License,
        req: &ActivationRequest,
    ) -> AppResult<ActivationAnswer> {
        if let Some(refusal) = not_in_force(license.status) {
            return Err(refusal);
        }
        let (outcome, license) = self
            .store()
            .activate_license(
                &license.org_id,
                &license.id,
                req.device_id.trim(),
                &req.hardware_fingerprint,
            )
            .await?;
        let (activation, existing) = match outcome {
            Activated::New(a) => {
                self.forget_license(&license.id);
                (a, false)
            }
            Activated::Existing(a) => (a, true),
            Activated::FingerprintMismatch => {
                return Err(AppError::Refused {
                    code: "fingerprint_mismatch",
                    message: "this device is activated with another hardware fingerprint; deactivate it first".into(),
                });
            }
            Activated::NotInForce => {
                return Err(not_in_force(license.status).unwrap_or_else(|| {
                    AppError::Conflict(format!("the license is {}", license.status.as_str()))
                }));
            }
            Activated::Full => {
                return Err(AppError::Refused {
                    code: "too_many_activations",
                    message: format!(
                        "all {} activations of this license are in use; deactivate a device first",
                        license.max_activations
                    ),
                });
            }
        };
        Ok(ActivationAnswer {
            activation_id: activation.id,
            license_id: license.id,
            device_id: activation.device_id,
            activated_at: activation.activated_at,
            expires_at: license.expires_at,
            features: license.features,
            existing,
        })
    }

    /// Validates a key (no API key). Every key gets an answer with a code; only a missing key
    /// is invalid input, and only the per-key limit refuses.
    pub async fn validate_license(
        &self,
        req: ValidationRequest,
        trail: &AuditTrail,
    ) -> AppResult<ValidationAnswer> {
        let mut v = Validator::new();
        device_fields(
            &mut v,
            &req.license_key,
            req.device_id.as_deref(),
            req.hardware_fingerprint.as_deref(),
        );
        // A key that names no license is answered with its code, not refused.
        let unmatched = |u| {
            let (code, detail) = match u {
                Unmatched::Invalid(e) => (ValidationCode::InvalidKey, e.to_string()),
                Unmatched::NotFound => (
                    ValidationCode::NotFound,
                    "no license of this server matches the key".to_string(),
                ),
            };
            Ok(ValidationAnswer {
                valid: false,
                code,
                detail,
                license_id: None,
                status: None,
                expires_at: None,
                features: None,
                current_activations: None,
                max_activations: None,
                activation_id: None,
                license_key: None,
            })
        };
        self.device_call(v, &req.license_key, trail, unmatched, async |l| {
            self.validate(l, &req).await
        })
        .await
    }

    async fn validate(
        &self,
        license: License,
        req: &ValidationRequest,
    ) -> AppResult<ValidationAnswer> {
        let (mut code, detail) = standing(license.status);
        let mut detail = detail.to_string();
        let mut activation_id = None;
        if let Some(device) = req.device_id.as_deref().map(str::trim) {
            match self.device_activation(&license.id, device).await? {
                None if code.is_valid() => {
                    code = ValidationCode::NotActivatedOnDevice;
                    detail = format!("the license is not activated on device '{device}'");
                }
                Some(a)
                    if code.is_valid()
                        && req
                            .hardware_fingerprint
                            .as_deref()
                            .is_some_and(|f| f != a.hardware_fingerprint) =>
                {
                    code = ValidationCode::FingerprintMismatch;
                    detail =
                        format!("device '{device}' is activated with another hardware fingerprint");
                }
                Some(a) => activation_id = Some(a.id),
                None => {}
            }
        }
        let superseded = req.license_key.trim() != license.license_key;
        Ok(ValidationAnswer {
            valid: code.is_valid(),
            code,
            detail,
            license_id: Some(license.id),
            status: Some(license.status),
            expires_at: license.expires_at,
            features: Some(license.features),
            current_activations: Some(license.current_activations),
            max_activations: Some(license.max_activations),
            activation_id,
            license_key: superseded.then_some(license.license_key),
        })
    }

    /// Frees an activation with the license key (a device's own call).
    pub async fn deactivate_with_key(
        &self,
        req: DeviceDeactivation,
        trail: &AuditTrail,
    ) -> AppResult<()> {
        let mut v = Validator::new();
        device_fields(&mut v, &req.license_key, None, None);
        v.check(
            !req.activation_id.trim().is_empty(),
            "activation_id",
            "is required",
        );
        self.device_call(v, &req.license_key, trail, refuse_unmatched, async |l| {
            let freed = self
                .store()
                .deactivate_license(&l.org_id, &l.id, req.activation_id.trim())
                .await
                .map_err(AppError::missing("activation"));
            self.forget_license(&l.id);
            freed.map(|_| ())
        })
        .await
    }
}
