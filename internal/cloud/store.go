package cloud

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Limits on what the API accepts.
const (
	maxDescription      = 255
	maxIngressRules     = 50
	maxSecurityGroups   = 10 // per database
	minSizeGB           = 1
	maxSizeGB           = 16384
	databaseUsername    = "admin"
	endpointDomain      = "db.landform.internal"
	securityGroupPrefix = "sg"
	databasePrefix      = "db"
)

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// enginePorts is the port each engine listens on.
var enginePorts = map[string]int{EnginePostgres: 5432, EngineMySQL: 3306}

// Every method below takes s.mu; responses are copies, so callers may keep
// them.

func (s *Server) listSecurityGroups() []SecurityGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedByName(s.sgs, func(sg SecurityGroup) (string, string) { return sg.Name, sg.ID })
}

func (s *Server) getSecurityGroup(id string) (SecurityGroup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, ok := s.sgs[id]
	if !ok {
		return SecurityGroup{}, notFound("security group", id)
	}
	return sg, nil
}

func (s *Server) createSecurityGroup(req SecurityGroupRequest) (SecurityGroup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, err := s.applySecurityGroup(SecurityGroup{}, req, true)
	if err != nil {
		return SecurityGroup{}, err
	}
	sg.ID = newID(securityGroupPrefix, func(id string) bool { _, ok := s.sgs[id]; return ok })
	s.sgs[sg.ID] = sg
	return sg, s.commit(func() { delete(s.sgs, sg.ID) })
}

// updateSecurityGroup replaces the group (PUT, full) or changes the fields
// the request sets (PATCH).
func (s *Server) updateSecurityGroup(id string, req SecurityGroupRequest, full bool) (SecurityGroup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.sgs[id]
	if !ok {
		return SecurityGroup{}, notFound("security group", id)
	}
	sg, err := s.applySecurityGroup(old, req, full)
	if err != nil {
		return SecurityGroup{}, err
	}
	s.sgs[id] = sg
	return sg, s.commit(func() { s.sgs[id] = old })
}

// deleteSecurityGroup deletes the group and detaches it from every database
// (unlike most clouds, which refuse): an out-of-band deletion is drift that
// Terraform must be able to see and repair.
func (s *Server) deleteSecurityGroup(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.sgs[id]
	if !ok {
		return notFound("security group", id)
	}
	delete(s.sgs, id)
	detached := map[string]Database{}
	for dbID, db := range s.dbs {
		if slices.Contains(db.SecurityGroupIDs, id) {
			detached[dbID] = db
			db.SecurityGroupIDs = slices.DeleteFunc(slices.Clone(db.SecurityGroupIDs), func(x string) bool { return x == id })
			s.dbs[dbID] = db
		}
	}
	return s.commit(func() {
		s.sgs[id] = old
		for dbID, db := range detached {
			s.dbs[dbID] = db
		}
	})
}

// applySecurityGroup returns old changed by req, validated. full (POST, PUT)
// starts from defaults instead of old and requires the name.
func (s *Server) applySecurityGroup(old SecurityGroup, req SecurityGroupRequest, full bool) (SecurityGroup, error) {
	sg := old
	if full {
		sg = SecurityGroup{ID: old.ID}
		if req.Name == nil {
			return SecurityGroup{}, errorf(http.StatusBadRequest, "name is required")
		}
	}
	if req.Name != nil {
		sg.Name = *req.Name
	}
	if req.Description != nil {
		sg.Description = *req.Description
	}
	if req.Ingress != nil {
		sg.Ingress = slices.Clone(*req.Ingress)
	}
	if sg.Ingress == nil {
		sg.Ingress = []IngressRule{}
	}
	if err := validateName(sg.Name); err != nil {
		return SecurityGroup{}, err
	}
	if len(sg.Description) > maxDescription {
		return SecurityGroup{}, errorf(http.StatusBadRequest, "description is %d bytes long: at most %d are allowed", len(sg.Description), maxDescription)
	}
	if len(sg.Ingress) > maxIngressRules {
		return SecurityGroup{}, errorf(http.StatusBadRequest, "%d ingress rules: at most %d are allowed", len(sg.Ingress), maxIngressRules)
	}
	for i, rule := range sg.Ingress {
		if err := validateRule(rule); err != nil {
			return SecurityGroup{}, errorf(http.StatusBadRequest, "ingress[%d]: %v", i, err)
		}
	}
	for _, other := range s.sgs {
		if other.Name == sg.Name && other.ID != sg.ID {
			return SecurityGroup{}, errorf(http.StatusConflict, "a security group named %q already exists: %s", sg.Name, other.ID)
		}
	}
	return sg, nil
}

