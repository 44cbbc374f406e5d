# A module that only needs builtins, so tests run offline. The marker file
# is the resource's real-world effect: created by a provisioner, removed by a
# destroy-time provisioner.

variable "name" {
  type = string
}

variable "dir" {
  type = string
}

variable "secret" {
  type      = string
  sensitive = true
  default   = "s3cr3t-value"
}

resource "terraform_data" "marker" {
  triggers_replace = [var.name]
  input = {
    path    = "${var.dir}/marker.txt"
    content = var.name
  }

  provisioner "local-exec" {
    command = "printf '%s' \"$CONTENT\" > \"$FILE\""
    environment = {
      FILE    = self.input.path
      CONTENT = self.input.content
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f \"$FILE\""
    environment = {
      FILE = self.input.path
    }
  }
}

resource "terraform_data" "static" {
  input = "static"
}

output "name" {
  value = var.name
}

output "answer" {
  value = 42
}

output "labels" {
  value = {
    app  = "landform"
    name = var.name
  }
}

output "password" {
  value     = var.secret
  sensitive = true
}

output "marker" {
  value = terraform_data.marker.output.path
}
