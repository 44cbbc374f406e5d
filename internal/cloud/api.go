// Package cloud is Landform's stand-in cloud: a small HTTP JSON API, meant
// for loopback, that keeps databases and security groups. Examples, the demo
// and the e2e suite create, read, drift and destroy real external objects
// through it offline, with the landform Terraform provider
// (providers/landform, which carries its own copy of these types because it
// is a separate module).
//
// The API, all under /v1 and all JSON (errors are {"error": "…"}):
//
//	GET    /v1/security-groups             list, sorted by name
//	POST   /v1/security-groups             create (201)
//	GET    /v1/security-groups/{id}        read
//	PUT    /v1/security-groups/{id}        replace: omitted optional fields reset
//	PATCH  /v1/security-groups/{id}        update: omitted fields unchanged
//	DELETE /v1/security-groups/{id}        delete (204); detaches it from databases
//	       /v1/databases…                  the same for databases
//	GET    /v1/databases/{id}/credentials  username and password
//	GET    /v1/databases/{id}/connect      a client of the database: HTTP
//	                                       Basic auth with the database's
//	                                       username and password, no token
//	GET    /healthz                        no token needed
//
// Unknown ids are 404, a name already taken is 409, bad input is 400, a
// missing or wrong bearer token (when the server has one) is 401, and so
// are wrong database credentials on connect.
package cloud

// Database engines.
const (
	EnginePostgres = "postgres"
	EngineMySQL    = "mysql"
)

// Ingress rule protocols.
const (
	ProtocolTCP = "tcp"
	ProtocolUDP = "udp"
)

// IngressRule lets traffic in.
type IngressRule struct {
	// Protocol is tcp or udp.
	Protocol string `json:"protocol"`
	// Port is 1–65535.
	Port int `json:"port"`
	// CIDR is the source range, in canonical form ("10.0.0.0/8", not "10.1.2.3/8").
	CIDR string `json:"cidr"`
}

// SecurityGroup is a named set of ingress rules that databases attach.
type SecurityGroup struct {
	// ID is assigned by the server: sg-<hex>.
	ID string `json:"id"`
	// Name is unique among security groups.
	Name        string        `json:"name"`
	Description string        `json:"description"`
	Ingress     []IngressRule `json:"ingress"`
}

// Database is a (pretend) managed database.
type Database struct {
	// ID is assigned by the server: db-<hex>.
	ID string `json:"id"`
	// Name is unique among databases; it is also the database's name in its DSN.
	Name string `json:"name"`
	// Engine is postgres or mysql; it cannot change.
	Engine           string   `json:"engine"`
	SizeGB           int      `json:"size_gb"`
	SecurityGroupIDs []string `json:"security_group_ids"`

	// Computed by the server.
	Endpoint string `json:"endpoint"`
	Port     int    `json:"port"`
	Username string `json:"username"`
	// Password is only in the response to create; afterwards ask for the
	// credentials explicitly.
	Password string `json:"password,omitempty"`
}

// Credentials are a database's login.
type Credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// SecurityGroupRequest is the body of create (POST), replace (PUT) and
// update (PATCH). Name is required by POST and PUT; PATCH leaves nil fields
// unchanged.
type SecurityGroupRequest struct {
	Name        *string        `json:"name,omitempty"`
	Description *string        `json:"description,omitempty"`
	Ingress     *[]IngressRule `json:"ingress,omitempty"`
}

// DatabaseRequest is the body of create (POST), replace (PUT) and update
// (PATCH). Name, Engine and SizeGB are required by POST and PUT; PATCH
// leaves nil fields unchanged.
type DatabaseRequest struct {
	Name             *string   `json:"name,omitempty"`
	Engine           *string   `json:"engine,omitempty"`
	SizeGB           *int      `json:"size_gb,omitempty"`
	SecurityGroupIDs *[]string `json:"security_group_ids,omitempty"`
}

// errorBody is every error response.
type errorBody struct {
	Error string `json:"error"`
}

// Session is what connect answers to a database's client.
type Session struct {
	// Database is the database's name.
	Database string `json:"database"`
	// Username is who connected.
	Username string `json:"username"`
}
