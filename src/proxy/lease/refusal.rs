//! Every way the lease contract refuses, each with its status, code and retry advice in one
//! table. The codes are a contract of their own (docs/reference/leases.md), so they are not the
//! data plane's; the request path carries a refusal to the answer table as `Stop::Lease`, the
//! lifecycle endpoint answers it directly, and both get the same status for the same code.

use crate::dialect::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The lifecycle body names no known action, or an action's fields are wrong.
    ActionInvalid,
    /// The lifecycle call's key is unknown.
    ApiKeyInvalid,
    /// A lease operation without a key.
    AuthenticationRequired,
    /// The lifecycle body is not JSON.
    ContentTypeRequired,
    /// The owner or generation is malformed.
    ContextInvalid,
    /// A lease key's request carries no lease headers.
    ContextRequired,
    /// The generation is not the lease's current one.
    FenceStale,
    /// The key's own settings cannot hold a lease (no allowed connections).
    KeyConfigurationInvalid,
    /// The model names no route.
    ModelInvalid,
    /// None of the key's allowed connections serves the model.
    NoEligibleConnection,
    /// The owner already holds a lease.
    OwnerActive,
    /// No lease is active for this owner (or its connection is gone).
    Required,
    /// The key lacks the lease scope, or a lease key calls an unfenced endpoint.
    ScopeRequired,
    /// Every free eligible connection is leased by another owner.
    CapacityUnavailable,
    /// Every eligible connection is cooling down or unusable (not contention).
    EligibilityUnavailable,
    /// The lease book did not answer: leases fail closed.
    ServiceUnavailable,
}

impl Refusal {
    pub const ALL: [Refusal; 16] = [
        Refusal::ActionInvalid,
        Refusal::ApiKeyInvalid,
        Refusal::AuthenticationRequired,
        Refusal::ContentTypeRequired,
        Refusal::ContextInvalid,
        Refusal::ContextRequired,
        Refusal::FenceStale,
        Refusal::KeyConfigurationInvalid,
        Refusal::ModelInvalid,
        Refusal::NoEligibleConnection,
        Refusal::OwnerActive,
        Refusal::Required,
        Refusal::ScopeRequired,
        Refusal::CapacityUnavailable,
        Refusal::EligibilityUnavailable,
        Refusal::ServiceUnavailable,
    ];

    /// The status and the contract's code.
    pub fn wire(self) -> (u16, &'static str) {
        match self {
            Refusal::ActionInvalid => (400, "LEASE_ACTION_INVALID"),
            Refusal::ApiKeyInvalid => (401, "LEASE_API_KEY_INVALID"),
            Refusal::AuthenticationRequired => (401, "LEASE_AUTHENTICATION_REQUIRED"),
            Refusal::ContentTypeRequired => (415, "LEASE_CONTENT_TYPE_REQUIRED"),
            Refusal::ContextInvalid => (400, "LEASE_CONTEXT_INVALID"),
            Refusal::ContextRequired => (400, "LEASE_CONTEXT_REQUIRED"),
            Refusal::FenceStale => (409, "LEASE_FENCE_STALE"),
            Refusal::KeyConfigurationInvalid => (403, "LEASE_KEY_CONFIGURATION_INVALID"),
            Refusal::ModelInvalid => (400, "LEASE_MODEL_INVALID"),
            Refusal::NoEligibleConnection => (404, "LEASE_NO_ELIGIBLE_CONNECTION"),
            Refusal::OwnerActive => (409, "LEASE_OWNER_ACTIVE"),
            Refusal::Required => (409, "LEASE_REQUIRED"),
            Refusal::ScopeRequired => (403, "LEASE_SCOPE_REQUIRED"),
            Refusal::CapacityUnavailable => (429, "LEASE_CAPACITY_UNAVAILABLE"),
            Refusal::EligibilityUnavailable => (503, "LEASE_ELIGIBILITY_UNAVAILABLE"),
            Refusal::ServiceUnavailable => (503, "LEASE_SERVICE_UNAVAILABLE"),
        }
    }

    /// `x-should-retry`: the same request can succeed once a lease expires (capacity); it
    /// cannot while the request itself is wrong; the 503s say nothing and leave it to the
    /// client's own rule for 503 (the SDKs retry it).
    fn should_retry(self) -> Option<bool> {
        match self {
            Refusal::CapacityUnavailable => Some(true),
            Refusal::EligibilityUnavailable | Refusal::ServiceUnavailable => None,
            _ => Some(false),
        }
    }

    /// The refusal as an answer, with what this case adds to the code.
    pub fn error(self, message: impl Into<String>) -> ApiError {
        let (status, code) = self.wire();
        let e = ApiError::new(status, code, message);
        match self.should_retry() {
            Some(retry) => e.should_retry(retry),
            None => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_a_code_of_its_own_and_a_status_that_fits() {
        let mut codes: Vec<_> = Refusal::ALL.iter().map(|r| r.wire().1).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Refusal::ALL.len());
        for r in Refusal::ALL {
            let (status, code) = r.wire();
            assert!(code.starts_with("LEASE_"));
            assert!((400..600).contains(&status));
            let e = r.error("m");
            assert_eq!((e.status, e.code), (status, code));
            // Only the capacity wall invites the same request again.
            assert_eq!(e.should_retry == Some(true), status == 429);
        }
    }
}
