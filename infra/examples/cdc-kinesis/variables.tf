variable "region" {
  description = "AWS region to deploy to."
  type        = string
  default     = "eu-west-1"
}

variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "floe-cdc"
}

variable "artifacts_dir" {
  description = "cargo-lambda's output directory (<dir>/<bin>/bootstrap.zip); relative paths are relative to this directory."
  type        = string
  default     = "../../../target/lambda"
}

variable "architecture" {
  description = "x86_64, or arm64 for zips built with `cargo lambda build --arm64`."
  type        = string
  default     = "x86_64"
}

variable "merge_strategy" {
  description = "How silver.customers applies updates and deletes: \"copy-on-write\" (data files only; Athena, pyiceberg and any engine read it) or \"merge-on-read\" (equality delete files: cheaper writes, readers must support them)."
  type        = string
  default     = "copy-on-write"

  validation {
    condition     = contains(["copy-on-write", "merge-on-read"], var.merge_strategy)
    error_message = "merge_strategy: \"copy-on-write\" or \"merge-on-read\"."
  }
}

variable "changelog" {
  description = "\"off\", or \"beside\" to also keep every change in order in silver.customers_changelog."
  type        = string
  default     = "off"

  validation {
    condition     = contains(["off", "beside"], var.changelog)
    error_message = "changelog: \"off\" or \"beside\"."
  }
}

variable "enable_maintenance" {
  description = "Deploy the scheduled maintenance function (compaction, snapshot expiry, orphan cleanup)."
  type        = bool
  default     = true
}
