//! Bearer tokens: each accepted algorithm verifies (EdDSA the tests' own,
//! ES256 and RS256 below); every forgery, misissued or ID token gets 401
//! with its challenge, nothing written; the verified-token cache agrees.

use plant_store::auth::Verifier;
use plant_store::config::{AccessTokenRule, Config, TokenRules, TrustConfig};
use plant_store::domain::limits::MAX_HEADER_BYTES;
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store_testkit::forgeries::{claims, forged_tokens, with, without};
use plant_store_testkit::key_server::KeyServer;
use plant_store_testkit::{
    ApiGatewayEvent, CHALLENGE, EDGES, INVALID_TOKEN, TestApp, assert_accepted, assert_refused,
    bearer, keys, token, token_rules,
};
use plant_store_testkit::{SigningKey, unix_now};
use serde_json::{Value, json};

use crate::interface::caller_key;

/// ECDSA's `(r, s)` verifies as `(r, n - s)` too: two keys of the per-caller
/// limit (docs/contract.md), both verified, as RFC 7518 asks no low `s`; a
/// third, a signature in non-canonical base64url, is refused.
#[tokio::test]
async fn an_es256_token_has_two_spellings_and_no_third() {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    // The order of P-256's group.
    const N: [u8; 32] = *b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\
        \xbc\xe6\xfa\xad\xa7\x17\x9e\x84\xf3\xb9\xca\xc2\xfc\x63\x25\x51";
    let app = TestApp::new().await;
    let token = keys().es256().sign(&claims("alice")).unwrap();
    let (signed, signature) = token.rsplit_once('.').unwrap();
    let mut bytes = URL_SAFE_NO_PAD.decode(signature).unwrap();
    let (mut borrow, s) = (0i16, &mut bytes[32..]);
    for (byte, n) in s.iter_mut().zip(N).rev() {
        let difference = i16::from(n) - i16::from(*byte) - borrow;
        (*byte, borrow) = ((difference.rem_euclid(256)) as u8, i16::from(difference < 0));
    }
    let other = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(&bytes));
    assert_ne!(caller_key(&format!("Bearer {token}")), caller_key(&format!("Bearer {other}")));
    for spelling in [&token, &other] {
        assert_eq!(app.get(&format!("Bearer {spelling}"), "").await.status, 200, "{spelling}");
    }
    // 64 bytes in 86 characters: the last one's low 4 bits are no data.
    let mut third = other.into_bytes();
    *third.last_mut().unwrap() ^= 1;
    let third = String::from_utf8(third).unwrap();
    assert_refused(&app, &format!("Bearer {third}"), INVALID_TOKEN, "non-canonical").await;
}

/// RFC 6750: no bearer credentials get the plain challenge; a `Bearer`
/// value that is not one b64token is a malformed token, `invalid_token`.
#[tokio::test]
async fn the_authorization_header_holds_one_bearer_token_or_gets_401() {
    let app = TestApp::new().await;
    let response = app.send(ApiGatewayEvent::new("GET", "/plants")).await;
    response.assert_error(401, "Authorization");
    assert_eq!(response.header("www-authenticate"), Some(CHALLENGE));
    let (token, alice, mallory) = (token("alice"), bearer("alice"), bearer("mallory"));
    let without = [
        format!("Basic {token}"),
        format!("Token {token}"),
        "Bearer".into(),
        "Bearer  ".into(),
        token.clone(),
        format!("Basic YWxpY2U6c2VjcmV0, {alice}"),
        "Basic ä".into(),
    ];
    // Two headers as HTTP APIs and function URLs deliver them, comma-joined:
    // indistinguishable from one value with a comma, so a malformed token.
    let malformed = [
        format!("{alice},{mallory}"),
        format!("{alice}, {mallory}"),
        format!("{alice},"),
        format!("{alice} extra"),
        "Bearer ==".into(),
        "Bearer a=b".into(),
        format!("{alice}\u{a0}"),
        "Bearer é".into(),
        "bearer eyJ🌱.x.y".into(),
    ];
    let cases = without.iter().map(|value| (value, CHALLENGE));
    for (authorization, challenge) in cases.chain(malformed.iter().map(|v| (v, INVALID_TOKEN))) {
        assert_refused(&app, authorization, challenge, authorization).await;
    }
    // The scheme in any case, 1*SP, the token and nothing else: each
    // spelling is one key of the firewall's per-caller limit.
    let spellings = [alice.clone(), format!("Bearer   {token}"), format!("bEaReR {token}")];
    for spelled in &spellings {
        assert_eq!(app.get(spelled, "").await.status, 200, "{spelled:?}");
    }
    let keys: std::collections::HashSet<_> = spellings.iter().map(|s| caller_key(s)).collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    for extra in [format!("{alice} "), format!("{alice}\t"), format!("Bearer \t{token}")] {
        assert_refused(&app, &extra, INVALID_TOKEN, &extra).await;
    }
}

