//! Operator operations shared by the command line (`plantd keys|orgs|users create`), the first
//! start and the test fixtures: they act on the store directly, outside the HTTP pipeline and
//! without a running [`App`](crate::App).

use plantd_model::org::{MemberStatus, Organization, Role};
use plantd_model::validation::{Validator, describe};
use plantd_model::{Scope, Tier, Timestamp};
use plantd_store::{NewApiKey, NewUser, Store, StoreError};

use crate::api_keys::validate_new_key;
use crate::error::AppError;
use crate::users::hash_password;

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("{0}")]
    Invalid(String),
    #[error("organization {0} does not exist")]
    NoSuchOrg(String),
    #[error("there is no organization yet: start `plantd serve` once or run `plantd orgs create`")]
    NoOrg,
    #[error("storage failed")]
    Store(#[from] StoreError),
}

fn invalid(v: Validator) -> Result<(), OperatorError> {
    v.finish()
        .map_err(|errors| OperatorError::Invalid(describe(&errors)))
}

/// The organization named by `--org`, or the first one.
pub async fn resolve_org(store: &Store, org: Option<&str>) -> Result<Organization, OperatorError> {
    match org {
        Some(id) => store.org(id).await.map_err(|e| match e {
            StoreError::NotFound => OperatorError::NoSuchOrg(id.to_string()),
            other => other.into(),
        }),
        None => store.first_org().await?.ok_or(OperatorError::NoOrg),
    }
}

/// Creates an organization.
pub async fn create_org(
    store: &Store,
    name: &str,
    tier: Tier,
) -> Result<Organization, OperatorError> {
    let mut v = Validator::new();
    v.text("name", name, 200);
    invalid(v)?;
    Ok(store.create_org(name.trim(), tier).await?)
}

/// A new key of `org` (acting for its first owner, if any); returns the key id and the secret.
pub async fn create_key(
    store: &Store,
    org: Option<&str>,
    name: &str,
    scopes: &[Scope],
    expires_at: Option<Timestamp>,
) -> Result<(String, String), OperatorError> {
    let org = resolve_org(store, org).await?;
    validate_new_key(name, scopes, expires_at).map_err(|e| match e {
        AppError::Invalid(errors) => OperatorError::Invalid(describe(&errors)),
        other => OperatorError::Invalid(plantd_model::error_chain(&other)),
    })?;
    let owner = store.first_owner(&org.id).await?;
    let secret = plantd_auth::generate_key();
    let key = store
        .create_api_key(NewApiKey {
            org_id: &org.id,
            user_id: owner.as_deref(),
            name: name.trim(),
            scopes,
            expires_at,
            prefix: &secret.display_prefix,
            key_hash: &secret.hash,
        })
        .await?;
    Ok((key.id, secret.secret))
}

/// Creates a user with a password and makes them a member of `org` with `role`. An existing
/// user without a password (an invitation) gets the password and becomes active.
pub async fn create_user(
    store: &Store,
    org: Option<&str>,
    email: &str,
    password: &str,
    role: Role,
) -> Result<String, OperatorError> {
    let org = resolve_org(store, org).await?;
    let mut v = Validator::new();
    v.email("email", email.trim());
    if let Some(problem) = plantd_auth::password_problem(password, email.trim()) {
        v.add("password", problem);
    }
    invalid(v)?;
    let hash = hash_password(password)
        .await
        .map_err(|e| OperatorError::Invalid(plantd_model::error_chain(&e)))?;
    let user = match store.user_by_email(email).await? {
        Some(existing) => {
            if store.password_hash(&existing.id).await?.is_some() {
                return Err(OperatorError::Invalid(format!(
                    "a user with email {} already exists",
                    existing.email
                )));
            }
            store.set_password(&existing.id, &hash).await?;
            existing
        }
        None => {
            let name = email.split('@').next().unwrap_or_default();
            store
                .create_user(NewUser {
                    email,
                    name,
                    password_hash: Some(&hash),
                })
                .await?
        }
    };
    match store
        .add_member(&org.id, &user.id, role, MemberStatus::Active)
        .await
    {
        Ok(_) => {}
        // Already a member (an invitation): the operator's word makes them active.
        Err(StoreError::Conflict(_)) => {
            store.activate_member(&org.id, &user.id).await?;
        }
        Err(e) => return Err(e.into()),
    }
    Ok(user.id)
}

/// Adds a new signing key for access tokens and prints its id; every node signs with it within
/// a minute, and tokens signed by the old key stay valid until they expire (the old key stays
/// in the JWKS meanwhile).
pub async fn rotate_signing_key(store: &Store) -> Result<String, OperatorError> {
    let pem = crate::signing::generate_pem()
        .await
        .map_err(|e| OperatorError::Invalid(plantd_model::error_chain(&e)))?;
    let kid = plantd_model::new_id();
    store.add_signing_key(&kid, &pem).await?;
    Ok(kid)
}

/// The login created on first start.
pub struct FirstStart {
    pub org: Organization,
    pub email: String,
    /// `None`: the owner has none yet; the edge agent's setup wizard sets it.
    pub password: Option<String>,
}

pub const FIRST_ADMIN_EMAIL: &str = "admin@localhost";

/// The owner's password at a first start.
pub enum FirstPassword {
    /// A random one, printed once.
    Random,
    /// This one (the edge agent of `plantd up` takes its platform's).
    Given(String),
    /// None yet: the edge agent's setup wizard sets it with a setup code.
    ByWizard,
}

/// On an empty database: creates organization `org_name` (enterprise) and the owner
/// `admin@localhost` with its password as `password` says. Returns `None` when organizations
/// already exist.
pub async fn first_start(
    store: &Store,
    org_name: &str,
    password: FirstPassword,
) -> Result<Option<FirstStart>, OperatorError> {
    if store.org_count().await? > 0 {
        return Ok(None);
    }
    let org = store.create_org(org_name, Tier::Enterprise).await?;
    let password = match password {
        FirstPassword::Random => Some(plantd_auth::generate_password()),
        FirstPassword::Given(p) => Some(p),
        FirstPassword::ByWizard => None,
    };
    match &password {
        Some(p) => {
            create_user(store, Some(&org.id), FIRST_ADMIN_EMAIL, p, Role::Owner).await?;
        }
        None => {
            let user = store
                .create_user(NewUser {
                    email: FIRST_ADMIN_EMAIL,
                    name: "admin",
                    password_hash: None,
                })
                .await?;
            store
                .add_member(&org.id, &user.id, Role::Owner, MemberStatus::Active)
                .await?;
        }
    }
    Ok(Some(FirstStart {
        org,
        email: FIRST_ADMIN_EMAIL.into(),
        password,
    }))
}

/// Failover (issue 33): the organization's primary region becomes `region`, this instance's,
/// which holds a copy of its resident data sent by the former primary region (the secondary
/// copy); what the former primary took after that copy is not here. The change replicates to
/// every region as they are reachable. Answers the copy's time.
pub async fn fail_over(
    store: &Store,
    org_id: &str,
    region: &str,
) -> Result<plantd_store::StandbyCopy, OperatorError> {
    let org = resolve_org(store, Some(org_id)).await?;
    let held = store.standby_copy(&org.id, "held").await?.ok_or_else(|| {
        OperatorError::Invalid(format!(
            "this instance holds no secondary copy of organization {}: fail over at its secondary region",
            org.id
        ))
    })?;
    store.set_org_primary_region(&org.id, region).await?;
    store.forget_standby_copy(&org.id, "held").await?;
    Ok(held)
}
