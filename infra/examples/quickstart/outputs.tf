output "events_queue_url" {
  description = "Send JSON records here, one record per message."
  value       = aws_sqs_queue.events.url
}

output "warehouse_uri" {
  value = module.floe.warehouse_uri
}

output "api_endpoint" {
  description = "POST $api_endpoint/v1/tables/bronze/events/records with Authorization: Bearer <token>."
  value       = module.floe.api_endpoint
}

output "function_url" {
  description = "The ingest function's IAM-authenticated URL: sign requests with SigV4 for service \"lambda\" (curl --aws-sigv4)."
  value       = module.floe.function_url
}

output "http_token_secret_arn" {
  description = "aws secretsmanager get-secret-value --secret-id <this> --query SecretString --output text"
  value       = aws_secretsmanager_secret.http_token.arn
}

output "function_names" {
  value = module.floe.function_names
}

output "commit_dlq_url" {
  value = module.floe.commit_dlq_url
}
