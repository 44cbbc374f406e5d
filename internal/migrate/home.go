package migrate

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// tofuHome is the HOME of tofu-controller's runner. Templates mount
// credentials and tool configuration there (~/.aws, ~/.ssh, ...). Landform's
// engine runs with HOME in the runner's own work directory, so nothing
// under /home/runner is read by itself any more: a cloud SDK that finds no
// credentials falls back to the Pod's ambient identity (IRSA, the node's
// role), and a plan could refresh against another account and plan
// creates. Each file a tool can be pointed at through an environment
// variable gets that variable, at the path it is mounted at.
const tofuHome = "/home/runner"

// homeEnv is how a tool finds what tofu-controller's runner kept under its
// HOME, by the path under it: the variables and the file each names
// (relative to the mount; "" is the mount itself).
var homeEnv = map[string][][2]string{
	".aws":             {{"AWS_SHARED_CREDENTIALS_FILE", "credentials"}, {"AWS_CONFIG_FILE", "config"}},
	".aws/credentials": {{"AWS_SHARED_CREDENTIALS_FILE", ""}},
	".aws/config":      {{"AWS_CONFIG_FILE", ""}},
	".azure":           {{"AZURE_CONFIG_DIR", ""}},
	".config/gcloud":   {{"CLOUDSDK_CONFIG", ""}},
	".kube":            {{"KUBECONFIG", "config"}},
	".kube/config":     {{"KUBECONFIG", ""}},
	".gitconfig":       {{"GIT_CONFIG_GLOBAL", ""}},
	".ssh":             {{"GIT_SSH_COMMAND", ""}},
	".config/gcloud/application_default_credentials.json": {{"GOOGLE_APPLICATION_CREDENTIALS", ""}},
}

// homeNoEnv are what Landform's runner sets itself.
var homeNoEnv = map[string]string{
	".terraformrc": "Landform's runner writes its own CLI configuration (provider mirrors): give registry credentials as TF_TOKEN_<host> (runnerPodTemplate.spec.env from a Secret)",
	".terraform.d": "Landform's runner writes its own CLI configuration and plugin directories: give registry credentials as TF_TOKEN_<host>, and providers through the operator's mirror (--provider-mirror)",
}

// remapHome points the tools at what the template mounts under
// tofu-controller's HOME, adding the variable to env unless the template
// sets it already, and notes each mount with what was done.
func (c *converter) remapHome(field string, mounts []corev1.VolumeMount, env []corev1.EnvVar) []corev1.EnvVar {
	for _, m := range mounts {
		mp := path.Clean(m.MountPath)
		rel, under := strings.CutPrefix(mp, tofuHome+"/")
		if mp == tofuHome {
			c.note("%s: volume %s is mounted at %s, tofu-controller's HOME; Landform's engine runs with HOME in the runner's work directory and reads nothing there by itself: point each tool at its file with its variable (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, CLOUDSDK_CONFIG, KUBECONFIG, GIT_SSH_COMMAND, ...) or the cloud SDK falls back to the Pod's own identity", field, m.Name, mp)
			continue
		}
		if !under {
			continue
		}
		if reason, ok := homeNoEnv[rel]; ok {
			c.note("%s: volume %s at %s is not read by Landform: %s", field, m.Name, mp, reason)
			continue
		}
		vars, ok := homeEnv[rel]
		if !ok {
			c.note("%s: volume %s at %s is under tofu-controller's HOME, which Landform's engine does not use: nothing reads it by itself; point the tool that needs it at %s with its environment variable", field, m.Name, mp, mp)
			continue
		}
		var added, kept []string
		for _, v := range vars {
			name, value := v[0], path.Join(mp, v[1])
			if name == "GIT_SSH_COMMAND" {
				value = fmt.Sprintf("ssh -i %[1]s/id_ed25519 -i %[1]s/id_rsa -o UserKnownHostsFile=%[1]s/known_hosts", mp)
			}
			if slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == name }) {
				kept = append(kept, name)
				continue
			}
			env = append(env, corev1.EnvVar{Name: name, Value: value})
			added = append(added, name+"="+value)
		}
		switch {
		case len(added) > 0:
			c.note("%s: volume %s at %s was read through tofu-controller's HOME, which Landform's engine does not use: the runner env now points at it (%s), so the credentials are not silently unread and no SDK falls back to the Pod's own identity; check the file names", field, m.Name, mp, strings.Join(added, ", "))
		default:
			c.note("%s: volume %s at %s is under tofu-controller's HOME, which Landform's engine does not use; the template's own %s points at it", field, m.Name, mp, strings.Join(kept, ", "))
		}
	}
	for _, e := range env {
		if e.Name == "HOME" {
			c.note("%s HOME: Landform's runner sets the engine's HOME to its own work directory, whatever the template says", field)
		}
	}
	return env
}
