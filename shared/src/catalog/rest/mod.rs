//! An Iceberg REST catalog client (Polaris, Unity, Lakekeeper, Glue's Iceberg
//! endpoint, S3 Tables, lakana…), speaking the REST spec itself: `GET
//! /v1/config`, namespaces, table create and load, and commits as
//! `CommitTableRequest`s carrying the requirements and updates of floe's
//! commit engine. The server writes the new metadata file; floe writes the
//! manifests and manifest lists it references.
//!
//! Outcomes of a commit follow the spec: 409 (`CommitFailedException`) is a
//! [`CatalogError::Conflict`]; 5xx, a timeout or a connection lost after the
//! request left is [`CatalogError::Ambiguous`] (commit state unknown: the
//! server may have applied it, so floe keeps its files and the engine reloads
//! and checks its ledger); 404 is [`CatalogError::NoSuchTable`]; other
//! refusals, and a request that never left, are [`CatalogError::NotApplied`]
//! with the server's message. Idempotent GETs are retried on 5xx and
//! transport errors with backoff; a commit never is, so a refusal is the
//! answer to the only attempt.
//!
//! HTTP client: `reqwest` 0.12 without default features. iceberg-rust already
//! builds it (with `json`) on the hyper 1 / http 1 stack the AWS SDK uses, so
//! only its TLS glue is new; `rustls-tls` uses the rustls 0.23 the SDK already
//! links (one rustls version) with the `ring` provider, which parquet already
//! compiles. Enabling rustls's `ring` feature rebuilds rustls and the SDK
//! crates above it once per target directory; reqwest's `*-no-provider` TLS
//! features would reuse the SDK's aws-lc-rs provider instead (not tried yet).
//! SigV4 signing uses `aws-sigv4`, also already in the SDK's tree.

mod auth;
pub mod sigv4;
mod wire;

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::spec::FormatVersion;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};
use reqwest::{Method, StatusCode, Url};
use tracing::Instrument;

use self::auth::Tokens;
pub use self::auth::{DEFAULT_SCOPE, RestAuth};
pub use self::sigv4::SigV4;
use self::sigv4::Signer;
use super::{Catalog, CatalogError, Committed, LoadedTable, TableCommit};
use crate::aws::AwsClients;
use crate::error::{BoxError, Classify, ErrorKind, cause};
use crate::ident::display;
use crate::storage::s3::S3StorageFactory;

/// Catalog property naming the path prefix of every call after `/v1`.
pub const PREFIX: &str = "prefix";
/// Catalog property naming the warehouse (sent to `/v1/config`; a URI names table storage).
pub const WAREHOUSE: &str = "warehouse";
/// Catalog property overriding the base URI.
pub const URI: &str = "uri";

/// How to reach a REST catalog.
#[derive(Debug, Clone)]
pub struct RestConfig {
    /// The base URI, without `/v1` (e.g. `https://polaris.example.com/api/catalog`).
    pub uri: String,
    /// The warehouse to ask `/v1/config` about, if the server serves several.
    pub warehouse: Option<String>,
    /// The path prefix when `/v1/config` names none (lakana: the environment).
    pub prefix: Option<String>,
    /// Client-side catalog properties: they win over the server's `defaults`
    /// and lose to its `overrides`.
    pub properties: HashMap<String, String>,
    /// Bearer-token authentication.
    pub auth: RestAuth,
    /// SigV4 signing, for AWS endpoints (then no bearer token is sent).
    pub sigv4: Option<SigV4>,
    /// Where table files live when the catalog does not say with a `warehouse`
    /// URI: `s3://bucket/prefix` or `file:///dir`. Picks the FileIO.
    pub storage_root: Option<String>,
    /// Per-request timeout; a commit that times out has an unknown outcome.
    pub timeout: Duration,
    /// Attempts of an idempotent GET (first included) on 5xx or transport errors.
    pub get_attempts: u32,
}

impl RestConfig {
    /// A configuration for the catalog at `uri` with defaults for the rest.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            warehouse: None,
            prefix: None,
            properties: HashMap::new(),
            auth: RestAuth::None,
            sigv4: None,
            storage_root: None,
            timeout: Duration::from_secs(60),
            get_attempts: 4,
        }
    }
}

