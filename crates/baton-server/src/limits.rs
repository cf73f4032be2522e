//! Limits every request lives by, before any route: a request id that fits in a log line, a
//! body that is refused at once when its declared length is over the limit, and a body that
//! must arrive within `body_read_timeout` (408 otherwise, not a 503 when the request's own
//! timeout fires later).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, CONTENT_LENGTH, HeaderValue};
use axum::http::{HeaderName, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::Frame;

use crate::problem::{self, Problem};
use crate::state::AppState;

/// The longest `x-request-id` kept from a caller, in bytes.
pub const MAX_REQUEST_ID: usize = 128;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Middleware: keeps a caller's `x-request-id` only as far as it is safe to log and echo: its
/// characters among letters, digits and `-_.:/+=@`, at most [`MAX_REQUEST_ID`] bytes. An id
/// with nothing left is replaced by a new one.
pub async fn request_id(mut request: Request, next: Next) -> Response {
    if let Some(given) = request.headers().get(&REQUEST_ID) {
        let kept: String = given
            .as_bytes()
            .iter()
            .map(|&b| char::from(b))
            .filter(|c| c.is_ascii_alphanumeric() || "-_.:/+=@".contains(*c))
            .take(MAX_REQUEST_ID)
            .collect();
        if kept.len() != given.len() {
            match HeaderValue::from_str(&kept) {
                Ok(value) if !kept.is_empty() => {
                    request.headers_mut().insert(REQUEST_ID, value);
                }
                _ => {
                    request.headers_mut().remove(REQUEST_ID);
                }
            }
        }
    }
    next.run(request).await
}

/// Middleware: a declared `Content-Length` over the body limit is answered 413 at once, without
/// reading the body; a body that has not arrived whole within `body_read_timeout` of the
/// handler's first read is answered 408. Both close the connection.
pub async fn body(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let limit = state.config.body_limit;
    if declared.is_some_and(|n| n > limit as u64) {
        return closing(problem::too_large());
    }
    let timed_out = Arc::new(AtomicBool::new(false));
    let timeout = state.config.body_read_timeout;
    let request = request.map(|body| {
        Body::new(Timed {
            inner: body,
            timeout,
            deadline: None,
            timed_out: timed_out.clone(),
        })
    });
    let response = next.run(request).await;
    if timed_out.load(Ordering::Relaxed) {
        return closing(Problem::new(
            StatusCode::REQUEST_TIMEOUT,
            "body-timeout",
            "Request body timeout",
            format!(
                "the request body did not arrive whole within {timeout:?} (`baton serve --body-read-timeout`); nothing was done with it"
            ),
        ));
    }
    response
}

fn closing(problem: Problem) -> Response {
    let mut response = problem.into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A request body that fails once `timeout` has passed since it was first read.
struct Timed {
    inner: Body,
    timeout: Duration,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    timed_out: Arc<AtomicBool>,
}

impl http_body::Body for Timed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {}
            ready => return ready,
        }
        let timeout = this.timeout;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.timed_out.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(axum::Error::new(format!(
                    "the request body did not arrive within {timeout:?}"
                )))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
