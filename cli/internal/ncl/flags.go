package ncl

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// enumFlag is a flag holding a proto enum, set by its lower-case word.
type enumFlag struct {
	ed  protoreflect.EnumDescriptor
	val protoreflect.EnumNumber
}

func (f *enumFlag) String() string {
	w, _ := enumword.WordOf(f.ed, f.val) // val came from ParseEnum: a known word or 0
	return w
}

func (f *enumFlag) Set(s string) error {
	n, err := render.ParseEnum(f.ed, s)
	if err != nil {
		return err
	}
	f.val = n
	return nil
}

func (f *enumFlag) Type() string { return "word" }

// enumVar adds an enum flag with its words in the help text and completion.
func enumVar(cmd *cobra.Command, name string, ed protoreflect.EnumDescriptor, usage string) *enumFlag {
	f := &enumFlag{ed: ed}
	words := enumword.Words(ed)
	cmd.Flags().Var(f, name, fmt.Sprintf("%s (%s)", usage, strings.Join(words, "|")))
	_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(words, cobra.ShellCompDirectiveNoFileComp))
	return f
}

// one requires exactly one positional argument, named for the error.
func one(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("%s takes exactly one argument: <%s> (got %d)", cmd.CommandPath(), name, len(args))
		}
		if strings.TrimSpace(args[0]) == "" {
			return usagef("<%s> must not be empty", name)
		}
		return nil
	}
}

func none(cmd *cobra.Command, args []string) error {
	if len(args) != 0 {
		return usagef("%s takes no arguments (got %q)", cmd.CommandPath(), args)
	}
	return nil
}

// required marks flags required (cobra reports the missing ones together).
func required(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		_ = cmd.MarkFlagRequired(n)
	}
}

// group makes a resource command whose job is to hold verbs.
func noun(use, short, example string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown verb %q for %s (verbs: %s)", args[0], cmd.CommandPath(), verbs(cmd))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("%s needs a verb: %s", cmd.CommandPath(), verbs(cmd))
		},
	}
	cmd.AddCommand(subs...)
	return cmd
}

func verbs(cmd *cobra.Command) string {
	var out []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			out = append(out, c.Name())
		}
	}
	return strings.Join(out, ", ")
}

// kvPairs parses repeated k=v flags.
func kvPairs(flag string, vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usagef("--%s %q: want key=value", flag, v)
		}
		out[k] = val
	}
	return out, nil
}

// parseMode reads an --mode flag: the enum's words, and "" or "inherit"
// (unspecified: the mode of what it inherits from, as tables print it).
func parseMode(s string) (guardv1.EnforcementMode, error) {
	if s == modeInherit {
		return guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED, nil
	}
	m, err := enumword.Parse[guardv1.EnforcementMode](s)
	if err != nil {
		return 0, usagef("--mode %q: want %s or %s", s, strings.Join(enumword.Words(m.Descriptor()), ", "), modeInherit)
	}
	return m, nil
}

// modeInherit is the word tables print for an unset mode.
const modeInherit = "inherit"
