# Each create appends a line to var.effects and then sleeps: the number of
# lines is the number of creates that really ran.
variable "effects" {
  type = string
}

variable "seconds" {
  type    = number
  default = 3
}

resource "terraform_data" "this" {
  input = var.effects
  provisioner "local-exec" {
    command = "echo created >> ${var.effects} && sleep ${var.seconds}"
  }
}

output "effects" {
  value = terraform_data.this.output
}
