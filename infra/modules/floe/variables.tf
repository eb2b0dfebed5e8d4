# Inputs of the floe module. Grouped as the files that use them: naming and
# artifacts, storage, commit queue, functions, writer sources, committer,
# HTTP ingest, maintenance, catalog, table config, alarms.

# --- naming and artifacts ----------------------------------------------------

variable "name" {
  description = "Prefix of every resource name (functions, roles, queues, log groups, alarms)."
  type        = string
  default     = "floe"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,31}$", var.name))
    error_message = "name: 1-32 lower-case letters, digits and hyphens (it prefixes Lambda, SQS, IAM and S3 names)."
  }
}

variable "tags" {
  description = "Tags for every resource that takes tags."
  type        = map(string)
  default     = {}
}

variable "artifacts_dir" {
  description = <<-EOT
    Directory holding cargo-lambda's zips, one per binary: <artifacts_dir>/<bin>/bootstrap.zip
    (`cargo lambda build --profile lambda --output-format zip` writes them to
    <CARGO_TARGET_DIR or target>/lambda). The examples default it to
    "../../../target/lambda", the repository's own target directory.
  EOT
  type        = string
}

variable "architecture" {
  description = "Instruction set of the functions; must match how the zips were built (`--arm64` for arm64)."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture: \"x86_64\" or \"arm64\"."
  }
}

# --- storage -------------------------------------------------------------------

variable "create_bucket" {
  description = "Create the warehouse bucket. false: use the existing bucket `bucket_name` (its encryption, public access block, TLS policy and lifecycle rules are then yours to manage)."
  type        = bool
  default     = true
}

variable "bucket_name" {
  description = "Warehouse bucket name. Empty with create_bucket: a generated name starting with \"<name>-warehouse-\". Required when create_bucket is false."
  type        = string
  default     = ""
}

variable "warehouse_prefix" {
  description = "Key prefix of the warehouse in the bucket: tables, dead letters (_floe/dlq) and claim checks (_floe/claims) live under s3://<bucket>/<warehouse_prefix>."
  type        = string
  default     = "warehouse"

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*$", var.warehouse_prefix))
    error_message = "warehouse_prefix: a non-empty key prefix without leading or trailing slash."
  }
}

variable "kms_key_arn" {
  description = "Customer managed KMS key for the bucket (SSE-KMS with bucket keys), the SQS queues and the HTTP buffer stream. null: SSE-S3, SQS managed SSE and the AWS managed key alias/aws/kinesis. Every role gets kms:Decrypt and kms:GenerateDataKey on it; its key policy must allow that (and the SQS service for queue encryption)."
  type        = string
  default     = null
}

variable "bucket_versioning" {
  description = "Enable versioning on the created bucket. floe never overwrites an object, so versioning only keeps deleted files (expired snapshots, orphans) for noncurrent_version_expiration_days."
  type        = bool
  default     = false
}

variable "noncurrent_version_expiration_days" {
  description = "With bucket_versioning: days after which noncurrent versions are removed."
  type        = number
  default     = 7
}

variable "abort_incomplete_multipart_days" {
  description = "Lifecycle rule: abort multipart uploads left incomplete this many days (a writer that crashed mid-upload). floe aborts its own uploads on failure; this is the backstop."
  type        = number
  default     = 1
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete a non-empty created bucket (tables included). For throwaway stacks only."
  type        = bool
  default     = false
}

variable "access_log_bucket" {
  description = "Bucket receiving S3 server access logs of the warehouse bucket. Empty: no access logging."
  type        = string
  default     = ""
}

# --- commit queue ----------------------------------------------------------------

variable "commit_queue_shards" {
  description = "Commit queues, each with its own DLQ, alarms and committer (reserved concurrency 1). Writers send each table's requests to one shard, by a stable hash of its name, so a table keeps one committer. 1 (the default) is one queue and one committer; raise it when one committer's runs over all tables take longer than the freshness you need (docs/deploy.md, \"Sharding the commit queue\"). Shard 0 keeps the unsharded names."
  type        = number
  default     = 1

  validation {
    condition     = var.commit_queue_shards >= 1 && var.commit_queue_shards <= 16 && floor(var.commit_queue_shards) == var.commit_queue_shards
    error_message = "commit_queue_shards: a whole number, 1-16."
  }
}

