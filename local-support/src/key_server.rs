//! A JWKS server on 127.0.0.1 for the remote key source's tests: it counts
//! fetches and can be switched to answer slowly, too much, with an error, or
//! not at all.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::StatusCode;
use hyper::body::{Body, Frame};
use tokio::task::JoinHandle;

use crate::http_server::{Reply, listen, respond, serve};

#[derive(Clone)]
pub enum Behaviour {
    /// 200 with this JWKS.
    Serve(String),
    /// 200 with this JWKS, after a delay.
    Slow(Duration, String),
    /// 200 with this JWKS padded (with an extra member) to this many bytes,
    /// without a Content-Length: valid, but too large.
    Oversized(String, usize),
    /// This status with an empty body.
    Status(u16),
}

pub struct KeyServer {
    pub jwks_url: String,
    behaviour: Arc<Mutex<Behaviour>>,
    fetches: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl KeyServer {
    pub async fn start(jwks: String) -> Self {
        let (listener, address) = listen().await;
        let jwks_url = format!("http://{address}/.well-known/jwks.json");
        let behaviour = Arc::new(Mutex::new(Behaviour::Serve(jwks)));
        let fetches = Arc::new(AtomicUsize::new(0));
        let task = serve(listener, {
            let (behaviour, fetches) = (behaviour.clone(), fetches.clone());
            move |_request| {
                fetches.fetch_add(1, Ordering::SeqCst);
                answer(behaviour.lock().unwrap().clone())
            }
        });
        Self {
            jwks_url,
            behaviour,
            fetches,
            task,
        }
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        let address = self.jwks_url.trim_start_matches("http://127.0.0.1:");
        address.split('/').next().unwrap().parse().unwrap()
    }

    pub fn set(&self, behaviour: Behaviour) {
        *self.behaviour.lock().unwrap() = behaviour;
    }

    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    /// Stops listening: later connections are refused.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for KeyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every answer closes its connection, so that a stopped server refuses
/// the next fetch, as a server that went down does.
async fn answer(behaviour: Behaviour) -> Reply {
    let close = ("connection", "close".to_owned());
    let json = ("content-type", "application/json".to_owned());
    let response = match behaviour {
        Behaviour::Serve(jwks) => respond(StatusCode::OK, &[json, close], jwks),
        Behaviour::Slow(delay, jwks) => {
            tokio::time::sleep(delay).await;
            respond(StatusCode::OK, &[json, close], jwks)
        }
        Behaviour::Oversized(jwks, size) => {
            let padded = format!(r#"{{"padding": "{}", {}"#, "x".repeat(size), &jwks[1..]);
            let mut response = respond(StatusCode::OK, &[json, close], "");
            *response.body_mut() = OfUnknownLength(Some(padded.into())).boxed();
            response
        }
        Behaviour::Status(status) => respond(StatusCode::from_u16(status).unwrap(), &[close], ""),
    };
    Reply::Respond(response)
}

/// A body that does not tell its length: sent chunked, without a
/// Content-Length for the client to check first.
struct OfUnknownLength(Option<Bytes>);

impl Body for OfUnknownLength {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|data| Ok(Frame::data(data))))
    }
}
