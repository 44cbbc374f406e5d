resource "landform_file" "this" {
  path              = var.path
  content           = var.content
  sensitive_content = var.sensitive_content
}
