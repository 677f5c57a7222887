//! The operations' handlers on axum's extractors: the caller and its access
//! ([`Caller`], read first), then the query or body as domain types, each
//! refusal the project's own answer; then the store, and the answer.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::to_bytes;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use lambda_http::http::header::{CONTENT_TYPE, LINK};
use lambda_http::http::{HeaderMap, HeaderValue};

use crate::auth::{Access, Verifier};
use crate::domain::limits::MAX_BODY_BYTES;
use crate::domain::{Cursor, Limit, NewPlant, Owner, PlantId};
use crate::error::ApiError;
use crate::event::ClientPath;
use crate::metrics::timed;
use crate::store::{Created, PlantStore, StoredPlant};

/// What every operation is answered with: the router's state.
pub(crate) struct Plants {
    pub(crate) verifier: Verifier,
    pub(crate) store: PlantStore,
}

type Shared = State<Arc<Plants>>;

pub(crate) async fn create_plant(
    State(plants): Shared,
    Caller(owner): Caller,
    new: NewPlant,
) -> Result<Response, ApiError> {
    let created =
        timed(|served, ms| served.store_ms = Some(ms), plants.store.create(&owner, &new)).await?;
    match created {
        Created::New | Created::Retry => Ok(Json(StoredPlant::from(&new.plant)).into_response()),
        Created::Conflict => Err(ApiError::Conflict(new.id)),
        Created::LimitReached(max) => Err(ApiError::TooManyPlants(max)),
    }
}

pub(crate) async fn list_plants(
    State(plants): Shared,
    Caller(owner): Caller,
    Page { limit, after }: Page,
    Extension(ClientPath(path)): Extension<ClientPath>,
) -> Result<Response, ApiError> {
    let page =
        timed(|served, ms| served.store_ms = Some(ms), plants.store.list(&owner, limit, after))
            .await?;
    let mut response = Json(&page.plants).into_response();
    if let Some(after) = page.next_after {
        // RFC 8288, relative to the path as the caller saw it, with one
        // leading slash: `//host/...` would name another host.
        let path = path.trim_start_matches('/');
        let cursor = Cursor::after(after).encode();
        let next = format!("</{path}?limit={}&cursor={cursor}>; rel=\"next\"", limit.get());
        response.headers_mut().extend(HeaderValue::from_str(&next).ok().map(|link| (LINK, link)));
    }
    Ok(response)
}

/// The caller the bearer token names, granted the access its operation
/// needs (`route::operation` put it in the request).
pub(crate) struct Caller(Owner);

impl FromRequestParts<Arc<Plants>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, plants: &Arc<Plants>) -> Result<Self, ApiError> {
        let access = parts.extensions.get::<Access>().copied();
        let access =
            access.ok_or_else(|| ApiError::Internal("a route without an access".into()))?;
        let owner = plants.verifier.authenticate(&parts.headers, access);
        Ok(Self(timed(|served, ms| served.auth_ms = Some(ms), owner).await?))
    }
}

/// A create's body: `application/json` (a missing Content-Type is read as
/// JSON), at most [`MAX_BODY_BYTES`], a NewPlant.
impl<S: Sync> FromRequest<S> for NewPlant {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        require_json_content_type(request.headers())?;
        let body = to_bytes(request.into_body(), MAX_BODY_BYTES).await;
        Ok(Self::from_json(&body.map_err(|_| ApiError::PayloadTooLarge)?)?)
    }
}

fn require_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else { return Ok(()) };
    let media_type = value.to_str().unwrap_or_default().split(';').next().unwrap_or_default();
    let json = media_type.trim().eq_ignore_ascii_case("application/json");
    json.then_some(()).ok_or(ApiError::UnsupportedMediaType)
}

/// A listing's page: `limit` (or its default) and where `cursor` says it
/// starts, each given at most once.
pub(crate) struct Page {
    limit: Limit,
    after: Option<PlantId>,
}

impl<S: Sync> FromRequestParts<S> for Page {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let limit = match single_parameter(query, "limit")? {
            None => Limit::DEFAULT,
            Some(value) => Limit::parse(&value).ok_or(ApiError::InvalidLimit)?,
        };
        let cursor = single_parameter(query, "cursor")?;
        let cursor = cursor.map(|value| Cursor::parse(&value).ok_or(ApiError::InvalidCursor));
        Ok(Self { limit, after: cursor.transpose()?.map(|cursor| cursor.after) })
    }
}

/// The one value of a query parameter, if given; repeating it is an error.
fn single_parameter<'q>(
    query: &'q str,
    name: &'static str,
) -> Result<Option<Cow<'q, str>>, ApiError> {
    let query = form_urlencoded::parse(query.as_bytes());
    let mut values = query.filter(|(parameter, _)| parameter == name).map(|(_, value)| value);
    match (values.next(), values.next()) {
        (value, None) => Ok(value),
        (_, Some(_)) => Err(ApiError::RepeatedParameter(name)),
    }
}
