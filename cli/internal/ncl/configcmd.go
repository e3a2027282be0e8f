package ncl

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/clawguard/clawguard/cli/internal/config"
)

// configCmd edits the config file's profiles, like kubectl's contexts: one
// profile per control plane, one of them current.
func (a *app) configCmd() *cobra.Command {
	return noun("config", "Profiles of the config file (one per control plane), like kubectl contexts",
		"  ncl config set-context prod --server guard.example.com:7443 --token-file ~/.config/clawguard/prod.token\n  ncl config use-context prod\n  ncl config get-contexts",
		a.configGetContexts(), a.configCurrentContext(), a.configUseContext(), a.configSetContext())
}

// loadConfigFile reads the config file (none yet: an empty one).
func (a *app) loadConfigFile() (string, config.File, error) {
	path, _ := config.Path(a.flags, a.getenv)
	f, err := config.Load(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return path, f, err
	}
	return path, f, nil
}

// configGetContexts lists the profiles.
func (a *app) configGetContexts() *cobra.Command {
	getContexts := &cobra.Command{
		Use: "get-contexts", Short: "List the config file's profiles (* marks the current one)",
		Example: "  ncl config get-contexts\n  ncl config get-contexts -o json", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, f, err := a.loadConfigFile()
			if err != nil {
				return usageError{err}
			}
			if a.structured() {
				rows := []map[string]any{}
				for _, n := range f.Names() {
					p := f.Profiles[n]
					rows = append(rows, map[string]any{"name": n, "current": n == f.Current, "server": p.Server,
						"token_file": p.TokenFile, "tls_ca": p.TLSCA, "tls_cert": p.TLSCert, "tls_key": p.TLSKey, "tls_server_name": p.TLSServerName})
				}
				return a.printer().Value(rows, "")
			}
			if a.quiet {
				for _, n := range f.Names() {
					fmt.Fprintln(a.stdout, n)
				}
				return nil
			}
			if len(f.Profiles) == 0 {
				_, err := fmt.Fprintf(a.stdout, "no profiles in %s (add one: ncl config set-context NAME --server ADDR --token-file FILE)\n", path)
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tTOKEN FILE\tTLS CA")
			for _, n := range f.Names() {
				p := f.Profiles[n]
				mark := ""
				if n == f.Current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, n, dash(p.Server), dash(p.TokenFile), dash(p.TLSCA))
			}
			return tw.Flush()
		},
	}
	return getContexts
}

// configCurrentContext prints the current profile.
func (a *app) configCurrentContext() *cobra.Command {
	currentContext := &cobra.Command{
		Use: "current-context", Short: "Print the current profile's name",
		Example: "  ncl config current-context", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, f, err := a.loadConfigFile()
			if err != nil {
				return usageError{err}
			}
			if f.Current == "" {
				return usagef("no current profile in %s (ncl config use-context NAME)", path)
			}
			_, err = fmt.Fprintln(a.stdout, f.Current)
			return err
		},
	}
	return currentContext
}

// configUseContext switches profiles.
func (a *app) configUseContext() *cobra.Command {
	useContext := &cobra.Command{
		Use: "use-context <name>", Short: "Make a profile the current one",
		Example: "  ncl config use-context prod", Args: one("name"),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			_, f, _ := a.loadConfigFile()
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return f.Names(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path, f, err := a.loadConfigFile()
			if err != nil {
				return usageError{err}
			}
			if _, ok := f.Profiles[args[0]]; !ok {
				return usagef("profile %q not found in %s (have: %s)", args[0], path, strings.Join(f.Names(), ", "))
			}
			f.Current = args[0]
			if err := config.Save(path, f); err != nil {
				return usageError{err}
			}
			return a.printer().Done(fmt.Sprintf("switched to profile %q (%s)", args[0], path))
		},
	}
	return useContext
}

// configSetContext creates or changes a profile.
func (a *app) configSetContext() *cobra.Command {
	var prof config.Profile
	var use bool
	setContext := &cobra.Command{
		Use: "set-context <name>", Short: "Create a profile or change the fields given",
		Example: `  ncl config set-context local --server 127.0.0.1:7443 --token-file ~/src/clawguard/.data/run/operator.token --use
  ncl config set-context prod --server guard.example.com:7443 --tls-ca ~/.config/clawguard/prod-ca.pem`,
		Args: one("name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, f, err := a.loadConfigFile()
			if err != nil {
				return usageError{err}
			}
			if f.Profiles == nil {
				f.Profiles = map[string]config.Profile{}
			}
			p, existed := f.Profiles[args[0]]
			set := func(flag string, dst *string, v string) {
				if cmd.Flags().Changed(flag) {
					*dst = v
				}
			}
			set("server", &p.Server, prof.Server)
			set("token-file", &p.TokenFile, prof.TokenFile)
			set("tls-ca", &p.TLSCA, prof.TLSCA)
			set("tls-cert", &p.TLSCert, prof.TLSCert)
			set("tls-key", &p.TLSKey, prof.TLSKey)
			set("tls-server-name", &p.TLSServerName, prof.TLSServerName)
			if (p.TLSCert == "") != (p.TLSKey == "") {
				return usagef("--tls-cert and --tls-key go together")
			}
			f.Profiles[args[0]] = p
			if use || f.Current == "" {
				f.Current = args[0]
			}
			if err := config.Save(path, f); err != nil {
				return usageError{err}
			}
			verb := "updated"
			if !existed {
				verb = "created"
			}
			return a.printer().Done(fmt.Sprintf("%s profile %q in %s", verb, args[0], path))
		},
	}
	// Local flags with the global flags' names would shadow them: the
	// profile's fields are set with these on set-context only.
	sf := setContext.Flags()
	sf.StringVar(&prof.Server, "server", "", "server address host:port")
	sf.StringVar(&prof.TokenFile, "token-file", "", "file holding the bearer token (~/ is expanded when read)")
	sf.StringVar(&prof.TLSCA, "tls-ca", "", "CA bundle to verify the server; enables TLS")
	sf.StringVar(&prof.TLSCert, "tls-cert", "", "client certificate for mutual TLS")
	sf.StringVar(&prof.TLSKey, "tls-key", "", "client key for mutual TLS")
	sf.StringVar(&prof.TLSServerName, "tls-server-name", "", "server name to verify")
	sf.BoolVar(&use, "use", false, "also make it the current profile")
	return setContext
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
