//! The acceptance suite: the contract end to end over HTTP against any
//! deployment, as two owners; it names the first broken rule, never prints
//! a token, and reports what it leaves in the table ([`Report`]).

use std::time::UNIX_EPOCH;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use plant_store_local_support::documented;

/// The plain challenge and the invalid-token challenge (RFC 6750).
const CHALLENGE: &str = r#"Bearer realm="plants""#;
const INVALID_TOKEN: &str = r#"Bearer realm="plants", error="invalid_token""#;
/// One byte over the contract's 16 KiB body limit, as a name.
const OVERSIZED_NAME_LENGTH: usize = 16 * 1024 + 1;
/// Two plants a page: three plants follow `Link`; this many pages (earlier
/// runs' plants add some) means `Link` never ends.
const PAGE_SIZE: usize = 2;
const MAX_PAGES: usize = 5_000;

/// A rule, as the suite names it.
type Rule = &'static str;
/// A check's outcome: the first rule broken, if any.
type Checked<T = ()> = Result<T, Failure>;

/// The first rule the API broke, and what it answered.
#[derive(Debug)]
pub struct Failure {
    pub rule: Rule,
    pub detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "broken rule: {}\n{}", self.rule, self.detail)
    }
}

/// What a run checked, the first rule broken if any, and what it wrote.
#[derive(Debug)]
pub struct Report {
    pub passed: Vec<Rule>,
    pub broken: Option<Failure>,
    pub left_behind: Vec<String>,
}

/// Runs every rule against `base_url` (without `/plants`) as owners A and
/// B, a line per rule passed, until the first broken one.
pub async fn run(base_url: &str, token_a: &str, token_b: &str) -> Report {
    let mut suite = Suite {
        api: Api::new(base_url),
        a: Caller::new(token_a),
        b: Caller::new(token_b),
        // Milliseconds since the epoch times 1000: runs never share ids
        // (a few per run) and stay far inside int64.
        run: UNIX_EPOCH.elapsed().expect("the clock is after 1970").as_millis() as i64 * 1000,
        passed: Vec::new(),
    };
    let broken = suite.run_all().await.err();
    let (run, a, b) = (suite.run, &suite.a.sub, &suite.b.sub);
    let (first, last) = (run + 1, run + 3);
    // What the run may have written (a failed run may have stopped sooner).
    let left_behind = vec![
        format!("owner {a}: plants {first} to {last} named \"acceptance {run} plant N\""),
        format!("owner {a}: each operation's openapi.yaml example"),
        format!("owner {b}: plant {first} named \"acceptance {run} other owner\""),
    ];
    Report { passed: suite.passed, broken, left_behind }
}

/// A caller of the API under test: its `Authorization` and who it is.
struct Caller {
    authorization: String,
    /// The token's `sub`, read without verification: the API verifies.
    sub: String,
}

impl Caller {
    fn new(token: &str) -> Self {
        let sub = token
            .split('.')
            .nth(1)
            .and_then(|payload| URL_SAFE_NO_PAD.decode(payload).ok())
            .and_then(|payload| serde_json::from_slice::<Value>(&payload).ok())
            .and_then(|claims| claims.get("sub")?.as_str().map(str::to_owned))
            .unwrap_or_else(|| "(a token without a readable sub)".to_owned());
        Self { authorization: format!("Bearer {token}"), sub }
    }
}

struct Suite {
    api: Api,
    a: Caller,
    b: Caller,
    run: i64,
    passed: Vec<Rule>,
}

impl Suite {
    async fn run_all(&mut self) -> Checked {
        self.creates_and_retries().await?;
        self.isolates_owners().await?;
        self.pages_to_the_end().await?;
        self.every_operation().await?;
        self.other_methods().await?;
        self.rejects().await
    }

    fn passed(&mut self, rule: Rule) -> Checked {
        println!("ok  {rule}");
        self.passed.push(rule);
        Ok(())
    }

    fn plant(&self, n: i64) -> (Value, Value) {
        let name = format!("acceptance {} plant {n}", self.run);
        // The second plant has no tag: its answer must leave the key out.
        let plant = if n == 2 {
            json!({"id": self.run + n, "name": name})
        } else {
            json!({"id": self.run + n, "name": name, "tag": "acceptance"})
        };
        let mut answer = plant.clone();
        answer.as_object_mut().unwrap().remove("id");
        (plant, answer)
    }

