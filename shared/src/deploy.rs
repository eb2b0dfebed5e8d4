//! A deployment's parts from its [`Config`]: the catalog, the commit queue, the
//! dead-letter location and the FileIO, built one way for every function (and
//! the CLI), so the writer, the committer and the HTTP function cannot disagree
//! about where tables, requests and dead letters live.

use std::path::PathBuf;
use std::sync::Arc;

use iceberg::io::FileIO;

use crate::catalog::{CatalogError, CatalogRef, SqliteCatalog};
use crate::commit::{CommitEngine, RetryPolicy};
use crate::config::{CatalogType, Config, Location};
use crate::dlq::{DeadLetters, StorageDeadLetters};
use crate::error::{Classify, ErrorKind};
use crate::faults::Faults;
use crate::metrics::Counters;
use crate::pipeline::{Committer, PipelineError, Writer, WriterParts};
use crate::queue::{MemoryQueue, QueueRef};
use crate::storage::{LocalWarehouse, StorageError};

/// Catalog name in the SQLite database (pyiceberg: `SqlCatalog("floe", …)`).
pub const CATALOG_NAME: &str = "floe";

/// Why a deployment cannot be assembled; each names the config key to fix.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The config asks for something this build does not have.
    #[error("config key {key}: {message}")]
    Unsupported {
        /// The key at fault.
        key: &'static str,
        /// What is missing and what to do.
        message: String,
    },
    /// The config asks for a part this build was compiled without.
    #[error("config key {key}: {what} needs floe built with its `{feature}` feature")]
    NotBuilt {
        /// The key at fault.
        key: &'static str,
        /// The part the key asks for.
        what: &'static str,
        /// The cargo feature of floe-core that brings it.
        feature: &'static str,
    },
    /// The config lacks a key this deployment needs.
    #[error("config key {key}: {message}")]
    Missing {
        /// The key.
        key: &'static str,
        /// Why it is needed.
        message: String,
    },
    /// The config, `FLOE_FAULT` or a secret the config names cannot be used.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The local warehouse cannot be opened.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The catalog cannot be opened.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The commit queue cannot be set up.
    #[error("config key queue.url (or queue.urls): {0}")]
    Queue(crate::queue::QueueError),
}

/// A deployment the config cannot assemble stays so; the stores it opens
/// answer for themselves.
impl Classify for DeployError {
    fn kind(&self) -> ErrorKind {
        match self {
            DeployError::Unsupported { .. }
            | DeployError::NotBuilt { .. }
            | DeployError::Missing { .. } => ErrorKind::Config,
            DeployError::Config(e) => e.kind(),
            DeployError::Storage(e) => e.kind(),
            DeployError::Catalog(e) => e.kind(),
            DeployError::Queue(e) => e.kind(),
        }
    }
}

/// Which function a deployment serves: each reads its own part of the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `floe-writer`: source events to Parquet and commit requests.
    Writer,
    /// `floe-committer`: commit requests to snapshots.
    Committer,
    /// `floe-ingest-http`: records over HTTP, like the writer.
    Ingest,
    /// `floe-maintenance`: scheduled compaction, expiry and orphan cleanup.
    Maintenance,
    /// `floe-pg-sync`: a Postgres slot into keyed tables, on a schedule.
    PgSync,
    /// The `floe` CLI: commits in-process, so a queue is optional (used by
    /// `ingest --via-queue` and `status`). Not a deployed function.
    Cli,
}

/// Keys that only make sense off AWS: a local warehouse directory, an
/// emulator's endpoint, the SQLite file of local emulation, `floe serve`'s
/// own buffer.
const LOCAL_ONLY: &[&str] = &[
    "warehouse.path",
    "aws.endpoint",
    "aws.path_style",
    "catalog.path",
    "http.buffer_window_ms",
];

impl Role {
    /// Every role, in deployment order.
    pub const ALL: [Role; 5] = [
        Role::Writer,
        Role::Committer,
        Role::Ingest,
        Role::Maintenance,
        Role::PgSync,
    ];

