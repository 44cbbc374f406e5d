# A file imported by its path: any string can be a file's path, so an
# import's id can be anything the tests choose.
terraform {
  required_providers {
    landform = {
      source = "landform-dev/landform"
    }
  }
}

variable "path" {
  type = string
}

resource "landform_file" "imported" {
  path    = var.path
  content = "kept"
}
