package principal

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentbull/toolruntime/protocol"
)

// MaxFileBytes bounds a principals file.
const MaxFileBytes = 4 << 20

// Principal is one caller of the door and what its turns are.
type Principal struct {
	// Name identifies the principal in logs and sealed states.
	Name string `json:"name"`
	// TokenSHA256 are the hex SHA-256 digests of its bearer tokens (more
	// than one during a rotation).
	TokenSHA256 []string `json:"token_sha256,omitempty"`
	// JWTSubject is the `sub` of its JWT access tokens, when the door
	// checks JWTs.
	JWTSubject string `json:"jwt_sub,omitempty"`
	// AgentID is the agent of every turn it starts.
	AgentID    string            `json:"agent_id"`
	Fairness   protocol.Fairness `json:"fairness,omitzero"`
	Bindings   map[string]bool   `json:"bindings,omitempty"`
	Skills     []string          `json:"skills,omitempty"`
	MCPServers []string          `json:"mcp_servers,omitempty"`
	// Approval adds to the calls held for a person's approval.
	Approval protocol.ApprovalScope `json:"approval,omitzero"`
	// MaxInFlight bounds its requests in flight on one door replica; zero
	// is the door's default.
	MaxInFlight int `json:"max_in_flight,omitempty"`

	hashes [][sha256.Size]byte
}

// Context is the protocol context of the principal's turns.
func (p *Principal) Context() protocol.Context {
	return protocol.Context{
		Kind:       protocol.KindText,
		Bindings:   p.Bindings,
		Skills:     p.Skills,
		MCPServers: p.MCPServers,
		Approval:   p.Approval,
		Fairness:   p.Fairness,
	}
}

// Set is the principals of a door.
type Set struct {
	list []*Principal
}

type file struct {
	Principals []*Principal `json:"principals"`
}

// Load reads a principals file.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileBytes)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse reads a principals file's bytes: {"principals": [...]}, unknown
// fields refused, every entry checked.
func Parse(b []byte) (*Set, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("principals: %w", err)
	}
	if dec.More() {
		return nil, errors.New("principals: trailing data after the object")
	}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	subs := map[string]bool{}
	agents := map[string]bool{}
	for i, p := range f.Principals {
		if p == nil {
			return nil, fmt.Errorf("principals[%d]: null", i)
		}
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("principals[%d] %q: %w", i, p.Name, err)
		}
		if names[p.Name] {
			return nil, fmt.Errorf("principals[%d]: name %q used twice", i, p.Name)
		}
		names[p.Name] = true
		// Two principals on one agent would share its turns and homes.
		if agents[p.AgentID] {
			return nil, fmt.Errorf("principals[%d] %q: agent_id %q used twice", i, p.Name, p.AgentID)
		}
		agents[p.AgentID] = true
		for _, h := range p.hashes {
			if hashes[h] {
				return nil, fmt.Errorf("principals[%d] %q: a token hash another entry has", i, p.Name)
			}
			hashes[h] = true
		}
		if p.JWTSubject != "" {
			if subs[p.JWTSubject] {
				return nil, fmt.Errorf("principals[%d] %q: jwt_sub used twice", i, p.Name)
			}
			subs[p.JWTSubject] = true
		}
	}
	return &Set{list: f.Principals}, nil
}

func (p *Principal) check() error {
	if !protocol.ValidID(p.Name) {
		return errors.New("name must match [A-Za-z0-9_-]{1,64}")
	}
	if !protocol.ValidID(p.AgentID) {
		return errors.New("agent_id must match [A-Za-z0-9_-]{1,64}")
	}
	if len(p.TokenSHA256) == 0 && p.JWTSubject == "" {
		return errors.New("needs token_sha256 or jwt_sub")
	}
	for _, h := range p.TokenSHA256 {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return errors.New("token_sha256 entries are 64 hex digits (sha256sum of the token)")
		}
		p.hashes = append(p.hashes, [sha256.Size]byte(b))
	}
	if p.Fairness.Key != "" && !protocol.ValidFairKey(p.Fairness.Key) {
		return errors.New("fairness.key is not a valid key")
	}
	if p.Fairness.Weight < 0 || p.Fairness.Weight > protocol.MaxFairWeight {
		return fmt.Errorf("fairness.weight must be 0..%d", protocol.MaxFairWeight)
	}
	if p.MaxInFlight < 0 {
		return errors.New("max_in_flight must not be negative")
	}
	return nil
}

// Len is how many principals the set holds.
func (s *Set) Len() int { return len(s.list) }

// ByToken finds the principal holding a bearer token. Every entry's
// every hash is compared, in constant time, whatever matched.
func (s *Set) ByToken(token string) *Principal {
	sum := sha256.Sum256([]byte(token))
	var found *Principal
	for _, p := range s.list {
		for i := range p.hashes {
			if subtle.ConstantTimeCompare(sum[:], p.hashes[i][:]) == 1 {
				found = p
			}
		}
	}
	return found
}

// BySubject finds the principal of a JWT subject.
func (s *Set) BySubject(sub string) *Principal {
	if sub == "" {
		return nil
	}
	for _, p := range s.list {
		if p.JWTSubject == sub {
			return p
		}
	}
	return nil
}

// Dev is the principal of --dev-principal: an agent of that name, its
// own fairness key, no bindings beyond the worker's defaults.
func Dev(name string) (*Principal, error) {
	p := &Principal{Name: name, AgentID: name, JWTSubject: "dev"}
	if err := p.check(); err != nil {
		return nil, err
	}
	return p, nil
}