variable "fifo_commit_queue" {
  description = "Make the commit queue FIFO (name ends .fifo; floe sets MessageGroupId = table and MessageDeduplicationId). Standard is the default: the committer coalesces and deduplicates by batch id, and a FIFO event source takes at most 10 messages per batch."
  type        = bool
  default     = false
}

variable "commit_queue_max_receive_count" {
  description = "Deliveries of a commit request before SQS moves it to the dead-letter queue. The committer retries conflicts itself (up to 10 attempts) before handing a request back."
  type        = number
  default     = 5

  validation {
    condition     = var.commit_queue_max_receive_count >= 1 && var.commit_queue_max_receive_count <= 1000
    error_message = "commit_queue_max_receive_count: 1-1000."
  }
}

variable "commit_queue_retention_seconds" {
  description = "Retention of the commit queue. Requests reference Parquet files that orphan cleanup would delete if they waited longer than orphan_window_seconds, so that must be at least this (and dlq_retention_seconds)."
  type        = number
  default     = 172800

  validation {
    condition     = var.commit_queue_retention_seconds >= 60 && var.commit_queue_retention_seconds <= 1209600
    error_message = "commit_queue_retention_seconds: 60-1209600."
  }
}

variable "dlq_retention_seconds" {
  description = "Retention of the dead-letter queues (commit requests, stream failures, failed maintenance events). A commit request redriven from its DLQ must still find its files: orphan_window_seconds must be at least this."
  type        = number
  default     = 1209600

  validation {
    condition     = var.dlq_retention_seconds >= 60 && var.dlq_retention_seconds <= 1209600
    error_message = "dlq_retention_seconds: 60-1209600."
  }
}

# --- functions -------------------------------------------------------------------

variable "log_level" {
  description = "RUST_LOG of every function (tracing EnvFilter syntax: \"info\", \"floe_core=debug,info\")."
  type        = string
  default     = "info"
}

variable "log_retention_days" {
  description = "CloudWatch Logs retention of the functions' and the HTTP API's log groups."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days: one of CloudWatch Logs' retention values (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...)."
  }
}

variable "log_kms_key_arn" {
  description = "KMS key encrypting the log groups. null: CloudWatch Logs' own encryption. Its key policy must allow the logs service principal of the region."
  type        = string
  default     = null
}

variable "tracing_mode" {
  description = "X-Ray tracing of the functions: \"PassThrough\" (default: trace only when the caller sampled) or \"Active\" (the roles then get xray:PutTraceSegments)."
  type        = string
  default     = "PassThrough"

  validation {
    condition     = contains(["PassThrough", "Active"], var.tracing_mode)
    error_message = "tracing_mode: \"PassThrough\" or \"Active\"."
  }
}

variable "vpc_subnet_ids" {
  description = "Run every function in these subnets (with vpc_security_group_ids). They need a route to S3, SQS, Glue, Secrets Manager, CloudWatch Logs and STS, and to Kinesis with the HTTP buffer stream (NAT or VPC endpoints). Empty: no VPC."
  type        = list(string)
  default     = []
}

variable "vpc_security_group_ids" {
  description = "Security groups of the functions when vpc_subnet_ids is set."
  type        = list(string)
  default     = []
}

variable "extra_policy_arns" {
  description = "Managed policies to attach to the roles, by function (writer, committer, ingest, maintenance, pg_sync): e.g. S3 Tables or Lake Formation rights for a REST catalog, or a customer key of a source."
  type = object({
    writer      = optional(list(string), [])
    committer   = optional(list(string), [])
    ingest      = optional(list(string), [])
    maintenance = optional(list(string), [])
    pg_sync     = optional(list(string), [])
  })
  default = {}
}

variable "writer_memory" {
  description = "Writer memory in MB (Lambda gives 1 vCPU per 1769 MB; Parquet encoding is CPU bound)."
  type        = number
  default     = 2048
}

