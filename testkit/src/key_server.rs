//! A JWKS server on 127.0.0.1 for the remote key source's tests: it counts
//! fetches and can be switched to answer slowly, too much, with an error, or
//! not at all.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

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
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let jwks_url = format!(
            "http://{}/.well-known/jwks.json",
            listener.local_addr().unwrap()
        );
        let behaviour = Arc::new(Mutex::new(Behaviour::Serve(jwks)));
        let fetches = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(accept(listener, behaviour.clone(), fetches.clone()));
        Self {
            jwks_url,
            behaviour,
            fetches,
            task,
        }
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

async fn accept(
    listener: TcpListener,
    behaviour: Arc<Mutex<Behaviour>>,
    fetches: Arc<AtomicUsize>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let behaviour = behaviour.lock().unwrap().clone();
        fetches.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(answer(stream, behaviour));
    }
}

async fn answer(mut stream: TcpStream, behaviour: Behaviour) {
    // Read the request head; its content does not matter.
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => head.extend_from_slice(&buffer[..read]),
        }
    }
    let ok = |body: &str| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let response = match behaviour {
        Behaviour::Serve(jwks) => ok(&jwks),
        Behaviour::Slow(delay, jwks) => {
            tokio::time::sleep(delay).await;
            ok(&jwks)
        }
        Behaviour::Oversized(jwks, size) => {
            let padded = format!(r#"{{"padding": "{}", {}"#, "x".repeat(size), &jwks[1..]);
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{padded}"
            )
        }
        Behaviour::Status(status) => {
            format!("HTTP/1.1 {status} Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        }
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
