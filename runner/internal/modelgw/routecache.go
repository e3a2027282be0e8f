package modelgw

import (
	"context"
	"sync"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
)

// providerRoute is where a session's calls of a kind go.
type providerRoute struct {
	provider, baseURL, credential string
	budget                        bool // the group has a budget: its calls reserve first
}

// routeCache keeps each session's routes a short while (RouteTTL): a call
// does not pay a round trip for them, and a rotated credential, a group's
// new provider or a new budget is used within the TTL.
type routeCache struct {
	models Models
	ttl    time.Duration

	mu      sync.Mutex
	entries map[routeKey]routeEntry
}

type routeKey struct{ session, kind string }

type routeEntry struct {
	route providerRoute
	until time.Time
}

func newRouteCache(m Models, ttl time.Duration) *routeCache {
	return &routeCache{models: m, ttl: ttl, entries: map[routeKey]routeEntry{}}
}

var kinds = map[string]guardv1.ModelProviderKind{
	modelrule.KindAnthropic: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC,
	modelrule.KindOpenAI:    guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI,
}

// get is the session's route of kind, read from the server when not kept.
func (c *routeCache) get(ctx context.Context, session, kind string) (providerRoute, error) {
	key := routeKey{session, kind}
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && time.Now().Before(e.until) {
		return e.route, nil
	}
	resp, err := c.models.GetModelRoute(ctx, &guardv1.GetModelRouteRequest{SessionId: session, Kind: kinds[kind]})
	if err != nil {
		return providerRoute{}, err
	}
	r := providerRoute{provider: resp.GetProvider(), baseURL: resp.GetBaseUrl(), credential: resp.GetCredential(), budget: resp.GetHasBudget()}
	c.mu.Lock()
	c.entries[key] = routeEntry{route: r, until: time.Now().Add(c.ttl)}
	c.mu.Unlock()
	return r, nil
}

// forget drops a session's routes (it stopped).
func (c *routeCache) forget(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.session == session {
			delete(c.entries, k)
		}
	}
}
