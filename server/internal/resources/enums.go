package resources

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/clawguard/clawguard/proto/enumword"
)

// The admin resources store enums as their words (enumword): one
// conversion each way, and an unknown value either way is an error.

// enumColumn is the stored word of an enum a request carries; UNSPECIFIED
// is "" (not set). A value the enum does not know is InvalidArgument.
func enumColumn(field string, e protoreflect.Enum) (string, error) {
	w, err := enumword.Word(e)
	if err != nil {
		return "", invalid(field, "unknown value %d (want %s)", e.Number(), wordList(e.Descriptor()))
	}
	return w, nil
}

// enumFromColumn reads a stored word ("" → UNSPECIFIED); a word the enum
// does not know is an error, never a guess.
func enumFromColumn[E enumword.Enum](column, s string) (E, error) {
	e, err := enumword.Parse[E](s)
	if err != nil {
		return e, fmt.Errorf("stored %s: %w", column, err)
	}
	return e, nil
}

// wordList is "a, b or c".
func wordList(ed protoreflect.EnumDescriptor) string {
	w := enumword.Words(ed)
	if len(w) < 2 {
		return strings.Join(w, "")
	}
	return strings.Join(w[:len(w)-1], ", ") + " or " + w[len(w)-1]
}