    async fn creates_and_retries(&mut self) -> Checked {
        const RULE: &str = "POST /plants creates a plant and answers it without its id";
        for n in 1..=3 {
            let (plant, answer) = self.plant(n);
            let response = self.api.post(&self.a.authorization, &plant).await;
            response.expect_json(RULE, StatusCode::OK, &answer)?;
        }
        self.passed(RULE)?;

        const RETRY: &str = "the same POST again is a safe retry: 200 with the same plant";
        let (plant, answer) = self.plant(1);
        let response = self.api.post(&self.a.authorization, &plant).await;
        response.expect_json(RETRY, StatusCode::OK, &answer)?;
        self.passed(RETRY)?;

        const CONFLICT: &str = "other content for an existing id is 409";
        let changed = json!({"id": self.run + 1, "name": "changed"});
        let response = self.api.post(&self.a.authorization, &changed).await;
        response.expect_error(CONFLICT, StatusCode::CONFLICT, "id")?;
        self.passed(CONFLICT)
    }

    async fn isolates_owners(&mut self) -> Checked {
        const RULE: &str = "another owner sees none of these plants and may use the same id";
        let listing = self.list_all(&self.b.authorization, RULE).await?;
        let marker = format!("acceptance {} plant", self.run);
        if let Some(leaked) = listing.iter().find(|plant| name(plant).contains(&marker)) {
            let detail = format!("owner B's listing holds owner A's plant {leaked}");
            return Err(Failure { rule: RULE, detail });
        }
        let name = format!("acceptance {} other owner", self.run);
        let plant = json!({"id": self.run + 1, "name": name});
        let response = self.api.post(&self.b.authorization, &plant).await;
        response.expect_json(RULE, StatusCode::OK, &json!({"name": name}))?;
        self.passed(RULE)
    }

    async fn pages_to_the_end(&mut self) -> Checked {
        const RULE: &str = "GET /plants pages through Link: every plant once, by id, unchanged";
        let listing = self.list_all(&self.a.authorization, RULE).await?;
        let marker = format!("acceptance {} ", self.run);
        let mine: Vec<&Value> =
            listing.iter().filter(|plant| name(plant).starts_with(&marker)).collect();
        let expected: Vec<Value> = (1..=3).map(|n| self.plant(n).1).collect();
        if mine.iter().copied().ne(expected.iter()) {
            let detail = format!(
                "owner A's plants of this run, in the order listed: {mine:?}; expected {expected:?} (in id order; the 409 and owner B's plant change nothing)"
            );
            return Err(Failure { rule: RULE, detail });
        }
        self.passed(RULE)
    }

    /// Every plant of an owner, following `Link: <...>; rel="next"` from
    /// `GET /plants?limit=2`; each page is a JSON array of at most 2 plants,
    /// and a page that is not the last has exactly 2.
    async fn list_all(&self, caller: &str, rule: Rule) -> Checked<Vec<Value>> {
        let mut plants = Vec::new();
        let mut target = Some(format!("/plants?limit={PAGE_SIZE}"));
        let mut pages = 0;
        while let Some(path) = target {
            pages += 1;
            if pages > MAX_PAGES {
                let detail = format!("Link still pointed onwards after {MAX_PAGES} pages");
                return Err(Failure { rule, detail });
            }
            let response = self.api.get(caller, &path).await;
            let page = response.expect_status(rule, StatusCode::OK)?;
            let Some(page) = page.as_array() else {
                return Err(response.failure(rule, "the body is not a JSON array"));
            };
            target = response.next_link(rule)?;
            if page.len() > PAGE_SIZE || (target.is_some() && page.len() < PAGE_SIZE) {
                let problem = format!("{} plants on a page of limit {PAGE_SIZE}", page.len());
                return Err(response.failure(rule, &problem));
            }
            plants.extend(page.iter().cloned());
        }
        Ok(plants)
    }

    /// What every operation of openapi.yaml answers its example request:
    /// 401 without a token or with a broken one; as owner A, one of the
    /// statuses it documents.
    async fn every_operation(&mut self) -> Checked {
        let a = self.a.authorization.clone();
        // The same credential with its signature's last character changed.
        let tampered = a[..a.len() - 1].to_owned() + if a.ends_with('A') { "B" } else { "A" };
        #[rustfmt::skip]
        let rules = [
            ("every operation, without a token: 401 with WWW-Authenticate: Bearer realm=\"plants\"", None, Some(CHALLENGE)),
            ("every operation, with a broken signature: 401 invalid_token", Some(tampered.as_str()), Some(INVALID_TOKEN)),
            ("every operation, its example as owner A: a status it documents", Some(a.as_str()), None),
        ];
        let operations = documented::operations();
        for (rule, authorization, challenge) in rules {
            for operation in &operations {
                let mut headers: Vec<_> =
                    authorization.map(|a| ("authorization", a)).into_iter().collect();
                headers
                    .extend(operation.body.as_ref().map(|_| ("content-type", "application/json")));
                let method = Method::from_bytes(operation.method.as_bytes()).unwrap();
                let response = self
                    .api
                    .send(method, &operation.target, &headers, operation.body.clone())
                    .await;
                match challenge {
                    Some(challenge) => {
                        response.expect_error(rule, StatusCode::UNAUTHORIZED, "token")?;
                        response.expect_header(rule, "www-authenticate", challenge)?;
                    }
                    None => response.expect_documented(rule, &operation.statuses)?,
                }
            }
            self.passed(rule)?;
        }
        Ok(())
    }

