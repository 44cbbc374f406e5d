// Package v1alpha1 contains the infra.landform.dev/v1alpha1 API: the Terraform kind.
// +kubebuilder:object:generate=true
// +groupName=infra.landform.dev
package v1alpha1
