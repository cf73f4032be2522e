//! API keys: as listed (never the key itself), and as made (the key, shown once).

use baton_store::ApiKey;
use serde::Serialize;

/// A key as listed: everything but the key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyView {
    /// The key's public id (the part after `bk_`).
    pub id: String,
    /// The tenant every request with this key acts for.
    pub tenant: String,
    /// What the key is for, as its creator said.
    pub label: Option<String>,
    /// When it was made (RFC 3339).
    pub created_at: String,
    /// When it was revoked (RFC 3339); a revoked key authenticates nobody.
    pub revoked_at: Option<String>,
}

impl From<&ApiKey> for KeyView {
    fn from(k: &ApiKey) -> Self {
        KeyView {
            id: k.id.clone(),
            tenant: k.tenant.to_string(),
            label: k.label.clone(),
            created_at: k.created_at.to_string(),
            revoked_at: k.revoked_at.map(|t| t.to_string()),
        }
    }
}

/// Keys, as listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyList {
    /// The keys, oldest first.
    pub keys: Vec<KeyView>,
}

/// A key just made: its listing, and the key itself, shown this once (baton keeps only its
/// hash).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewKeyView {
    /// The key as listed.
    #[serde(flatten)]
    pub listed: KeyView,
    /// The key (`bk_<id>_<secret>`).
    pub key: String,
}
