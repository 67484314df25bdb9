-- Products and licenses (issue 16): an organization's products, the licenses it issues for them
-- (the key is signed with the organization's Ed25519 key, license_signing_keys), and each
-- license's activations per device.
CREATE TABLE products (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    sku TEXT NOT NULL,
    description TEXT NOT NULL,
    price DOUBLE PRECISION NOT NULL,
    license_type TEXT NOT NULL,
    features TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (org_id, sku)
);
CREATE INDEX products_org ON products (org_id, name, id);

CREATE TABLE license_signing_keys (
    org_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    -- hex of the 32-byte Ed25519 seed, and of the public key
    seed TEXT NOT NULL,
    public_key TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE licenses (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    product_id TEXT NOT NULL REFERENCES products(id),
    license_key TEXT NOT NULL,
    license_type TEXT NOT NULL,
    status TEXT NOT NULL,
    max_activations BIGINT NOT NULL,
    validity_days BIGINT,
    features TEXT NOT NULL,
    customer_email TEXT NOT NULL,
    expires_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX licenses_org ON licenses (org_id, created_at, id);
CREATE INDEX licenses_product ON licenses (product_id);

CREATE TABLE license_activations (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    license_id TEXT NOT NULL REFERENCES licenses(id) ON DELETE CASCADE,
    device_id TEXT NOT NULL,
    hardware_fingerprint TEXT NOT NULL,
    activated_at BIGINT NOT NULL,
    UNIQUE (license_id, device_id)
);
