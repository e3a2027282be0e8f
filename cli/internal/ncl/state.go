package ncl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
)

// Config as code: the administered state as one YAML document a person
// reviews in a pull request (names, not ids; stable order; nothing the
// server generates), read from the server by `ncl export` and made true by
// `ncl apply`, one existing admin RPC per change. Each kind in the document
// (kinds.go) reads, plans, checks and sorts its own part; this file is the
// document and the loops over the kinds.

// stateVersion is the document's apiVersion.
const stateVersion = "clawguard/v1"

// state is the document: a field per kind in it, in the order YAML
// writes them.
type state struct {
	APIVersion   string            `yaml:"apiVersion"`
	Users        []userSpec        `yaml:"users,omitempty"`
	Groups       []groupSpec       `yaml:"groups,omitempty"`
	Destinations []destinationSpec `yaml:"destinations,omitempty"`
	Policies     []policySpec      `yaml:"policies,omitempty"`
	Roles        []roleSpec        `yaml:"roles,omitempty"`
	Catalog      []actionSpec      `yaml:"catalog,omitempty"`
	// Chats (messaging groups), which groups they reach, and group members.
	MessagingGroups []messagingGroupSpec `yaml:"messagingGroups,omitempty"`
	Wirings         []wiringSpec         `yaml:"wirings,omitempty"`
	Members         []memberSpec         `yaml:"members,omitempty"`
	// The model gateway's providers and prices (models.go).
	ModelProviders []modelProviderSpec `yaml:"modelProviders,omitempty"`
	ModelPrices    []modelPriceSpec    `yaml:"modelPrices,omitempty"`
}

// parseState reads a document, refusing unknown fields (a typo must not
// silently mean "unset") with the line it is on.
func parseState(r io.Reader) (*state, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var s state
	if err := dec.Decode(&s); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("the document is empty")
		}
		return nil, err
	}
	if s.APIVersion != stateVersion {
		return nil, fmt.Errorf("apiVersion %q: want %s", s.APIVersion, stateVersion)
	}
	return &s, s.check()
}

// check refuses a document that names one thing twice or misses a key:
// every kind's check, in the kinds' order; the first refusal.
func (s *state) check() error {
	seen := map[string]bool{}
	once := func(kind, key string) error {
		if strings.TrimSpace(key) == "" || strings.HasSuffix(key, "/") || strings.HasPrefix(key, "/") {
			return fmt.Errorf("%s: a required name is empty", kind)
		}
		if seen[kind+" "+key] {
			return fmt.Errorf("%s %s is listed twice", kind, key)
		}
		seen[kind+" "+key] = true
		return nil
	}
	var err error
	for _, k := range kinds() {
		if k.state != nil && k.state.check != nil {
			err = firstErr(err, k.state.check(s, once))
		}
	}
	return err
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (s *state) yaml() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// groupBook maps group ids and names both ways, and chats' ids and keys.
type groupBook struct {
	name map[string]string // id → name
	id   map[string]string // name → id
	chat map[string]string // chat key → id
	key  map[string]string // chat id → key
}

func newBook() groupBook {
	return groupBook{name: map[string]string{}, id: map[string]string{}, chat: map[string]string{}, key: map[string]string{}}
}

// chatID is a chat's id by its key, or the key as it is (the server says
// it is no messaging group).
func (b groupBook) chatID(key string) string {
	if id, ok := b.chat[key]; ok {
		return id
	}
	return key
}

func (b groupBook) chatKey(id string) string {
	if k, ok := b.key[id]; ok {
		return k
	}
	return id
}

func (b groupBook) nameOf(id string) string {
	if n, ok := b.name[id]; ok {
		return n
	}
	return id
}

// readState reads what the server holds now, as a document: each kind's
// part, in the kinds' order (groups and chats before what names them).
func readState(ctx context.Context, c *clients) (*state, groupBook, error) {
	s := &state{APIVersion: stateVersion}
	book := newBook()
	for _, k := range kinds() {
		if k.state == nil {
			continue
		}
		if err := k.state.read(ctx, c, s, book); err != nil {
			return nil, book, err
		}
	}
	s.sort()
	return s, book, nil
}

// listAll reads every page of a List RPC.
func listAll(ctx context.Context, c *clients, page func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error)) ([]proto.Message, error) {
	return pages(ctx, c, 0, page)
}

func msgs[T proto.Message](in []T) []proto.Message {
	out := make([]proto.Message, len(in))
	for i, m := range in {
		out[i] = m
	}
	return out
}

// sort puts every list in a stable order, so an export diffs cleanly.
func (s *state) sort() {
	for _, k := range kinds() {
		if k.state != nil && k.state.sort != nil {
			k.state.sort(s)
		}
	}
}
