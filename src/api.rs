//! The edge: an invocation's event through the router (`route.rs`) to its
//! answer, in the event's format, within the invocation's deadline; the
//! request's one line written (`metrics.rs`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use lambda_http::Context;
use lambda_http::http::header::ORIGIN;
use tower::{Layer, ServiceExt};
use tower_http::cors::CorsLayer;
use tracing::Instrument;

use crate::auth::Verifier;
use crate::error::Refusal;
use crate::event::{self, ClientPath, InvocationResponse, Unreadable};
use crate::metrics::{RequestLine, serving};
use crate::plants::Plants;
use crate::route::{self, Deadline};
use crate::store::PlantStore;
use crate::xray;

/// The Plant Store API: the handler that production and the tests both run.
pub struct PlantApi {
    plants: Arc<Plants>,
    router: Router,
    /// The CORS layer, when origins are listed: for an unreadable event's
    /// answer, which no router gives.
    cors: Option<CorsLayer>,
}

impl PlantApi {
    pub fn new(verifier: Verifier, store: PlantStore) -> Self {
        let plants = Arc::new(Plants { verifier, store });
        Self { router: route::router(plants.clone()), plants, cors: None }
    }

    /// Answers browsers of these origins (`route::with_cors`); none: CORS off.
    pub fn with_cors(self, origins: &[String]) -> Self {
        if origins.is_empty() {
            return self;
        }
        let cors = route::cors(origins);
        let router = route::with_cors(self.router, cors.clone(), origins);
        Self { router, cors: Some(cors), ..self }
    }

    /// Fetches the keys and opens the DynamoDB connection while init has full
    /// CPU; neither failure is fatal (requests try again).
    pub async fn prepare(&self) {
        tokio::join!(self.plants.verifier.load_keys(), self.plants.store.warm_up());
    }

    /// Answers `event`, the JSON Lambda delivered, in its own format: every
    /// outcome, an unreadable event's too, so no invocation fails.
    pub async fn invoke(&self, event: &str, context: Context) -> InvocationResponse {
        let started = Instant::now();
        let trace = context.xray_trace_id.as_deref().and_then(xray::parse);
        let trace_id = trace.map_or("-", |(root, _, _)| root);
        // At every log level, so that every line of the invocation names it.
        let invocation = tracing::error_span!(
            "invocation",
            requestId = context.request_id.as_str(),
            traceId = trace_id
        );
        let (format, request) = event::read(event);
        let (asked, (response, served)) = match request {
            Ok(mut request) => {
                let path = request.extensions().get::<ClientPath>().map_or("/", |path| &path.0);
                let asked = (request.method().to_string(), path.to_owned());
                request.extensions_mut().insert(Deadline::before(context.deadline));
                let answered = xray::within(trace, self.router.clone().oneshot(request));
                let answered = serving(answered.instrument(invocation.clone())).await;
                (Some(asked), (answered.0.unwrap_or_else(|never| match never {}), answered.1))
            }
            Err(unreadable) => (None, (self.unreadable(unreadable).await, Default::default())),
        };
        let (method, path) = asked.as_ref().map_or(("-", "-"), |(m, p)| (m.as_str(), p.as_str()));
        let refusal = response.extensions().get::<Refusal>();
        let status = response.status();
        let detail = refusal.and_then(|refusal| refusal.detail.as_deref());
        if let Some(detail) = detail.filter(|_| status.is_server_error()) {
            invocation.in_scope(|| tracing::error!(status = status.as_u16(), detail));
        }
        let line = RequestLine {
            function: &context.env_config.function_name,
            method,
            path,
            status: status.as_u16(),
            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
            served,
            error: refusal.map(|refusal| refusal.message.as_str()),
            reason: detail.filter(|_| !status.is_server_error()),
            request_id: &context.request_id,
            trace_id,
            at_bound: refusal.is_some_and(|refusal| refusal.at_bound),
        };
        crate::log::write_line(&line.to_json());
        format.answer(response).await
    }

    /// The answer to an event that is no request: its 400, with the CORS
    /// headers of the origin it names, as every answer to it has.
    async fn unreadable(&self, Unreadable { error, origin }: Unreadable) -> Response {
        let (Some(cors), Some(origin)) = (&self.cors, origin) else { return error.into_response() };
        let mut request = Request::new(axum::body::Body::empty());
        request.headers_mut().insert(ORIGIN, origin);
        let answer = tower::service_fn(move |_: Request| {
            std::future::ready(Ok::<_, Infallible>(error.clone().into_response()))
        });
        cors.clone().layer(answer).oneshot(request).await.unwrap_or_else(|never| match never {})
    }
}
