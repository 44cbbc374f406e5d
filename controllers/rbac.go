package controllers

// RBAC for runner Pods (--runner=pod): the controller creates and deletes
// one Pod per run, checks the runner ServiceAccount exists, and writes the
// runner CA Secret and the namespaces' runner certificate Secrets.

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update