variable "writer_timeout" {
  description = "Writer timeout in seconds. An SQS source queue's visibility timeout should be at least 6x this."
  type        = number
  default     = 120
}

variable "writer_reserved_concurrency" {
  description = "Reserved concurrency of the writer, bounding how many writers run at once (and so the commit request rate). -1: unreserved."
  type        = number
  default     = -1
}

variable "committer_memory" {
  description = "Committer memory in MB."
  type        = number
  default     = 1024
}

variable "committer_timeout" {
  description = "Committer timeout in seconds. The commit queue's visibility timeout is 6 x this + 30."
  type        = number
  default     = 300

  validation {
    condition     = var.committer_timeout >= 10 && var.committer_timeout <= 900
    error_message = "committer_timeout: 10-900 seconds."
  }
}

variable "committer_table_concurrency" {
  description = "FLOE_QUEUE_TABLE_CONCURRENCY: tables one committer run commits at once (each within the run's deadline; a table that cannot finish in time hands its messages back). Lower it if the catalog throttles."
  type        = number
  default     = 8

  validation {
    condition     = var.committer_table_concurrency >= 1 && var.committer_table_concurrency <= 256
    error_message = "committer_table_concurrency: 1-256."
  }
}

variable "ingest_memory" {
  description = "HTTP ingest memory in MB."
  type        = number
  default     = 1024
}

variable "ingest_timeout" {
  description = "HTTP ingest timeout in seconds; above http_wait_seconds. API Gateway gives up after 30 s whatever this says."
  type        = number
  default     = 29
}

variable "ingest_reserved_concurrency" {
  description = "Reserved concurrency of the HTTP ingest function. -1: unreserved."
  type        = number
  default     = -1
}

variable "maintenance_memory" {
  description = "Maintenance memory in MB (compaction holds one partition's rows in memory)."
  type        = number
  default     = 3008
}

variable "maintenance_timeout" {
  description = "Maintenance timeout in seconds."
  type        = number
  default     = 900
}

# --- writer sources --------------------------------------------------------------
# Maps, keyed by a name of your choice (stable keys, so ARNs unknown until apply
# work). Every mapping reports partial batch failures (ReportBatchItemFailures):
# the writer names the batches that must come again.

variable "sqs_sources" {
  description = "SQS queues the writer reads. Give each queue a visibility timeout of at least 6 x writer_timeout and its own redrive policy."
  type = map(object({
    queue_arn                          = string
    batch_size                         = optional(number, 1000)
    maximum_batching_window_in_seconds = optional(number, 10)
    maximum_concurrency                = optional(number)
    enabled                            = optional(bool, true)
  }))
  default = {}
}

variable "kinesis_sources" {
  description = "Kinesis data streams the writer reads. Failed batches past maximum_retry_attempts go (as metadata) to the stream failure queue."
  type = map(object({
    stream_arn                         = string
    starting_position                  = optional(string, "LATEST")
    batch_size                         = optional(number, 1000)
    maximum_batching_window_in_seconds = optional(number, 5)
    parallelization_factor             = optional(number, 1)
    bisect_batch_on_function_error     = optional(bool, false)
    maximum_retry_attempts             = optional(number, -1)
    maximum_record_age_in_seconds      = optional(number, -1)
    enabled                            = optional(bool, true)
  }))
  default = {}
}

variable "dynamodb_sources" {
  description = "DynamoDB streams the writer reads (records go to floe's DynamoDB change decoder on keyed tables)."
  type = map(object({
    stream_arn                         = string
    starting_position                  = optional(string, "LATEST")
    batch_size                         = optional(number, 1000)
    maximum_batching_window_in_seconds = optional(number, 5)
    parallelization_factor             = optional(number, 1)
    bisect_batch_on_function_error     = optional(bool, false)
    maximum_retry_attempts             = optional(number, -1)
    maximum_record_age_in_seconds      = optional(number, -1)
    enabled                            = optional(bool, true)
  }))
  default = {}
}