    /// The function's binary name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Writer => "floe-writer",
            Self::Committer => "floe-committer",
            Self::Ingest => "floe-ingest-http",
            Self::Maintenance => "floe-maintenance",
            Self::PgSync => "floe-pg-sync",
            Self::Cli => "floe",
        }
    }

    /// Maintenance, pg-sync and the CLI commit straight to the catalog
    /// (pg-sync may advance its slot only once its batch is in the tables, so
    /// it cannot hand the commit to the committer); the others meet on the
    /// queue.
    pub fn needs_queue(self) -> bool {
        !matches!(self, Self::Maintenance | Self::PgSync | Self::Cli)
    }

    /// The environment variables this function reads on AWS, which a
    /// deployment (the Terraform module) sets: `FLOE_CONFIG_TOML` for routing
    /// and tables, `RUST_LOG` for the log filter, then `FLOE_<SECTION>_<KEY>`
    /// of each section it uses.
    pub fn env_vars(self) -> Vec<String> {
        let mut sections = vec!["warehouse", "aws", "catalog", "dead_letter"];
        if self.needs_queue() {
            sections.push("queue");
        }
        match self {
            Self::Ingest => sections.push("http"),
            Self::Maintenance => sections.push("maintenance"),
            Self::PgSync => sections.push("postgres"),
            Self::Writer | Self::Committer | Self::Cli => {}
        }
        let mut vars = vec!["FLOE_CONFIG_TOML".to_string(), "RUST_LOG".to_string()];
        if self == Self::Maintenance {
            // The orphan window is checked against the commit queue's and
            // its DLQ's retention, though maintenance never reads the queue.
            vars.push("FLOE_QUEUE_RETENTION_SECONDS".to_string());
            vars.push("FLOE_QUEUE_DLQ_RETENTION_SECONDS".to_string());
        }
        if self == Self::Writer {
            // Read by the writer function itself (its Kinesis record names),
            // and the HTTP function's buffer, whose records are POSTs.
            vars.push("FLOE_KINESIS_PER_RECORD".to_string());
            vars.push("FLOE_HTTP_BUFFER_STREAM".to_string());
        }
        for section in sections {
            vars.extend(
                crate::config::env_vars(section)
                    .into_iter()
                    .filter(|(key, _)| !LOCAL_ONLY.contains(&key.as_str()))
                    .map(|(_, var)| var),
            );
        }
        vars
    }
}

/// Every shared part of a deployment.
#[derive(Debug, Clone)]
pub struct Deployment {
    /// The settings it was built from.
    pub config: Arc<Config>,
    /// The catalog.
    pub catalog: CatalogRef,
    /// The commit queue.
    pub queue: QueueRef,
    /// The SQS queue this process reads, when there is one: the commit queue,
    /// or with shards the committer's own (`queue.url`); the committer
    /// function resolves claim-check bodies of the messages Lambda hands it.
    #[cfg(feature = "aws")]
    pub sqs: Option<Arc<crate::queue::SqsQueue>>,
    /// Every shard of the SQS commit queue, in shard order (`queue.urls`, else
    /// `queue.url` alone); empty when embedded. Writers send to all of them
    /// through `queue`.
    #[cfg(feature = "aws")]
    pub shards: Vec<Arc<crate::queue::SqsQueue>>,
    /// The AWS clients the parts were built from (none when embedded).
    #[cfg(feature = "aws")]
    pub aws: Option<crate::aws::AwsClients>,
    /// Where rejected records go.
    pub dead_letters: Arc<dyn DeadLetters>,
    /// Reaches table files, dead letters and claim-check bodies.
    pub file_io: FileIO,
    /// Fault injection (`FLOE_FAULT` in the functions; tests arm it directly).
    pub faults: Faults,
    /// This process's counters.
    pub counters: Arc<Counters>,
    /// Lists table locations (orphan cleanup).
    pub lister: crate::maintain::orphans::Lister,
    /// The caches every committer of this process shares, so a looping
    /// source (`floe pg sync --follow-ms`, `floe serve`) keeps the table's
    /// keys and ledger warm between cycles; it commits to `catalog`, even
    /// one set after the parts were built.
    engine: CommitEngine,
}

impl Deployment {
    /// JSON log lines on stdout, which CloudWatch Logs indexes, with the
    /// current span (table, batch id) on each; `RUST_LOG` filters.
    #[cfg(feature = "aws")]
    pub fn init_logging() {
        tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .without_time()
            .init();
    }

