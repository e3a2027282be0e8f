package ncl

import (
	"time"

	"github.com/spf13/cobra"
)

const rootLong = `ncl is the admin and approver CLI of Clawguard, a plain gRPC client of
clawguard-server. Every command reads: ncl <resource> <verb> [id] [flags].

Connection (flags win over environment, environment over the config file):
  --server           CLAWGUARD_SERVER      (default 127.0.0.1:7443)
  --token-file       CLAWGUARD_TOKEN_FILE  (or CLAWGUARD_TOKEN holding the token itself)
  --profile          CLAWGUARD_PROFILE     (profile of the config file; default: its "current")
  --config           CLAWGUARD_CONFIG      (default ~/.config/clawguard/ncl.yaml)
  --tls-ca, --tls-cert, --tls-key, --tls-server-name
                     CLAWGUARD_TLS_CA, CLAWGUARD_TLS_CERT, CLAWGUARD_TLS_KEY, CLAWGUARD_TLS_SERVER_NAME
                     (plaintext when no CA is given)

Config file:
  current: local
  profiles:
    local: {server: 127.0.0.1:7443, token_file: ~/.config/clawguard/operator.token}
    prod:  {server: guard.example.com:7443, token_file: ~/.config/clawguard/prod.token, tls_ca: ~/ca.pem}

There is deliberately no --token flag: a secret on the command line lands in
shell history and in every other user's "ps" output. Point --token-file at a
0600 file, or export CLAWGUARD_TOKEN.

Output: aligned tables by default, groups and users by name; -o wide adds
the ids behind the names; -o json for scripts (a list is an array, a created
or fetched object is the object with its id); -o yaml the same values as
YAML; -q prints ids only. Every group or user argument takes a name or an id.
Exit codes: 0 ok, 1 the server refused or failed, 2 usage, config or connection error.`

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ncl",
		Short: "Admin and approver CLI for Clawguard",
		Long:  rootLong,
		Example: `  export CLAWGUARD_TOKEN_FILE=~/.config/clawguard/operator.token
  ncl groups create --name research --cli-scope group
  ncl approvals list
  ncl approvals approve <hold-id> --as telegram:dana`,
		Version:       Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return a.checkGlobals()
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.flags.Server, "server", "", "server address host:port (env CLAWGUARD_SERVER, default 127.0.0.1:7443)")
	pf.StringVar(&a.flags.TokenFile, "token-file", "", "file holding the bearer token (env CLAWGUARD_TOKEN_FILE)")
	pf.StringVar(&a.flags.Profile, "profile", "", "config profile (env CLAWGUARD_PROFILE)")
	pf.StringVar(&a.flags.ConfigPath, "config", "", "config file (env CLAWGUARD_CONFIG, default ~/.config/clawguard/ncl.yaml)")
	pf.StringVar(&a.flags.TLSCA, "tls-ca", "", "CA bundle to verify the server; enables TLS (env CLAWGUARD_TLS_CA)")
	pf.StringVar(&a.flags.TLSCert, "tls-cert", "", "client certificate for mutual TLS (env CLAWGUARD_TLS_CERT)")
	pf.StringVar(&a.flags.TLSKey, "tls-key", "", "client key for mutual TLS (env CLAWGUARD_TLS_KEY)")
	pf.StringVar(&a.flags.TLSServerName, "tls-server-name", "", "server name to verify (env CLAWGUARD_TLS_SERVER_NAME)")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table, wide (the ids behind the names too), json or yaml")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "print ids only")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "deadline of each call")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))

	for _, k := range kinds() {
		if k.command != nil {
			root.AddCommand(k.command(a))
		}
	}
	root.AddCommand(a.exportCmd(), a.applyCmd(), a.versionCmd(), a.configCmd(), completionCmd())
	a.addDynamicCompletion(root)
	return root
}