    /// On each operation's path, a method it does not document: 405 with
    /// `Allow` naming those it does.
    async fn other_methods(&mut self) -> Checked {
        const RULE: &str =
            "a method its path does not document: 405 with Allow naming those it does";
        for operation in documented::operations() {
            let documented = documented::methods_of(&operation.path);
            let mut methods = ["DELETE", "PUT", "PATCH", "POST"].into_iter();
            let other =
                methods.find(|m| !documented.iter().any(|d| d == m)).expect("an undocumented one");
            let headers = [("authorization", self.a.authorization.as_str())];
            let method = Method::from_bytes(other.as_bytes()).unwrap();
            let response = self.api.send(method, &operation.target, &headers, None).await;
            response.expect_error(RULE, StatusCode::METHOD_NOT_ALLOWED, other)?;
            response.expect_header(RULE, "allow", &documented.join(", "))?;
        }
        self.passed(RULE)
    }

    /// Each refusal the contract names: the request (as owner A; a body
    /// with its Content-Type), the status, what the Error body's message
    /// names.
    async fn rejects(&mut self) -> Checked {
        let (a, run) = (self.a.authorization.clone(), self.run);
        let json = |body: Value| Some(("application/json", body));
        let large = json!({"id": run + 5, "name": "x".repeat(OVERSIZED_NAME_LENGTH)});
        let ivy = Some(("text/plain", json!({"id": run + 6, "name": "Ivy"})));
        #[rustfmt::skip]
        let rejections = [
            ("a plant without a name: 400 naming the field", Method::POST, "/plants", json(json!({"id": run + 4})), StatusCode::BAD_REQUEST, "name"),
            ("limit=0: 400 naming limit", Method::GET, "/plants?limit=0", None, StatusCode::BAD_REQUEST, "limit"),
            ("an unknown path: 404", Method::GET, "/gardens", None, StatusCode::NOT_FOUND, "path"),
            ("a body over 16 KiB: 413", Method::POST, "/plants", json(large), StatusCode::PAYLOAD_TOO_LARGE, "16384 bytes"),
            ("Content-Type: text/plain: 415", Method::POST, "/plants", ivy, StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type"),
        ];
        for (rule, method, path, body, status, mentions) in rejections {
            let mut headers = vec![("authorization", a.as_str())];
            headers.extend(body.as_ref().map(|(content_type, _)| ("content-type", *content_type)));
            let body = body.map(|(_, body)| body.to_string());
            let response = self.api.send(method, path, &headers, body).await;
            response.expect_error(rule, status, mentions)?;
            self.passed(rule)?;
        }
        Ok(())
    }
}

/// The plant's name, by which a run finds its plants in a listing.
fn name(plant: &Value) -> &str {
    plant["name"].as_str().unwrap_or_default()
}

/// An HTTP(S) client of the API at a base URL (reqwest).
struct Api {
    base_url: String,
    client: reqwest::Client,
}

impl Api {
    fn new(base_url: &str) -> Self {
        let base_url = base_url.trim_end_matches('/').to_owned();
        Self { base_url, client: reqwest::Client::new() }
    }

    async fn post(&self, authorization: &str, plant: &Value) -> Exchange {
        let headers = [("authorization", authorization), ("content-type", "application/json")];
        self.send(Method::POST, "/plants", &headers, Some(plant.to_string())).await
    }

    async fn get(&self, authorization: &str, path: &str) -> Exchange {
        self.send(Method::GET, path, &[("authorization", authorization)], None).await
    }