/// Why the REST catalog could not be set up or reached.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// The configuration cannot work.
    #[error("REST catalog configuration: {0}")]
    Config(String),
    /// A configured or derived URL does not parse.
    #[error("REST catalog configuration: `{url}` is not a URL: {source}")]
    Url {
        /// The text.
        url: String,
        /// The parser's error (`url::ParseError`, which reqwest does not re-export).
        source: crate::error::BoxError,
    },
    /// The HTTP client could not be built (its TLS backend).
    #[error("REST catalog HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The OAuth2 token endpoint refused or failed.
    #[error("OAuth2 token from {url}: {context}{}", cause(.source))]
    Token {
        /// The token endpoint.
        url: String,
        /// What went wrong; for a refusal, the endpoint's answer.
        context: String,
        /// The client's error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A request could not be signed.
    #[error("SigV4 signing of {url}: {context}: {source}")]
    Sign {
        /// The request's URL.
        url: String,
        /// What was being done.
        context: &'static str,
        /// The signer's or the credential provider's error.
        source: BoxError,
    },
    /// The catalog answered with an error, or not at all.
    #[error("REST {method} {url}: {message}")]
    Http {
        /// The method.
        method: String,
        /// The URL.
        url: String,
        /// The status and the server's message, or the transport error.
        message: String,
    },
}

/// A configuration that cannot work stays so; the token endpoint, the
/// signer's credentials and the catalog may answer next time.
impl Classify for RestError {
    fn kind(&self) -> ErrorKind {
        match self {
            RestError::Config(_) | RestError::Url { .. } | RestError::Client(_) => {
                ErrorKind::Config
            }
            RestError::Token { .. } | RestError::Sign { .. } | RestError::Http { .. } => {
                ErrorKind::Service
            }
        }
    }
}

impl From<RestError> for CatalogError {
    fn from(e: RestError) -> Self {
        CatalogError::store("REST catalog", e)
    }
}

/// What came back from one call: an answer, or a transport failure.
enum Outcome {
    Answer(StatusCode, bytes::Bytes),
    /// The request never reached the server: nothing can have been applied.
    NotSent(String),
    /// The request may have reached the server (timeout, reset, cut body).
    Lost(String),
}

/// The HTTP side: one client, the token, the signer.
struct Http {
    client: reqwest::Client,
    tokens: Tokens,
    signer: Option<Signer>,
}

impl Http {
    /// Sends once, refreshing the token and trying again once on a 401.
    async fn call(
        &self,
        method: &Method,
        url: &Url,
        body: Option<&[u8]>,
    ) -> Result<Outcome, RestError> {
        let mut refreshed = false;
        loop {
            let (sent, used) = self.send(method, url, body).await?;
            match (&sent, used) {
                (Outcome::Answer(StatusCode::UNAUTHORIZED, _), Some(token))
                    if !refreshed && self.tokens.refreshable() =>
                {
                    tracing::info!(%url, "catalog refused the token; fetching a new one");
                    self.tokens.invalidate(&token).await;
                    refreshed = true;
                }
                _ => return Ok(sent),
            }
        }
    }