    /// The URLs of the SQS commit queue's shards (one unless sharded); none
    /// when requests are committed in process.
    pub fn queue_urls(&self) -> Vec<&str> {
        #[cfg(feature = "aws")]
        return self.shards.iter().map(|q| q.url()).collect();
        #[cfg(not(feature = "aws"))]
        Vec::new()
    }

    /// The deployment a function's environment describes (`FLOE_CONFIG`,
    /// `FLOE_CONFIG_TOML`, `FLOE_<SECTION>_<KEY>`, `FLOE_FAULT`), for its init
    /// phase: a bad config fails it, naming the key, before any event is taken.
    pub async fn from_env(role: Role) -> Result<Self, DeployError> {
        let config = Config::load(None)?;
        let deployment = Self::from_config(config, Faults::from_env()?, role).await;
        if let Err(e) = &deployment {
            tracing::error!(error = %e, "cannot start");
        }
        deployment
    }

    /// Assembles the deployment `config` describes, for `role`.
    pub async fn from_config(
        config: Config,
        faults: Faults,
        role: Role,
    ) -> Result<Self, DeployError> {
        match (config.catalog.kind, config.warehouse_location()) {
            (CatalogType::Sqlite, Location::Path(dir)) => Self::embedded(config, faults, dir),
            (CatalogType::Sqlite, Location::Uri(_)) => {
                Self::sqlite_on_s3(config, faults, role).await
            }
            (CatalogType::Glue, _) => Self::glue(config, faults, role).await,
            (CatalogType::Rest, _) => Self::rest(config, faults, role).await,
        }
    }

    /// A local warehouse at `dir` with its SQLite catalog and the in-process queue.
    pub(crate) fn embedded(
        config: Config,
        faults: Faults,
        dir: PathBuf,
    ) -> Result<Self, DeployError> {
        // Embedded and `floe local`-style in-process runs have one queue in
        // this process: sharding is for deployed committers.
        let sqs_key = match (&config.queue.url, config.queue.urls.is_empty()) {
            (Some(_), _) => Some("queue.url"),
            (None, false) => Some("queue.urls"),
            (None, true) => None,
        };
        if let Some(key) = sqs_key {
            return Err(DeployError::Unsupported {
                key,
                message: "an SQS queue goes with catalog.type = \"glue\"; the sqlite catalog uses the in-process queue".into(),
            });
        }
        let warehouse = LocalWarehouse::open(&dir)?;
        let file_io = warehouse.file_io();
        let catalog = SqliteCatalog::open(
            CATALOG_NAME,
            &warehouse.catalog_db(),
            &warehouse.uri(),
            file_io.clone(),
            faults.clone(),
        )?;
        let dlq = match config.dead_letter_location() {
            Location::Uri(uri) => uri,
            Location::Path(p) => file_uri(p),
        };
        let catalog: CatalogRef = Arc::new(catalog);
        Ok(Self {
            engine: CommitEngine::new(catalog.clone(), RetryPolicy::default()),
            dead_letters: Arc::new(StorageDeadLetters::new(file_io.clone(), dlq)),
            catalog,
            queue: Arc::new(MemoryQueue::new()),
            #[cfg(feature = "aws")]
            sqs: None,
            #[cfg(feature = "aws")]
            shards: Vec::new(),
            #[cfg(feature = "aws")]
            aws: None,
            file_io,
            faults,
            counters: Arc::default(),
            lister: Default::default(),
            config: Arc::new(config),
        })
    }

    #[cfg(not(feature = "aws"))]
    async fn sqlite_on_s3(
        _config: Config,
        _faults: Faults,
        _role: Role,
    ) -> Result<Self, DeployError> {
        Err(DeployError::NotBuilt {
            key: "warehouse.uri",
            what: "an object-store warehouse",
            feature: "aws",
        })
    }

