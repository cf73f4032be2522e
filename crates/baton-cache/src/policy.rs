//! Authorization, apart from the key: a key is never a permission.
//!
//! Every [`Cache::call`](crate::Cache::call) asks its [`AccessPolicy`] first, with the caller's
//! tenant and the operation. The store then reaches only that tenant's rows, so even a caller
//! holding another tenant's exact key finds nothing of it.

use baton_core::TenantId;

/// A caller the policy refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tenant \"{tenant}\" may not call {operation}: {reason}")]
pub struct Denied {
    /// The tenant.
    pub tenant: TenantId,
    /// The operation.
    pub operation: String,
    /// Why.
    pub reason: String,
}

/// Decides whether a tenant may make a call (and so read the cache of it).
pub trait AccessPolicy: Send + Sync {
    /// `Ok` to go on; `Err` names why not.
    fn check(&self, tenant: &TenantId, operation: &str) -> Result<(), Denied>;
}

/// The default: a tenant may call anything, and reaches only its own entries.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowOwnTenant;

impl AccessPolicy for AllowOwnTenant {
    fn check(&self, _tenant: &TenantId, _operation: &str) -> Result<(), Denied> {
        Ok(())
    }
}

/// Allows only the operations listed (for example a tenant limited to one provider).
#[derive(Clone, Debug, Default)]
pub struct AllowOperations(pub Vec<String>);

impl AccessPolicy for AllowOperations {
    fn check(&self, tenant: &TenantId, operation: &str) -> Result<(), Denied> {
        if self.0.iter().any(|op| op == operation) {
            return Ok(());
        }
        Err(Denied {
            tenant: tenant.clone(),
            operation: operation.to_owned(),
            reason: format!("allowed operations are {}", self.0.join(", ")),
        })
    }
}
