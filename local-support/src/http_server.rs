//! The stand-ins' one HTTP/1.1 server: hyper on 127.0.0.1.

use std::convert::Infallible;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub type Body = BoxBody<Bytes, Infallible>;

/// What a handler answers: a response, or a reset of the connection (the
/// fault proxy's fault; it needs the socket, which hyper otherwise keeps).
pub enum Reply {
    Respond(Response<Body>),
    Reset,
}

/// A response with this status and body, and these headers.
pub fn respond(
    status: StatusCode,
    headers: &[(&str, String)],
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed());
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().insert(
            hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    response
}

/// A listener on 127.0.0.1 and its address (`127.0.0.1:PORT`).
pub async fn listen() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    (listener, address)
}

/// Serves `listener` with `handler` until the returned task is aborted.
pub fn serve<H, F>(listener: TcpListener, handler: H) -> JoinHandle<()>
where
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    let handler = Arc::new(handler);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            stream.set_nodelay(true).unwrap();
            let socket = stream.as_raw_fd();
            let handler = handler.clone();
            let service = service_fn(move |request| {
                let reply = handler(request);
                async move {
                    match reply.await {
                        Reply::Respond(response) => Ok(response),
                        Reply::Reset => {
                            reset_on_close(socket);
                            Err(std::io::Error::other("connection reset by the fault plan"))
                        }
                    }
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    })
}

/// Sets a zero linger on the socket: hyper closes the connection when the
/// service fails, and that close is then a TCP reset.
fn reset_on_close(socket: RawFd) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: the connection (and so the socket) lives while its service
    // runs; the option is plain data of the right size.
    unsafe {
        libc::setsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// The whole of a request's body.
pub async fn body_bytes(body: Incoming) -> Bytes {
    body.collect().await.map(|body| body.to_bytes()).unwrap_or_default()
}
