# OpenTofu state encryption: the state Secret holds ciphertext, so only the
# engine can read the outputs. The test adds the outputs module's main.tf.
terraform {
  encryption {
    key_provider "pbkdf2" "key" {
      passphrase = "a-test-passphrase-of-some-length"
    }
    method "aes_gcm" "method" {
      keys = key_provider.pbkdf2.key
    }
    state {
      method = method.aes_gcm.method
    }
  }
}