    /// Local emulation: the functions' S3 and SQS, with the catalog in one
    /// SQLite file every process on the machine shares.
    #[cfg(feature = "aws")]
    async fn sqlite_on_s3(config: Config, faults: Faults, role: Role) -> Result<Self, DeployError> {
        use crate::storage::s3::S3StorageFactory;

        let warehouse = remote_warehouse(&config)?;
        let Some(db) = config.catalog.path.as_deref().map(|p| config.resolve(p)) else {
            return Err(DeployError::Missing {
                key: "catalog.path",
                message:
                    "a sqlite catalog over warehouse.uri keeps its database in this local file"
                        .into(),
            });
        };
        let (config, clients) = aws_parts(config).await?;
        let file_io = S3StorageFactory::file_io(&clients);
        let catalog =
            SqliteCatalog::open("floe", &db, &warehouse, file_io.clone(), faults.clone())?;
        Self::on_sqs(config, faults, role, &clients, Arc::new(catalog), file_io)
    }

    #[cfg(not(feature = "aws"))]
    async fn glue(_config: Config, _faults: Faults, _role: Role) -> Result<Self, DeployError> {
        Err(DeployError::NotBuilt {
            key: "catalog.type",
            what: "the Glue catalog",
            feature: "aws",
        })
    }

    #[cfg(feature = "aws")]
    async fn glue(config: Config, faults: Faults, role: Role) -> Result<Self, DeployError> {
        use crate::catalog::GlueCatalog;
        use crate::storage::s3::S3StorageFactory;

        let warehouse = remote_warehouse(&config)?;
        let (config, clients) = aws_parts(config).await?;
        let file_io = S3StorageFactory::file_io(&clients);
        let catalog = GlueCatalog::new(
            &clients,
            config.catalog.catalog_id.clone(),
            &warehouse,
            file_io.clone(),
            faults.clone(),
        );
        Self::on_sqs(config, faults, role, &clients, Arc::new(catalog), file_io)
    }

    #[cfg(not(feature = "rest"))]
    async fn rest(_config: Config, _faults: Faults, _role: Role) -> Result<Self, DeployError> {
        Err(DeployError::NotBuilt {
            key: "catalog.type",
            what: "a REST catalog",
            feature: "rest",
        })
    }

    #[cfg(feature = "rest")]
    async fn rest(config: Config, faults: Faults, role: Role) -> Result<Self, DeployError> {
        use crate::catalog::rest::{RestAuth, RestCatalog, RestConfig, SigV4};

        let warehouse = remote_warehouse(&config)?;
        let (config, clients) = aws_parts(config).await?;
        let c = &config.catalog;
        let mut rest = RestConfig::new(c.uri.clone().unwrap_or_default());
        rest.prefix = c.prefix.clone();
        rest.storage_root = Some(warehouse);
        rest.auth = match (&c.token, &c.client_id, &c.client_secret) {
            (_, Some(id), Some(secret)) => RestAuth::OAuth2 {
                server_uri: c.oauth2_server_uri.clone(),
                client_id: id.clone(),
                client_secret: secret.expose().to_string(),
                scope: c.scope.clone(),
            },
            (Some(token), _, _) => RestAuth::Token(token.expose().to_string()),
            _ => RestAuth::None,
        };
        rest.sigv4 = c.sigv4_service.clone().map(|service| SigV4 {
            service,
            region: config
                .aws
                .region
                .clone()
                .unwrap_or_else(|| "us-east-1".into()),
        });
        let catalog = RestCatalog::connect(rest, Some(&clients))
            .await
            .map_err(|e| DeployError::Unsupported {
                key: "catalog.uri",
                message: e.to_string(),
            })?;
        let file_io = crate::catalog::Catalog::file_io(&catalog).clone();
        Self::on_sqs(config, faults, role, &clients, Arc::new(catalog), file_io)
    }

    /// The parts of a deployment whose writers and committer meet on SQS.
    #[cfg(feature = "aws")]
    fn on_sqs(
        config: Config,
        faults: Faults,
        role: Role,
        clients: &crate::aws::AwsClients,
        catalog: CatalogRef,
        file_io: FileIO,
    ) -> Result<Self, DeployError> {
        use crate::queue::{ShardedQueue, SqsQueue};

        let claims = config.claim_prefix().to_string();
        let shards = config
            .queue
            .shard_urls()
            .into_iter()
            .map(|url| SqsQueue::new(clients, url, &claims).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(DeployError::Queue)?;
        if shards.is_empty() && role.needs_queue() {
            return Err(DeployError::Missing {
                key: "queue.url",
                message: "the SQS commit queue between writers and the committer (FLOE_QUEUE_URL, or its shards in FLOE_QUEUE_URLS)".into(),
            });
        }
        // The queue this process reads: the only one, or the shard
        // `queue.url` names (the config checked it is one of `queue.urls`).
        let sqs = match (&config.queue.url, &shards[..]) {
            (Some(url), _) => shards.iter().find(|q| q.url() == url).cloned(),
            (None, [only]) => Some(only.clone()),
            (None, _) => None,
        };
        if role == Role::Committer && sqs.is_none() {
            return Err(DeployError::Missing {
                key: "queue.url",
                message: format!(
                    "a committer reads one shard of queue.urls ({} of them): set queue.url (FLOE_QUEUE_URL) to its shard's URL",
                    shards.len()
                ),
            });
        }
        let queue: QueueRef = match (role, &sqs, &shards[..]) {
            // A committer's queue is its own shard, to receive, ack and release.
            (Role::Committer, Some(own), _) => own.clone(),
            (_, _, [only]) => only.clone(),
            // Without a queue (maintenance) nothing is ever enqueued; an
            // in-process queue keeps the parts uniform.
            (_, _, []) => Arc::new(MemoryQueue::new()),
            // Senders reach every shard, each table's requests its own.
            (_, _, many) => Arc::new(
                ShardedQueue::new(many.iter().map(|q| q.clone() as QueueRef).collect())
                    .map_err(DeployError::Queue)?,
            ),
        };
        let dlq = config.dead_letter_location().to_string();
        Ok(Self {
            engine: CommitEngine::new(catalog.clone(), RetryPolicy::default()),
            dead_letters: Arc::new(StorageDeadLetters::new(file_io.clone(), dlq)),
            catalog,
            queue,
            sqs,
            shards,
            aws: Some(clients.clone()),
            file_io,
            faults,
            counters: Arc::default(),
            lister: crate::maintain::orphans::Lister::S3(clients.s3.clone()),
            config: Arc::new(config),
        })
    }

    /// The writer step on these parts.
    pub fn writer(&self) -> Result<Writer, PipelineError> {
        Writer::new(WriterParts {
            catalog: self.catalog.clone(),
            queue: self.queue.clone(),
            dead_letters: self.dead_letters.clone(),
            faults: self.faults.clone(),
            counters: self.counters.clone(),
            config: self.config.clone(),
        })
    }

    /// Where the HTTP function binds idempotency keys to bodies:
    /// `<warehouse>/_floe/http-keys`, honoured for the ledger's key window.
    pub fn http_keys(&self) -> crate::idempotency::HttpKeys {
        let root = match self.config.warehouse_location() {
            Location::Uri(uri) => uri,
            Location::Path(p) => file_uri(p),
        };
        crate::idempotency::HttpKeys::new(
            self.file_io.clone(),
            format!("{}/_floe/http-keys", root.trim_end_matches('/')),
            crate::ledger::DEFAULT_KEY_WINDOW_MS,
        )
    }

    /// A commit engine on `catalog` with the caches its committers share.
    pub fn engine(&self) -> CommitEngine {
        self.engine.with_catalog(self.catalog.clone())
    }

    /// The committer step on these parts.
    pub fn committer(&self) -> Committer {
        Committer::new(
            self.engine(),
            self.dead_letters.clone(),
            self.faults.clone(),
            self.counters.clone(),
        )
        .with_table_concurrency(self.config.queue.table_concurrency())
    }
}

fn file_uri(p: PathBuf) -> String {
    format!("file://{}", std::path::absolute(&p).unwrap_or(p).display())
}

/// `warehouse.uri`, which the remote catalogs require.
#[cfg(feature = "aws")]
fn remote_warehouse(config: &Config) -> Result<String, DeployError> {
    match config.warehouse_location() {
        Location::Uri(uri) => Ok(uri),
        Location::Path(_) => Err(DeployError::Missing {
            key: "warehouse.uri",
            message: "tables of a remote catalog live in object storage: set s3://bucket/prefix"
                .into(),
        }),
    }
}

/// The AWS clients `[aws]` describes, and the config with its secret ARNs
/// replaced by the secrets.
#[cfg(feature = "aws")]
async fn aws_parts(mut config: Config) -> Result<(Config, crate::aws::AwsClients), DeployError> {
    let clients = aws_clients(&config).await;
    crate::secrets::resolve(&mut config, &clients).await?;
    Ok((config, clients))
}

/// The AWS clients `[aws]` describes (public for floe-postgres, which reads
/// its login secret with them).
#[cfg(feature = "aws")]
pub async fn aws_clients(config: &Config) -> crate::aws::AwsClients {
    crate::aws::AwsClients::new(crate::aws::AwsSettings {
        region: config.aws.region.clone(),
        endpoint_url: config.aws.endpoint.clone(),
        // Emulators (moto, MinIO) behind a custom endpoint have no per-bucket
        // host names.
        force_path_style: config
            .aws
            .path_style
            .unwrap_or(config.aws.endpoint.is_some()),
        max_attempts: 0,
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config(text: &str) -> Config {
        Config::from_toml_str(text, Path::new(""), &|_| None).unwrap()
    }

    #[test]
    fn rest_needs_its_uri_and_its_keys_need_rest() {
        let e = Config::from_toml_str(
            "[warehouse]\nuri = \"s3://b/wh\"\n[catalog]\ntype = \"rest\"\n",
            Path::new(""),
            &|_| None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("catalog.uri"), "{e}");
        let e = Config::from_toml_str(
            "[warehouse]\nuri = \"s3://b/wh\"\n[catalog]\ntype = \"glue\"\ntoken = \"t\"\n",
            Path::new(""),
            &|_| None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("catalog.token") && e.contains("only"), "{e}");
    }

    #[tokio::test]
    async fn the_embedded_deployment_refuses_sqs_shards() {
        let dir = tempfile::tempdir().unwrap();
        let c = config(&format!(
            "[warehouse]\npath = \"{}\"\n[queue]\nurls = [\"https://sqs/1/a\", \"https://sqs/1/b\"]\n",
            dir.path().display()
        ));
        let e = Deployment::from_config(c, Faults::none(), Role::Writer)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("config key queue.urls:") && e.contains("in-process queue"),
            "{e}"
        );
    }

    /// Writers send to every shard, each committer reads the one its
    /// `queue.url` names, and a committer that names none is refused.
    #[cfg(feature = "aws")]
    #[tokio::test]
    async fn writers_reach_every_shard_and_a_committer_reads_its_own() {
        const A: &str = "https://sqs.eu-west-1.amazonaws.com/1/floe-commits-0";
        const B: &str = "https://sqs.eu-west-1.amazonaws.com/1/floe-commits-1";
        let sharded = |url: &str| {
            config(&format!(
                "[warehouse]\nuri = \"s3://b/wh\"\n[aws]\nregion = \"eu-west-1\"\n[catalog]\ntype = \"glue\"\n[queue]\nurls = [\"{A}\", \"{B}\"]\n{url}"
            ))
        };
        let writer = Deployment::from_config(sharded(""), Faults::none(), Role::Writer)
            .await
            .unwrap();
        let urls: Vec<&str> = writer.shards.iter().map(|q| q.url()).collect();
        assert_eq!(urls, [A, B]);
        assert!(writer.sqs.is_none());
        assert!(format!("{:?}", writer.queue).starts_with("ShardedQueue"));

        let committer = Deployment::from_config(
            sharded(&format!("url = \"{B}\"\n")),
            Faults::none(),
            Role::Committer,
        )
        .await
        .unwrap();
        assert_eq!(committer.sqs.as_ref().map(|q| q.url()), Some(B));
        assert!(format!("{:?}", committer.queue).contains(B));

        let e = Deployment::from_config(sharded(""), Faults::none(), Role::Committer)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("config key queue.url:")
                && e.contains("one shard of queue.urls (2 of them)"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn sqlite_builds_an_embedded_deployment() {
        let dir = tempfile::tempdir().unwrap();
        let c = config(&format!(
            "[warehouse]\npath = \"{}\"\n[routing]\ntable = \"bronze.events\"\n",
            dir.path().display()
        ));
        let d = Deployment::from_config(c, Faults::none(), Role::Writer)
            .await
            .unwrap();
        assert!(d.writer().is_ok());
        assert!(dir.path().join("catalog.db").is_file());
    }
}