variable "msk_sources" {
  description = "Amazon MSK clusters the writer reads. IAM auth by default (the writer role gets kafka-cluster read rights on the topics and its consumer group); auth_secret_arn with SASL/SCRAM. Mappings run in provisioned mode, the only mode in which Lambda honours a Kafka partial batch response."
  type = map(object({
    cluster_arn                        = string
    topics                             = list(string)
    consumer_group_id                  = optional(string)
    starting_position                  = optional(string, "LATEST")
    batch_size                         = optional(number, 1000)
    maximum_batching_window_in_seconds = optional(number, 5)
    auth_secret_arn                    = optional(string)
    minimum_pollers                    = optional(number, 1)
    maximum_pollers                    = optional(number, 2)
    enabled                            = optional(bool, true)
  }))
  default = {}
}

variable "kafka_sources" {
  description = "Self-managed Kafka clusters the writer reads. auth_type: SASL_SCRAM_512_AUTH, SASL_SCRAM_256_AUTH or BASIC_AUTH with auth_secret_arn; subnets and security groups when the brokers are in a VPC. Provisioned mode, as for MSK."
  type = map(object({
    bootstrap_servers                  = list(string)
    topics                             = list(string)
    consumer_group_id                  = optional(string)
    starting_position                  = optional(string, "LATEST")
    batch_size                         = optional(number, 1000)
    maximum_batching_window_in_seconds = optional(number, 5)
    subnet_ids                         = optional(list(string), [])
    security_group_ids                 = optional(list(string), [])
    auth_type                          = optional(string)
    auth_secret_arn                    = optional(string)
    minimum_pollers                    = optional(number, 1)
    maximum_pollers                    = optional(number, 2)
    enabled                            = optional(bool, true)
  }))
  default = {}

  validation {
    condition = alltrue([
      for s in values(var.kafka_sources) :
      s.auth_type == null || contains(["SASL_SCRAM_512_AUTH", "SASL_SCRAM_256_AUTH", "BASIC_AUTH"], coalesce(s.auth_type, "x"))
    ])
    error_message = "kafka_sources[*].auth_type: SASL_SCRAM_512_AUTH, SASL_SCRAM_256_AUTH or BASIC_AUTH."
  }
}

variable "source_kms_key_arns" {
  description = "Customer managed KMS keys of the writer's sources (encrypted SQS queues, Kinesis streams with a CMK): the writer role gets kms:Decrypt on them."
  type        = list(string)
  default     = []
}

# --- committer -------------------------------------------------------------------

variable "committer_batch_size" {
  description = "Commit requests per committer invocation. null: 10000 on a standard queue, 10 on a FIFO queue (SQS's limits). Larger batches coalesce more requests into one snapshot."
  type        = number
  default     = null
}

variable "committer_batching_window_seconds" {
  description = "How long Lambda gathers commit requests before invoking the committer (standard queue only; a batch over 10 needs at least 1). The floor of commit latency, and the lever on snapshots per minute."
  type        = number
  default     = 5

  validation {
    condition     = var.committer_batching_window_seconds >= 0 && var.committer_batching_window_seconds <= 300
    error_message = "committer_batching_window_seconds: 0-300."
  }
}

# --- HTTP ingest -----------------------------------------------------------------

variable "enable_http_ingest" {
  description = "Deploy the HTTP ingest function with an IAM-authenticated (AWS_IAM, SigV4) function URL: any caller that AWS authenticated and that may invoke the URL (lambda:InvokeFunctionUrl) gets in; no token needed."
  type        = bool
  default     = true
}

variable "http_token_secret_arn" {
  description = <<-EOT
    Secrets Manager secret (full ARN, arn:aws:secretsmanager:...) whose value is a bearer
    token HTTP clients may send instead (`Authorization: Bearer <token>`). FLOE_HTTP_TOKEN is
    set to the ARN; the function reads the secret at start. Empty: only IAM-authenticated
    callers of the function URL get in. Required with http_api_gateway, whose requests carry
    no IAM identity.
  EOT
  type        = string
  default     = ""

  validation {
    condition     = var.http_token_secret_arn == "" || can(regex("^arn:aws[a-z-]*:secretsmanager:", var.http_token_secret_arn))
    error_message = "http_token_secret_arn: empty, or a Secrets Manager ARN of the form \"arn:<partition>:secretsmanager:...\" (floe resolves only those; any other value would be taken as the token itself)."
  }
}

