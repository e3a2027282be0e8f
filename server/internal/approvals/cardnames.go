package approvals

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// groupIDPattern is the shape of a generated agent group id.
var groupIDPattern = regexp.MustCompile(`\bag_[0-9a-f]{16}\b`)

// nameGroups rewrites the generated group ids a card's title and question
// carry (the runner knows its sessions' groups by id only) into the groups'
// names, at creation: every surface that shows the card — console, ncl,
// chat cards, webhook bodies — then reads "research wants to send a message
// to ops", not "ag_5f44f5b6ed84603d wants …". The hold's agent_group_id and
// payload keep the ids, one step away. An id with no group stays as it is.
func nameGroups(ctx context.Context, tx pgx.Tx, texts ...*string) error {
	var ids []string
	for _, t := range texts {
		ids = append(ids, groupIDPattern.FindAllString(*t, -1)...)
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id, name FROM agent_groups WHERE id = ANY($1) AND name <> ''`, ids)
	if err != nil {
		return fmt.Errorf("name the card's groups: %w", err)
	}
	defer rows.Close()
	var pairs []string
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return fmt.Errorf("name the card's groups: %w", err)
		}
		pairs = append(pairs, id, name)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("name the card's groups: %w", err)
	}
	r := strings.NewReplacer(pairs...)
	for _, t := range texts {
		*t = r.Replace(*t)
	}
	return nil
}