    async fn send(
        &self,
        method: &Method,
        url: &Url,
        body: Option<&[u8]>,
    ) -> Result<(Outcome, Option<String>), RestError> {
        let mut builder = self.client.request(method.clone(), url.clone());
        let mut used = None;
        if self.signer.is_none() {
            used = self.tokens.bearer(&self.client).await?;
            if let Some(token) = &used {
                builder = builder.bearer_auth(token);
            }
        }
        if let Some(body) = body {
            builder = builder
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_vec());
        }
        let mut request = builder.build().map_err(|e| RestError::Http {
            method: method.to_string(),
            url: url.to_string(),
            message: e.to_string(),
        })?;
        if let Some(signer) = &self.signer {
            signer.sign(&mut request, body.unwrap_or_default()).await?;
        }
        let sent = match self.client.execute(request).await {
            Ok(response) => {
                let status = response.status();
                match response.bytes().await {
                    Ok(bytes) => Outcome::Answer(status, bytes),
                    Err(e) => Outcome::Lost(format!("HTTP {status}, body cut short: {e}")),
                }
            }
            Err(e) if e.is_connect() => Outcome::NotSent(format!("{e:#}")),
            Err(e) if e.is_timeout() => Outcome::Lost(format!("timed out: {e:#}")),
            Err(e) => Outcome::Lost(format!("{e:#}")),
        };
        Ok((sent, used))
    }

    /// A GET, retried with backoff on 5xx and transport errors.
    async fn get(&self, url: &Url, attempts: u32) -> Result<Outcome, RestError> {
        let mut wait = Duration::from_millis(100);
        let mut attempt = 1;
        loop {
            let sent = self.call(&Method::GET, url, None).await?;
            let retry = match &sent {
                Outcome::Answer(status, _) => status.is_server_error(),
                Outcome::NotSent(_) | Outcome::Lost(_) => true,
            };
            if !retry || attempt >= attempts {
                return Ok(sent);
            }
            tracing::debug!(%url, attempt, "GET failed; retrying");
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
            attempt += 1;
        }
    }
}

/// A [`Catalog`] on an Iceberg REST catalog server.
pub struct RestCatalog {
    http: Http,
    /// `{uri}/v1/{prefix}/`, ready for path segments.
    base: Url,
    /// The properties in force: server defaults, then the client's, then server overrides.
    properties: HashMap<String, String>,
    storage_root: String,
    file_io: FileIO,
    get_attempts: u32,
}

impl std::fmt::Debug for RestCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestCatalog")
            .field("base", &self.base.as_str())
            .field("storage_root", &self.storage_root)
            .finish_non_exhaustive()
    }
}

/// The FileIO for table files under `root`, by its scheme: S3 through floe's own
/// storage (which needs `aws`), `file://` or a bare path on the local disk.
pub fn file_io_for(root: &str, aws: Option<&AwsClients>) -> Result<FileIO, RestError> {
    match root.split_once("://").map(|(scheme, _)| scheme) {
        Some("s3" | "s3a") => aws.map(S3StorageFactory::file_io).ok_or_else(|| {
            RestError::Config(format!(
                "table storage {root} is on S3: pass the AWS clients to reach it"
            ))
        }),
        Some("file") | None => Ok(FileIO::new_with_fs()),
        Some(other) => Err(RestError::Config(format!(
            "table storage {root}: scheme `{other}` is not supported (s3 or file)"
        ))),
    }
}

fn http_err(method: &Method, url: &Url, message: String) -> RestError {
    RestError::Http {
        method: method.to_string(),
        url: url.to_string(),
        message,
    }
}

impl RestCatalog {
    /// Connects: authenticates, reads `/v1/config`, and picks the FileIO for
    /// table storage. `aws` signs requests (with [`RestConfig::sigv4`]) and
    /// reaches S3 table storage.
    pub async fn connect(config: RestConfig, aws: Option<&AwsClients>) -> Result<Self, RestError> {
        let uri = config.uri.trim_end_matches('/');
        let uri = uri.strip_suffix("/v1").unwrap_or(uri).to_string();
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(RestError::Client)?;
        let signer = signer(&config, aws).await?;
        let http = Http {
            client,
            tokens: Tokens::new(config.auth.clone(), &uri),
            signer,
        };

        let server = server_config(&http, &uri, &config).await?;
        let mut properties = server.defaults;
        properties.extend(config.properties.clone());
        if let Some(w) = &config.warehouse {
            properties
                .entry(WAREHOUSE.to_string())
                .or_insert_with(|| w.clone());
        }
        properties.extend(server.overrides);

        let uri = properties
            .get(URI)
            .map(|u| u.trim_end_matches('/').to_string())
            .unwrap_or(uri);
        let prefix = properties.get(PREFIX).cloned().or(config.prefix.clone());
        let base = base_url(&uri, prefix.as_deref())?;
        // A warehouse that is a location names the storage; lakana's and
        // Polaris's warehouses are names, so the configuration must say.
        let storage_root = properties
            .get(WAREHOUSE)
            .filter(|w| w.contains("://"))
            .cloned()
            .or(config.storage_root.clone())
            .ok_or_else(|| {
                RestError::Config(format!(
                    "the catalog at {uri} names no warehouse location; set storage_root"
                ))
            })?
            .trim_end_matches('/')
            .to_string();
        let file_io = file_io_for(&storage_root, aws)?;
        tracing::info!(base = %base, storage = %storage_root, "connected to the REST catalog");
        Ok(Self {
            http,
            base,
            properties,
            storage_root,
            file_io,
            get_attempts: config.get_attempts.max(1),
        })
    }

