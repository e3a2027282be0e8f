package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/clawguard/clawguard/proto/egressrule"
)

// connectTarget reads a CONNECT request's destination: the authority
// host:port. A Host header that names anything else is refused: the
// destination decided is the one dialed, and nothing else may claim to be.
func connectTarget(r *http.Request, hosts []string) (Dest, error) {
	d, err := authority(r.RequestURI, 0)
	if err != nil {
		return Dest{}, fmt.Errorf("CONNECT %q: %w", r.RequestURI, err)
	}
	if err := hostAgrees(r.Method, hosts, d); err != nil {
		return Dest{}, err
	}
	return d, nil
}

// forwardTarget reads an absolute-form request's destination (plain HTTP
// only: an https:// URL goes through CONNECT, the proxy opens no TLS).
func forwardTarget(r *http.Request, hosts []string) (Dest, error) {
	switch {
	case r.URL == nil || !r.URL.IsAbs():
		return Dest{}, errors.New("a request to the proxy must be CONNECT host:port or an absolute http:// URL")
	case r.URL.Scheme != "http":
		return Dest{}, fmt.Errorf("%s:// is not forwarded: use CONNECT (an HTTPS proxy variable) for it", r.URL.Scheme)
	case r.URL.User != nil:
		return Dest{}, errors.New("a URL with credentials in it is not forwarded")
	}
	d, err := authority(r.URL.Host, 80)
	if err != nil {
		return Dest{}, fmt.Errorf("%s: %w", r.URL.Redacted(), err)
	}
	if err := hostAgrees(r.Method, hosts, d); err != nil {
		return Dest{}, err
	}
	return d, nil
}

// authority parses host[:port] (defaultPort 0: the port is required).
func authority(s string, defaultPort int) (Dest, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		if defaultPort == 0 {
			return Dest{}, errors.New("want host:port")
		}
		host, portText = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), strconv.Itoa(defaultPort)
	}
	norm, err := egressrule.NormalizeHost(host)
	if err != nil {
		return Dest{}, err
	}
	port, err := egressrule.ParsePort(portText)
	if err != nil {
		return Dest{}, err
	}
	return Dest{Host: norm, Port: port}, nil
}

// hostAgrees refuses a request whose Host header names another destination
// than the one decided (a proxy that decided on one and dialed the other
// could be steered). Absent is fine; the forwarded request is sent with
// the decided host.
func hostAgrees(method string, hosts []string, d Dest) error {
	if len(hosts) > 1 {
		return errors.New("more than one Host header")
	}
	if len(hosts) == 0 {
		return nil
	}
	def := 80
	if method == http.MethodConnect {
		def = d.Port
	}
	h, err := authority(hosts[0], def)
	if err != nil || h != d {
		return fmt.Errorf("the Host header %q names another destination than %s", hosts[0], egressrule.Destination(d.Host, d.Port))
	}
	return nil
}

// maxHead bounds a request's head (its line and headers).
const maxHead = 16 << 10

// readRequest reads one request, and the Host headers it carried
// (http.ReadRequest drops them for an absolute or authority target, and
// the proxy refuses one that disagrees). The head is read without
// consuming what follows it: after a CONNECT that is tunnel data.
func readRequest(br *bufio.Reader) (*http.Request, []string, error) {
	head, err := peekHead(br)
	if err != nil {
		return nil, nil, err
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return nil, nil, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, nil, err
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	return req, h.Values("Host"), nil
}

// peekHead is the request's head, up to and including its blank line,
// left in br. A head that does not fit the buffer is refused.
func peekHead(br *bufio.Reader) ([]byte, error) {
	for {
		b, _ := br.Peek(br.Buffered())
		if i := headEnd(b); i >= 0 {
			return b[:i], nil
		}
		if br.Buffered() >= maxHead || br.Buffered() == br.Size() {
			return nil, fmt.Errorf("the request's head is over %d bytes", maxHead)
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return nil, err
		}
	}
}

// headEnd is where a head ends in b (after its blank line), or -1.
func headEnd(b []byte) int {
	crlf, lf := bytes.Index(b, []byte("\r\n\r\n")), bytes.Index(b, []byte("\n\n"))
	switch {
	case crlf >= 0 && (lf < 0 || crlf+2 <= lf):
		return crlf + 4
	case lf >= 0:
		return lf + 2
	}
	return -1
}
