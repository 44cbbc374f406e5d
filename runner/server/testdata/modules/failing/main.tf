# Apply fails with output that contains an environment value, which the
# runner must not echo in its error.
resource "terraform_data" "fails" {
  provisioner "local-exec" {
    command = "echo \"token is $LANDFORM_TEST_TOKEN\"; exit 3"
  }
}
