//! The acceptance suite's Cognito test users: created by the administrator
//! API, signed in through the app client, deleted after; any pool's policy met.

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_sdk_cognitoidentityprovider::Client;
use aws_sdk_cognitoidentityprovider::error::DisplayErrorContext;
use aws_sdk_cognitoidentityprovider::types::{AttributeType, AuthFlowType, MessageActionType};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::acceptance::{self, Report};

/// The suite's shortest password: beyond guessing, within every pool's maximum.
const PASSWORD_LENGTH: usize = 64;

pub struct TestUsers {
    client: Client,
    user_pool_id: String,
    usernames: Vec<String>,
}

impl TestUsers {
    /// Users of `user_pool_id`, through the AWS configuration of the
    /// environment (the operator's credentials).
    pub async fn new(user_pool_id: &str) -> Self {
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self::with_client(Client::new(&config), user_pool_id)
    }

    /// Users of `user_pool_id` through `client` (another endpoint).
    pub fn with_client(client: Client, user_pool_id: &str) -> Self {
        Self { client, user_pool_id: user_pool_id.to_owned(), usernames: Vec::new() }
    }

    /// Creates a user named after `label` and this run, with a random
    /// password, and returns an access token from signing it in.
    async fn create_and_sign_in(&mut self, client_id: &str, label: &str) -> Result<String, String> {
        let username = format!("plant-store-acceptance-{}-{label}@example.com", random_text(6));
        // The pool's minimum; unread, the most a policy may ask (99).
        let pool = self.client.describe_user_pool().user_pool_id(&self.user_pool_id).send().await;
        let pool = pool.ok().and_then(|pool| pool.user_pool);
        let minimum = pool.and_then(|pool| pool.policies?.password_policy?.minimum_length);
        let password = password(minimum.map_or(99, |minimum| minimum as usize));
        let email = |name: &str, value: &str| {
            AttributeType::builder().name(name).value(value).build().expect("name is set")
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
            .map_err(failed("creating a test user"))?;
        self.usernames.push(username.clone());
        self.client
            .admin_set_user_password()
            .user_pool_id(&self.user_pool_id)
            .username(&username)
            .password(&password)
            .permanent(true)
            .send()
            .await
            .map_err(failed("setting the test user's password"))?;
        let signed_in = self
            .client
            .initiate_auth()
            .auth_flow(AuthFlowType::UserPasswordAuth)
            .client_id(client_id)
            .auth_parameters("USERNAME", &username)
            .auth_parameters("PASSWORD", &password)
            .send()
            .await
            .map_err(failed("signing the test user in"))?;
        let token = signed_in.authentication_result().and_then(|result| result.access_token());
        let no_token = || "signing in gave no access token (a challenge?)".to_owned();
        token.map(str::to_owned).ok_or_else(no_token)
    }

    /// Deletes every user this run created; says which could not be.
    pub async fn delete(self) -> Result<(), String> {
        let mut undeleted = Vec::new();
        for username in &self.usernames {
            let delete = self.client.admin_delete_user().user_pool_id(&self.user_pool_id);
            if let Err(error) = delete.username(username).send().await {
                undeleted.push(format!("{username} ({})", DisplayErrorContext(error)));
            }
        }
        match undeleted.join(", ") {
            undeleted if undeleted.is_empty() => Ok(()),
            undeleted => Err(format!("could not delete the test users {undeleted}")),
        }
    }
}

/// The acceptance suite as two test users of the pool, signed in through
/// `client_id`; the users are deleted however it ends.
pub async fn run_as_test_users(
    mut users: TestUsers,
    url: &str,
    client_id: &str,
) -> Result<Report, String> {
    let mut tokens = Vec::new();
    for label in ["a", "b"] {
        match users.create_and_sign_in(client_id, label).await {
            Ok(token) => tokens.push(token),
            Err(error) => {
                users.delete().await?;
                return Err(error);
            }
        }
    }
    let report = acceptance::run(url, &tokens[0], &tokens[1]).await;
    users.delete().await?;
    Ok(report)
}

/// A failed call of the administrator API, with its chain of causes.
fn failed<E: std::error::Error>(doing: &str) -> impl Fn(E) -> String {
    move |error| format!("{doing} failed: {}", DisplayErrorContext(error))
}

/// A random password of at least `minimum` (and [`PASSWORD_LENGTH`])
/// characters, with each class of character a policy may ask for.
fn password(minimum: usize) -> String {
    let length = minimum.max(PASSWORD_LENGTH);
    let classes = "aA1!";
    let mut random = random_text(length);
    random.truncate(length - classes.len());
    random + classes
}

/// `bytes` random bytes as base64url text.
fn random_text(bytes: usize) -> String {
    let mut buffer = vec![0; bytes];
    SystemRandom::new().fill(&mut buffer).expect("the system's random source works");
    URL_SAFE_NO_PAD.encode(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hold_every_class_cognito_may_require_and_are_long_enough() {
        for minimum in (0..50).map(|n| [6, 8, 12, 64, 99][n % 5]) {
            let password = password(minimum);
            assert_eq!(password.len(), minimum.max(PASSWORD_LENGTH));
            assert!(password.bytes().any(|byte| byte.is_ascii_lowercase()));
            assert!(password.bytes().any(|byte| byte.is_ascii_uppercase()));
            assert!(password.bytes().any(|byte| byte.is_ascii_digit()));
            // Cognito's symbols: ^ $ * . [ ] { } ( ) ? " ! @ # % & / \ , > < ' : ; | _ ~ ` = + -
            let symbol = |byte| b"^$*.[]{}()?\"!@#%&/\\,><':;|_~`=+-".contains(&byte);
            assert!(password.bytes().any(symbol));
        }
    }
}