func validateRule(r IngressRule) error {
	if r.Protocol != ProtocolTCP && r.Protocol != ProtocolUDP {
		return fmt.Errorf("protocol %q is not supported: use %q or %q", r.Protocol, ProtocolTCP, ProtocolUDP)
	}
	if r.Port < 1 || r.Port > 65535 {
		return fmt.Errorf("port %d is out of range 1-65535", r.Port)
	}
	return validateCIDR(r.CIDR)
}

// validateCIDR accepts canonical prefixes only, so that what is stored is
// what was sent and a plan never shows a spurious change.
func validateCIDR(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("cidr %q is not a CIDR range such as 10.0.0.0/8", cidr)
	}
	if masked := p.Masked(); masked != p {
		return fmt.Errorf("cidr %q has host bits set: use %s", cidr, masked)
	}
	return nil
}

func validateName(name string) error {
	if !namePattern.MatchString(name) {
		return errorf(http.StatusBadRequest, "name %q is invalid: use 1 to 63 lowercase letters, digits, '-' and '_', starting with a letter", name)
	}
	return nil
}

func (s *Server) listDatabases() []Database {
	s.mu.Lock()
	defer s.mu.Unlock()
	dbs := sortedByName(s.dbs, func(db Database) (string, string) { return db.Name, db.ID })
	for i := range dbs {
		dbs[i].Password = ""
	}
	return dbs
}

func (s *Server) getDatabase(id string) (Database, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	db, ok := s.dbs[id]
	if !ok {
		return Database{}, notFound("database", id)
	}
	db.Password = ""
	return db, nil
}

func (s *Server) databaseCredentials(id string) (Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	db, ok := s.dbs[id]
	if !ok {
		return Credentials{}, notFound("database", id)
	}
	return Credentials{Username: db.Username, Password: db.Password}, nil
}

// createDatabase returns the new database with its password, which no other
// response but the credentials' carries.
func (s *Server) createDatabase(req DatabaseRequest) (Database, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	db, err := s.applyDatabase(Database{}, req, true)
	if err != nil {
		return Database{}, err
	}
	db.ID = newID(databasePrefix, func(id string) bool { _, ok := s.dbs[id]; return ok })
	db.Endpoint = db.ID + "." + endpointDomain
	db.Port = enginePorts[db.Engine]
	db.Username = databaseUsername
	db.Password = rand.Text()
	s.dbs[db.ID] = db
	return db, s.commit(func() { delete(s.dbs, db.ID) })
}

func (s *Server) updateDatabase(id string, req DatabaseRequest, full bool) (Database, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.dbs[id]
	if !ok {
		return Database{}, notFound("database", id)
	}
	db, err := s.applyDatabase(old, req, full)
	if err != nil {
		return Database{}, err
	}
	s.dbs[id] = db
	if err := s.commit(func() { s.dbs[id] = old }); err != nil {
		return Database{}, err
	}
	db.Password = ""
	return db, nil
}

func (s *Server) deleteDatabase(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.dbs[id]
	if !ok {
		return notFound("database", id)
	}
	delete(s.dbs, id)
	return s.commit(func() { s.dbs[id] = old })
}

