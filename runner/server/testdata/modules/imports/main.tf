# A database in the stand-in cloud (internal/cloud), through the offline
# landform provider (bin/providers): the import tests create it directly in
# the cloud and import it with spec.imports.
terraform {
  required_providers {
    landform = {
      source = "landform-dev/landform"
    }
  }
}

variable "name" {
  type = string
}

resource "landform_database" "main" {
  name    = var.name
  engine  = "postgres"
  size_gb = 10
}

output "id" {
  value = landform_database.main.id
}
