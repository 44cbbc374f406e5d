package demo

import "fmt"

// Paths in the dev git server's repository.
const (
	infraPath = "demo/infra/terraform.yaml"
	appPath   = "demo/app/deployment.yaml"

	terraformName = "app-infra"
	outputsSecret = "app-infra-outputs"
	repoName      = "landform"
)

// terraformManifest is the infrastructure: modules/app-infra with manual
// approval, writing its outputs into a Secret the app uses.
func terraformManifest(dbSizeGB int, node *Node, cloudURL string) string {
	m := fmt.Sprintf(`apiVersion: infra.landform.dev/v1alpha1
kind: Terraform
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  sourceRef:
    kind: GitRepository
    name: %[3]s
  path: ./modules/app-infra
  interval: 10m
  retryInterval: 10s
  # Manual approval: plans wait for `+"`landform approve`"+`.
  approvePlan: ""
  vars:
    - name: name
      value: demo
    - name: db_size_gb
      value: %[4]d
  writeOutputsToSecret:
    name: %[5]s
    outputs: ["security_group_id", "db_endpoint", "db_port", "db_size_gb", "dsn"]
`, terraformName, Namespace, repoName, dbSizeGB, outputsSecret)
	if node != nil {
		// Runner Pods get the provider's endpoint like any setting.
		m += fmt.Sprintf(`  runnerPodTemplate:
    spec:
      env:
        - name: LANDFORM_CLOUD_ENDPOINT
          value: %q
`, cloudURL)
	}
	return m
}

// appDeployment is the app's Deployment, with podSpec (indented as the
// Pod template's spec) for its Pods: its annotations carry the security
// group id and the database size, substituted by Flux from the outputs
// Secret.
func appDeployment(podSpec string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: demo
  annotations:
    landform.dev/security-group: "${security_group_id}"
    # Flux substitutes into the rendered YAML: keep the value a string.
    landform.dev/db-size: "${db_size_gb}GB"
spec:
  replicas: 1
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
` + podSpec
}

// appManifest is the app in the dev environment: its Pod would take the
// DSN from the outputs Secret. There is no kubelet there: the Deployment
// exists as an object but runs no Pods.
var appManifest = appDeployment(`      containers:
        - name: app
          image: registry.invalid/app:1
          env:
            - name: DATABASE_DSN
              valueFrom:
                secretKeyRef: {name: app-infra-outputs, key: dsn}
`)

// nodeAppManifest is the app on a real node: its Pod mounts the outputs
// Secret (so it waits, ContainerCreating, until Landform writes it), takes
// the security group id from it, and proves the DSN works by connecting to
// the database (e2e/cluster/app).
func nodeAppManifest(image, cloudURL string) string {
	return appDeployment(fmt.Sprintf(`      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 2
      containers:
        - name: app
          image: %s
          imagePullPolicy: Never
          env:
            - name: SECURITY_GROUP_ID
              valueFrom:
                secretKeyRef: {name: app-infra-outputs, key: security_group_id}
            - name: DSN_FILE
              value: /etc/infra/dsn
            - name: CLOUD_ENDPOINT
              value: %q
          volumeMounts:
            - {name: infra, mountPath: /etc/infra, readOnly: true}
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
      volumes:
        - name: infra
          secret: {secretName: app-infra-outputs}
`, image, cloudURL))
}
