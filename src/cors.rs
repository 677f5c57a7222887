//! CORS (the Fetch Standard), for both edges alike: only the origins the
//! deployment lists (`CORS_ALLOWED_ORIGINS`), never `*`. A listed origin's
//! preflight is answered here, before any token is read (a preflight
//! carries none); every other answer to a listed origin names it.

use lambda_http::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_METHOD, ORIGIN,
    VARY,
};
use lambda_http::http::{HeaderValue, Method, StatusCode};
use lambda_http::{Body, Request, Response};

use crate::route::Route;

/// The origins whose pages may call the API; none: CORS off.
#[derive(Debug, Default)]
pub struct Cors(Vec<String>);

impl Cors {
    pub fn new(origins: Vec<String>) -> Self {
        Self(origins)
    }

    /// `request`'s `Origin`, if it is a listed one.
    fn origin<'r>(&self, request: &'r Request) -> Option<&'r HeaderValue> {
        let origin = request.headers().get(ORIGIN)?;
        self.0.iter().any(|listed| listed.as_bytes() == origin.as_bytes()).then_some(origin)
    }

    /// The answer to a listed origin's preflight of the route path `path`:
    /// 204 with the methods it allows (the origin is named as on every
    /// answer, [`Self::answer`]).
    pub(crate) fn preflight(&self, request: &Request, path: &str) -> Option<Response<Body>> {
        let asks = request.headers().contains_key(ACCESS_CONTROL_REQUEST_METHOD);
        self.origin(request).filter(|_| request.method() == Method::OPTIONS && asks)?;
        let methods: Vec<&str> = Route::allowed_methods(path).iter().map(|m| m.as_str()).collect();
        let mut response = Response::new(Body::Empty);
        *response.status_mut() = StatusCode::NO_CONTENT;
        let allowed = [
            (ACCESS_CONTROL_ALLOW_METHODS, methods.join(", ")),
            (ACCESS_CONTROL_MAX_AGE, "600".into()),
            (ACCESS_CONTROL_ALLOW_HEADERS, "authorization, content-type".into()),
        ];
        for (name, value) in allowed {
            response.headers_mut().insert(name, HeaderValue::from_str(&value).ok()?);
        }
        Some(response)
    }

    /// `response` as a listed origin may read it: named, with the headers
    /// it may read; varying by origin whenever CORS is on.
    pub(crate) fn answer(&self, request: &Request, response: &mut Response<Body>) {
        if self.0.is_empty() {
            return;
        }
        let origin = self.origin(request).cloned();
        let headers = response.headers_mut();
        headers.insert(VARY, HeaderValue::from_static("origin"));
        if let Some(origin) = origin {
            headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            let exposed = HeaderValue::from_static("link, retry-after, www-authenticate");
            headers.entry(ACCESS_CONTROL_EXPOSE_HEADERS).or_insert(exposed);
        }
    }
}
