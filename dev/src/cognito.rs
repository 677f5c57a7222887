//! Test users in a Cognito user pool, for the acceptance suite against a
//! deployed stack: created with the administrator API (no e-mail is sent),
//! signed in through the app client (`USER_PASSWORD_AUTH`, as
//! docs/deploying.md's first call does), deleted when the run ends.

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_sdk_cognitoidentityprovider::Client;
use aws_sdk_cognitoidentityprovider::types::{AttributeType, AuthFlowType, MessageActionType};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub struct TestUsers {
    client: Client,
    user_pool_id: String,
    usernames: Vec<String>,
}

impl TestUsers {
    pub async fn new(user_pool_id: &str) -> Self {
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self {
            client: Client::new(&config),
            user_pool_id: user_pool_id.to_owned(),
            usernames: Vec::new(),
        }
    }

    /// Creates a user named after `label` and this run, with a random
    /// password, and returns an access token from signing it in.
    pub async fn create_and_sign_in(
        &mut self,
        client_id: &str,
        label: &str,
    ) -> Result<String, String> {
        let username = format!(
            "plant-store-acceptance-{}-{label}@example.com",
            random_text(6)
        );
        let password = format!("{}Aa1", random_text(24));
        let email = |name: &str, value: &str| {
            AttributeType::builder()
                .name(name)
                .value(value)
                .build()
                .expect("name is set")
        };
        self.client
            .admin_create_user()
            .user_pool_id(&self.user_pool_id)
            .username(&username)
            .message_action(MessageActionType::Suppress)
            .user_attributes(email("email", &username))
            .user_attributes(email("email_verified", "true"))
            .send()
            .await
            .map_err(|error| {
                format!(
                    "creating a test user failed: {}",
                    error.into_service_error()
                )
            })?;
        self.usernames.push(username.clone());
        self.client
            .admin_set_user_password()
            .user_pool_id(&self.user_pool_id)
            .username(&username)
            .password(&password)
            .permanent(true)
            .send()
            .await
            .map_err(|error| {
                format!(
                    "setting the test user's password failed: {}",
                    error.into_service_error()
                )
            })?;
        let signed_in = self
            .client
            .initiate_auth()
            .auth_flow(AuthFlowType::UserPasswordAuth)
            .client_id(client_id)
            .auth_parameters("USERNAME", &username)
            .auth_parameters("PASSWORD", &password)
            .send()
            .await
            .map_err(|error| {
                format!(
                    "signing the test user in failed: {}",
                    error.into_service_error()
                )
            })?;
        signed_in
            .authentication_result()
            .and_then(|result| result.access_token())
            .map(str::to_owned)
            .ok_or_else(|| "signing in returned no access token (a challenge?)".to_owned())
    }

    /// Deletes every user this run created; says which could not be.
    pub async fn delete(self) -> Result<(), String> {
        let mut failed = Vec::new();
        for username in &self.usernames {
            let deleted = self
                .client
                .admin_delete_user()
                .user_pool_id(&self.user_pool_id)
                .username(username)
                .send()
                .await;
            if let Err(error) = deleted {
                failed.push(format!("{username} ({})", error.into_service_error()));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "could not delete the test users {}",
                failed.join(", ")
            ))
        }
    }
}

/// `bytes` random bytes as base64url text.
fn random_text(bytes: usize) -> String {
    let mut buffer = vec![0; bytes];
    SystemRandom::new()
        .fill(&mut buffer)
        .expect("the system's random source works");
    URL_SAFE_NO_PAD.encode(buffer)
}
