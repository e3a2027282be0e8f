package forward

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
)

// Bytes go both ways, and a half-close reaches the other side.
func TestForwardsBothWaysWithHalfClose(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	back, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	go func() {
		c, err := back.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // until the client's half-close
		c.Write(append([]byte("got:"), b...))
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Forwarder{Listener: ln, Socket: sock}).Serve(ctx)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "got:hello" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// A socket nobody serves closes the connection.
func TestDeadSocketClosesTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Forwarder{Listener: ln, Socket: filepath.Join(t.TempDir(), "none.sock")}).Serve(ctx)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Fatalf("read %q, %v; want EOF", b, err)
	}
}
