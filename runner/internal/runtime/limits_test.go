package runtime

import "testing"

func TestParseCPUs(t *testing.T) {
	good := map[string]int64{"": 0, "0.5": 500_000_000, "2": 2_000_000_000, " 1.25 ": 1_250_000_000, "0.000000001": 1}
	for in, want := range good {
		got, err := ParseCPUs(in)
		if err != nil || got != want {
			t.Errorf("ParseCPUs(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "abc", "1/2", "1e3", "0.0000000001", "5000", "NaN", "1,5"} {
		if got, err := ParseCPUs(in); err == nil {
			t.Errorf("ParseCPUs(%q) = %d, want error", in, got)
		}
	}
}

func TestParseMemory(t *testing.T) {
	good := map[string]int64{"": 0, "256m": 256 << 20, "1g": 1 << 30, "1G": 1 << 30, "512MiB": 512 << 20,
		"1.5g": 3 << 29, "8388608": 8 << 20, "7000k": 7000 << 10, "64mb": 64 << 20}
	for in, want := range good {
		got, err := ParseMemory(in)
		if err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"abc", "-1g", "1x", "1m", "1024", "10000000000t", "1 g b", "g"} {
		if got, err := ParseMemory(in); err == nil {
			t.Errorf("ParseMemory(%q) = %d, want error", in, got)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := SessionSpec{SessionID: "s1", AgentGroupID: "g1", Image: "img", SessionDir: "/tmp/s", Endpoints: []Endpoint{{Name: "gateway", HostSocket: "/tmp/g.sock", ContainerSocket: "/run/g.sock"}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid spec refused: %v", err)
	}
	bad := []func(*SessionSpec){
		func(s *SessionSpec) { s.SessionID = "../x" },
		func(s *SessionSpec) { s.SessionID = "" },
		func(s *SessionSpec) { s.AgentGroupID = "a b" },
		func(s *SessionSpec) { s.Image = "" },
		func(s *SessionSpec) { s.SessionDir = "rel" },
		func(s *SessionSpec) { s.Endpoints = nil },
		func(s *SessionSpec) {
			s.Endpoints = []Endpoint{{Name: "gateway", HostSocket: "g.sock", ContainerSocket: "/run/g.sock"}}
		},
		func(s *SessionSpec) { s.CPUs = "lots" },
		func(s *SessionSpec) { s.Memory = "1x" },
		func(s *SessionSpec) { s.PidsLimit = -1 },
	}
	for i, mutate := range bad {
		s := ok
		mutate(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("case %d: %+v accepted", i, s)
		}
	}
	if ok.EffectivePidsLimit() != DefaultPidsLimit {
		t.Errorf("default pids limit = %d", ok.EffectivePidsLimit())
	}
}
