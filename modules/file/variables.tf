variable "path" {
  description = "Path of the file to manage. Relative paths are relative to the engine's working directory."
  type        = string
}

variable "content" {
  description = "Content of the file."
  type        = string
}

variable "sensitive_content" {
  description = "Sensitive text appended after content (redacted in plans and outputs)."
  type        = string
  default     = ""
  sensitive   = true
}
