//! An issuer's JWKS on 127.0.0.1 (wiremock): fetches counted, answers
//! switched to slow, too much, an error, or none.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

#[derive(Clone)]
pub enum Behaviour {
    /// 200 with this JWKS.
    Serve(String),
    /// 200 with this JWKS, after a delay.
    Slow(Duration, String),
    /// 200 with this JWKS padded (with an extra member) to this many bytes:
    /// valid, but too large.
    Oversized(String, usize),
    /// This status with an empty body.
    Status(u16),
}

/// How the server answers now, and how many fetches it has had.
#[derive(Clone)]
struct Answers {
    behaviour: Arc<Mutex<Behaviour>>,
    fetches: Arc<AtomicUsize>,
}

impl Respond for Answers {
    /// Every answer closes its connection, so that a stopped server
    /// refuses the next fetch, as a server that went down does.
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let answer = |status| ResponseTemplate::new(status).insert_header("connection", "close");
        let json = |body: String| answer(200).set_body_raw(body, "application/json");
        match self.behaviour.lock().unwrap().clone() {
            Behaviour::Serve(jwks) => json(jwks),
            Behaviour::Slow(delay, jwks) => json(jwks).set_delay(delay),
            Behaviour::Oversized(jwks, size) => {
                json(format!(r#"{{"padding": "{}", {}"#, "x".repeat(size), &jwks[1..]))
            }
            Behaviour::Status(status) => answer(status),
        }
    }
}

pub struct KeyServer {
    pub jwks_url: String,
    answers: Answers,
    server: Mutex<Option<MockServer>>,
}

impl KeyServer {
    pub async fn start(jwks: String) -> Self {
        let server = MockServer::builder().start().await;
        let answers = Answers {
            behaviour: Arc::new(Mutex::new(Behaviour::Serve(jwks))),
            fetches: Arc::default(),
        };
        Mock::given(any()).respond_with(answers.clone()).mount(&server).await;
        Self {
            jwks_url: format!("{}/.well-known/jwks.json", server.uri()),
            answers,
            server: Mutex::new(Some(server)),
        }
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        let address = self.jwks_url.trim_start_matches("http://127.0.0.1:");
        address.split('/').next().unwrap().parse().unwrap()
    }

    pub fn set(&self, behaviour: Behaviour) {
        *self.answers.behaviour.lock().unwrap() = behaviour;
    }

    pub fn fetches(&self) -> usize {
        self.answers.fetches.load(Ordering::SeqCst)
    }

    /// Stops listening: later connections are refused.
    pub fn stop(&self) {
        self.server.lock().unwrap().take();
    }
}
