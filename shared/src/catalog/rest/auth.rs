//! Bearer tokens for the REST catalog: a static token, or OAuth2 client
//! credentials exchanged at the token endpoint and refreshed before they expire
//! or when the catalog answers 401.

use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;
use tracing::Instrument;

use super::RestError;
use crate::error::BoxError;

/// The OAuth2 scope the Iceberg REST spec asks for when none is configured.
pub const DEFAULT_SCOPE: &str = "catalog";

/// How floe authenticates to the REST catalog.
#[derive(Clone, Default)]
pub enum RestAuth {
    /// No `Authorization` header (SigV4 signing, or an open catalog).
    #[default]
    None,
    /// A fixed bearer token; a 401 is final.
    Token(String),
    /// OAuth2 client credentials (`grant_type=client_credentials`).
    OAuth2 {
        /// The token endpoint; `None` is the catalog's `/v1/oauth/tokens`.
        server_uri: Option<String>,
        /// The client id.
        client_id: String,
        /// The client secret.
        client_secret: String,
        /// The scope; `None` is [`DEFAULT_SCOPE`].
        scope: Option<String>,
    },
}

// Secrets stay out of logs and error messages.
impl std::fmt::Debug for RestAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestAuth::None => f.write_str("None"),
            RestAuth::Token(_) => f.write_str("Token(***)"),
            RestAuth::OAuth2 {
                server_uri,
                client_id,
                scope,
                ..
            } => f
                .debug_struct("OAuth2")
                .field("server_uri", server_uri)
                .field("client_id", client_id)
                .field("client_secret", &"***")
                .field("scope", scope)
                .finish(),
        }
    }
}

/// The token endpoint's answer (RFC 6749 §5.1).
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Clone)]
struct Token {
    value: String,
    /// When to fetch a new one: a little before the server says it expires.
    refresh_at: Option<Instant>,
}

/// The current bearer token, fetched and refreshed on demand.
pub(super) struct Tokens {
    auth: RestAuth,
    /// The token endpoint, resolved against the catalog's base URI.
    endpoint: String,
    current: Mutex<Option<Token>>,
}

impl Tokens {
    pub(super) fn new(auth: RestAuth, base: &str) -> Self {
        let endpoint = match &auth {
            RestAuth::OAuth2 {
                server_uri: Some(uri),
                ..
            } => uri.clone(),
            _ => format!("{base}/v1/oauth/tokens"),
        };
        Self {
            auth,
            endpoint,
            current: Mutex::new(None),
        }
    }

    /// True when a 401 can be cured by fetching a new token.
    pub(super) fn refreshable(&self) -> bool {
        matches!(self.auth, RestAuth::OAuth2 { .. })
    }

    /// The token to send now, if any; fetches one when none is valid.
    pub(super) async fn bearer(&self, http: &reqwest::Client) -> Result<Option<String>, RestError> {
        let (client_id, client_secret, scope) = match &self.auth {
            RestAuth::None => return Ok(None),
            RestAuth::Token(t) => return Ok(Some(t.clone())),
            RestAuth::OAuth2 {
                client_id,
                client_secret,
                scope,
                ..
            } => (client_id, client_secret, scope),
        };
        // Held across the fetch so concurrent callers share one exchange.
        let mut current = self.current.lock().await;
        if let Some(t) = current.as_ref()
            && t.refresh_at.is_none_or(|at| Instant::now() < at)
        {
            return Ok(Some(t.value.clone()));
        }
        let token = self
            .fetch(http, client_id, client_secret, scope.as_deref())
            .await?;
        let value = token.value.clone();
        *current = Some(token);
        Ok(Some(value))
    }

    /// Forgets `used` after the catalog refused it, so the next call fetches anew.
    pub(super) async fn invalidate(&self, used: &str) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|t| t.value == used) {
            *current = None;
        }
    }

    async fn fetch(
        &self,
        http: &reqwest::Client,
        client_id: &str,
        client_secret: &str,
        scope: Option<&str>,
    ) -> Result<Token, RestError> {
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", client_id),
            ("client_secret", client_secret),
            ("scope", scope.unwrap_or(DEFAULT_SCOPE)),
        ];
        let err = |context: &str, source: Option<BoxError>| RestError::Token {
            url: self.endpoint.clone(),
            context: context.to_string(),
            source,
        };
        let span = tracing::debug_span!("rest.oauth2_token", url = %self.endpoint);
        let sent = http
            .post(&self.endpoint)
            .form(&form)
            .send()
            .instrument(span)
            .await
            .map_err(|e| err("sending the request", Some(e.into())))?;
        let status = sent.status();
        let body = sent
            .bytes()
            .await
            .map_err(|e| err("reading the answer", Some(e.into())))?;
        if !status.is_success() {
            let answer = format!("{status}: {}", super::wire::server_message(&body));
            return Err(err(&answer, None));
        }
        let answer: TokenResponse = serde_json::from_slice(&body)
            .map_err(|e| err("unreadable token response", Some(e.into())))?;
        let refresh_at = answer.expires_in.map(|secs| {
            let lifetime = Duration::from_secs(secs);
            // Refresh ahead of expiry by a tenth of the lifetime, at most a minute,
            // so a call started just before expiry does not carry a dead token.
            let margin = (lifetime / 10).min(Duration::from_secs(60));
            Instant::now() + lifetime - margin
        });
        tracing::debug!(expires_in = ?answer.expires_in, "fetched an OAuth2 token");
        Ok(Token {
            value: answer.access_token,
            refresh_at,
        })
    }
}
