variable "region" {
  description = "AWS region to deploy to."
  type        = string
  default     = "eu-west-1"
}

variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "floe-quickstart"
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

variable "enable_maintenance" {
  description = "Deploy the scheduled maintenance function (compaction, snapshot expiry, orphan cleanup)."
  type        = bool
  default     = true
}

variable "alarm_email" {
  description = "Optional e-mail address subscribed to the alarms (confirm the subscription mail)."
  type        = string
  default     = ""
}