    /// `method path` with these headers and body: the status, headers and
    /// body of the answer, or why there was none.
    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Exchange {
        let request_line = format!("{method} {path}");
        let mut request = self.client.request(method, format!("{}{path}", self.base_url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let result = async {
            let sent = request.body(body.unwrap_or_default()).send().await;
            let response = sent.map_err(|error| format!("the request failed: {error}"))?;
            let (status, headers) = (response.status(), response.headers().clone());
            let body = response.text().await;
            Ok((
                status,
                headers,
                body.map_err(|error| format!("reading the body failed: {error}"))?,
            ))
        };
        Exchange { request_line, result: result.await }
    }
}

/// One response, or why there was none.
struct Exchange {
    request_line: String,
    result: Result<(StatusCode, HeaderMap, String), String>,
}

impl Exchange {
    fn failure(&self, rule: Rule, problem: &str) -> Failure {
        let answered = match &self.result {
            Ok((status, headers, body)) => {
                let mut shown: Vec<String> = headers
                    .iter()
                    .filter(|(name, _)| *name != "authorization")
                    .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or("?")))
                    .collect();
                shown.sort();
                format!("{status}\n  {}\n  {body}", shown.join("\n  "))
            }
            Err(error) => error.clone(),
        };
        let detail = format!("{}: {problem}\nanswered: {answered}", self.request_line);
        Failure { rule, detail }
    }

    /// The body as JSON, if the status is `status` and the response is
    /// `application/json` with a JSON body.
    fn expect_status(&self, rule: Rule, status: StatusCode) -> Checked<Value> {
        let Ok((actual, headers, body)) = &self.result else {
            return Err(self.failure(rule, "no answer"));
        };
        if *actual != status {
            return Err(self.failure(rule, &format!("expected status {status}")));
        }
        let content_type = headers.get("content-type").and_then(|v| v.to_str().ok());
        if content_type != Some("application/json") {
            return Err(self.failure(rule, "expected Content-Type: application/json"));
        }
        serde_json::from_str(body).map_err(|_| self.failure(rule, "the body is not JSON"))
    }

    /// One of the statuses the operation documents; a JSON body if below 400.
    fn expect_documented(&self, rule: Rule, statuses: &[u16]) -> Checked {
        let status = self.result.as_ref().map_or(0, |(status, _, _)| status.as_u16());
        if !statuses.contains(&status) {
            return Err(self.failure(rule, &format!("expected one of {statuses:?}")));
        }
        self.expect_status(rule, StatusCode::from_u16(status).unwrap()).map(drop)
    }

    fn expect_json(&self, rule: Rule, status: StatusCode, expected: &Value) -> Checked {
        if self.expect_status(rule, status)? != *expected {
            return Err(self.failure(rule, &format!("expected the body {expected}")));
        }
        Ok(())
    }

    /// The contract's Error body for `status`, its message naming `mentions`.
    fn expect_error(&self, rule: Rule, status: StatusCode, mentions: &str) -> Checked {
        let body = self.expect_status(rule, status)?;
        let message = body["message"].as_str().unwrap_or_default();
        let is_error_body = body["error"] == json!(status.as_u16())
            && body.as_object().is_some_and(|fields| fields.len() == 2);
        if !is_error_body || !message.contains(mentions) {
            let expected =
                format!(r#"{{"error": {}, "message": "...{mentions}..."}}"#, status.as_u16());
            return Err(self.failure(rule, &format!("expected the Error body {expected}")));
        }
        Ok(())
    }

    /// The header `name` is `value`; `Allow` names at least its methods.
    fn expect_header(&self, rule: Rule, name: &str, value: &str) -> Checked {
        let actual = self.header(name).unwrap_or_default();
        let items = |text: &str| text.split(',').map(|item| item.trim().to_owned()).collect();
        let (wanted, given): (Vec<String>, Vec<String>) = (items(value), items(&actual));
        let holds = match name {
            "allow" => wanted.iter().all(|method| given.contains(method)),
            _ => actual == value,
        };
        if !holds {
            return Err(self.failure(rule, &format!("expected {name}: {value}")));
        }
        Ok(())
    }

    fn header(&self, name: &str) -> Option<String> {
        let (_, headers, _) = self.result.as_ref().ok()?;
        Some(headers.get(name)?.to_str().ok()?.to_owned())
    }

    /// The path of `Link: <target>; rel="next"`, if any; the target may be
    /// relative or absolute (an API behind a custom domain).
    fn next_link(&self, rule: Rule) -> Checked<Option<String>> {
        let Some(link) = self.header("link") else { return Ok(None) };
        let target = link
            .strip_prefix('<')
            .and_then(|rest| rest.split_once(">; rel=\"next\""))
            .map(|(target, _)| target.to_owned())
            .ok_or_else(|| self.failure(rule, "expected Link: <...>; rel=\"next\""))?;
        // Relative to the path the caller saw, which may carry a base path.
        match target.find("/plants") {
            Some(start) => Ok(Some(target[start..].to_owned())),
            None => Err(self.failure(rule, "the Link target is no /plants URL")),
        }
    }
}
