package cloud

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
)

// Client calls the stand-in cloud's API: for tests (drift made out of band)
// and for `landform dev cloud ls`.
type Client struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:8480.
	URL string
	// Token is the bearer token, if the server wants one.
	Token string
	// HTTPClient defaults to http.DefaultClient.
	HTTPClient *http.Client
}

// Error is an error response from the API.
type Error struct {
	StatusCode int
	Message    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("cloud API: %s (HTTP %d)", e.Message, e.StatusCode)
}

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.StatusCode == http.StatusNotFound
}

// ListSecurityGroups returns every security group, sorted by name.
func (c *Client) ListSecurityGroups(ctx context.Context) ([]SecurityGroup, error) {
	var out []SecurityGroup
	return out, c.do(ctx, http.MethodGet, "/v1/security-groups", nil, &out)
}

// GetSecurityGroup returns one security group.
func (c *Client) GetSecurityGroup(ctx context.Context, id string) (*SecurityGroup, error) {
	var out SecurityGroup
	return &out, c.do(ctx, http.MethodGet, "/v1/security-groups/"+url.PathEscape(id), nil, &out)
}

// CreateSecurityGroup creates a security group.
func (c *Client) CreateSecurityGroup(ctx context.Context, req SecurityGroupRequest) (*SecurityGroup, error) {
	var out SecurityGroup
	return &out, c.do(ctx, http.MethodPost, "/v1/security-groups", req, &out)
}

// UpdateSecurityGroup changes the fields req sets (PATCH).
func (c *Client) UpdateSecurityGroup(ctx context.Context, id string, req SecurityGroupRequest) (*SecurityGroup, error) {
	var out SecurityGroup
	return &out, c.do(ctx, http.MethodPatch, "/v1/security-groups/"+url.PathEscape(id), req, &out)
}

// DeleteSecurityGroup deletes a security group, detaching it from databases.
func (c *Client) DeleteSecurityGroup(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/security-groups/"+url.PathEscape(id), nil, nil)
}

// ListDatabases returns every database (without passwords), sorted by name.
func (c *Client) ListDatabases(ctx context.Context) ([]Database, error) {
	var out []Database
	return out, c.do(ctx, http.MethodGet, "/v1/databases", nil, &out)
}

// GetDatabase returns one database, without its password.
func (c *Client) GetDatabase(ctx context.Context, id string) (*Database, error) {
	var out Database
	return &out, c.do(ctx, http.MethodGet, "/v1/databases/"+url.PathEscape(id), nil, &out)
}

// CreateDatabase creates a database; the result carries its password.
func (c *Client) CreateDatabase(ctx context.Context, req DatabaseRequest) (*Database, error) {
	var out Database
	return &out, c.do(ctx, http.MethodPost, "/v1/databases", req, &out)
}

// UpdateDatabase changes the fields req sets (PATCH).
func (c *Client) UpdateDatabase(ctx context.Context, id string, req DatabaseRequest) (*Database, error) {
	var out Database
	return &out, c.do(ctx, http.MethodPatch, "/v1/databases/"+url.PathEscape(id), req, &out)
}

// DeleteDatabase deletes a database.
func (c *Client) DeleteDatabase(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/databases/"+url.PathEscape(id), nil, nil)
}

// DatabaseCredentials returns a database's username and password.
func (c *Client) DatabaseCredentials(ctx context.Context, id string) (*Credentials, error) {
	var out Credentials
	return &out, c.do(ctx, http.MethodGet, "/v1/databases/"+url.PathEscape(id)+"/credentials", nil, &out)
}

// Connect connects to database id as its client, with its username and
// password; wrong credentials are an *Error with code 401.
func (c *Client) Connect(ctx context.Context, id, username, password string) (*Session, error) {
	var out Session
	return &out, c.do(ctx, http.MethodGet, "/v1/databases/"+url.PathEscape(id)+"/connect", nil, &out, func(r *http.Request) {
		r.SetBasicAuth(username, password)
	})
}

// do sends in (if not nil) as JSON and decodes a 2xx response into out (if
// not nil). Other responses become an *Error. edit adjusts the request
// (other credentials).
func (c *Client) do(ctx context.Context, method, path string, in, out any, edit ...func(*http.Request)) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for _, e := range edit {
		e(req)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s %s: reading the response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb errorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(data))
		}
		return &Error{StatusCode: resp.StatusCode, Message: eb.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the response: %w", method, path, err)
	}
	return nil
}
