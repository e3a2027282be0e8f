package ncl

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl models: the model gateway. The operator's providers (each a kind, a
// base URL and a write-only credential) and prices; a group's providers,
// model rules, default and budget (modelgroup.go); usage (usage.go).
func (a *app) modelsCmd() *cobra.Command {
	return noun("models", "The model gateway: providers, a group's models and budget, prices",
		"  ncl models providers set --name anthropic --kind anthropic --credential-file key.txt\n"+
			"  ncl models use --group research --provider anthropic\n"+
			"  ncl models set --group research --provider anthropic --model 'claude-opus-*' --effect hold\n"+
			"  ncl models budget set --group research --period day --tokens 2000000",
		a.modelProvidersCmd(), a.modelsUse(), a.modelsList(), a.modelsSet(), a.modelsUnset(), a.modelsDefault(),
		a.modelBudgetCmd(), a.modelPricesCmd())
}

func (a *app) modelProvidersCmd() *cobra.Command {
	return noun("providers", "The model providers agents' calls go to (operator only)",
		"  ncl models providers list\n  ncl models providers set --name anthropic --kind anthropic --credential-file key.txt",
		a.providersList(), a.providersSet(), a.providersDelete())
}

func (a *app) providersList() *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List the providers (whether each has a credential, never its value)", Args: none,
		Example: "  ncl models providers list",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.ModelProvider{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				r, err := c.reg.ListModelProviders(ctx, &guardv1.ListModelProvidersRequest{})
				return msgs(r.GetProviders()), err
			})
		},
	}
}

func (a *app) providersSet() *cobra.Command {
	var name, kind, baseURL, credFile string
	var noCred bool
	cmd := &cobra.Command{
		Use: "set", Short: "Create or change a provider; set or rotate its credential",
		Long: `Create or change a provider agents' model calls go to. A new one needs its
--kind: anthropic (the Messages API, base URL without /v1, default
https://api.anthropic.com) or openai (Chat Completions and Responses, or any
compatible API; base URL with /v1, default https://api.openai.com/v1).

The credential is write-only: read from --credential-file (- = standard input),
never from a flag's value, and never shown again by any read. Setting it again
rotates it: runners use the new one within seconds, nothing restarts.
Without --credential-file the stored one is kept; --no-credential removes it
(a provider that takes none, such as a local model server).`,
		Example: "  ncl models providers set --name anthropic --kind anthropic --credential-file anthropic.key\n" +
			"  echo \"$OPENAI_API_KEY\" | ncl models providers set --name openai --kind openai --credential-file -\n" +
			"  ncl models providers set --name local --kind openai --base-url http://10.0.0.5:8000/v1 --no-credential",
		Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &guardv1.SetModelProviderRequest{Name: name, BaseUrl: baseURL}
			if kind != "" {
				k, err := enumword.Parse[guardv1.ModelProviderKind](kind)
				if err != nil || k == guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_UNSPECIFIED {
					return usagef("--kind %q: want anthropic or openai", kind)
				}
				req.Kind = k
			}
			switch {
			case noCred && credFile != "":
				return usagef("--no-credential and --credential-file: choose one")
			case noCred:
				req.Credential = proto.String("")
			case credFile != "":
				cred, err := readCredential(cmd, credFile)
				if err != nil {
					return err
				}
				req.Credential = &cred
			}
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				r, err := c.reg.SetModelProvider(ctx, req)
				return r.GetProvider(), err
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the provider's name (lower case, digits, - and _)")
	cmd.Flags().StringVar(&kind, "kind", "", "anthropic or openai (required for a new provider; never changes)")
	cmd.Flags().StringVar(&baseURL, "base-url", "", "the provider's base URL (default: the kind's public API)")
	cmd.Flags().StringVar(&credFile, "credential-file", "", "file holding the API key (- = standard input)")
	cmd.Flags().BoolVar(&noCred, "no-credential", false, "remove the stored credential")
	required(cmd, "name")
	return cmd
}

// readCredential reads a key from a file or standard input: one word,
// surrounding white space dropped.
func readCredential(cmd *cobra.Command, file string) (string, error) {
	var (
		b   []byte
		err error
	)
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 8193))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", usagef("--credential-file: %v", err)
	}
	cred := strings.TrimSpace(string(b))
	if cred == "" || len(cred) > 8192 {
		return "", usagef("--credential-file: want one key of 1 to 8192 characters")
	}
	return cred, nil
}

