//! The edge: one invocation from the event Lambda hands over to the answer
//! in the event's format, through the router (`route.rs`): the token
//! checked for every operation with the access it needs, then the
//! operation's content type, size and parameters read and the operation
//! called; every outcome answered once (`error.rs` for an error) and the
//! request's one line written (`metrics.rs`). The rules are the domain's,
//! the reading and writing the store's.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::to_bytes;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use lambda_http::Context;
use lambda_http::http::header::{CONTENT_TYPE, LINK};
use lambda_http::http::{HeaderMap, HeaderValue, StatusCode};
use tower::ServiceExt;
use tracing::Instrument;

use crate::auth::Verifier;
use crate::domain::limits::MAX_BODY_BYTES;
use crate::domain::{Cursor, Limit, NewPlant, Owner};
use crate::error::{ApiError, Refusal};
use crate::event::{self, ClientPath, InvocationResponse};
use crate::metrics::RequestLine;
use crate::response::json_response;
use crate::route::{self, Operation};
use crate::store::{Created, Deadline, PlantStore, StoredPlant};
use crate::xray;

/// The Plant Store API: the handler that production and the tests both run.
pub struct PlantApi {
    plants: Arc<Plants>,
    router: Router,
}

/// What the operations answer with.
pub struct Plants {
    verifier: Verifier,
    store: PlantStore,
}

/// One call of an operation: the caller the token names, when the store's
/// work must end, and the times of its steps.
pub(crate) struct Call<'a> {
    owner: Owner,
    deadline: Deadline,
    steps: &'a mut Steps,
}

/// How long a request's token check and store work took, in ms.
#[derive(Debug, Default, Clone, Copy)]
struct Steps {
    auth: Option<f64>,
    store: Option<f64>,
}

/// The operation an answer is of, and its steps' times, for its line.
#[derive(Clone)]
struct Served {
    operation: &'static str,
    steps: Steps,
}

/// `work`, its time kept in `step`.
async fn timed<T>(step: &mut Option<f64>, work: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let done = work.await;
    *step = Some(started.elapsed().as_secs_f64() * 1000.0);
    done
}

impl PlantApi {
    pub fn new(verifier: Verifier, store: PlantStore) -> Self {
        let plants = Arc::new(Plants { verifier, store });
        Self { router: route::router(plants.clone()), plants }
    }

    /// Answers browsers of these origins (`route::cors`); none: CORS off.
    pub fn with_cors(self, origins: &[String]) -> Self {
        match origins.is_empty() {
            true => self,
            false => Self { router: self.router.layer(route::cors(origins)), ..self },
        }
    }

    /// Makes both remote calls of a request ready (the signing keys fetched,
    /// the DynamoDB connection open) while init has full CPU. Neither
    /// failure is fatal: requests try again.
    pub async fn prepare(&self) {
        tokio::join!(self.plants.verifier.load_keys(), self.plants.store.warm_up());
    }

    /// Answers one invocation: `event`, the JSON Lambda delivered, read by
    /// [`crate::event`], answered in the event's own format. Every outcome,
    /// an unreadable event included, is a response: the function itself
    /// never fails an invocation.
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
        let (asked, response) = match request {
            Ok(mut request) => {
                let asked = (request.method().to_string(), ClientPath::of(&request).to_owned());
                request.extensions_mut().insert(Deadline::before(context.deadline));
                let served = xray::within(trace, self.router.clone().oneshot(request));
                let response = served.instrument(invocation.clone()).await;
                (Some(asked), response.unwrap_or_else(|never| match never {}))
            }
            Err(error) => (None, error.into_response()),
        };
        let (method, path) = asked.as_ref().map_or(("-", "-"), |(m, p)| (m.as_str(), p.as_str()));
        let served = response.extensions().get::<Served>().cloned();
        let refusal = response.extensions().get::<Refusal>();
        let status = response.status();
        let detail = refusal.and_then(|refusal| refusal.detail.as_deref());
        if let Some(detail) = detail.filter(|_| status.is_server_error()) {
            invocation.in_scope(|| tracing::error!(status = status.as_u16(), detail));
        }
        let steps = served.as_ref().map(|served| served.steps).unwrap_or_default();
        let line = RequestLine {
            function: &context.env_config.function_name,
            route: served.as_ref().map_or("other", |served| served.operation),
            method,
            path,
            status: status.as_u16(),
            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
            steps: [steps.auth, steps.store],
            error: refusal.map(|refusal| refusal.message.as_str()),
            reason: detail.filter(|_| !status.is_server_error()),
            request_id: &context.request_id,
            trace_id,
            at_bound: refusal.is_some_and(|refusal| refusal.at_bound),
        };
        crate::log::write_line(&line.to_json());
        format.answer(response).await
    }
}