    /// The catalog properties in force after `/v1/config`.
    pub fn properties(&self) -> &HashMap<String, String> {
        &self.properties
    }

    /// `{base}/namespaces[/{ns}[/tables[/{name}]]]`, each segment percent-encoded;
    /// namespace levels are joined with 0x1F as the spec asks.
    fn url(&self, namespace: Option<&NamespaceIdent>, table: Option<&str>) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push("namespaces");
            if let Some(ns) = namespace {
                segments.push(&ns.join("\u{1f}"));
                segments.push("tables");
                if let Some(t) = table {
                    segments.push(t);
                }
            }
        }
        url
    }

    fn table_url(&self, ident: &TableIdent) -> Url {
        self.url(Some(ident.namespace()), Some(ident.name()))
    }

    /// Every page of a list call, each decoded by `page` into its items and
    /// the next page's token.
    async fn pages<T, P: serde::de::DeserializeOwned>(
        &self,
        url: &Url,
        mut page: impl FnMut(P) -> (Vec<T>, Option<String>),
    ) -> Result<Vec<T>, CatalogError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut call = url.clone();
            if let Some(t) = &token {
                call.query_pairs_mut().append_pair("pageToken", t);
            }
            let body = match self.http.get(&call, self.get_attempts).await? {
                Outcome::Answer(status, body) if status.is_success() => body,
                Outcome::Answer(status, body) => {
                    return Err(CatalogError::refused(
                        format!("GET {call}: {status} {}", wire::server_message(&body)),
                        status.as_u16(),
                    ));
                }
                Outcome::NotSent(m) | Outcome::Lost(m) => {
                    return Err(http_err(&Method::GET, &call, m).into());
                }
            };
            let answer: P = serde_json::from_slice(&body)
                .map_err(|e| CatalogError::store(format!("unreadable answer from {call}"), e))?;
            let (items, next) = page(answer);
            out.extend(items);
            match next.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => return Ok(out),
            }
        }
    }

    async fn post(&self, url: &Url, body: &impl serde::Serialize) -> Result<Outcome, CatalogError> {
        let body = serde_json::to_vec(body)
            .map_err(|e| CatalogError::store(format!("encoding the request to {url}"), e))?;
        Ok(self.http.call(&Method::POST, url, Some(&body)).await?)
    }
}

#[async_trait]
impl Catalog for RestCatalog {
    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    /// `<storage root>/<namespace>/<table>`; only sent when a creation asks for
    /// it, since REST servers choose a new table's location themselves.
    fn default_location(&self, ident: &TableIdent) -> String {
        format!(
            "{}/{}/{}",
            self.storage_root,
            ident.namespace().join("/"),
            ident.name()
        )
    }

