terraform {
  # optional() object attributes with defaults need 1.3; preconditions 1.2.
  required_version = ">= 1.3"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.79 added provisioned_poller_config to aws_lambda_event_source_mapping:
      # Kafka event source mappings honour partial batch responses
      # (ReportBatchItemFailures) only in provisioned mode, and the writer
      # reports failed partitions that way.
      version = ">= 5.79"
    }
  }
}
