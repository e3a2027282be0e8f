package ncl

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
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

// modelProviderViews are how a provider (never its credential: whether one is set
// and when) and a price print.
var modelProviderViews = []render.View{
	render.For[*guardv1.ModelProvider](render.View{
		Cols: []render.Col{
			render.C("NAME", (*guardv1.ModelProvider).GetName),
			render.C("KIND", func(p *guardv1.ModelProvider) string { return enumword.String(p.GetKind()) }),
			render.C("BASE URL", (*guardv1.ModelProvider).GetBaseUrl),
			render.C("CREDENTIAL", func(p *guardv1.ModelProvider) string {
				if !p.GetHasCredential() {
					return "none"
				}
				if t := p.GetCredentialSetAt(); t != nil {
					return "set " + t.AsTime().UTC().Format("2006-01-02 15:04 UTC")
				}
				return "set"
			}),
		},
		ID: render.IDOf((*guardv1.ModelProvider).GetName),
	}),
	render.For[*guardv1.ModelPrice](render.View{
		Cols: []render.Col{
			render.C("PROVIDER", (*guardv1.ModelPrice).GetProvider),
			render.C("MODEL", (*guardv1.ModelPrice).GetModel),
			render.C("INPUT/M", func(p *guardv1.ModelPrice) string { return render.Micros(p.GetInputMicros()) }),
			render.C("OUTPUT/M", func(p *guardv1.ModelPrice) string { return render.Micros(p.GetOutputMicros()) }),
			render.C("CACHE READ/M", func(p *guardv1.ModelPrice) string { return render.Micros(p.GetCacheReadMicros()) }),
			render.C("CACHE WRITE/M", func(p *guardv1.ModelPrice) string { return render.Micros(p.GetCacheWriteMicros()) }),
		},
		ID: render.IDOf(func(p *guardv1.ModelPrice) string { return p.GetProvider() + "/" + p.GetModel() }),
	}),
}

// The model gateway's providers and prices in the document (the
// operator's): a provider's credential is write-only (export writes
// "<redacted>", which apply reads as "keep the one the server holds"; a
// value written out is set; none means none). A provider or price the
// document drops is deleted last, once no group's settings name it.

var modelProvidersState = &statePart{read: readModelProviders, plan: planModelProviders, check: checkModelProviders, sort: sortModelProviders}

type modelProviderSpec struct {
	Name       string `yaml:"name"`
	Kind       string `yaml:"kind"`
	BaseURL    string `yaml:"baseUrl"`
	Credential string `yaml:"credential,omitempty"`
}

type modelPriceSpec struct {
	Provider         string `yaml:"provider"`
	Model            string `yaml:"model"`
	InputMicros      int64  `yaml:"inputMicros,omitempty"`
	OutputMicros     int64  `yaml:"outputMicros,omitempty"`
	CacheReadMicros  int64  `yaml:"cacheReadMicros,omitempty"`
	CacheWriteMicros int64  `yaml:"cacheWriteMicros,omitempty"`
}

func (p modelPriceSpec) key() string { return p.Provider + "/" + p.Model }

// readModelProviders reads the providers and the prices.
func readModelProviders(ctx context.Context, c *clients, s *state, _ groupBook) error {
	ps, err := c.reg.ListModelProviders(ctx, &guardv1.ListModelProvidersRequest{})
	if err != nil {
		return fmt.Errorf("read model providers: %w", err)
	}
	for _, p := range ps.GetProviders() {
		spec := modelProviderSpec{Name: p.GetName(), Kind: enumword.String(p.GetKind()), BaseURL: p.GetBaseUrl()}
		if p.GetHasCredential() {
			spec.Credential = secret.Redacted
		}
		s.ModelProviders = append(s.ModelProviders, spec)
	}
	prices, err := c.reg.ListModelPrices(ctx, &guardv1.ListModelPricesRequest{})
	if err != nil {
		return fmt.Errorf("read model prices: %w", err)
	}
	for _, p := range prices.GetPrices() {
		s.ModelPrices = append(s.ModelPrices, modelPriceSpec{Provider: p.GetProvider(), Model: p.GetModel(), InputMicros: p.GetInputMicros(),
			OutputMicros: p.GetOutputMicros(), CacheReadMicros: p.GetCacheReadMicros(), CacheWriteMicros: p.GetCacheWriteMicros()})
	}
	return nil
}