func (a *app) providersDelete() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use: "delete", Short: "Delete a provider no group is given", Args: none,
		Example: "  ncl models providers delete --name local",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.done(cmd, "model provider "+name+" deleted", func(ctx context.Context, c *clients) error {
				_, err := c.reg.DeleteModelProvider(ctx, &guardv1.DeleteModelProviderRequest{Name: name})
				return err
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the provider")
	required(cmd, "name")
	return cmd
}

func (a *app) modelPricesCmd() *cobra.Command {
	return noun("prices", "What a million tokens of a model cost (a cost budget counts them)",
		"  ncl models prices set --provider anthropic --model 'claude-sonnet-*' --input 3 --output 15 --cache-read 0.3 --cache-write 3.75",
		a.pricesList(), a.pricesSet())
}

func (a *app) pricesList() *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List the prices", Args: none, Example: "  ncl models prices list",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd, &guardv1.ModelPrice{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				r, err := c.reg.ListModelPrices(ctx, &guardv1.ListModelPricesRequest{})
				return msgs(r.GetPrices()), err
			})
		},
	}
}

func (a *app) pricesSet() *cobra.Command {
	var (
		provider, model                   string
		input, output, cacheRead, cacheWr string
		remove                            bool
	)
	cmd := &cobra.Command{
		Use: "set", Short: "Set (or --remove) what a million tokens of a provider's model cost",
		Long: `Set what a million tokens of a provider's model cost, by kind of token, in
the currency of the group budgets' cost (amounts with up to six decimals; they
are stored in micro-units). --model is a model or a prefix ending in *; of the
prices that match a call, an exact one wins, else the longest prefix. A model
without a price costs nothing.`,
		Example: "  ncl models prices set --provider anthropic --model 'claude-sonnet-*' --input 3 --output 15 --cache-read 0.3 --cache-write 3.75\n" +
			"  ncl models prices set --provider anthropic --model 'claude-sonnet-*' --remove",
		Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := &guardv1.ModelPrice{Provider: provider, Model: model}
			for _, f := range []struct {
				flag, v string
				dst     *int64
			}{{"--input", input, &p.InputMicros}, {"--output", output, &p.OutputMicros}, {"--cache-read", cacheRead, &p.CacheReadMicros},
				{"--cache-write", cacheWr, &p.CacheWriteMicros}} {
				n, err := parseMicros(f.v)
				if err != nil {
					return usagef("%s %q: %v", f.flag, f.v, err)
				}
				*f.dst = n
			}
			what := "price of " + provider + "/" + model + " set"
			if remove {
				what = "price of " + provider + "/" + model + " removed"
			}
			return a.done(cmd, what, func(ctx context.Context, c *clients) error {
				_, err := c.reg.SetModelPrice(ctx, &guardv1.SetModelPriceRequest{Price: p, Remove: remove})
				return err
			})
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "", "the provider")
	cmd.Flags().StringVar(&model, "model", "", "a model, or a prefix ending in *")
	cmd.Flags().StringVar(&input, "input", "0", "per million input tokens")
	cmd.Flags().StringVar(&output, "output", "0", "per million output tokens")
	cmd.Flags().StringVar(&cacheRead, "cache-read", "0", "per million tokens read from the prompt cache")
	cmd.Flags().StringVar(&cacheWr, "cache-write", "0", "per million tokens written to the prompt cache")
	cmd.Flags().BoolVar(&remove, "remove", false, "remove the price")
	required(cmd, "provider", "model")
	return cmd
}
