//! Errors as RFC 9457 problem details (`application/problem+json`), one stable `type` per kind.
//!
//! A handler returns `Result<_, Problem>`; every rejection axum's extractors make (a body that is
//! not JSON, a wrong content type, an unknown field, a body over the limit, a malformed path)
//! is turned into one too ([`ApiJson`], [`ApiPath`], [`ApiQuery`]), so no response of the
//! service is ever plain text.
//!
//! An error with a kind (`baton_store::ErrorKind`: a store error, a rejected install) is
//! answered with the status [`status`] gives its kind, and nothing else decides it:
//!
//! | kind | status |
//! |---|---|
//! | `not_found` | 404 |
//! | `conflict` | 409 |
//! | `invalid` | 422 |
//! | `unavailable` | 503, with `Retry-After` |
//! | `internal` | 500, whose detail names no internals (the error is logged) |
//!
//! 422 and not 400 for `invalid`: the request was read (its JSON, path and parameters parse),
//! but what it asks cannot be done as given, which is what 422 says. 400 answers a request the
//! service cannot read at all — JSON that does not parse, a path or query value of the wrong
//! type, a missing or malformed header, an id with characters no id may have — found before
//! any store call, so it has no kind. The command line's exit codes follow the same kinds
//! (`baton-cli`'s `exit`).
//!
//! The ledger's `begin` outcomes are answers, not errors, and follow the IETF
//! `Idempotency-Key` draft instead ([`http_status`]).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_store::{Begin, ErrorKind};
use serde::Serialize;
use utoipa::ToSchema;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The `type` URIs are `urn:baton:problem:<kind>`: stable names, not pages to fetch.
pub const TYPE_PREFIX: &str = "urn:baton:problem:";

/// An error response body (RFC 9457).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ProblemBody {
    /// `urn:baton:problem:<kind>`, stable per kind of error.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the kind.
    pub title: String,
    /// The HTTP status, repeated.
    pub status: u16,
    /// What was wrong with this request, naming the value.
    pub detail: String,
    /// Members of some kinds: the conflicting operation's status, the current summary, …
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// An error the service answers with.
#[derive(Clone, Debug)]
pub struct Problem {
    status: StatusCode,
    kind: &'static str,
    title: &'static str,
    detail: String,
    extra: serde_json::Map<String, serde_json::Value>,
    retry_after: Option<u64>,
}

impl Problem {
    /// A problem of `kind` (the last part of its `type`) with `status`, `title` and `detail`.
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Problem {
            status,
            kind,
            title,
            detail: detail.into(),
            extra: serde_json::Map::new(),
            retry_after: None,
        }
    }

    /// Adds an extension member to the body. The names of RFC 9457's own members (`type`,
    /// `title`, `status`, `detail`, `instance`) are not extensions: such a member is dropped
    /// (and logged), so a body never holds one of them twice.
    pub fn with(mut self, name: &str, value: impl Serialize) -> Self {
        if matches!(name, "type" | "title" | "status" | "detail" | "instance") {
            tracing::warn!(
                member = name,
                "a problem extension named like a standard member was dropped"
            );
            return self;
        }
        if let Ok(value) = serde_json::to_value(value) {
            self.extra.insert(name.to_owned(), value);
        }
        self
    }

    /// Adds a `Retry-After` header (seconds).
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// 400: the request is malformed (a missing or bad value, a bad parameter).
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            "Bad request",
            detail,
        )
    }

    /// 422: well-formed, but not acceptable (an invalid summary candidate, …).
    pub fn unprocessable(
        kind: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Problem::new(StatusCode::UNPROCESSABLE_ENTITY, kind, title, detail)
    }

    /// 404: nothing of this tenant by that name.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    /// 409 of a given kind.
    pub fn conflict(kind: &'static str, title: &'static str, detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::CONFLICT, kind, title, detail)
    }

    /// 401: no key, or a key that is unknown or revoked.
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unauthorized",
            detail,
        )
    }

    /// 500: something the caller cannot act on; the cause is logged, not sent.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Problem::new(
            status(ErrorKind::Internal),
            "internal",
            "Internal error",
            "the service failed to answer; the error is in its log",
        )
    }

    /// The body this problem is sent as.
    pub fn body(&self) -> ProblemBody {
        ProblemBody {
            kind: format!("{TYPE_PREFIX}{}", self.kind),
            title: self.title.to_owned(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            extra: self.extra.clone(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.kind, self.detail)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"baton\""),
            );
        }
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// The status every error of `kind` is answered with (the table in the module's docs).
pub fn status(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The HTTP status a service answers for what `begin` found, after the IETF `Idempotency-Key`
/// draft: `None` when the service should run the operation (it answers with the operation's
/// own status); 200 to replay a completed operation's stored result; 409 while another worker
/// still runs it (retry later) and for an operation that failed for good (a new key is needed
/// to try again); 422 when the key was used with another request body. (A request without the
/// header is a 400.)
pub fn http_status(begun: &Begin) -> Option<u16> {
    match begun {
        Begin::Acquired { .. } => None,
        Begin::Completed(_) => Some(200),
        Begin::InProgress(_) | Begin::Failed(_) => Some(409),
        Begin::Mismatch { .. } => Some(422),
    }
}

impl From<baton_store::Error> for Problem {
    fn from(err: baton_store::Error) -> Self {
        use baton_store::Error as E;
        let kind = err.kind();
        let status = status(kind);
        match kind {
            ErrorKind::NotFound => Problem::new(status, "not-found", "Not found", err.to_string()),
            ErrorKind::Conflict => {
                let (kind, title) = match &err {
                    E::RunExists { .. } => ("run-exists", "Run exists"),
                    E::RunNotActive { .. } => ("run-not-active", "Run not active"),
                    E::Import(_) => ("import-rejected", "Import rejected"),
                    _ => ("conflict", "Conflict"),
                };
                Problem::new(status, kind, title, err.to_string())
            }
            ErrorKind::Invalid => Problem::new(
                status,
                "invalid-request",
                "Invalid request",
                err.to_string(),
            ),
            ErrorKind::Unavailable => {
                tracing::warn!(error = %err, "the store is unavailable");
                Problem::new(
                    status,
                    "store-unavailable",
                    "Store unavailable",
                    "the store cannot be reached; try again",
                )
                .retry_after(1)
            }
            ErrorKind::Internal => Problem::internal(&err),
        }
    }
}

impl From<baton_core::Error> for Problem {
    fn from(err: baton_core::Error) -> Self {
        Problem::bad_request(err.to_string())
    }
}

impl From<JsonRejection> for Problem {
    fn from(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let text = rejection.body_text();
        match rejection {
            JsonRejection::MissingJsonContentType(_) => Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
                "the body must be JSON, sent with `Content-Type: application/json`",
            ),
            JsonRejection::JsonSyntaxError(_) => Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid-json",
                "Invalid JSON",
                text,
            ),
            JsonRejection::JsonDataError(_) => Problem::unprocessable(
                "invalid-body",
                "Invalid body",
                text.replace(
                    "Failed to deserialize the JSON body into the target type: ",
                    "",
                ),
            ),
            _ if status == StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            _ => Problem::new(status, "bad-body", "Unreadable body", text),
        }
    }
}

