//! Connections: the accept loop under a cap, the timeouts a connection lives by, and
//! problem+json for what hyper rejects before any route sees it.
//!
//! - **Cap**: at most `max_connections` connections are served at once. One more is answered
//!   `503 too-many-connections` (problem+json, `Connection: close`) for each request it sends
//!   and closed; past twice the cap a connection is closed at once.
//! - **Header read** (`header_read_timeout`): once the first byte of a request has arrived,
//!   its whole head must arrive within this long, or the connection is closed. A client
//!   sending a byte a second gets no further.
//! - **Idle** (`idle_timeout`): a connection with no request in flight that sends nothing for
//!   this long is closed: a silent socket, or a keep-alive connection nobody reuses.
//! - The body has its own deadline, per request (`crate::limits`).
//! - **Rejections before the router**: a request hyper cannot parse (a header block too large or
//!   with too many fields: 431; a request line over 64 KiB: 414; a byte that is no part of HTTP,
//!   such as a path that is not ASCII: 400) is answered by hyper itself, with an empty body. The
//!   connection's writer recognizes such an answer (a 4xx/5xx head with `content-length: 0`, no
//!   `content-type`, written while no request of the connection is in the service) and sends a
//!   problem+json of the same status instead, so every error of the service is one.
//!
//! Every timeout is a watchdog per connection over an activity record the connection's reader,
//! and its service, keep: nothing polls a socket to find out.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::IntoResponse;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tower::ServiceExt as _;

use crate::problem::{self, Problem};
use crate::state::AppState;

/// Serves `app` on `listener` until `shutdown` resolves; then stops accepting, lets every
/// connection finish its requests in flight (idle ones close at once), and returns.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let config = &state.config;
    let limits = Limits {
        header_read: config.header_read_timeout,
        idle: config.idle_timeout,
    };
    let served = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let refused = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let mut builder = http1::Builder::new();
    // The connection's own watchdog times header reads (hyper's timer would also close a
    // keep-alive connection after the header timeout, which is the idle timeout's job).
    builder.header_read_timeout(None);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, a connection reset before it was accepted: the
                    // listener is still good; wait a moment instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            inner: stream,
            activity: activity.clone(),
            replacing: None,
        });
        let builder = builder.clone();
        let watcher = graceful.watcher();
        if let Ok(permit) = served.clone().try_acquire_owned() {
            let service = hyper::service::service_fn({
                let app = app.clone();
                let activity = activity.clone();
                move |request: Request<Incoming>| {
                    let app = app.clone();
                    let busy = activity.begin();
                    async move {
                        let response = app.oneshot(request.map(Body::new)).await?;
                        // The request counts as in flight until its body has been sent.
                        Ok::<_, Infallible>(response.map(|body| {
                            Body::new(body.map_frame(move |frame| {
                                let _ = &busy;
                                frame
                            }))
                        }))
                    }
                }
            });
            tokio::spawn(async move {
                let conn = watcher.watch(builder.serve_connection(io, service));
                tokio::select! {
                    done = conn => {
                        if let Err(e) = done {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                    }
                    why = watchdog(&activity, limits) => {
                        tracing::info!(reason = why, "connection closed");
                    }
                }
                drop(permit);
            });
        } else if let Ok(permit) = refused.clone().try_acquire_owned() {
            let service = hyper::service::service_fn(|_: Request<Incoming>| async {
                let problem = Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too-many-connections",
                    "Too many connections",
                    "the server serves as many connections as it takes (`baton serve --max-connections`); try again",
                )
                .retry_after(1);
                let mut response = problem.into_response();
                response.headers_mut().insert(
                    header::CONNECTION,
                    header::HeaderValue::from_static("close"),
                );
                Ok::<_, Infallible>(response)
            });
            tracing::warn!("connection refused: at the connection cap");
            tokio::spawn(async move {
                let conn = builder.serve_connection(io, service);
                tokio::select! {
                    _ = conn => {}
                    _ = watchdog(&activity, limits) => {}
                }
                drop(permit);
            });
        } else {
            tracing::warn!("connection dropped: twice over the connection cap");
        }
    }
    drop(listener);
    state.drain();
    tracing::info!("shutting down: finishing the requests in flight");
    graceful.shutdown().await;
    Ok(())
}