// planModelProviders sets providers and prices before the groups (which
// name providers) and deletes them after every other deletion.
func planModelProviders(cur, want *state) (p planned) {
	for _, w := range want.ModelProviders {
		i := slices.IndexFunc(cur.ModelProviders, func(o modelProviderSpec) bool { return o.Name == w.Name })
		if i >= 0 && cur.ModelProviders[i] == w && (w.Credential == secret.Redacted || w.Credential == "") {
			continue // the same: its credential kept, or none
		}
		op, what := byte('+'), fmt.Sprintf("model provider %s: %s at %s", w.Name, w.Kind, w.BaseURL)
		if i >= 0 {
			op = '~'
		}
		switch {
		case w.Credential == "" && i >= 0 && cur.ModelProviders[i].Credential != "":
			what += " (its credential removed)"
		case w.Credential != "" && w.Credential != secret.Redacted:
			what += " (credential set from the document)"
		}
		p.changes = append(p.changes, change{op, what, setProvider(w)})
	}
	for _, o := range cur.ModelProviders {
		if !slices.ContainsFunc(want.ModelProviders, func(w modelProviderSpec) bool { return w.Name == o.Name }) {
			p.last = append(p.last, change{'-', "model provider " + o.Name, func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.DeleteModelProvider(ctx, &guardv1.DeleteModelProviderRequest{Name: o.Name})
				return err
			}})
		}
	}
	for _, w := range want.ModelPrices {
		i := slices.IndexFunc(cur.ModelPrices, func(o modelPriceSpec) bool { return o.key() == w.key() })
		if i >= 0 && cur.ModelPrices[i] == w {
			continue
		}
		op := byte('+')
		if i >= 0 {
			op = '~'
		}
		p.changes = append(p.changes, change{op, fmt.Sprintf("model price %s: %d in, %d out, %d cache read, %d cache write (micro-units per million tokens)",
			w.key(), w.InputMicros, w.OutputMicros, w.CacheReadMicros, w.CacheWriteMicros), setPrice(w, false)})
	}
	for _, o := range cur.ModelPrices {
		if !slices.ContainsFunc(want.ModelPrices, func(w modelPriceSpec) bool { return w.key() == o.key() }) {
			p.last = append(p.last, change{'-', "model price " + o.key(), setPrice(o, true)})
		}
	}
	return p
}

func setProvider(w modelProviderSpec) func(ctx context.Context, c *clients, _ groupBook) error {
	return func(ctx context.Context, c *clients, _ groupBook) error {
		kind, err := enumword.Parse[guardv1.ModelProviderKind](w.Kind)
		if err != nil {
			return fmt.Errorf("model provider %s: kind: %w", w.Name, err)
		}
		req := &guardv1.SetModelProviderRequest{Name: w.Name, Kind: kind, BaseUrl: w.BaseURL}
		if w.Credential != secret.Redacted {
			cred := w.Credential // "" removes it
			req.Credential = &cred
		}
		_, err = c.reg.SetModelProvider(ctx, req)
		return err
	}
}

func setPrice(w modelPriceSpec, remove bool) func(ctx context.Context, c *clients, _ groupBook) error {
	return func(ctx context.Context, c *clients, _ groupBook) error {
		_, err := c.reg.SetModelPrice(ctx, &guardv1.SetModelPriceRequest{Remove: remove, Price: &guardv1.ModelPrice{Provider: w.Provider, Model: w.Model,
			InputMicros: w.InputMicros, OutputMicros: w.OutputMicros, CacheReadMicros: w.CacheReadMicros, CacheWriteMicros: w.CacheWriteMicros}})
		return err
	}
}

// checkModelProviders refuses a provider or price listed twice.
func checkModelProviders(s *state, _ func(kind, key string) error) error {
	dup := duplicates()
	var err error
	for _, p := range s.ModelProviders {
		err = firstErr(err, dup("model provider", p.Name))
	}
	for _, p := range s.ModelPrices {
		err = firstErr(err, dup("model price", p.key()))
	}
	return err
}

// duplicates is a check of the model gateway's names: empty or listed twice.
func duplicates() func(kind, key string) error {
	seen := map[string]bool{}
	return func(kind, key string) error {
		if key == "" || strings.HasSuffix(key, "/") || strings.HasPrefix(key, "/") || seen[kind+" "+key] {
			return fmt.Errorf("%s %q is empty or listed twice", kind, key)
		}
		seen[kind+" "+key] = true
		return nil
	}
}

func sortModelProviders(s *state) {
	slices.SortFunc(s.ModelProviders, func(a, b modelProviderSpec) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.ModelPrices, func(a, b modelPriceSpec) int { return strings.Compare(a.key(), b.key()) })
}

func spentOf(spent, reserved string, limit int64, limitText string) string {
	if limit == 0 {
		return spent + " spent (no limit)"
	}
	return fmt.Sprintf("%s of %s spent, %s reserved", spent, limitText, reserved)
}