variable "http_api_gateway" {
  description = "Also put an API Gateway HTTP API in front of the ingest function (routes POST /v1/tables/{namespace}/{table}/records and GET /v1/tables/{namespace}/{table}, access logs, throttling). Its requests carry no IAM identity, so the function checks the bearer token: needs http_token_secret_arn."
  type        = bool
  default     = false
}

variable "http_throttle_rate_limit" {
  description = "HTTP API: steady-state requests per second."
  type        = number
  default     = 100
}

variable "http_throttle_burst_limit" {
  description = "HTTP API: burst of requests."
  type        = number
  default     = 200
}

variable "http_max_body_bytes" {
  description = "FLOE_HTTP_MAX_BODY_BYTES: larger request bodies are refused with 413 (Lambda's own payload limit is 6 MB)."
  type        = number
  # Lambda's 6 MB payload limit counts the whole event (headers, base64), so
  # the body limit stays below it, as floe's own default does.
  default = 5242880

  validation {
    condition     = var.http_max_body_bytes >= 1 && var.http_max_body_bytes <= 6291456
    error_message = "http_max_body_bytes: 1-6291456."
  }
}

variable "http_wait_seconds" {
  description = "FLOE_HTTP_WAIT_SECONDS: how long ?wait=commit waits for the batch to be in the table before answering 202."
  type        = number
  default     = 20

  validation {
    condition     = var.http_wait_seconds >= 0 && var.http_wait_seconds <= 29
    error_message = "http_wait_seconds: 0-29 (API Gateway answers 503 after 30 s)."
  }
}

variable "http_max_record_bytes" {
  description = "FLOE_HTTP_MAX_RECORD_BYTES: a request with a larger record is refused with 413 naming it."
  type        = number
  default     = 1048576

  validation {
    condition     = var.http_max_record_bytes >= 1 && var.http_max_record_bytes <= 6291456
    error_message = "http_max_record_bytes: 1-6291456."
  }
}

variable "http_max_new_columns" {
  description = "FLOE_HTTP_MAX_NEW_COLUMNS: most columns (nested ones included) one request may add to a table; more is refused with 400."
  type        = number
  default     = 16

  validation {
    condition     = var.http_max_new_columns >= 0 && var.http_max_new_columns <= 10000
    error_message = "http_max_new_columns: 0-10000."
  }
}

variable "http_redact_values" {
  description = "FLOE_HTTP_REDACT_VALUES: 400 answers name each bad record's position and field but never its value."
  type        = bool
  default     = false
}

variable "http_create_tables" {
  description = "FLOE_HTTP_CREATE_TABLES: a POST to a missing table creates it (only names routing.allow permits; needs a non-empty allow list). Off, such a POST gets 404."
  type        = bool
  default     = false
}

variable "http_buffer" {
  description = "With enable_http_ingest: create the HTTP buffer stream, a Kinesis data stream <name>-http-buffer (FLOE_HTTP_BUFFER_STREAM on the HTTP function and the writer). The HTTP function appends each POST to it (the 200 comes after PutRecord) and the writer drains it every http_buffer_window_seconds, one Parquet file per table per window instead of one per POST; ?wait=commit requests still write their file directly. false: every POST writes its own file, and the stream's fixed cost goes away (docs/deploy.md, \"The HTTP buffer stream\")."
  type        = bool
  default     = true
}

variable "http_buffer_shards" {
  description = "Shards of the HTTP buffer stream (provisioned mode, billed per shard-hour). Each takes 1 MB/s or 1,000 POSTs/s of every table's POSTs; past that a POST is written directly."
  type        = number
  default     = 1

  validation {
    condition     = var.http_buffer_shards >= 1 && floor(var.http_buffer_shards) == var.http_buffer_shards
    error_message = "http_buffer_shards: a whole number, at least 1."
  }
}

