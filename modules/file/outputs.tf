output "path" {
  description = "Path of the file."
  value       = landform_file.this.id
}

output "sha256" {
  description = "Hex SHA-256 of the whole file (content followed by sensitive_content)."
  value       = landform_file.this.sha256
}

output "content_length" {
  description = "Length of content in characters (sensitive_content not counted)."
  value       = length(landform_file.this.content)
}

output "meta" {
  description = "A structured output: the path and the length of content (characters, as length() counts; bytes for ASCII)."
  value = {
    path  = landform_file.this.id
    bytes = length(landform_file.this.content)
  }
}

output "secret" {
  description = "The sensitive_content, as a sensitive output."
  value       = var.sensitive_content
  sensitive   = true
}
