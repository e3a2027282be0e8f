package delivery

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/proto/mcpcall"
)

// The seed's install_packages validation (src/modules/self-mod/request.ts).
var (
	aptName = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*$`)
	npmName = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$`)
)

// MaxPackages is the most packages one install_packages request may name.
const MaxPackages = 20

// CheckInstallPackages validates {apt: [...], npm: [...], reason}.
func CheckInstallPackages(p *structpb.Struct) error {
	apt, err := StringList(p, "apt")
	if err != nil {
		return fmt.Errorf("install_packages failed: %w", err)
	}
	npm, err := StringList(p, "npm")
	if err != nil {
		return fmt.Errorf("install_packages failed: %w", err)
	}
	switch n := len(apt) + len(npm); {
	case n == 0:
		return errors.New("install_packages failed: at least one apt or npm package is required")
	case n > MaxPackages:
		return fmt.Errorf("install_packages failed: max %d packages per request", MaxPackages)
	}
	for _, a := range apt {
		if !aptName.MatchString(a) {
			return fmt.Errorf("install_packages failed: invalid apt package name %q", a)
		}
	}
	for _, n := range npm {
		if !npmName.MatchString(n) {
			return fmt.Errorf("install_packages failed: invalid npm package name %q", n)
		}
	}
	return nil
}

// CheckAddMCPServer validates {name, command, args?, env?, image?}.
func CheckAddMCPServer(p *structpb.Struct) error {
	if String(p, "name") == "" || String(p, "command") == "" {
		return errors.New("add_mcp_server failed: name and command are required")
	}
	if !mcpcall.ValidServer(String(p, "name")) {
		return fmt.Errorf("add_mcp_server failed: %q is not a valid MCP server name (letters, digits, . _ -)", String(p, "name"))
	}
	if _, err := StringList(p, "args"); err != nil {
		return fmt.Errorf("add_mcp_server failed: %w", err)
	}
	if v, ok := p.GetFields()["image"]; ok {
		if _, isStr := v.GetKind().(*structpb.Value_StringValue); !isStr {
			return errors.New("add_mcp_server failed: image must be a string (an image reference)")
		}
	}
	if env := p.GetFields()["env"]; env != nil {
		s := env.GetStructValue()
		if s == nil {
			return errors.New("add_mcp_server failed: env must be an object of strings")
		}
		for k, v := range s.GetFields() {
			if _, ok := v.GetKind().(*structpb.Value_StringValue); !ok {
				return fmt.Errorf("add_mcp_server failed: env %q must be a string", k)
			}
		}
	}
	return nil
}

// MaxInstructions bounds create_agent's instructions (the server refuses
// longer ones too).
const MaxInstructions = 16 << 10

// CheckCreateAgent validates {name, instructions?}.
func CheckCreateAgent(p *structpb.Struct) error {
	if strings.TrimSpace(String(p, "name")) == "" {
		return errors.New("create_agent failed: name is required")
	}
	if v, ok := p.GetFields()["instructions"]; ok {
		if _, isStr := v.GetKind().(*structpb.Value_StringValue); !isStr {
			return errors.New("create_agent failed: instructions must be a string")
		}
	}
	if len(String(p, "instructions")) > MaxInstructions {
		return fmt.Errorf("create_agent failed: instructions longer than %d bytes", MaxInstructions)
	}
	return nil
}

// MaxMessageText bounds an agent-to-agent message's text.
const MaxMessageText = 64 << 10

// CheckSendMessage validates {to, text, payload?}.
func CheckSendMessage(p *structpb.Struct) error {
	if String(p, "to") == "" {
		return errors.New("send_message failed: to (the target agent group id) is required")
	}
	text := String(p, "text")
	if text == "" && p.GetFields()["payload"] == nil {
		return errors.New("send_message failed: text or payload is required")
	}
	if len(text) > MaxMessageText {
		return fmt.Errorf("send_message failed: text longer than %d bytes", MaxMessageText)
	}
	return nil
}

// String reads a string field ("" when absent or not a string).
func String(p *structpb.Struct, key string) string {
	return p.GetFields()[key].GetStringValue()
}

// StringList reads a list of strings; absent is empty, anything else is an error.
func StringList(p *structpb.Struct, key string) ([]string, error) {
	v, ok := p.GetFields()[key]
	if !ok || v == nil {
		return nil, nil
	}
	if _, isNull := v.GetKind().(*structpb.Value_NullValue); isNull {
		return nil, nil
	}
	l := v.GetListValue()
	if l == nil {
		return nil, fmt.Errorf("%s must be a list of strings", key)
	}
	out := make([]string, 0, len(l.GetValues()))
	for _, e := range l.GetValues() {
		s, ok := e.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, fmt.Errorf("%s must be a list of strings", key)
		}
		out = append(out, s.StringValue)
	}
	return out, nil
}
