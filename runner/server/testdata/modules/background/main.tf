# Apply starts a process that outlives the engine and holds its stdout
# (reopened through /proc, as a daemon a provisioner starts may hold it):
# the run must end with the engine, not with that process. Its pid goes to
# var.pidfile, for the test to end it.
variable "pidfile" {
  type = string
}

resource "terraform_data" "daemon" {
  provisioner "local-exec" {
    command = "sleep 300 > /proc/$PPID/fd/1 2>&1 & echo $! > ${var.pidfile}"
  }
}