#[derive(Clone, Copy)]
struct Limits {
    header_read: Duration,
    idle: Duration,
}

/// What a connection is doing, kept by its reader and its service; read by its watchdog.
struct Activity {
    epoch: Instant,
    /// Requests in the service whose response has not been sent whole.
    in_flight: AtomicUsize,
    /// Milliseconds since `epoch` of the last byte read or the last response finished.
    last: AtomicU64,
    /// Milliseconds since `epoch`, plus one, of the first byte of a request head not yet
    /// handed to the service; 0 when there is none.
    head: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            head: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn read(&self) {
        let now = self.now();
        self.last.store(now, Ordering::Relaxed);
        if self.in_flight.load(Ordering::Relaxed) == 0 {
            let _ = self
                .head
                .compare_exchange(0, now + 1, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// A request reached the service; in flight until the returned guard is dropped.
    fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head.store(0, Ordering::Relaxed);
        Busy(self.clone())
    }
}

struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.last.store(self.0.now(), Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Resolves when the connection must close, saying why.
async fn watchdog(activity: &Activity, limits: Limits) -> &'static str {
    let tick = (limits.header_read.min(limits.idle) / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    loop {
        tokio::time::sleep(tick).await;
        if activity.in_flight.load(Ordering::Relaxed) > 0 {
            continue;
        }
        let now = activity.now();
        match activity.head.load(Ordering::Relaxed) {
            0 => {
                if now.saturating_sub(activity.last.load(Ordering::Relaxed)) > ms(limits.idle) {
                    return "idle timeout";
                }
            }
            head => {
                if now.saturating_sub(head - 1) > ms(limits.header_read) {
                    return "header read timeout";
                }
            }
        }
    }
}

/// A connection's socket, watched: reads mark activity, and hyper's own bare error answers
/// are sent as problem+json.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
    /// A problem being written in place of hyper's answer: the bytes, how many are written,
    /// and how many of hyper's bytes the replacement stands for.
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.replacing.is_none()
            && this.activity.in_flight.load(Ordering::Relaxed) == 0
            && let Some(status) = bare_error(buf)
        {
            this.replacing = Some((problem_response(status), 0, buf.len()));
        }
        let Some((bytes, written, stands_for)) = &mut this.replacing else {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        };
        while *written < bytes.len() {
            match Pin::new(&mut this.inner).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                other => return other,
            }
        }
        let n = *stands_for;
        this.replacing = None;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    // Not vectored: hyper then writes each response head in one call, where it can be seen.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

/// The status of an answer hyper made on its own: a 4xx or 5xx head with an empty body and no
/// content type (every answer of the service's has one).
fn bare_error(buf: &[u8]) -> Option<StatusCode> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let status = StatusCode::from_bytes(rest.get(..3)?).ok()?;
    if !(status.is_client_error() || status.is_server_error()) {
        return None;
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let empty = head.contains("\r\ncontent-length: 0");
    (empty && !head.contains("\r\ncontent-type:")).then_some(status)
}

/// A whole HTTP/1.1 response carrying the problem of a rejection before the router.
fn problem_response(status: StatusCode) -> Vec<u8> {
    let problem = problem::before_router(status);
    let body = serde_json::to_vec(&problem.body()).unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        problem::PROBLEM_JSON,
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hyper_s_bare_errors_are_replaced() {
        let hyper_431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Thu, 03 Dec 2026 14:00:00 GMT\r\n\r\n";
        assert_eq!(
            bare_error(hyper_431),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
        let ours = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/problem+json\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(bare_error(ours), None);
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(bare_error(ok), None);
        let body = b"{\"a\":1}";
        assert_eq!(bare_error(body), None);
        let replaced = String::from_utf8(problem_response(StatusCode::URI_TOO_LONG)).unwrap();
        assert!(
            replaced.starts_with("HTTP/1.1 414 URI Too Long\r\n"),
            "{replaced}"
        );
        assert!(
            replaced.contains("urn:baton:problem:uri-too-long"),
            "{replaced}"
        );
    }
}
