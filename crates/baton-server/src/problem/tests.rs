//! The status tables: store errors by kind, and the ledger's `begin` outcomes after the IETF
//! `Idempotency-Key` draft. The expected statuses are written out here, not read from the code.

#![allow(clippy::unwrap_used)]

use axum::http::StatusCode;
use baton_core::key::RequestKey;
use baton_core::{RunId, RunStatus, Seq, SummaryId, TenantId, Timestamp};
use baton_store::{Begin, Error, OpStatus, Operation};

use super::{Problem, http_status};

fn op(status: OpStatus) -> Operation {
    Operation {
        id: "id".into(),
        key: "k".into(),
        request_hash: RequestKey([1; 32]),
        status,
        fence: 3,
        lease_owner: Some("w".into()),
        lease_expires_at: Some(Timestamp(1)),
        result: None,
        error: None,
        retryable: false,
        created_at: Timestamp(0),
        updated_at: Timestamp(0),
        expires_at: Timestamp(10),
    }
}

#[test]
fn begin_outcomes_follow_the_idempotency_key_draft() {
    assert_eq!(
        http_status(&Begin::Completed(op(OpStatus::Completed))),
        Some(200)
    );
    assert_eq!(
        http_status(&Begin::InProgress(op(OpStatus::Running))),
        Some(409)
    );
    assert_eq!(http_status(&Begin::Failed(op(OpStatus::Failed))), Some(409));
    let mismatch = Begin::Mismatch {
        operation: op(OpStatus::Completed),
        given: RequestKey([2; 32]),
    };
    assert_eq!(http_status(&mismatch), Some(422));
    let acquired = Begin::Acquired {
        operation: op(OpStatus::Running),
        takeover: false,
    };
    assert_eq!(http_status(&acquired), None);
}

#[test]
fn store_errors_are_answered_by_kind() {
    let run = RunId::new("r").unwrap();
    let cases: Vec<(Error, StatusCode, &str)> = vec![
        (
            Error::UnknownTenant {
                tenant: TenantId::default_tenant(),
            },
            StatusCode::NOT_FOUND,
            "not-found",
        ),
        (
            Error::RunNotFound { run: run.clone() },
            StatusCode::NOT_FOUND,
            "not-found",
        ),
        (
            Error::SummaryNotFound { id: SummaryId(7) },
            StatusCode::NOT_FOUND,
            "not-found",
        ),
        (
            Error::SeqNotFound {
                run: run.clone(),
                seq: Seq(9),
                last: Seq(2),
            },
            StatusCode::NOT_FOUND,
            "not-found",
        ),
        (
            Error::RunExists { run: run.clone() },
            StatusCode::CONFLICT,
            "run-exists",
        ),
        (
            Error::RunNotActive {
                run: run.clone(),
                status: RunStatus::Cancelled,
            },
            StatusCode::CONFLICT,
            "run-not-active",
        ),
        (
            Error::InvalidQuery {
                detail: "no words".into(),
            },
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-request",
        ),
        (
            Error::InvalidKey {
                detail: "taken".into(),
            },
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-request",
        ),
        (
            Error::Unavailable { what: "pg".into() },
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
        ),
        (
            Error::Corrupt {
                what: "row 3".into(),
            },
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
        ),
    ];
    for (err, status, kind) in cases {
        let text = err.to_string();
        let problem = Problem::from(err);
        assert_eq!((problem.status, problem.kind), (status, kind), "{text}");
    }
}