impl Plants {
    /// Answers `operation`: every one needs a token, verified here, once,
    /// with the access it needs (before any body is read); the operation
    /// gets the caller it names.
    pub(crate) async fn serve(&self, operation: &'static Operation, request: Request) -> Response {
        let mut steps = Steps::default();
        let deadline = request.extensions().get::<Deadline>().copied();
        let answered = async {
            let verified = self.verifier.authenticate(request.headers(), operation.access);
            let owner = timed(&mut steps.auth, verified).await?;
            let deadline = deadline.unwrap_or_else(|| Deadline::before(0));
            operation.answer(self, Call { owner, deadline, steps: &mut steps }, request).await
        }
        .await;
        let mut response = answered.unwrap_or_else(IntoResponse::into_response);
        // Every test holds the answers to the table (which cargo test holds
        // to openapi.yaml).
        debug_assert!(
            operation.answers.contains(&response.status().as_u16()),
            "{} answered {}",
            operation.id,
            response.status()
        );
        response.extensions_mut().insert(Served { operation: operation.id, steps });
        response
    }

    pub(crate) async fn create_plant(
        &self,
        call: Call<'_>,
        request: Request,
    ) -> Result<Response, ApiError> {
        require_json_content_type(request.headers())?;
        let body = to_bytes(request.into_body(), usize::MAX).await;
        let body = body.map_err(|error| ApiError::Internal(error.to_string()))?;
        if body.len() > MAX_BODY_BYTES {
            return Err(ApiError::PayloadTooLarge);
        }
        let new = NewPlant::from_json(&body)?;
        let created = self.store.create(&call.owner, &new, call.deadline);
        match timed(&mut call.steps.store, created).await? {
            Created::New | Created::Retry => {}
            Created::Conflict => return Err(ApiError::Conflict(new.id)),
            Created::LimitReached(max) => return Err(ApiError::TooManyPlants(max)),
        }
        Ok(json_response(StatusCode::OK, &StoredPlant::from(&new.plant)))
    }

    pub(crate) async fn list_plants(
        &self,
        call: Call<'_>,
        request: Request,
    ) -> Result<Response, ApiError> {
        let (limit, cursor) = (limit_parameter(&request)?, cursor_parameter(&request)?);
        let after = cursor.map(|cursor| cursor.after);
        let listed = self.store.list(&call.owner, limit, after, call.deadline);
        let page = timed(&mut call.steps.store, listed).await?;
        let mut response = json_response(StatusCode::OK, &page.plants);
        if let Some(after) = page.next_after {
            // RFC 8288, relative to the path as the caller saw it, with one
            // leading slash: `//host/...` would name another host.
            let next = format!(
                "</{}?limit={}&cursor={}>; rel=\"next\"",
                ClientPath::of(&request).trim_start_matches('/'),
                limit.get(),
                Cursor::after(after).encode()
            );
            if let Ok(value) = HeaderValue::from_str(&next) {
                response.headers_mut().insert(LINK, value);
            }
        }
        Ok(response)
    }
}

/// `application/json`, with any parameters; a missing Content-Type is read as JSON.
fn require_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Ok(());
    };
    let media_type = value.to_str().ok().and_then(|value| value.split(';').next());
    match media_type.map(str::trim) {
        Some(media_type) if media_type.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ApiError::UnsupportedMediaType),
    }
}

/// The one value of a query parameter, if given; repeating it is an error.
fn single_parameter<'r>(
    request: &'r Request,
    name: &'static str,
) -> Result<Option<Cow<'r, str>>, ApiError> {
    let query = form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes());
    let mut values = query.filter(|(parameter, _)| parameter == name).map(|(_, value)| value);
    match (values.next(), values.next()) {
        (value, None) => Ok(value),
        (Some(_), Some(_)) | (None, Some(_)) => Err(ApiError::RepeatedParameter(name)),
    }
}

fn limit_parameter(request: &Request) -> Result<Limit, ApiError> {
    match single_parameter(request, "limit")? {
        None => Ok(Limit::DEFAULT),
        Some(value) => Limit::parse(&value).ok_or(ApiError::InvalidLimit),
    }
}

fn cursor_parameter(request: &Request) -> Result<Option<Cursor>, ApiError> {
    let cursor = single_parameter(request, "cursor")?;
    cursor.map(|value| Cursor::parse(&value).ok_or(ApiError::InvalidCursor)).transpose()
}
