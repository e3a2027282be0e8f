// Command credential-gateway shows how a credential gateway (the seed's
// OneCLI) asks Clawguard before it uses a stored credential for an agent:
// it files a credential hold for the agent's group, waits for a human with
// an expiry just before its own deadline, and acts only on "approve".
//
//	credential-gateway --group ag_123 --credential github \
//	    --action "POST https://api.github.com/repos/acme/app/issues" --deadline 2m
//
// It reads CLAWGUARD_SERVER (default 127.0.0.1:7443) and the bridge (or
// operator) token from CLAWGUARD_TOKEN_FILE. Exit status: 0 approved,
// 1 error (no answer: the credential is not used), 3 rejected, 4 expired,
// 5 swept (the server restarted), 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/clawguard/clawguard/cli/credgate"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("credential-gateway", flag.ContinueOnError)
	group := fs.String("group", "", "the requesting agent's group id (required)")
	session := fs.String("session", "", "the requesting agent's session id (optional; it is told the outcome)")
	credential := fs.String("credential", "", "name of the stored credential (required)")
	action := fs.String("action", "", `what would be done with it, e.g. "POST https://api.github.com/..." (required)`)
	deadline := fs.Duration("deadline", 2*time.Minute, "how long this gateway waits before answering its caller")
	margin := fs.Duration("margin", credgate.DefaultMargin, "the hold expires this long before the deadline")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *group == "" || *credential == "" || *action == "" {
		fmt.Fprintln(os.Stderr, "credential-gateway: --group, --credential and --action are required")
		return 2
	}
	server := os.Getenv("CLAWGUARD_SERVER")
	if server == "" {
		server = "127.0.0.1:7443"
	}
	token, err := os.ReadFile(os.Getenv("CLAWGUARD_TOKEN_FILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "credential-gateway: CLAWGUARD_TOKEN_FILE:", err)
		return 1
	}
	conn, err := grpc.NewClient(server, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(strings.TrimSpace(string(token)))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "credential-gateway:", err)
		return 1
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()
	gate := credgate.New(conn)
	gate.Margin = *margin
	d, err := gate.Ask(ctx, credgate.Request{
		AgentGroupID: *group, SessionID: *session,
		Question: fmt.Sprintf("Use credential %q for: %s", *credential, *action),
		Payload:  map[string]any{"credential": *credential, "action": *action},
	})
	if err != nil {
		if errors.Is(err, credgate.ErrUndecided) {
			fmt.Println("no answer before the deadline: credential not used")
		}
		fmt.Fprintln(os.Stderr, "credential-gateway:", err)
		return 1
	}
	switch d.Outcome {
	case credgate.Approved:
		fmt.Printf("approved by %s (hold %s): using credential %q for %s\n", d.Resolver, d.HoldID, *credential, *action)
		return 0
	case credgate.Rejected:
		fmt.Printf("rejected by %s (hold %s): %s\n", d.Resolver, d.HoldID, orNone(d.Reason))
		return 3
	case credgate.Expired:
		fmt.Printf("expired (hold %s): nobody answered in time\n", d.HoldID)
		return 4
	default:
		fmt.Printf("swept (hold %s): the server restarted while we waited\n", d.HoldID)
		return 5
	}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }
