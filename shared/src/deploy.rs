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
use crate::faults::Faults;
use crate::metrics::Counters;
use crate::pipeline::{Committer, PipelineError, Writer, WriterParts};
use crate::queue::{MemoryQueue, QueueRef};
use crate::storage::{LocalWarehouse, StorageError};

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
    /// The config lacks a key this deployment needs.
    #[error("config key {key}: {message}")]
    Missing {
        /// The key.
        key: &'static str,
        /// Why it is needed.
        message: String,
    },
    /// The config cannot be loaded.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// `FLOE_FAULT` is not a fault spec.
    #[error(transparent)]
    Faults(#[from] crate::faults::FaultSpecError),
    /// The local warehouse cannot be opened.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The catalog cannot be opened.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The commit queue cannot be set up.
    #[error("config key queue.url: {0}")]
    Queue(crate::queue::QueueError),
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
    /// The SQS queue behind `queue`, when there is one (the committer function
    /// resolves claim-check bodies of the messages Lambda hands it).
    #[cfg(feature = "aws")]
    pub sqs: Option<Arc<crate::queue::SqsQueue>>,
    /// Where rejected records go.
    pub dead_letters: Arc<dyn DeadLetters>,
    /// Reaches table files, dead letters and claim-check bodies.
    pub file_io: FileIO,
    /// Fault injection (`FLOE_FAULT` in the functions; tests arm it directly).
    pub faults: Faults,
    /// This process's counters.
    pub counters: Arc<Counters>,
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

    /// The deployment a function's environment describes (`FLOE_CONFIG`,
    /// `FLOE_CONFIG_TOML`, `FLOE_<SECTION>_<KEY>`, `FLOE_FAULT`), for its init
    /// phase: a bad config fails it, naming the key, before any event is taken.
    pub async fn from_env() -> Result<Self, DeployError> {
        let config = Config::load(None)?;
        let deployment = Self::from_config(config, Faults::from_env()?).await;
        if let Err(e) = &deployment {
            tracing::error!(error = %e, "cannot start");
        }
        deployment
    }

    /// Assembles the deployment `config` describes.
    pub async fn from_config(config: Config, faults: Faults) -> Result<Self, DeployError> {
        match config.catalog.kind {
            CatalogType::Sqlite => Self::embedded(config, faults),
            CatalogType::Glue => Self::glue(config, faults).await,
            CatalogType::Rest => Self::rest(config, faults).await,
        }
    }

    fn embedded(config: Config, faults: Faults) -> Result<Self, DeployError> {
        let dir = match config.warehouse_location() {
            Location::Path(p) => p,
            Location::Uri(_) => {
                return Err(DeployError::Unsupported {
                    key: "catalog.type",
                    message: "the sqlite catalog lives in a local warehouse.path; use \"glue\" with warehouse.uri".into(),
                });
            }
        };
        if config.queue.url.is_some() {
            return Err(DeployError::Unsupported {
                key: "queue.url",
                message: "an SQS queue goes with catalog.type = \"glue\"; the sqlite catalog uses the in-process queue".into(),
            });
        }
        let warehouse = LocalWarehouse::open(&dir)?;
        let file_io = warehouse.file_io();
        let catalog = SqliteCatalog::open(
            "floe",
            &warehouse.catalog_db(),
            &warehouse.uri(),
            file_io.clone(),
            faults.clone(),
        )?;
        let dlq = match config.dead_letter_location() {
            Location::Uri(uri) => uri,
            Location::Path(p) => file_uri(p),
        };
        Ok(Self {
            dead_letters: Arc::new(StorageDeadLetters::new(file_io.clone(), dlq)),
            catalog: Arc::new(catalog),
            queue: Arc::new(MemoryQueue::new()),
            #[cfg(feature = "aws")]
            sqs: None,
            file_io,
            faults,
            counters: Arc::default(),
            config: Arc::new(config),
        })
    }

    #[cfg(not(feature = "aws"))]
    async fn glue(_config: Config, _faults: Faults) -> Result<Self, DeployError> {
        Err(DeployError::Unsupported {
            key: "catalog.type",
            message: "\"glue\" needs floe built with the `aws` feature".into(),
        })
    }

    #[cfg(feature = "aws")]
    async fn glue(config: Config, faults: Faults) -> Result<Self, DeployError> {
        use crate::catalog::GlueCatalog;
        use crate::storage::s3::S3StorageFactory;

        let warehouse = remote_warehouse(&config)?;
        let clients = aws_clients(&config).await;
        let file_io = S3StorageFactory::file_io(&clients);
        let catalog = GlueCatalog::new(
            &clients,
            config.catalog.catalog_id.clone(),
            &warehouse,
            file_io.clone(),
            faults.clone(),
        );
        Self::on_sqs(config, faults, &clients, Arc::new(catalog), file_io)
    }

    #[cfg(not(feature = "rest"))]
    async fn rest(_config: Config, _faults: Faults) -> Result<Self, DeployError> {
        Err(DeployError::Unsupported {
            key: "catalog.type",
            message: "\"rest\" needs floe built with the `rest` feature".into(),
        })
    }

    #[cfg(feature = "rest")]
    async fn rest(config: Config, faults: Faults) -> Result<Self, DeployError> {
        use crate::catalog::rest::{RestAuth, RestCatalog, RestConfig, SigV4};

        let warehouse = remote_warehouse(&config)?;
        let clients = aws_clients(&config).await;
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
        Self::on_sqs(config, faults, &clients, Arc::new(catalog), file_io)
    }

    /// The parts of a deployment whose writers and committer meet on SQS.
    #[cfg(feature = "aws")]
    fn on_sqs(
        config: Config,
        faults: Faults,
        clients: &crate::aws::AwsClients,
        catalog: CatalogRef,
        file_io: FileIO,
    ) -> Result<Self, DeployError> {
        use crate::queue::SqsQueue;

        let Some(url) = config.queue.url.clone() else {
            return Err(DeployError::Missing {
                key: "queue.url",
                message: "the SQS commit queue between writers and the committer (FLOE_QUEUE_URL)"
                    .into(),
            });
        };
        let sqs = Arc::new(
            SqsQueue::new(clients, &url, &config.claim_prefix().to_string())
                .map_err(DeployError::Queue)?,
        );
        let dlq = config.dead_letter_location().to_string();
        Ok(Self {
            dead_letters: Arc::new(StorageDeadLetters::new(file_io.clone(), dlq)),
            catalog,
            queue: sqs.clone(),
            sqs: Some(sqs),
            file_io,
            faults,
            counters: Arc::default(),
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

    /// The committer step on these parts.
    pub fn committer(&self) -> Committer {
        Committer::new(
            CommitEngine::new(self.catalog.clone(), RetryPolicy::default()),
            self.faults.clone(),
            self.counters.clone(),
        )
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

/// The AWS clients `[aws]` describes.
#[cfg(feature = "aws")]
async fn aws_clients(config: &Config) -> crate::aws::AwsClients {
    crate::aws::AwsClients::new(crate::aws::AwsSettings {
        region: config.aws.region.clone(),
        endpoint_url: config.aws.endpoint.clone(),
        // Emulators (moto, MinIO) behind a custom endpoint have no per-bucket
        // host names.
        force_path_style: config.aws.endpoint.is_some(),
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
    async fn sqlite_builds_an_embedded_deployment() {
        let dir = tempfile::tempdir().unwrap();
        let c = config(&format!(
            "[warehouse]\npath = \"{}\"\n[routing]\ntable = \"bronze.events\"\n",
            dir.path().display()
        ));
        let d = Deployment::from_config(c, Faults::none()).await.unwrap();
        assert!(d.writer().is_ok());
        assert!(dir.path().join("catalog.db").is_file());
    }
}