/// The per-caller limit's rule (docs/contract.md), on every edge: every
/// `Authorization` value is read (either REST map, any spelling), so a second
/// is refused; so is a request with more headers than AWS WAF inspects.
#[tokio::test]
async fn the_function_authenticates_exactly_the_request_the_firewall_keyed() {
    let app = TestApp::new().await;
    let (alice, junk) = (bearer("alice"), "Bearer junk".to_owned());
    let listing = |headers: &[(&str, &str)]| {
        let get = ApiGatewayEvent::new("GET", "/plants");
        headers.iter().fold(get, |get, (name, value)| get.header(name, value))
    };
    let padding: Vec<String> = (0..250).map(|n| format!("x-pad-{n}")).collect();
    let padded: Vec<(&str, &str)> = padding.iter().map(|name| (name.as_str(), "1")).collect();
    let one = ("authorization", alice.as_str());
    let cookies = (0..1500).map(|n| format!("c{n}=1")).collect::<Vec<_>>().join("; ");
    for edge in EDGES {
        assert_eq!(app.invoke(&listing(&[one]).event_as(edge)).await.status, 200, "{edge}");
        for (case, headers, status) in [
            ("two values", vec![("authorization", junk.as_str()), one], 401),
            ("two spellings", vec![("authorization", &junk), ("Authorization", &alice)], 401),
            ("past what WAF inspects", [&padded[..], &[one]].concat(), 431),
            ("cookies past what WAF inspects", vec![("cookie", &cookies), one], 431),
        ] {
            let response = app.invoke(&listing(&headers).event_as(edge)).await;
            assert_eq!(response.status, status, "{edge}, {case}: {}", response.body);
        }
    }
    // A REST event whose maps disagree: every value counts.
    let mut event: Value = serde_json::from_str(&listing(&[one]).event_as("rest-api")).unwrap();
    event["multiValueHeaders"]["authorization"] = json!([junk, alice]);
    app.invoke(&event.to_string()).await.assert_error(401, "token");
    let at_limit = [&padded[..199], &[one]].concat();
    let response = app.invoke(&listing(&at_limit).event_as("http-api")).await;
    assert_eq!(response.status, 200, "200 headers: {}", response.body);
}

#[tokio::test]
async fn forged_misissued_and_untyped_tokens_get_invalid_token() {
    let app = TestApp::new().await;
    for (case, token) in forged_tokens() {
        assert_refused(&app, &format!("Bearer {token}"), INVALID_TOKEN, case).await;
    }
    // By default, only tokens typed as access tokens pass.
    let signed =
        |typ| format!("Bearer {}", keys().eddsa().sign_typed(typ, &claims("alice")).unwrap());
    for typ in [Some("JWT"), Some("id+jwt"), Some(""), Some("text/at+jwt"), Some("at+jwt2"), None] {
        assert_refused(&app, &signed(typ), INVALID_TOKEN, &format!("{typ:?}")).await;
    }
    for typ in ["at+jwt", "application/at+jwt", "AT+JWT"] {
        assert_accepted(&app, &signed(Some(typ)), typ).await;
    }
}

