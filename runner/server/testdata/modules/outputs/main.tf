# Outputs of each kind: a string, an object and a sensitive value.
resource "terraform_data" "this" {
  input = { name = "db", port = 5432 }
}

output "name" {
  value = terraform_data.this.output.name
}

output "settings" {
  value = terraform_data.this.output
}

output "dsn" {
  value     = "postgres://app:s3cr3t-dsn@db:5432/app"
  sensitive = true
}
