package runtime

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// MinMemory is the smallest memory limit Docker accepts (6 MiB).
const MinMemory int64 = 6 << 20

// ParseCPUs turns a --cpus value ("0.5", "2") into nano-CPUs. "" means no
// limit and gives 0, so the caller sets no CPU limit at all.
func ParseCPUs(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || strings.ContainsAny(s, "/eE") {
		return 0, fmt.Errorf("cpus %q: not a decimal number", s)
	}
	nano := r.Mul(r, big.NewRat(1e9, 1))
	if !nano.IsInt() {
		return 0, fmt.Errorf("cpus %q: more than 9 decimal places", s)
	}
	if nano.Sign() <= 0 {
		return 0, fmt.Errorf("cpus %q: must be greater than zero", s)
	}
	if !nano.Num().IsInt64() || nano.Num().Int64() > 1024*1e9 {
		return 0, fmt.Errorf("cpus %q: too large", s)
	}
	return nano.Num().Int64(), nil
}

var memoryPattern = regexp.MustCompile(`^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$`)

// ParseMemory turns a --memory value ("256m", "1g", "512MiB", "1073741824")
// into bytes, units binary as Docker's. "" means no limit and gives 0.
func ParseMemory(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	m := memoryPattern.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, fmt.Errorf("memory %q: want a size like 256m or 1g", s)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("memory %q: %w", s, err)
	}
	shift := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[m[2]]
	bytes := n * float64(uint64(1)<<shift)
	if bytes >= math.MaxInt64 {
		return 0, fmt.Errorf("memory %q: too large", s)
	}
	if int64(bytes) < MinMemory {
		return 0, fmt.Errorf("memory %q: below Docker's minimum of 6m", s)
	}
	return int64(bytes), nil
}
