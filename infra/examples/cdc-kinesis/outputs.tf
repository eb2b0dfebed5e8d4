output "stream_name" {
  description = "Put Debezium JSON change events here (partition key: the row's key)."
  value       = aws_kinesis_stream.cdc.name
}

output "warehouse_uri" {
  value = module.floe.warehouse_uri
}

output "function_names" {
  value = module.floe.function_names
}

output "stream_failure_queue_url" {
  description = "Batches given up after their retries (shard and sequence numbers)."
  value       = module.floe.stream_failure_queue_url
}
