//! OTA packages (SPEC 4.8; issue 29): a file received as a stream into a content-addressed
//! directory with its SHA-256 and size computed on the way, stored once per content and
//! durable before the answer; its manifest (id, version, size, SHA-256) signed with the
//! organization's Ed25519 key, the one that signs license keys; release once; the file for a
//! download, to a person or to a device presenting its own password.

use base64::Engine as _;
use plantd_model::Timestamp;
use plantd_model::ota::{self, Package, PackageStatus};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_store::StoreError;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;

use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::{AppError, AppResult};
use crate::licenses::PublicKey;

/// The largest package accepted: 2 GiB (docs/api.md, "OTA").
pub const MAX_PACKAGE_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// A package file being received: written to a temporary file of the package directory while
/// its SHA-256 and size are computed. Dropped before [`App::create_package`], it leaves nothing
/// behind.
pub struct PackageUpload {
    file: Option<tokio::io::BufWriter<tokio::fs::File>>,
    path: PathBuf,
    hasher: Sha256,
    size: u64,
    kept: bool,
}

impl PackageUpload {
    /// Appends a chunk; refuses a file beyond [`MAX_PACKAGE_BYTES`].
    pub async fn write(&mut self, chunk: &[u8]) -> AppResult<()> {
        self.size += chunk.len() as u64;
        if self.size > MAX_PACKAGE_BYTES {
            return Err(AppError::invalid(
                "file",
                format!("is larger than the limit of {MAX_PACKAGE_BYTES} bytes"),
            ));
        }
        self.hasher.update(chunk);
        let Some(file) = self.file.as_mut() else {
            return Err(AppError::invalid("file", "was sent twice"));
        };
        file.write_all(chunk)
            .await
            .map_err(|e| AppError::internal("writing an uploaded package", e))
    }

    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for PackageUpload {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The form fields of an upload (`file` is the [`PackageUpload`]).
#[derive(Clone, Debug, Default)]
pub struct PackageFields {
    pub version: Option<String>,
    pub name: Option<String>,
    pub device_type: Option<String>,
    pub release_notes: Option<String>,
    /// The uploaded file's own name: the package's name when none is given.
    pub file_name: Option<String>,
}

/// Where package files live: `<dir>/sha256/<first two hex digits>/<sha256>`.
pub(crate) fn blob_path(dir: &Path, sha256: &str) -> PathBuf {
    dir.join("sha256").join(&sha256[..2]).join(sha256)
}

fn io(context: &'static str) -> impl Fn(std::io::Error) -> AppError {
    move |e| AppError::internal(context, e)
}

impl App {
    /// Begins receiving a package file.
    pub async fn package_upload(&self) -> AppResult<PackageUpload> {
        let tmp = self.config().ota_dir.join("tmp");
        tokio::fs::create_dir_all(&tmp)
            .await
            .map_err(io("creating the package directory"))?;
        let path = tmp.join(format!("{}.part", plantd_model::new_id()));
        let file = tokio::fs::File::create(&path)
            .await
            .map_err(io("creating an upload file"))?;
        Ok(PackageUpload {
            file: Some(tokio::io::BufWriter::with_capacity(1 << 20, file)),
            path,
            hasher: Sha256::new(),
            size: 0,
            kept: false,
        })
    }

    /// Stores a received package as a draft: the file under its SHA-256 (durable before the
    /// answer), the manifest signed.
    pub async fn create_package(
        &self,
        org_id: &str,
        mut upload: Option<PackageUpload>,
        fields: PackageFields,
    ) -> AppResult<Package> {
        let version = fields.version.unwrap_or_default().trim().to_string();
        let name = fields
            .name
            .filter(|n| !n.trim().is_empty())
            .or(fields.file_name.filter(|n| !n.trim().is_empty()))
            .unwrap_or_default()
            .trim()
            .to_string();
        let device_type = fields.device_type.unwrap_or_default().trim().to_string();
        let notes = fields.release_notes.unwrap_or_default();
        let mut v = Validator::new();
        v.check(upload.is_some(), "file", "is required (the package file)");
        v.check(
            upload.as_ref().is_none_or(|u| u.size > 0),
            "file",
            "is empty",
        );
        ota::check_package_fields(&mut v, &name, &version, &device_type, &notes);
        v.finish()?;
        let Some(mut up) = upload.take() else {
            return Err(AppError::invalid("file", "is required"));
        };
        let mut file = up
            .file
            .take()
            .ok_or_else(|| AppError::invalid("file", "is required"))?;
        file.flush()
            .await
            .map_err(io("writing an uploaded package"))?;
        file.get_mut()
            .sync_all()
            .await
            .map_err(io("writing an uploaded package"))?;
        drop(file);
        let sha256 = hex::encode(std::mem::take(&mut up.hasher).finalize());
        let blob = blob_path(&self.config().ota_dir, &sha256);
        if let Some(parent) = blob.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(io("creating the package directory"))?;
        }
        // Content-addressed: the same file uploaded twice is stored once.
        if tokio::fs::metadata(&blob).await.is_err() {
            tokio::fs::rename(&up.path, &blob)
                .await
                .map_err(io("storing a package file"))?;
            up.kept = true;
        }
        let id = plantd_model::new_id();
        let manifest = ota::manifest(&id, &version, up.size, &sha256);
        let signature = self
            .license_signer(org_id)
            .await?
            .sign_message(manifest.as_bytes());
        let package = Package {
            id,
            org_id: org_id.to_string(),
            name,
            version,
            device_type,
            release_notes: notes,
            size_bytes: up.size,
            sha256: sha256.clone(),
            status: PackageStatus::Draft,
            signature: base64::engine::general_purpose::STANDARD.encode(signature),
            manifest,
            created_at: Timestamp::now(),
            released_at: None,
        };
        drop(up);
        match self.store().insert_package(&package).await {
            Ok(p) => Ok(p),
            Err(e) => {
                if !self
                    .store()
                    .package_file_in_use(&sha256)
                    .await
                    .unwrap_or(true)
                {
                    let _ = tokio::fs::remove_file(&blob).await;
                }
                Err(e.into())
            }
        }
    }

    pub async fn packages(&self, org_id: &str, page: Page) -> AppResult<Paged<Package>> {
        let (items, total) = self
            .store()
            .packages(org_id, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn package(&self, org_id: &str, id: &str) -> AppResult<Package> {
        self.store()
            .package(org_id, id)
            .await
            .map_err(AppError::missing("package"))
    }

    /// Releases a draft; a released package is refused (409 `package_already_released`).
    pub async fn release_package(&self, org_id: &str, id: &str) -> AppResult<Package> {
        self.package(org_id, id).await?;
        if !self
            .store()
            .release_package(org_id, id, Timestamp::now())
            .await?
        {
            return Err(AppError::Refused {
                code: "package_already_released",
                message: "the package is released already".into(),
            });
        }
        self.package(org_id, id).await
    }

    /// A package and the path of its file, for a download: a person's credential reads any
    /// package of the organization; a device's, released packages of its organization.
    pub async fn package_file(&self, caller: &Caller, id: &str) -> AppResult<(Package, PathBuf)> {
        let package = self.package(&caller.org_id, id).await?;
        if matches!(caller.credential, Credential::Device { .. })
            && package.status != PackageStatus::Released
        {
            return Err(AppError::NotFound("package"));
        }
        let path = blob_path(&self.config().ota_dir, &package.sha256);
        if tokio::fs::metadata(&path).await.is_err() {
            return Err(AppError::internal(
                format!("the file of package {id} is missing from the package directory"),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        }
        Ok((package, path))
    }

    /// The key package manifests are signed with (the organization's license key pair).
    pub async fn ota_public_key(&self, org_id: &str) -> AppResult<PublicKey> {
        self.license_public_key(org_id).await
    }

    /// A device presenting its password as a bearer token (OTA downloads): the caller it is,
    /// with no scope (only routes that take device credentials admit it).
    pub(crate) async fn device_bearer_caller(&self, token: &str) -> AppResult<Caller> {
        let hash = plantd_auth::hash_key(token);
        let login = match self.store().device_by_password_hash(&hash).await {
            Ok(l) => l,
            Err(StoreError::NotFound) => {
                return Err(AppError::Unauthenticated(
                    "invalid device credentials".into(),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        // The channel's caller, without its `write:telemetry`: over HTTP a device has no scope.
        let mut caller = self.session_of(login).await?.caller;
        caller.scopes.clear();
        Ok(caller)
    }
}
