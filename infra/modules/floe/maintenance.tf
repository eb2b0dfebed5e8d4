# Scheduled maintenance: EventBridge invokes the function on
# var.maintenance_schedule (asynchronously; failures go to the maintenance DLQ).

resource "aws_cloudwatch_event_rule" "maintenance" {
  count = var.enable_maintenance ? 1 : 0

  name                = "${var.name}-maintenance"
  description         = "floe table maintenance"
  schedule_expression = var.maintenance_schedule
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "maintenance" {
  count = var.enable_maintenance ? 1 : 0

  rule = aws_cloudwatch_event_rule.maintenance[0].name
  arn  = aws_lambda_function.maintenance[0].arn

  # A missed run is made up by the next one.
  retry_policy {
    maximum_retry_attempts       = 2
    maximum_event_age_in_seconds = 900
  }
}

resource "aws_lambda_permission" "maintenance" {
  count = var.enable_maintenance ? 1 : 0

  statement_id  = "AllowSchedule"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.maintenance[0].function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.maintenance[0].arn
}