variable "http_buffer_window_seconds" {
  description = "How long Lambda gathers the HTTP buffer stream's records before invoking the writer (or until 10,000 records or 6 MB). Buffered records reach their table about this plus the committer's window after their POST; longer windows mean fewer, larger files and commits."
  type        = number
  default     = 60

  validation {
    condition     = var.http_buffer_window_seconds >= 0 && var.http_buffer_window_seconds <= 300
    error_message = "http_buffer_window_seconds: 0-300 (Lambda's limit for a stream's batching window)."
  }
}

# --- maintenance -------------------------------------------------------------------

variable "enable_maintenance" {
  description = "Deploy the scheduled maintenance function floe-maintenance (compaction, manifest merging, snapshot expiry, orphan cleanup)."
  type        = bool
  default     = true
}

variable "maintenance_schedule" {
  description = "EventBridge schedule expression of maintenance runs."
  type        = string
  default     = "rate(1 hour)"
}

variable "orphan_window_seconds" {
  description = "FLOE_MAINTENANCE_ORPHAN_WINDOW_SECONDS: unreferenced files younger than this are not orphans yet. At least commit_queue_retention_seconds and dlq_retention_seconds (checked at plan); the default, 16 days, covers the default queue (2 days) and DLQ (14 days) one after the other."
  type        = number
  default     = 1382400

  validation {
    condition     = var.orphan_window_seconds >= 60 && var.orphan_window_seconds <= 31536000
    error_message = "orphan_window_seconds: 60-31536000 (a year)."
  }
}

variable "maintenance_tables" {
  description = "Tables maintenance runs on, \"namespace.table\" each (FLOE_MAINTENANCE_TABLES, comma-separated), whoever writes them. Empty: every table the catalog lists that floe writes (created by floe or committed to by it; Glue: in the databases the role may read, glue_databases; REST: whatever the server lists); tables other engines created are left alone."
  type        = list(string)
  default     = []
}

# --- catalog -------------------------------------------------------------------------

variable "catalog_type" {
  description = "\"glue\" (AWS Glue Data Catalog of this account) or \"rest\" (an Iceberg REST catalog)."
  type        = string
  default     = "glue"

  validation {
    condition     = contains(["glue", "rest"], var.catalog_type)
    error_message = "catalog_type: \"glue\" or \"rest\"."
  }
}

variable "glue_databases" {
  description = "Glue databases (Iceberg namespaces) floe may write. The roles' Glue and S3 rights are scoped to them (tables live at <warehouse>/<db>.db/<table>); a table routed to another database fails to create."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for d in var.glue_databases : can(regex("^[a-z0-9_-]{1,255}$", d))])
    error_message = "glue_databases: lower-case letters, digits, _ and - (floe lower-cases routed names)."
  }
}

variable "create_glue_databases" {
  description = "Create the glue_databases (false: they exist already)."
  type        = bool
  default     = true
}

variable "glue_catalog_id" {
  description = "Account id of the Glue catalog (FLOE_CATALOG_CATALOG_ID). Empty: this account."
  type        = string
  default     = ""
}

variable "rest_uri" {
  description = "REST catalog base URI, without /v1 (FLOE_CATALOG_URI)."
  type        = string
  default     = ""
}

variable "rest_prefix" {
  description = "REST catalog path prefix when the server's /v1/config names none (FLOE_CATALOG_PREFIX)."
  type        = string
  default     = ""
}

variable "rest_sigv4_service" {
  description = "Sign REST requests with SigV4 for this service instead of a token: \"glue\" or \"s3tables\"; empty: no signing. With \"glue\" the roles get the Glue rights of glue_databases; for \"s3tables\" attach S3 Tables rights with extra_policy_arns."
  type        = string
  default     = ""

  validation {
    condition     = contains(["", "glue", "s3tables"], var.rest_sigv4_service)
    error_message = "rest_sigv4_service: \"\", \"glue\" or \"s3tables\"."
  }
}

variable "rest_oauth2_server_uri" {
  description = "OAuth2 token endpoint (FLOE_CATALOG_OAUTH2_SERVER_URI). Empty: <rest_uri>/v1/oauth/tokens."
  type        = string
  default     = ""
}

variable "rest_scope" {
  description = "OAuth2 scope (FLOE_CATALOG_SCOPE). Empty: \"catalog\"."
  type        = string
  default     = ""
}

