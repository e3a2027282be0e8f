// Command httpsprobe stands in for a binary of ours making an HTTPS call from
// a FROM scratch image (a decision export, a webhook): it GETs its argument
// and prints the status, or the error. It loads roots as our binaries do,
// compiled-in public roots included.
package main

import (
	"fmt"
	"net/http"
	"os"

	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println("status:", resp.StatusCode)
}
