//! The process's one TLS crypto provider, ring: webhook and Slack posts (reqwest), SMTP
//! (lettre) and MQTT (rumqttc) all use rustls with it, so a second provider (aws-lc, a C build
//! of about a minute) is not compiled. reqwest's clients need it installed before they are
//! built; [`install_provider`] is idempotent.

/// Installs ring as the process's default rustls provider (once; later calls do nothing).
pub fn install_provider() {
    // An error means a provider is installed already (this one, by an earlier call).
    let _ = rustls::crypto::ring::default_provider().install_default();
}
