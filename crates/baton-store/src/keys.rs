//! API keys: how an HTTP caller proves which tenant it is.
//!
//! A key is `bk_<id>_<secret>`: `id` (12 hex digits) names the key in listings and in
//! `keys revoke`, `secret` (64 hex digits, 256 random bits) is what proves possession. The store
//! keeps only the SHA-256 of the whole key ([`KeyHash`]), never the key: a leaked database
//! authenticates nobody. A key is shown once, when it is made ([`generate`]).
//!
//! [`KeyStore::authenticate`] is the one lookup that is not scoped by tenant, because finding
//! the tenant is what it is for; it answers only live (unrevoked) keys. Revoking every key of a
//! tenant is how a tenant is shut out ("deleted") without touching its data.

use async_trait::async_trait;
use baton_core::{TenantId, Timestamp};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::backend::{Backend, KeyRows};
use crate::history::job;
use crate::{Error, check_text};

/// The SHA-256 of a whole key, which is all the store keeps of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyHash(pub [u8; 32]);

impl KeyHash {
    /// The hash of `key` as presented (no trimming: a key with a stray space is another key).
    pub fn of(key: &str) -> Self {
        KeyHash(Sha256::digest(key.as_bytes()).into())
    }
}

/// A key as listed: everything but the key itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApiKey {
    /// The key's public id (the part after `bk_`).
    pub id: String,
    /// The tenant every request with this key acts for.
    pub tenant: TenantId,
    /// What the key is for, as its creator said.
    pub label: Option<String>,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it was revoked; a revoked key authenticates nobody.
    pub revoked_at: Option<Timestamp>,
}

/// A key to store: its id and hash, never its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewApiKey<'a> {
    /// The public id.
    pub id: &'a str,
    /// The hash of the whole key.
    pub hash: KeyHash,
    /// The tenant.
    pub tenant: &'a TenantId,
    /// What it is for.
    pub label: Option<&'a str>,
    /// When it is made.
    pub now: Timestamp,
}

/// Which keys to revoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revoke<'a> {
    /// One key, by its public id.
    Id(&'a str),
    /// Every live key of a tenant.
    Tenant(&'a TenantId),
}

/// The API keys every store keeps (schema version 8).
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores a new key. An id already taken is [`Error::InvalidKey`].
    async fn create_api_key(&self, new: &NewApiKey<'_>) -> Result<ApiKey, Error>;

    /// The live key with this hash, whatever its tenant; `None` for an unknown or revoked key.
    async fn authenticate(&self, hash: &KeyHash) -> Result<Option<ApiKey>, Error>;

    /// The keys of `tenant` (of every tenant when `None`), revoked ones included, oldest first.
    async fn api_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, Error>;

    /// Revokes the named live keys at `now`; returns how many it revoked (0 when none was live).
    async fn revoke_api_keys(&self, which: Revoke<'_>, now: Timestamp) -> Result<u64, Error>;
}

/// Every call is one statement: a key's id (and hash) is unique, so an insert that finds it
/// taken is refused.
#[async_trait]
impl<B: Backend> KeyStore for B {
    async fn create_api_key(&self, new: &NewApiKey<'_>) -> Result<ApiKey, Error> {
        check_text("api key id", Some(new.id))?;
        check_text("api key label", new.label)?;
        let key = ApiKey {
            id: new.id.to_owned(),
            tenant: new.tenant.clone(),
            label: new.label.map(str::to_owned),
            created_at: new.now,
            revoked_at: None,
        };
        let (row, hash) = (key.clone(), new.hash);
        self.write(job!(|tx| {
            let new = NewApiKey {
                id: &row.id,
                hash,
                tenant: &row.tenant,
                label: row.label.as_deref(),
                now: row.created_at,
            };
            if tx.insert_key(&new).await? {
                Ok(())
            } else {
                Err(Error::InvalidKey {
                    detail: format!("a key with id {} already exists", row.id),
                })
            }
        }))
        .await?;
        Ok(key)
    }

    async fn authenticate(&self, hash: &KeyHash) -> Result<Option<ApiKey>, Error> {
        let hash = *hash;
        self.read_row(job!(|tx| { tx.key(&hash).await })).await
    }

    async fn api_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, Error> {
        let tenant = tenant.cloned();
        self.read_one(job!(|tx| { tx.keys(tenant.as_ref()).await }))
            .await
    }

    async fn revoke_api_keys(&self, which: Revoke<'_>, now: Timestamp) -> Result<u64, Error> {
        let which = match which {
            Revoke::Id(id) => Ok(id.to_owned()),
            Revoke::Tenant(t) => Err(t.clone()),
        };
        self.write(job!(|tx| {
            let which = match &which {
                Ok(id) => Revoke::Id(id),
                Err(tenant) => Revoke::Tenant(tenant),
            };
            tx.revoke_keys(which, now).await
        }))
        .await
    }
}

/// A new key: the text to hand out once, its public id and its hash.
pub struct Generated {
    /// The whole key, `bk_<id>_<secret>`: print it once, store it nowhere.
    pub key: String,
    /// The public id.
    pub id: String,
    /// What the store keeps.
    pub hash: KeyHash,
}

impl std::fmt::Debug for Generated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generated")
            .field("id", &self.id)
            .field("key", &"***")
            .finish()
    }
}

/// Makes a key from the operating system's random source.
pub fn generate() -> Result<Generated, Error> {
    let mut bytes = [0u8; 6 + 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::InvalidKey {
        detail: format!("no random source to make a key from: {e}"),
    })?;
    let (id, secret) = bytes.split_at(6);
    let id = hex(id);
    let key = format!("bk_{id}_{}", hex(secret));
    Ok(Generated {
        hash: KeyHash::of(&key),
        id,
        key,
    })
}

/// Whether `text` has the shape of a key (`bk_` + 12 hex + `_` + 64 hex). Anything else is
/// refused before a lookup, so no caller learns anything from timing a malformed key.
pub fn well_formed(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("bk_") else {
        return false;
    };
    let Some((id, secret)) = rest.split_once('_') else {
        return false;
    };
    let hexish = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    hexish(id, 12) && hexish(secret, 64)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn generated_keys_are_well_formed_unique_and_hashed_whole() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert!(well_formed(&a.key), "{}", a.key);
        assert_ne!(a.key, b.key);
        assert_ne!(a.id, b.id);
        assert_eq!(a.hash, KeyHash::of(&a.key));
        assert!(a.key.starts_with(&format!("bk_{}_", a.id)));
        assert!(!format!("{a:?}").contains(&a.key[16..]));
    }

    #[test]
    fn malformed_keys_are_refused() {
        let good = generate().unwrap().key;
        for bad in [
            "",
            "sk-abc",
            "bk_",
            &good[..good.len() - 1],
            &format!("{good}0"),
            &good.to_uppercase(),
            &good.replacen('_', "-", 1),
        ] {
            assert!(!well_formed(bad), "{bad:?}");
        }
    }
}
