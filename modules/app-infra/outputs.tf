output "security_group_id" {
  description = "Id of the security group guarding the database (sg-<hex>)."
  value       = landform_security_group.db.id
}

output "db_endpoint" {
  description = "Host name of the database."
  value       = landform_database.this.endpoint
}

output "db_port" {
  description = "Port of the database (a number)."
  value       = landform_database.this.port
}

output "dsn" {
  description = "Connection string: postgres://user:password@endpoint:port/name."
  value       = "postgres://${landform_database.this.username}:${landform_database.this.password}@${landform_database.this.endpoint}:${landform_database.this.port}/${landform_database.this.name}"
  sensitive   = true
}

output "db_size_gb" {
  description = "Storage of the database in GB, as the cloud reports it."
  value       = landform_database.this.size_gb
}
