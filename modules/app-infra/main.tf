# An application's database in Landform's stand-in cloud, reachable on 5432
# from allowed_cidr only. The provider is configured by the environment
# (LANDFORM_CLOUD_ENDPOINT, LANDFORM_CLOUD_TOKEN), which `landform dev` sets
# for its runners.

resource "landform_security_group" "db" {
  name        = "${var.name}-db"
  description = "PostgreSQL access for ${var.name}"

  ingress {
    protocol = "tcp"
    port     = 5432
    cidr     = var.allowed_cidr
  }
}

resource "landform_database" "this" {
  name               = var.name
  engine             = "postgres"
  size_gb            = var.db_size_gb
  security_group_ids = [landform_security_group.db.id]
}
