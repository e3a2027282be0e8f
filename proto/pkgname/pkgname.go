// Package pkgname is the one rule for the apt and npm package names an agent
// may ask to install. The server's precheck, the admin RPCs, ApplyAction,
// the runner's payload schema and its image build all check it: the names
// end up in a RUN line.
package pkgname

import "regexp"

// AptPattern and NpmPattern are the rules as regular expressions, in the
// syntax Go and JSON Schema (ECMA-262) read alike, so a schema can carry
// them as its "pattern".
const (
	AptPattern = `^[a-z0-9][a-z0-9._+-]*$`
	NpmPattern = `^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$`
)

var (
	apt = regexp.MustCompile(AptPattern)
	npm = regexp.MustCompile(NpmPattern)
)

// Apt reports whether name is a valid Debian package name.
func Apt(name string) bool { return apt.MatchString(name) }

// Npm reports whether name is a valid npm package name, scoped or not.
func Npm(name string) bool { return npm.MatchString(name) }
