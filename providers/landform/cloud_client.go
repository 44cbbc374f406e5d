package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// A client for Landform's stand-in cloud (internal/cloud in the main module,
// served by `landform dev` and cmd/landform-cloud). This module must not
// import the main module, so the few types it needs are copied here; the
// JSON field names are the contract.

type cloudIngressRule struct {
	Protocol string `json:"protocol"`
	Port     int64  `json:"port"`
	CIDR     string `json:"cidr"`
}

type cloudSecurityGroup struct {
	ID          string             `json:"id,omitempty"`
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Ingress     []cloudIngressRule `json:"ingress"`
}

type cloudDatabase struct {
	ID               string   `json:"id,omitempty"`
	Name             string   `json:"name"`
	Engine           string   `json:"engine"`
	SizeGB           int64    `json:"size_gb"`
	SecurityGroupIDs []string `json:"security_group_ids"`
	// Computed by the server; the password only in the response to create.
	Endpoint string `json:"endpoint,omitempty"`
	Port     int64  `json:"port,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

type cloudCredentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type cloudClient struct {
	url   string // base URL, no trailing slash
	token string
	http  *http.Client
}

func newCloudClient(endpoint, token string) (*cloudClient, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q is not an http(s) URL such as http://127.0.0.1:8480", endpoint)
	}
	return &cloudClient{
		url:   strings.TrimSuffix(endpoint, "/"),
		token: token,
		http:  &http.Client{Timeout: 30 * time.Second},
	}, nil
}

// cloudError is an error response from the API.
type cloudError struct {
	status  int
	message string
}

func (e *cloudError) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.message, e.status)
}

func isNotFound(err error) bool {
	e, ok := errors.AsType[*cloudError](err)
	return ok && e.status == http.StatusNotFound
}

func securityGroupPath(id string) string { return "/v1/security-groups/" + url.PathEscape(id) }
func databasePath(id string) string      { return "/v1/databases/" + url.PathEscape(id) }

// do sends in (if not nil) as JSON and decodes a 2xx response into out (if
// not nil); other responses are a *cloudError.
func (c *cloudClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the landform cloud API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(data))
		}
		return &cloudError{status: resp.StatusCode, message: eb.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the response: %w", method, path, err)
	}
	return nil
}
