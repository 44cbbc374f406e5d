package devenv

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/landform-dev/landform/internal/cloud"
)

// CloudEndpointEnv is the variable the landform provider reads the stand-in
// cloud's URL from; runners get it in their environment.
const CloudEndpointEnv = "LANDFORM_CLOUD_ENDPOINT"

// startCloud serves the stand-in cloud on the recorded port, its objects in
// StateDir/cloud.json.
func (s *starter) startCloud() (string, error) {
	srv := cloud.New(cloud.Options{StateFile: filepath.Join(s.StateDir, "cloud.json")})
	url, err := srv.Start(loopback(s.ports.Cloud))
	if err != nil {
		return "", err
	}
	s.onStop("stand-in cloud", srv.Close)
	s.CloudURL = url
	return url, nil
}

// ListCloud writes what exists in the stand-in cloud at url: security
// groups, then databases.
func ListCloud(ctx context.Context, url string, w io.Writer) error {
	c := &cloud.Client{URL: url}
	sgs, err := c.ListSecurityGroups(ctx)
	if err != nil {
		return fmt.Errorf("the stand-in cloud at %s does not answer (is `landform dev` running?): %w", url, err)
	}
	dbs, err := c.ListDatabases(ctx)
	if err != nil {
		return fmt.Errorf("listing databases at %s: %w", url, err)
	}
	if len(sgs)+len(dbs) == 0 {
		_, err := fmt.Fprintln(w, "The stand-in cloud is empty.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tNAME\tDETAILS")
	for _, sg := range sgs {
		rules := make([]string, 0, len(sg.Ingress))
		for _, r := range sg.Ingress {
			rules = append(rules, fmt.Sprintf("%s/%d from %s", r.Protocol, r.Port, r.CIDR))
		}
		fmt.Fprintf(tw, "security-group\t%s\t%s\t%s\n", sg.ID, sg.Name, orNone(strings.Join(rules, ", "), "no ingress"))
	}
	for _, db := range dbs {
		fmt.Fprintf(tw, "database\t%s\t%s\t%s %dGB at %s:%d, security groups: %s\n", db.ID, db.Name, db.Engine, db.SizeGB,
			db.Endpoint, db.Port, orNone(strings.Join(db.SecurityGroupIDs, ","), "none"))
	}
	return tw.Flush()
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
