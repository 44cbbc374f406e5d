package devenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
)

// alertCRD is notification-controller's Alert CRD. Its eventSources kinds
// are an enum of Flux's own; Flux's documented way to alert on a third-party
// controller's objects is to add the kind to it.
const alertCRD = "alerts.notification.toolkit.fluxcd.io"

// allowTerraformAlerts adds Terraform to the kinds an Alert may name, as
// Flux documents for third-party controllers (docs/notifications.md shows
// the same patch for a cluster).
func (s *starter) allowTerraformAlerts() error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := s.Client.Get(s.ctx, types.NamespacedName{Name: alertCRD}, crd); err != nil {
			return fmt.Errorf("reading CRD %s: %w", alertCRD, err)
		}
		changed := false
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
			if !ok {
				continue
			}
			sources, ok := spec.Properties["eventSources"]
			if !ok || sources.Items == nil || sources.Items.Schema == nil {
				continue
			}
			kind, ok := sources.Items.Schema.Properties["kind"]
			if !ok || len(kind.Enum) == 0 {
				continue
			}
			terraform := apiextensionsv1.JSON{Raw: []byte(`"` + infrav1.TerraformKind + `"`)}
			if slices.ContainsFunc(kind.Enum, func(j apiextensionsv1.JSON) bool { return bytes.Equal(j.Raw, terraform.Raw) }) {
				continue
			}
			kind.Enum = append(kind.Enum, terraform)
			sources.Items.Schema.Properties["kind"] = kind
			spec.Properties["eventSources"] = sources
			v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
			changed = true
		}
		if !changed {
			return nil
		}
		return s.Client.Update(s.ctx, crd)
	})
}

// startNotificationController runs Flux's notification-controller; the
// Landform controller sends its events to its event endpoint (EventsURL),
// and Alerts on Terraform objects forward them to their Providers.
func (s *starter) startNotificationController() (string, error) {
	if err := s.allowTerraformAlerts(); err != nil {
		return "", err
	}
	events, err := freePort()
	if err != nil {
		return "", err
	}
	receiver, err := freePort()
	if err != nil {
		return "", err
	}
	detail, err := s.startFlux("notification-controller", []string{
		"--events-addr=" + loopback(events),
		"--receiverAddr=" + loopback(receiver),
	})
	if err != nil {
		return "", err
	}
	s.EventsURL = "http://" + loopback(events) + "/"
	return fmt.Sprintf("events at %s, %s", s.EventsURL, detail), nil
}

// startAlertReceiver serves a webhook that appends every notification it
// receives, one JSON object a line, to logs/alerts.log: the address of
// alerts.yaml's generic Provider, so that alerts can be tried locally.
func (s *starter) startAlertReceiver() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	path := s.logPath("alerts")
	f, err := openLog(path)
	if err != nil {
		return "", err
	}
	logger := log.New(f, "", log.LstdFlags)
	err = s.serve("alert receiver", port, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var compact bytes.Buffer
		if json.Compact(&compact, body) != nil {
			compact.Reset()
			compact.Write(body)
		}
		compact.WriteByte('\n')
		if _, err := f.Write(compact.Bytes()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), logger, f)
	if err != nil {
		return "", err
	}
	s.AlertReceiverURL = "http://" + loopback(port) + "/"
	return fmt.Sprintf("%s, notifications in %s", s.AlertReceiverURL, path), nil
}

// alertsYAML is alerts.yaml: a generic Provider posting to the alert
// receiver and an Alert on every Terraform object in namespace default.
func (e *Env) alertsYAML() string {
	return fmt.Sprintf(`# Flux alerts on Terraform objects for `+"`landform dev`"+`: notifications go to
# the dev alert receiver, which appends them to %s
# kubectl apply -f %s
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Provider
metadata:
  name: dev-webhook
  namespace: default
spec:
  type: generic
  address: %s
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Alert
metadata:
  name: terraform
  namespace: default
spec:
  providerRef:
    name: dev-webhook
  eventSeverity: info
  eventSources:
    - kind: Terraform
      name: "*"
`, filepath.Join(e.StateDir, "logs", "alerts.log"), e.Alerts, e.AlertReceiverURL)
}
