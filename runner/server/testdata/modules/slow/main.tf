# Apply runs a long command, to test that an interrupt stops terraform
# cleanly and releases the state lock.
variable "seconds" {
  type    = number
  default = 120
}

resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "exec sleep ${var.seconds}"
  }
}