// applyDatabase returns old changed by req, validated. full (POST, PUT)
// starts from defaults instead of old's settable fields and requires name,
// engine and size_gb.
func (s *Server) applyDatabase(old Database, req DatabaseRequest, full bool) (Database, error) {
	db := old
	if full {
		db = Database{ID: old.ID, Endpoint: old.Endpoint, Port: old.Port, Username: old.Username, Password: old.Password}
		var missing []string
		for _, f := range []struct {
			name string
			set  bool
		}{{"name", req.Name != nil}, {"engine", req.Engine != nil}, {"size_gb", req.SizeGB != nil}} {
			if !f.set {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			return Database{}, errorf(http.StatusBadRequest, "required: %s", strings.Join(missing, ", "))
		}
	}
	if req.Name != nil {
		db.Name = *req.Name
	}
	if req.Engine != nil {
		db.Engine = *req.Engine
	}
	if req.SizeGB != nil {
		db.SizeGB = *req.SizeGB
	}
	if req.SecurityGroupIDs != nil {
		db.SecurityGroupIDs = slices.Clone(*req.SecurityGroupIDs)
	}
	if db.SecurityGroupIDs == nil {
		db.SecurityGroupIDs = []string{}
	}

	if err := validateName(db.Name); err != nil {
		return Database{}, err
	}
	if _, ok := enginePorts[db.Engine]; !ok {
		return Database{}, errorf(http.StatusBadRequest, "engine %q is not supported: use %q or %q", db.Engine, EnginePostgres, EngineMySQL)
	}
	if old.ID != "" && db.Engine != old.Engine {
		return Database{}, errorf(http.StatusBadRequest, "engine cannot change from %s to %s: create a new database", old.Engine, db.Engine)
	}
	if db.SizeGB < minSizeGB || db.SizeGB > maxSizeGB {
		return Database{}, errorf(http.StatusBadRequest, "size_gb %d is out of range %d-%d", db.SizeGB, minSizeGB, maxSizeGB)
	}
	if len(db.SecurityGroupIDs) > maxSecurityGroups {
		return Database{}, errorf(http.StatusBadRequest, "%d security groups: at most %d are allowed", len(db.SecurityGroupIDs), maxSecurityGroups)
	}
	for i, id := range db.SecurityGroupIDs {
		if _, ok := s.sgs[id]; !ok {
			return Database{}, errorf(http.StatusBadRequest, "security_group_ids[%d]: security group %q does not exist", i, id)
		}
		if slices.Index(db.SecurityGroupIDs, id) != i {
			return Database{}, errorf(http.StatusBadRequest, "security_group_ids[%d]: %s is listed twice", i, id)
		}
	}
	for _, other := range s.dbs {
		if other.Name == db.Name && other.ID != db.ID {
			return Database{}, errorf(http.StatusConflict, "a database named %q already exists: %s", db.Name, other.ID)
		}
	}
	return db, nil
}

func notFound(kind, id string) error {
	return errorf(http.StatusNotFound, "%s %q not found", kind, id)
}

// newID returns prefix-<10 hex digits> that taken says is free.
func newID(prefix string, taken func(string) bool) string {
	for {
		b := make([]byte, 5)
		rand.Read(b)
		id := prefix + "-" + hex.EncodeToString(b)
		if !taken(id) {
			return id
		}
	}
}

func sortedByName[T any](m map[string]T, key func(T) (name, id string)) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b T) int {
		an, ai := key(a)
		bn, bi := key(b)
		return cmp.Or(cmp.Compare(an, bn), cmp.Compare(ai, bi))
	})
	return out
}

// stateFile is the persisted cloud: every object, passwords included.
type stateFile struct {
	SecurityGroups []SecurityGroup `json:"security_groups"`
	Databases      []Database      `json:"databases"`
}

// load reads opts.StateFile, if any; a missing file is an empty cloud.
func (s *Server) load() error {
	if s.opts.StateFile == "" {
		return nil
	}
	data, err := os.ReadFile(s.opts.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading cloud state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("cloud state %s is not valid JSON (move it away to start empty): %w", s.opts.StateFile, err)
	}
	for _, sg := range st.SecurityGroups {
		if sg.Ingress == nil {
			sg.Ingress = []IngressRule{}
		}
		s.sgs[sg.ID] = sg
	}
	for _, db := range st.Databases {
		if db.SecurityGroupIDs == nil {
			db.SecurityGroupIDs = []string{}
		}
		s.dbs[db.ID] = db
	}
	return nil
}

// commit saves the state after a change. When that fails it reverts the
// change with undo, so that memory never holds what the file does not.
func (s *Server) commit(undo func()) error {
	if err := s.save(); err != nil {
		undo()
		return fmt.Errorf("saving cloud state: %w", err)
	}
	return nil
}

// save writes the state file atomically (temporary file, then rename).
func (s *Server) save() (err error) {
	if s.opts.StateFile == "" {
		return nil
	}
	st := stateFile{
		SecurityGroups: sortedByName(s.sgs, func(sg SecurityGroup) (string, string) { return sg.Name, sg.ID }),
		Databases:      sortedByName(s.dbs, func(db Database) (string, string) { return db.Name, db.ID }),
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.opts.StateFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(s.opts.StateFile)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(append(data, '\n')); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), s.opts.StateFile)
}
