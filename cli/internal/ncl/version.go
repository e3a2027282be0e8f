package ncl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/clawguard/clawguard/cli/internal/config"
)

// serverVersionHeader is the header every server answer carries (the
// server's app.VersionHeader), a token-less health check included.
const serverVersionHeader = "x-clawguard-server-version"

// versionCmd prints the client's version and the server's, read from the
// header of a health check: no token and no reflection needed.
func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the versions of ncl and of the server it points at",
		Example: "  ncl version\n  ncl version -o json",
		Args:    none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := config.Resolve(a.flags, a.getenv)
			if err != nil {
				return connError{err}
			}
			a.settings = s
			creds, err := transportCreds(s)
			if err != nil {
				return connError{err}
			}
			conn, err := grpc.NewClient(s.Server, grpc.WithTransportCredentials(creds), grpc.WithUserAgent("ncl/"+Version))
			if err != nil {
				return connError{fmt.Errorf("dial %s: %w", s.Server, err)}
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
			defer cancel()
			var md metadata.MD
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
			server := "unknown (an older server)"
			if v := md.Get(serverVersionHeader); len(v) > 0 {
				server = v[0]
			}
			if err != nil && len(md.Get(serverVersionHeader)) == 0 {
				if !a.structured() { // still say what is known before failing
					fmt.Fprintf(a.stdout, "client: %s\n", Version)
				}
				return asServerError(err, s.Server)
			}
			if a.structured() {
				return a.printer().Value(map[string]string{"client": Version, "server": server, "server_address": s.Server}, "")
			}
			_, err = fmt.Fprintf(a.stdout, "client: %s\nserver: %s (%s)\n", Version, server, s.Server)
			return err
		},
	}
}