#[tokio::test]
async fn cognito_mode_accepts_access_tokens_of_its_clients_only() {
    let access = AccessTokenRule::Cognito(vec!["app-client".into(), "machine-client".into()]);
    let rules = TokenRules::new(plant_store_testkit::ISSUER.into(), None, access, None).unwrap();
    let keys_json = &keys().jwks;
    let app =
        TestApp::with_verifier(Verifier::new(KeySource::inline(keys_json).unwrap(), &rules)).await;
    let now = unix_now();
    // Cognito access tokens carry `client_id` and `token_use`, and no `aud`.
    let access = json!({
        "iss": plant_store_testkit::ISSUER, "sub": "alice", "exp": now + 600, "iat": now,
        "token_use": "access", "client_id": "app-client", "scope": "aws.cognito.signin.user.admin"
    });
    let sign = |claims: &Value| format!("Bearer {}", keys().rs256().sign(claims).unwrap());
    let changed = |claim, value: Value| with(access.clone(), claim, value);
    let id_token = with(changed("token_use", json!("id")), "aud", json!("app-client"));
    for (case, claims) in [
        ("an ID token", id_token),
        ("another client's access token", changed("client_id", json!("other"))),
        ("two configured ids as one", changed("client_id", json!("app-client,machine-client"))),
        ("no token_use", without(access.clone(), "token_use")),
        ("no client_id", without(access.clone(), "client_id")),
    ] {
        assert_refused(&app, &sign(&claims), INVALID_TOKEN, case).await;
    }
    assert_eq!(app.post(&sign(&access), r#"{"id": 1, "name": "Fern"}"#).await.status, 200);
    // A client-credentials token of the other client (its `sub` the client's id).
    let machine = with(changed("client_id", json!("machine-client")), "sub", json!("m"));
    assert_eq!(app.get(&sign(&machine), "").await.status, 200);
    assert_eq!(app.stored_items().await.len(), 1);
}

/// Two tokens signed by a published key, padded with an extra claim: the
/// longest of at most `limit` bytes and the shortest of more.
fn signed_tokens_around(limit: usize) -> (String, String) {
    let sign = |padding: usize| {
        let claims = with(claims("alice"), "padding", json!("x".repeat(padding)));
        keys().eddsa().sign(&claims).unwrap()
    };
    // Base64 makes 4 characters of every 3 bytes: start just below the limit.
    let unpadded = sign(0).len();
    let mut padding = (limit - unpadded) * 3 / 4 - 8;
    while sign(padding + 1).len() <= limit {
        padding += 1;
    }
    (sign(padding), sign(padding + 1))
}

/// A token's size is bounded by what the firewall inspects of a request's
/// headers: alone, one that fills them verifies, and one byte more is 431.
#[tokio::test]
async fn a_token_is_bounded_by_the_headers_the_firewall_inspects() {
    let app = TestApp::new().await;
    let budget = MAX_HEADER_BYTES - "authorization: Bearer \r\n".len();
    let (fits, over) = signed_tokens_around(budget);
    assert!(fits.len() > budget - 4 && over.len() > budget);
    let listing = |token: &str| {
        ApiGatewayEvent::new("GET", "/plants").header("authorization", &format!("Bearer {token}"))
    };
    app.send(listing(&over)).await.assert_error(431, "headers");
    assert_eq!(app.send(listing(&fits)).await.status, 200);
}

#[tokio::test]
async fn a_subject_over_512_bytes_is_refused_and_one_of_512_is_the_owner() {
    let app = TestApp::new().await;
    // 512 characters but 513 bytes: the limit counts bytes (the partition key's unit).
    for (case, sub) in [
        ("513 ASCII bytes", "s".repeat(513)),
        ("512 characters in 513 bytes", format!("{}é", "s".repeat(511))),
    ] {
        let token = keys().eddsa().sign(&claims(&sub)).unwrap();
        assert_refused(&app, &format!("Bearer {token}"), INVALID_TOKEN, case).await;
    }
    let sub = "s".repeat(512);
    let token = keys().eddsa().sign(&claims(&sub)).unwrap();
    assert_accepted(&app, &format!("Bearer {token}"), "512 bytes").await;
    assert_eq!(app.stored_owners().await, [json!(sub)]);
}

/// `Bearer` and `token`'s claims issued now for ten minutes, with its `typ`.
fn issued(key: &SigningKey, token: &Value) -> String {
    let now = unix_now();
    let claims = with(with(token["claims"].clone(), "iat", json!(now)), "exp", json!(now + 600));
    format!("Bearer {}", key.sign_typed(token["typ"].as_str(), &claims).unwrap())
}

/// Each issuer's tokens as its documentation shows them
/// (`vendor_tokens.json`), under the settings docs/deploying.md gives, its
/// ID token for the configured audience (the worst case), keys over HTTP.
#[tokio::test]
async fn an_id_token_is_refused_and_an_access_token_of_the_same_issuer_passes() {
    let key = keys().rs256();
    let server = KeyServer::start(SigningKey::jwks_json(&[key])).await;
    let https = Https::new(&TrustConfig::default()).unwrap();
    let vendors: Vec<Value> = serde_json::from_str(include_str!("vendor_tokens.json")).unwrap();
    for vendor in &vendors {
        let name = vendor["issuer"].as_str().unwrap();
        let settings = |variable: &str| match variable {
            "PLANTS_TABLE" => Some("plants".to_owned()),
            "AUTH_JWKS_URL" => Some(server.jwks_url.clone()),
            "AUTH_ALLOW_LOOPBACK_HTTP" => Some("true".to_owned()),
            _ => vendor["settings"][variable].as_str().map(str::to_owned),
        };
        let config = Config::from_lookup(settings).unwrap();
        let keys = KeySource::from_config(&config.keys, &https).unwrap();
        let app = TestApp::with_verifier(Verifier::new(keys, &config.rules)).await;
        // Also without the claims only ID tokens carry, as a code flow
        // without a nonce issues it.
        let bare =
            ["nonce", "at_hash", "c_hash"].into_iter().fold(vendor["id"].clone(), |id, claim| {
                with(id.clone(), "claims", without(id["claims"].clone(), claim))
            });
        for id in [&vendor["id"], &bare] {
            assert_refused(&app, &issued(key, id), INVALID_TOKEN, name).await;
        }
        match vendor["access"]["opaque"].as_str() {
            Some(opaque) => {
                assert_refused(&app, &format!("Bearer {opaque}"), INVALID_TOKEN, name).await
            }
            None => assert_accepted(&app, &issued(key, &vendor["access"]), name).await,
        }
    }
}

// The verified-token cache accepts nothing a fresh verification refuses (a
// token whose key was rotated out: remote_keys.rs).

#[tokio::test]
async fn a_remembered_token_is_refused_once_its_expiry_and_leeway_have_passed() {
    let app = TestApp::new().await;
    // Expired 29 s ago: within the 30 s leeway for about a second more.
    let token = keys().eddsa().sign(&with(claims("alice"), "exp", json!(unix_now() - 29))).unwrap();
    let bearer = format!("Bearer {token}");
    assert_eq!(app.get(&bearer, "").await.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let expired = app.get(&bearer, "").await;
    expired.assert_error(401, "expired");
    assert_eq!(expired.header("www-authenticate"), Some(INVALID_TOKEN));
}

#[tokio::test]
async fn a_token_remembered_by_one_configuration_is_refused_by_another() {
    let inline = || KeySource::inline(&keys().jwks).unwrap();
    let (issuer, access) = (plant_store_testkit::ISSUER.into(), AccessTokenRule::AtJwt);
    let other_audience = TokenRules::new(issuer, Some("another-api".into()), access, None).unwrap();
    let ours = TestApp::with_verifier(Verifier::new(inline(), &token_rules(None))).await;
    let theirs = TestApp::with_verifier(Verifier::new(inline(), &other_audience)).await;
    let token = format!("Bearer {}", keys().eddsa().sign(&claims("alice")).unwrap());
    for _ in 0..2 {
        assert_eq!(ours.get(&token, "").await.status, 200);
        theirs.get(&token, "").await.assert_error(401, "token");
    }
}