    async fn ensure_namespace(&self, namespace: &NamespaceIdent) -> Result<(), CatalogError> {
        let name = namespace.join(".");
        let url = self.url(None, None);
        let body = wire::CreateNamespace {
            namespace: namespace.as_ref(),
            properties: HashMap::new(),
        };
        let span = tracing::debug_span!("rest.create_namespace", namespace = %name);
        match self.post(&url, &body).instrument(span).await? {
            Outcome::Answer(status, _) if status.is_success() => Ok(()),
            Outcome::Answer(status, body) => {
                match wire::namespace_error(&name, url.as_str(), status.as_u16(), &body) {
                    None => Ok(()),
                    Some(e) => Err(e),
                }
            }
            Outcome::NotSent(m) | Outcome::Lost(m) => Err(http_err(&Method::POST, &url, m).into()),
        }
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, CatalogError> {
        let table = display(ident);
        let span = tracing::info_span!("rest.create_table", table = %table);
        async {
            self.ensure_namespace(ident.namespace()).await?;
            let mut properties = creation.properties.clone();
            if creation.format_version != FormatVersion::V2 {
                let v = match creation.format_version {
                    FormatVersion::V1 => "1",
                    FormatVersion::V2 => "2",
                    FormatVersion::V3 => "3",
                };
                properties.insert("format-version".to_string(), v.to_string());
            }
            let body = wire::CreateTable {
                name: ident.name(),
                location: creation.location.as_deref(),
                schema: &creation.schema,
                partition_spec: creation.partition_spec.as_ref(),
                write_order: creation.sort_order.as_ref(),
                stage_create: false,
                properties: &properties,
            };
            let url = self.url(Some(ident.namespace()), None);
            match self.post(&url, &body).await? {
                Outcome::Answer(status, body) if status.is_success() => {
                    wire::loaded(ident, &url, &body, "create")
                }
                Outcome::Answer(status, body) => Err(wire::create_error(
                    &table,
                    url.as_str(),
                    status.as_u16(),
                    &body,
                )),
                Outcome::NotSent(m) | Outcome::Lost(m) => {
                    Err(http_err(&Method::POST, &url, m).into())
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Top-level namespaces only: floe routes to one-level namespaces.
    async fn list_tables(&self) -> Result<Vec<TableIdent>, CatalogError> {
        let namespaces = self
            .pages(&self.url(None, None), |p: wire::ListNamespaces| {
                (p.namespaces, p.next_page_token)
            })
            .await?;
        let mut out = Vec::new();
        for levels in namespaces {
            let ns = NamespaceIdent::from_vec(levels)
                .map_err(|e| CatalogError::store("namespace", e))?;
            let ids = self
                .pages(&self.url(Some(&ns), None), |p: wire::ListTables| {
                    (p.identifiers, p.next_page_token)
                })
                .await?;
            for id in ids {
                let ns = NamespaceIdent::from_vec(id.namespace)
                    .map_err(|e| CatalogError::store("namespace", e))?;
                out.push(TableIdent::new(ns, id.name));
            }
        }
        out.sort_by_key(display);
        Ok(out)
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError> {
        let table = display(ident);
        let span = tracing::debug_span!("rest.load_table", table = %table);
        async {
            let url = self.table_url(ident);
            match self.http.get(&url, self.get_attempts).await? {
                Outcome::Answer(status, body) if status.is_success() => {
                    wire::loaded(ident, &url, &body, "load")
                }
                Outcome::Answer(status, body) => Err(wire::load_error(
                    &table,
                    url.as_str(),
                    status.as_u16(),
                    &body,
                )),
                Outcome::NotSent(m) | Outcome::Lost(m) => {
                    Err(http_err(&Method::GET, &url, m).into())
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Drops the catalog entry only (`purgeRequested=false`): floe removes
    /// the files itself when asked, as it does on every catalog.
    async fn drop_table(&self, ident: &TableIdent) -> Result<(), CatalogError> {
        let table = display(ident);
        let mut url = self.table_url(ident);
        url.query_pairs_mut().append_pair("purgeRequested", "false");
        match self.http.call(&Method::DELETE, &url, None).await? {
            Outcome::Answer(status, _) if status.is_success() => Ok(()),
            Outcome::Answer(status, body) => Err(wire::load_error(
                &table,
                url.as_str(),
                status.as_u16(),
                &body,
            )),
            Outcome::NotSent(m) | Outcome::Lost(m) => {
                Err(http_err(&Method::DELETE, &url, m).into())
            }
        }
    }

    /// The server applies a commit's updates to whatever the table holds
    /// when its requirements pass.
    fn swaps_pointer(&self) -> bool {
        false
    }

    /// An answer lost on its way back is read back: the server names the
    /// metadata file, so a snapshot the commit added is what shows it landed.
    async fn commit(&self, commit: TableCommit) -> Committed {
        let ident = commit.base.ident.clone();
        let table = display(&ident);
        let added = commit.added_snapshots();
        let span = tracing::info_span!(
            "rest.commit",
            table = %table,
            updates = commit.updates.len(),
        );
        let swap = async {
            let url = self.table_url(&ident);
            let body = wire::CommitTable {
                identifier: wire::TableName {
                    namespace: ident.namespace().as_ref(),
                    name: ident.name(),
                },
                requirements: &commit.requirements,
                updates: &commit.updates,
            };
            match self.post(&url, &body).await? {
                // Applied, but an answer floe cannot read leaves it unsure what it holds.
                Outcome::Answer(status, body) if status.is_success() => {
                    wire::loaded(&ident, &url, &body, "commit").map_err(|e| {
                        CatalogError::Ambiguous {
                            table: table.clone(),
                            reason: e.to_string(),
                        }
                    })
                }
                Outcome::Answer(status, body) => Err(wire::commit_error(
                    &table,
                    url.as_str(),
                    status.as_u16(),
                    &body,
                )),
                Outcome::NotSent(m) => Err(CatalogError::NotApplied {
                    table: table.clone(),
                    reason: http_err(&Method::POST, &url, m).to_string(),
                }),
                Outcome::Lost(reason) => Err(CatalogError::Ambiguous {
                    table: table.clone(),
                    reason: format!("POST {url}: {reason}"),
                }),
            }
        };
        Committed::of(swap.instrument(span.clone()).await)
            .settled(self, &ident, None, &added)
            .instrument(span)
            .await
    }
}

/// The SigV4 signer `config.sigv4` asks for, with the AWS clients' credentials.
async fn signer(
    config: &RestConfig,
    aws: Option<&AwsClients>,
) -> Result<Option<Signer>, RestError> {
    Ok(match &config.sigv4 {
        None => None,
        Some(sigv4) => {
            let sdk = match aws {
                Some(a) => Some(a.settings.sdk_config().await),
                None => None,
            };
            let credentials = sdk
                .and_then(|sdk| sdk.credentials_provider())
                .ok_or_else(|| {
                    RestError::Config(
                        "SigV4 signing needs AWS clients with credentials".to_string(),
                    )
                })?;
            Some(Signer::new(sigv4.clone(), credentials))
        }
    })
}

/// The catalog's configuration (`GET /v1/config`) for the configured warehouse.
async fn server_config(
    http: &Http,
    uri: &str,
    config: &RestConfig,
) -> Result<wire::ConfigResponse, RestError> {
    let mut url = parse_url(&format!("{uri}/v1/config"))?;
    if let Some(w) = &config.warehouse {
        url.query_pairs_mut().append_pair(WAREHOUSE, w);
    }
    let server: wire::ConfigResponse = match http.get(&url, config.get_attempts).await? {
        Outcome::Answer(status, body) if status.is_success() => serde_json::from_slice(&body)
            .map_err(|e| http_err(&Method::GET, &url, format!("unreadable config: {e}")))?,
        Outcome::Answer(status, body) => {
            return Err(http_err(
                &Method::GET,
                &url,
                format!("HTTP {status}: {}", wire::server_message(&body)),
            ));
        }
        Outcome::NotSent(m) | Outcome::Lost(m) => return Err(http_err(&Method::GET, &url, m)),
    };
    Ok(server)
}

/// The base of the catalog's routes: `{uri}/v1/`, then the prefix's segments.
fn base_url(uri: &str, prefix: Option<&str>) -> Result<Url, RestError> {
    let mut base = parse_url(&format!("{uri}/v1/"))?;
    if let Some(prefix) = prefix.filter(|p| !p.is_empty()) {
        base.path_segments_mut()
            .map_err(|()| RestError::Config(format!("{uri} cannot be a base URL")))?
            .pop_if_empty()
            .extend(prefix.split('/').filter(|s| !s.is_empty()))
            .push("");
    }
    Ok(base)
}

fn parse_url(s: &str) -> Result<Url, RestError> {
    Url::parse(s).map_err(|e| RestError::Url {
        url: s.to_string(),
        source: e.into(),
    })
}
