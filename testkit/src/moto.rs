//! moto's server, an independent Cognito API on 127.0.0.1 (RS256 access
//! tokens, their JWKS), for the acceptance suite's Cognito mode.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use aws_sdk_cognitoidentityprovider::Client;
use aws_sdk_cognitoidentityprovider::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_cognitoidentityprovider::types::{
    ExplicitAuthFlowsType, PasswordPolicyType, UserPoolPolicyType, UsernameAttributeType,
};
use plant_store_local_support::process::{GRACE, Started, free_port, start, wait_for_port};

const START_TIMEOUT: Duration = Duration::from_secs(60);
const REGION: &str = "us-east-1";

/// moto's server, stopped on drop.
pub struct MotoCognito {
    pub url: String,
    pub client: Client,
    server: Started,
}

impl Drop for MotoCognito {
    fn drop(&mut self) {
        self.server.stop();
    }
}

/// A user pool and its app client, as the template makes them.
pub struct Pool {
    pub id: String,
    pub client_id: String,
}

impl Pool {
    /// The `iss` of the pool's tokens (Cognito's, which moto keeps).
    pub fn issuer(&self) -> String {
        format!("https://cognito-idp.{REGION}.amazonaws.com/{}", self.id)
    }
}

impl MotoCognito {
    /// The server from `PLANT_STORE_MOTO_SERVER`, else `.tools/venv`'s.
    pub async fn start() -> Self {
        let program = std::env::var_os("PLANT_STORE_MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| plant_store_local_support::tools::venv_bin().join("moto_server"));
        let shown = program.display();
        assert!(program.is_file(), "{shown} is missing: scripts/test installs moto's server");
        let port = free_port();
        let mut command = Command::new(program);
        command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        command.stdout(Stdio::null()).stderr(Stdio::null());
        let server = start("moto_server", command, GRACE, None)
            .and_then(|server| wait_for_port(port, &server, START_TIMEOUT).map(|()| server))
            .unwrap_or_else(|error| panic!("{error}"));
        let url = format!("http://127.0.0.1:{port}");
        let config = aws_sdk_cognitoidentityprovider::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .credentials_provider(Credentials::new("moto", "moto", None, None, "moto"))
            .endpoint_url(&url)
            .build();
        Self { url, client: Client::from_conf(config), server }
    }

    /// A pool with `policy`, e-mail addresses as user names, and an app
    /// client that signs users in with their password, as template.yaml's.
    pub async fn create_pool(&self, name: &str, policy: PasswordPolicyType) -> Pool {
        let pool = self.client.create_user_pool().pool_name(name);
        let pool = pool.username_attributes(UsernameAttributeType::Email);
        let policies = UserPoolPolicyType::builder().password_policy(policy).build();
        let pool = pool.policies(policies).send().await.unwrap();
        let id = pool.user_pool().and_then(|pool| pool.id()).unwrap().to_owned();
        let app = self.client.create_user_pool_client().user_pool_id(&id);
        let app = app.client_name("plant-store-cli");
        let app = app.explicit_auth_flows(ExplicitAuthFlowsType::AllowUserPasswordAuth);
        let app = app.explicit_auth_flows(ExplicitAuthFlowsType::AllowRefreshTokenAuth);
        let app = app.send().await.unwrap();
        let client_id = app.user_pool_client().and_then(|app| app.client_id()).unwrap().to_owned();
        Pool { id, client_id }
    }

    /// The pool's JWKS URL on this server.
    pub fn jwks_url(&self, pool: &Pool) -> String {
        format!("{}/{}/.well-known/jwks.json", self.url, pool.id)
    }

    /// How many users the pool holds.
    pub async fn user_count(&self, pool: &Pool) -> usize {
        let users = self.client.list_users().user_pool_id(&pool.id).send().await.unwrap();
        users.users().len()
    }
}
