// Command stub stands in for clawguard-server/clawguard-runner when the
// Dockerfiles are tested: it prints its uid and arguments and exits.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	fmt.Printf("uid=%d args=%s\n", os.Getuid(), strings.Join(os.Args[1:], " "))
}
