package slack

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/clawguard/clawguard/cli/internal/bridge"
)

// blocksOf renders a message as the Web API receives it.
func blocksOf(t *testing.T, text string, buttons []bridge.Button) (top string, blocks []map[string]any) {
	t.Helper()
	f := newFakeSlack(t)
	if _, _, err := slack.New(f.botToken, slack.OptionAPIURL(f.apiURL())).PostMessage("C1", message(text, buttons)...); err != nil {
		t.Fatal(err)
	}
	m := f.sentTo("C1")[0]
	if err := json.Unmarshal([]byte(m.Blocks), &blocks); err != nil {
		t.Fatalf("blocks %q: %v", m.Blocks, err)
	}
	return m.Top, blocks
}

// A card stays inside Block Kit's limits however long it is or however
// many options it has: sections of at most 3000 characters, at most 25
// buttons per actions block, labels of at most 75; its words are plain
// text and its notification line escaped.
func TestCardsStayInsideBlockKitsLimits(t *testing.T) {
	long := "🔐 <!channel> & <@U1>\n" + strings.Repeat("line of arguments\n", 400)
	var buttons []bridge.Button
	for i := range 30 {
		buttons = append(buttons, bridge.Button{Label: fmt.Sprintf("Connect to %s %d", strings.Repeat("x", 80), i), Data: bridge.CallbackData("hold_1", i)})
	}
	top, blocks := blocksOf(t, long, buttons)
	if top != "🔐 &lt;!channel&gt; &amp; &lt;@U1&gt;" {
		t.Fatalf("notification text %q, want the first line escaped", top)
	}
	var text strings.Builder
	var values []string
	actions := 0
	for _, b := range blocks {
		switch b["type"] {
		case "section":
			tx := b["text"].(map[string]any)
			if tx["type"] != "plain_text" || len([]rune(tx["text"].(string))) > sectionMax {
				t.Fatalf("section %v: want plain text of at most %d characters", tx["type"], sectionMax)
			}
			text.WriteString(tx["text"].(string) + "\n")
		case "actions":
			actions++
			els := b["elements"].([]any)
			if len(els) > actionsMax {
				t.Fatalf("an actions block of %d elements", len(els))
			}
			for _, e := range els {
				el := e.(map[string]any)
				if l := el["text"].(map[string]any)["text"].(string); len([]rune(l)) > labelMax {
					t.Fatalf("a label of %d characters", len([]rune(l)))
				}
				values = append(values, el["value"].(string))
			}
		}
	}
	if actions != 2 || len(values) != 30 || values[29] != bridge.CallbackData("hold_1", 29) {
		t.Fatalf("%d actions blocks, values %v", actions, values)
	}
	if strings.Count(text.String(), "line of arguments") != 400 {
		t.Fatalf("the sections lost text: %d of 400 lines", strings.Count(text.String(), "line of arguments"))
	}
}

// A hold that must be confirmed in the console gets a link button (no
// value: a press of it resolves nothing).
func TestAConsoleLinkIsALinkButton(t *testing.T) {
	_, blocks := blocksOf(t, "🔐 Grant owner", []bridge.Button{
		{Label: bridge.ConfirmLabel, URL: "https://console.example/holds/hold_1"},
		{Label: "Reject", Data: bridge.CallbackData("hold_1", 1)},
	})
	els := blocks[len(blocks)-1]["elements"].([]any)
	link := els[0].(map[string]any)
	if link["url"] != "https://console.example/holds/hold_1" || link["value"] != nil {
		t.Fatalf("link button %v", link)
	}
	if _, err := url.Parse(link["url"].(string)); err != nil {
		t.Fatal(err)
	}
}
