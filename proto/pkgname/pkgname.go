// Package pkgname is the one rule for the apt and npm package names an agent
// may ask to install. The server's precheck, the admin RPCs, ApplyAction and
// the runner's image build all check it: the names end up in a RUN line.
package pkgname

import "regexp"

var (
	apt = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*$`)
	npm = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$`)
)

// Apt reports whether name is a valid Debian package name.
func Apt(name string) bool { return apt.MatchString(name) }

// Npm reports whether name is a valid npm package name, scoped or not.
func Npm(name string) bool { return npm.MatchString(name) }
