# Glue: the databases (Iceberg namespaces) floe writes. Tables are created by
# the writer on first write (routing.create) under <warehouse>/<db>.db/<table>,
# Java's and pyiceberg's layout, and registered with table_type=ICEBERG so
# Athena, EMR and pyiceberg read them. A REST catalog needs nothing here.

resource "aws_glue_catalog_database" "db" {
  for_each = var.catalog_type == "glue" && var.create_glue_databases ? toset(var.glue_databases) : toset([])

  name         = each.value
  catalog_id   = local.glue_catalog_id
  description  = "floe namespace ${each.value}"
  location_uri = "${local.warehouse_uri}/${each.value}.db"
  tags         = var.tags
}
