# One database in Landform's stand-in cloud, often one that exists already
# and is imported (spec.imports, see docs/handoffs.md) rather than created.

variable "name" {
  description = "Name of the database."
  type        = string
}

variable "size_gb" {
  description = "Storage in GB."
  type        = number
  default     = 10
}

resource "landform_database" "this" {
  name    = var.name
  engine  = "postgres"
  size_gb = var.size_gb
}

output "id" {
  value = landform_database.this.id
}

output "endpoint" {
  value = landform_database.this.endpoint
}
