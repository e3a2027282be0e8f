// Package enumword is the one conversion between a proto enum value and its
// word: the value's name without the enum's prefix, in lower case
// (ENFORCEMENT_MODE_WARN ↔ "warn", SENDER_POLICY_REQUEST_APPROVAL ↔
// "request_approval"). The words are what the database's enum columns
// store, what ncl's flags take and what the JSON view prints. They are
// derived from the enum's descriptor, so a new enum value needs no code.
//
// The zero value (X_UNSPECIFIED, "not set") is "" both ways. Anything else
// that names no value — a number the descriptor does not know, a word that
// is not one of the enum's — is an error: callers fail closed.
package enumword

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Word is e's word; "" for the zero value; an unknown number is an error.
func Word(e protoreflect.Enum) (string, error) { return WordOf(e.Descriptor(), e.Number()) }

// WordOf is Word for a descriptor and number.
func WordOf(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) (string, error) {
	if n == 0 {
		return "", nil
	}
	w, ok := tableOf(ed).words[n]
	if !ok {
		return "", fmt.Errorf("%s: unknown value %d (want %s)", ed.Name(), n, strings.Join(Words(ed), ", "))
	}
	return w, nil
}

// String is e's word for people and logs: the word, "" for the zero value,
// the number for one the descriptor does not know. Never for storing.
func String(e protoreflect.Enum) string {
	if w, err := Word(e); err == nil {
		return w
	}
	return strconv.Itoa(int(e.Number()))
}

// Parse is the value of E a word names; "" is the zero value; any other
// string that is not one of E's words (the full value name, "unspecified",
// another case) is an error.
func Parse[E Enum](s string) (E, error) {
	var zero E
	n, err := NumberOf(zero.Descriptor(), s)
	if err != nil {
		return zero, err
	}
	return E(n), nil
}

// Enum is a generated Go enum type (an int32 with the protoreflect methods).
type Enum interface {
	~int32
	protoreflect.Enum
}

// NumberOf is Parse for a descriptor.
func NumberOf(ed protoreflect.EnumDescriptor, s string) (protoreflect.EnumNumber, error) {
	if s == "" {
		return 0, nil
	}
	n, ok := tableOf(ed).numbers[s]
	if !ok {
		return 0, fmt.Errorf("%s: unknown word %q (want %s)", ed.Name(), s, strings.Join(Words(ed), ", "))
	}
	return n, nil
}

// Words lists the enum's words in declaration order, the zero value left out.
func Words(ed protoreflect.EnumDescriptor) []string {
	return append([]string(nil), tableOf(ed).ordered...)
}

// Prefix is the shared prefix of an enum's value names, taken from its zero
// value (EFFECT_UNSPECIFIED → "EFFECT_").
func Prefix(ed protoreflect.EnumDescriptor) string {
	if z := ed.Values().ByNumber(0); z != nil {
		return strings.TrimSuffix(string(z.Name()), "UNSPECIFIED")
	}
	return ""
}

// table is one enum's words both ways, built once per enum (the guard
// converts an effect with every decision).
type table struct {
	words   map[protoreflect.EnumNumber]string
	numbers map[string]protoreflect.EnumNumber
	ordered []string
}

var tables sync.Map // protoreflect.FullName → *table

func tableOf(ed protoreflect.EnumDescriptor) *table {
	if t, ok := tables.Load(ed.FullName()); ok {
		return t.(*table)
	}
	t := &table{words: map[protoreflect.EnumNumber]string{}, numbers: map[string]protoreflect.EnumNumber{}}
	prefix, vals := Prefix(ed), ed.Values()
	for i := 0; i < vals.Len(); i++ {
		v := vals.Get(i)
		if v.Number() == 0 {
			continue
		}
		if _, dup := t.words[v.Number()]; dup {
			continue // an alias (allow_alias): the first name is the word
		}
		w := strings.ToLower(strings.TrimPrefix(string(v.Name()), prefix))
		t.words[v.Number()], t.numbers[w] = w, v.Number()
		t.ordered = append(t.ordered, w)
	}
	got, _ := tables.LoadOrStore(ed.FullName(), t)
	return got.(*table)
}

// WithArticle is a word with its indefinite article: "an operator", "a
// bridge" (a sentence's "a " + String(e) reads wrong for a vowel).
func WithArticle(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}
