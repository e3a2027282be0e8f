// Package logs builds the server's one logger: JSON lines on stderr (also
// slog's default, so nothing prints in another format), durations as
// duration strings ("1.5s", not nanoseconds), and known secrets replaced
// wherever they appear in a line's values, error texts included.
package logs

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
)

// Redacted replaces a secret in logged values.
const Redacted = "xxxxx"

// New returns a JSON logger at level that redacts every non-empty secret.
func New(w io.Writer, level slog.Leveler, secrets ...string) *slog.Logger {
	r := redactor(nonEmpty(secrets))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		switch a.Value.Kind() {
		case slog.KindDuration:
			return slog.String(a.Key, a.Value.Duration().String())
		case slog.KindString:
			if s := a.Value.String(); r.has(s) {
				return slog.String(a.Key, r.replace(s))
			}
		case slog.KindAny:
			if err, ok := a.Value.Any().(error); ok {
				return slog.String(a.Key, r.replace(err.Error()))
			}
			if st, ok := a.Value.Any().(fmt.Stringer); ok && len(r) > 0 {
				if s := st.String(); r.has(s) {
					return slog.String(a.Key, r.replace(s))
				}
			}
		}
		return a
	}}))
}

// URLSecrets are the secrets of a URL: its userinfo password and the values
// of query parameters that carry one (password, sslpassword, token, ...).
func URLSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p, url.QueryEscape(p), url.PathEscape(p))
		}
	}
	for k, vs := range u.Query() {
		if secretParam(k) {
			for _, v := range vs {
				out = append(out, v, url.QueryEscape(v))
			}
		}
	}
	return nonEmpty(out)
}

// RedactURL is raw with its secrets replaced (an unparseable URL is hidden
// whole: it may be a DSN with the password anywhere).
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable>"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Redacted)
		}
	}
	q := u.Query()
	changed := false
	for k := range q {
		if secretParam(k) {
			q.Set(k, Redacted)
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func secretParam(k string) bool {
	k = strings.ToLower(k)
	return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.Contains(k, "token") || k == "key" || k == "sslkey"
}

type redactor []string

func (r redactor) has(s string) bool {
	for _, sec := range r {
		if strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

func (r redactor) replace(s string) string {
	for _, sec := range r {
		s = strings.ReplaceAll(s, sec, Redacted)
	}
	return s
}

func nonEmpty(in []string) []string {
	var out []string
	for _, s := range in {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
