//! The physical floor: lambda_runtime and the job's SigV4-signed calls
//! through hyper and rustls (a listing's Query; a create's PutItem, after
//! the bound's UpdateItem unless `MAX_PLANTS_PER_OWNER=0`), nothing else.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use rustls::pki_types::{CertificateDer, pem::PemObject};
use serde_json::{Value, json};

const OWNER: &str = "baseline";

struct DynamoDb {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: String,
    region: String,
    identity: Identity,
    table: String,
}

impl DynamoDb {
    fn from_env() -> Result<Self, Error> {
        let var = |name: &str| std::env::var(name);
        let region = var("AWS_REGION")?;
        let endpoint = var("AWS_ENDPOINT_URL_DYNAMODB")
            .unwrap_or_else(|_| format!("https://dynamodb.{region}.amazonaws.com"));
        let credentials = Credentials::new(
            var("AWS_ACCESS_KEY_ID")?,
            var("AWS_SECRET_ACCESS_KEY")?,
            var("AWS_SESSION_TOKEN").ok(),
            None,
            "environment",
        );
        // The roots SSL_CERT_FILE names, as the SDK's default client reads them.
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(var("SSL_CERT_FILE")?)?;
        roots.add_parsable_certificates(CertificateDer::pem_slice_iter(&pem).flatten());
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let tls = rustls::ClientConfig::builder_with_provider(provider.into())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            endpoint,
            region,
            identity: credentials.into(),
            table: var("PLANTS_TABLE")?,
        })
    }

    /// One signed call of `operation` with `request`; DynamoDB's answer.
    async fn call(&self, operation: &str, mut request: Value) -> Result<Value, Error> {
        request["TableName"] = json!(self.table);
        let body = serde_json::to_vec(&request)?;
        let target = format!("DynamoDB_20120810.{operation}");
        let headers = [("content-type", "application/x-amz-json-1.0"), ("x-amz-target", &target)];
        let settings = SigningSettings::default();
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name("dynamodb")
            .time(SystemTime::now())
            .settings(settings)
            .build()?
            .into();
        let signable = SignableRequest::new(
            "POST",
            &self.endpoint,
            headers.into_iter(),
            SignableBody::Bytes(&body),
        )?;
        let (instructions, _) = sign(signable, &params)?.into_parts();
        let mut http = Request::post(&self.endpoint);
        for (name, value) in headers {
            http = http.header(name, value);
        }
        let mut http = http.body(Full::new(Bytes::from(body)))?;
        instructions.apply_to_request_http1x(&mut http);
        let answer = self.client.request(http).await?.into_body().collect().await?.to_bytes();
        Ok(serde_json::from_slice(&answer)?)
    }
}

async fn handle(dynamodb: &DynamoDb, bounded: bool, event: Value) -> Result<Value, Error> {
    let owner = json!({"S": OWNER});
    // A REST API's event, or an HTTP API's.
    let method = event.get("httpMethod").unwrap_or(&event["requestContext"]["http"]["method"]);
    let answer = if method == "POST" {
        let plant: Value = serde_json::from_str(event["body"].as_str().unwrap_or("{}"))?;
        if bounded {
            let count = json!({"Key": {"owner": {"S": "counter"}, "id": {"N": "0"}},
                "UpdateExpression": "SET #n = if_not_exists(#n, :zero) + :one",
                "ConditionExpression": "attribute_not_exists(#n) OR #n < :max",
                "ExpressionAttributeNames": {"#n": "plants"},
                "ExpressionAttributeValues": {":zero": {"N": "0"}, ":one": {"N": "1"}, ":max": {"N": "1000000000"}}});
            dynamodb.call("UpdateItem", count).await?;
        }
        let item = json!({"owner": owner, "id": {"N": plant["id"].to_string()},
            "name": {"S": plant["name"].as_str().unwrap_or_default()}});
        let put = json!({"Item": item, "ConditionExpression": "attribute_not_exists(id)"});
        dynamodb.call("PutItem", put).await?;
        plant.to_string()
    } else {
        let limit = event["queryStringParameters"]["limit"].as_str().and_then(|l| l.parse().ok());
        let query = json!({"KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": {":owner": owner}, "ConsistentRead": true,
            "Limit": limit.unwrap_or(100) + 1});
        let page = dynamodb.call("Query", query).await?;
        format!("{} items", page["Count"])
    };
    Ok(json!({"statusCode": 200, "body": answer}))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let dynamodb = DynamoDb::from_env()?;
    let warm_up = json!({"KeyConditionExpression": "#owner = :owner",
        "ExpressionAttributeNames": {"#owner": "owner"},
        "ExpressionAttributeValues": {":owner": {"S": "warm-up"}}, "Limit": 1});
    let _ = dynamodb.call("Query", warm_up).await;
    let dynamodb: &'static DynamoDb = Box::leak(Box::new(dynamodb));
    let bounded = std::env::var("MAX_PLANTS_PER_OWNER").is_ok_and(|max| max != "0");
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        handle(dynamodb, bounded, event.payload)
    }))
    .await
}