variable "rest_client_id" {
  description = "OAuth2 client id (FLOE_CATALOG_CLIENT_ID); goes with rest_credential_secret_arn."
  type        = string
  default     = ""
}

variable "rest_credential_secret_arn" {
  description = "Secrets Manager secret (full ARN, arn:aws:secretsmanager:...) holding the OAuth2 client secret; FLOE_CATALOG_CLIENT_SECRET is set to its ARN."
  type        = string
  default     = ""

  validation {
    condition     = var.rest_credential_secret_arn == "" || can(regex("^arn:aws[a-z-]*:secretsmanager:", var.rest_credential_secret_arn))
    error_message = "rest_credential_secret_arn: empty, or a Secrets Manager ARN of the form \"arn:<partition>:secretsmanager:...\" (floe resolves only those; any other value would be taken as the secret itself)."
  }
}

variable "rest_token_secret_arn" {
  description = "Secrets Manager secret (full ARN, arn:aws:secretsmanager:...) holding a fixed bearer token for the REST catalog; FLOE_CATALOG_TOKEN is set to its ARN."
  type        = string
  default     = ""

  validation {
    condition     = var.rest_token_secret_arn == "" || can(regex("^arn:aws[a-z-]*:secretsmanager:", var.rest_token_secret_arn))
    error_message = "rest_token_secret_arn: empty, or a Secrets Manager ARN of the form \"arn:<partition>:secretsmanager:...\" (floe resolves only those; any other value would be taken as the secret itself)."
  }
}

variable "secret_kms_key_arn" {
  description = "Customer managed KMS key of the Secrets Manager secrets given here (null: aws/secretsmanager, which needs no grant)."
  type        = string
  default     = null
}

# --- table config ----------------------------------------------------------------------

variable "floe_toml" {
  description = <<-EOT
    Contents of a floe.toml, passed whole as FLOE_CONFIG_TOML: [routing] (the writer
    refuses to start without routing.table or routing.template), [defaults],
    [tables."ns.table"]. Sections set through the module's FLOE_* variables
    ([warehouse], [dead_letter], [aws], [catalog], [queue], [http]) are overridden
    by them. Schema files are not shipped to Lambda: leave tables.*.schema unset
    (schemas are inferred). Lambda allows 4 KB of environment per function in all.
  EOT
  type        = string
  default     = ""
}

# --- alarms ------------------------------------------------------------------------------

variable "create_alarms" {
  description = "Create the CloudWatch alarms."
  type        = bool
  default     = true
}

variable "alarm_sns_topic_arn" {
  description = "SNS topic notified when an alarm fires and recovers. null: alarms without actions."
  type        = string
  default     = null
}

variable "commit_age_alarm_seconds" {
  description = "Alarm when the oldest pending commit request is older than this (data written but not yet in its table)."
  type        = number
  default     = 300
}

variable "commit_latency_alarm_ms" {
  description = "Alarm when one committer run takes longer than this (floe's commit_latency metric)."
  type        = number
  default     = 60000
}

variable "freshness_alarm_ms" {
  description = "Alarm when committed data is staler than this (floe's freshness metric: commit time minus the oldest record's arrival at its source, Maximum over 5 minutes, twice in a row). A backfill (a stream read from TRIM_HORIZON, a DLQ redrive) fires it too."
  type        = number
  default     = 900000

  validation {
    condition     = var.freshness_alarm_ms > 0
    error_message = "freshness_alarm_ms: a positive number of milliseconds."
  }
}

variable "iterator_age_alarm_ms" {
  description = "Alarm when the writer lags a Kinesis or DynamoDB stream, the HTTP buffer stream included, by more than this (Lambda's IteratorAge)."
  type        = number
  default     = 300000
}

variable "alarm_on_dead_letters" {
  description = "Alarm when the writer or the HTTP function dead-letters records (floe's dead_lettered_records metric)."
  type        = bool
  default     = true
}

# --- Postgres source (floe-pg-sync) -------------------------------------------------

variable "enable_pg_sync" {
  description = "Deploy floe-pg-sync: on pg_sync_schedule, one bounded run of a Postgres logical replication slot into keyed Iceberg tables (reserved concurrency 1)."
  type        = bool
  default     = false
}

