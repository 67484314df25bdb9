//! `plantd license verify`: checks a license key offline with an organization's public key,
//! as a device would, and prints what the key carries.

use anyhow::{Context, bail};
use clap::Subcommand;
use plantd_auth::license_key;
use plantd_model::Timestamp;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum LicenseCommand {
    /// Check a license key's signature offline and print its license, product, features and
    /// expiry. Fails (exit status 1) for a damaged, altered or foreign key, and for an expired
    /// one.
    Verify {
        /// The license key (`pdl_...`).
        key: String,
        /// The organization's public key: the PEM file of `GET /v1/licenses/public-key`
        /// (`public_key_pem`), or its base64.
        #[arg(long)]
        public_key: PathBuf,
    },
}

pub fn run(command: LicenseCommand) -> anyhow::Result<()> {
    let LicenseCommand::Verify { key, public_key } = command;
    let text = std::fs::read_to_string(&public_key)
        .with_context(|| format!("cannot read the public key file {}", public_key.display()))?;
    let public = license_key::parse_public_key(&text)
        .with_context(|| format!("in {}", public_key.display()))?;
    let claims = license_key::verify(&key, &public)?;
    println!("signature: valid (Ed25519)");
    println!("license:   {}", claims.license_id);
    println!("product:   {}", claims.product_id);
    println!("features:  {}", claims.features.join(", "));
    match claims.expires_at {
        None => println!("expires:   never (perpetual)"),
        Some(secs) => {
            let at = Timestamp::from_millis(secs.saturating_mul(1000));
            println!("expires:   {at}");
            if at <= Timestamp::now() {
                bail!("the license key expired at {at}");
            }
        }
    }
    Ok(())
}
