package slack

import (
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/clawguard/clawguard/cli/internal/bridge"
)

// Block Kit's limits the cards must stay inside.
const (
	sectionMax = 3000 // characters of a section's text
	actionsMax = 25   // elements of an actions block
	labelMax   = 75   // characters of a button's label
)

// message is the Web API options of a bridge message: its text as plain
// text sections (a card's words are never mrkdwn: an agent's words cannot
// mention @channel, a user or a link), and its buttons as actions blocks.
// The message's top-level text (notifications, clients without blocks) is
// the first line, escaped.
func message(text string, buttons []bridge.Button) []slack.MsgOption {
	first, _, _ := strings.Cut(text, "\n")
	blocks := sections(text)
	for i := 0; i < len(buttons); i += actionsMax {
		var els []slack.BlockElement
		for j := i; j < len(buttons) && j < i+actionsMax; j++ {
			els = append(els, button(j, buttons[j]))
		}
		blocks = append(blocks, slack.NewActionBlock("actions_"+strconv.Itoa(i/actionsMax), els...))
	}
	return []slack.MsgOption{slack.MsgOptionText(first, true), slack.MsgOptionBlocks(blocks...)}
}

// sections splits text into plain text sections, at a line break where
// one is near the limit.
func sections(text string) []slack.Block {
	var out []slack.Block
	r := []rune(text)
	for len(r) > 0 {
		n := min(len(r), sectionMax)
		if n < len(r) {
			if i := strings.LastIndex(string(r[:n]), "\n"); i > 0 {
				n = len([]rune(string(r[:n])[:i]))
			}
		}
		out = append(out, slack.NewSectionBlock(plain(string(r[:n])), nil, nil))
		r = []rune(strings.TrimLeft(string(r[n:]), "\n"))
	}
	return out
}

// button: the option's data is its value (a press sends it back); a link
// button (the console) has no value to send.
func button(i int, b bridge.Button) *slack.ButtonBlockElement {
	btn := slack.NewButtonBlockElement("option_"+strconv.Itoa(i), b.Data, plain(clip(b.Label, labelMax)))
	if b.URL != "" {
		btn = slack.NewButtonBlockElement("link_"+strconv.Itoa(i), "", plain(clip(b.Label, labelMax))).WithURL(b.URL).WithStyle(slack.StylePrimary)
	}
	return btn
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, true, false)
}

// clip keeps s within n characters.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