variable "pg_conninfo" {
  description = "FLOE_POSTGRES_CONNINFO: libpq conninfo without a password, e.g. \"host=db.xxx.rds.amazonaws.com dbname=shop sslmode=verify-full sslrootcert=system\" (the login comes from pg_secret_arn)."
  type        = string
  default     = ""

  validation {
    condition     = !can(regex("password\\s*=", var.pg_conninfo))
    error_message = "pg_conninfo: keep the password out of it (and out of Terraform state): put the login in a Secrets Manager secret and set pg_secret_arn."
  }
}

variable "pg_secret_arn" {
  description = "FLOE_POSTGRES_SECRET: Secrets Manager ARN of the login JSON RDS (and its rotation) writes: username, password, optionally host, port, dbname. Re-read on every run."
  type        = string
  default     = ""
}

variable "pg_tables" {
  description = "FLOE_POSTGRES_TABLES: schema.table names to replicate (comma-separated in the environment)."
  type        = list(string)
  default     = []
}

variable "pg_slot" {
  description = "FLOE_POSTGRES_SLOT: the logical replication slot (pgoutput); `floe pg setup` creates it."
  type        = string
  default     = "floe"
}

variable "pg_publication" {
  description = "FLOE_POSTGRES_PUBLICATION: the publication naming pg_tables."
  type        = string
  default     = "floe"
}

variable "pg_namespace" {
  description = "FLOE_POSTGRES_NAMESPACE: namespace (Glue database) of the Iceberg tables; one of glue_databases under Glue."
  type        = string
  default     = "raw"
}

variable "pg_chunk_rows" {
  description = "FLOE_POSTGRES_CHUNK_ROWS: rows per initial-snapshot chunk."
  type        = number
  default     = 10000
}

variable "pg_max_changes" {
  description = "FLOE_POSTGRES_MAX_CHANGES: stream changes per micro-batch, about."
  type        = number
  default     = 50000
}

variable "pg_peek" {
  description = "FLOE_POSTGRES_PEEK: read each batch by peeking the slot instead of over a replication session, for a path that cannot carry one (RDS Proxy, PgBouncer in transaction mode); the peek decodes the WAL again each time, on the database's CPU."
  type        = bool
  default     = false
}

variable "pg_schedule" {
  description = "EventBridge schedule of pg-sync runs. Each run stops before its deadline; a run still going when the next is due makes that one wait (reserved concurrency 1), it never overlaps."
  type        = string
  default     = "rate(1 minute)"
}

variable "pg_timeout" {
  description = "pg-sync timeout in seconds; a run starts no batch it expects to end within 30 s of it."
  type        = number
  default     = 900

  validation {
    condition     = var.pg_timeout >= 60 && var.pg_timeout <= 900
    error_message = "pg_timeout: 60-900 seconds."
  }
}

variable "pg_memory" {
  description = "pg-sync memory in MB (one batch of max_changes changes is held at a time)."
  type        = number
  default     = 2048
}

variable "pg_subnet_ids" {
  description = "Subnets of pg-sync, to reach the database (with pg_security_group_ids); they also need a route to S3, the catalog, Secrets Manager and CloudWatch Logs. Empty: vpc_subnet_ids, else no VPC."
  type        = list(string)
  default     = []
}

variable "pg_security_group_ids" {
  description = "Security groups of pg-sync: the database's security group must admit them on its port."
  type        = list(string)
  default     = []
}

variable "pg_slot_lag_alarm_bytes" {
  description = "Alarm when the slot is behind the server's WAL by more than this (pg_slot_lag)."
  type        = number
  default     = 1073741824
}

variable "pg_wal_retained_alarm_bytes" {
  description = "Alarm when the server keeps more WAL than this for the slot (pg_wal_retained): a stalled sync fills the database's disk."
  type        = number
  default     = 10737418240
}

variable "pg_freshness_alarm_ms" {
  description = "Alarm when the oldest change not yet in Iceberg is older than this (pg_oldest_uncommitted_change_age), or when runs report nothing at all."
  type        = number
  default     = 900000
}