/// 413 for a body over the limit.
pub fn too_large() -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body-too-large",
        "Body too large",
        "the request body is larger than the server's limit (`baton serve --body-limit`)",
    )
}

impl From<PathRejection> for Problem {
    fn from(rejection: PathRejection) -> Self {
        Problem::bad_request(format!("path: {}", rejection.body_text()))
    }
}

impl From<QueryRejection> for Problem {
    fn from(rejection: QueryRejection) -> Self {
        Problem::bad_request(format!("query: {}", rejection.body_text()))
    }
}

/// `axum::Json` whose rejections are problems.
#[derive(Debug, Clone, Copy, Default, FromRequest)]
#[from_request(via(axum::Json), rejection(Problem))]
pub struct ApiJson<T>(pub T);

impl<T: Serialize> IntoResponse for ApiJson<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `axum::extract::Path` whose rejections are problems.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(Problem))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query` whose rejections are problems.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(Problem))]
pub struct ApiQuery<T>(pub T);

/// The answer of a route that matched nothing.
pub async fn no_route(uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no-route",
        "No such route",
        format!(
            "no route {}; the API is described at /openapi.json",
            uri.path()
        ),
    )
}

/// The answer of a route that exists, called with a method it does not take.
pub async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
        format!("{} does not take {method}", uri.path()),
    )
}

/// The problem of a request rejected before any route saw it: hyper could not parse it, so
/// only its status is known (`crate::conn` sends this in place of hyper's empty answer).
pub fn before_router(status: StatusCode) -> Problem {
    match status {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => Problem::new(
            status,
            "headers-too-large",
            "Request header fields too large",
            "the request's header block is too large or has too many fields (at most 100)",
        ),
        StatusCode::URI_TOO_LONG => Problem::new(
            status,
            "uri-too-long",
            "URI too long",
            "the request's target is longer than the server accepts (64 KiB)",
        ),
        StatusCode::BAD_REQUEST => Problem::new(
            status,
            "malformed-request",
            "Malformed request",
            "the request is not valid HTTP/1.1: a method, target, version or header holds a byte HTTP does not allow (a path must be ASCII, other bytes percent-encoded)",
        ),
        _ => Problem::new(
            status,
            "rejected",
            "Rejected",
            format!("the request was rejected before it was read whole ({status})"),
        ),
    }
}

#[cfg(test)]
mod tests;
