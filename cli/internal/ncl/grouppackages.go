package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl groups packages: the packages installed into a group's image, by
// manager; in the document the group's aptPackages and npmPackages.

func (a *app) groupsPackages() *cobra.Command {
	add := &cobra.Command{
		Use: "add <group> <package>...", Short: "Add packages to a group's image",
		Example: "  ncl groups packages add research curl jq --manager apt",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("usage: %s <group> <package>... --manager apt|npm", cmd.CommandPath())
			}
			return nil
		},
	}
	addMgr := enumVar(add, "manager", managerEnum, "package manager")
	required(add, "manager")
	add.RunE = func(cmd *cobra.Command, args []string) error {
		a.groupArgs(&args[0])
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{
				Group: args[0], Manager: guardv1.PackageManager(addMgr.val), Packages: args[1:],
			})
			if err != nil {
				return err
			}
			return a.printer().Object(resp.GetConfig())
		})
	}
	remove := &cobra.Command{
		Use: "remove <group> <package>", Short: "Remove a package from a group's image",
		Example: "  ncl groups packages remove research jq --manager apt",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("usage: %s <group> <package> --manager apt|npm", cmd.CommandPath())
			}
			return nil
		},
	}
	rmMgr := enumVar(remove, "manager", managerEnum, "package manager")
	required(remove, "manager")
	remove.RunE = func(cmd *cobra.Command, args []string) error {
		a.groupArgs(&args[0])
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.RemoveGroupPackage(ctx, &guardv1.RemoveGroupPackageRequest{
				Group: args[0], Manager: guardv1.PackageManager(rmMgr.val), Package: args[1],
			})
			if err != nil {
				return err
			}
			return a.printer().Object(resp.GetConfig())
		})
	}
	return noun("packages", "Packages installed into a group's image", "  ncl groups packages add research curl --manager apt", add, remove)
}

// planPackages lists the packages want adds to a group (old: as it is)
// and those it drops (deletions).
func planPackages(old, g groupSpec) (adds, dels []change) {
	// Packages: what the document lists and the group lacks is added
	// (after the group, when it is new); the rest removed with prune.
	for _, m := range []struct {
		manager   guardv1.PackageManager
		have, got []string
	}{{guardv1.PackageManager_PACKAGE_MANAGER_APT, old.AptPackages, g.AptPackages}, {guardv1.PackageManager_PACKAGE_MANAGER_NPM, old.NpmPackages, g.NpmPackages}} {
		word := enumword.String(m.manager)
		var add []string
		for _, p := range m.got {
			if !slices.Contains(m.have, p) {
				add = append(add, p)
			}
		}
		if len(add) > 0 { // after every group's own changes, created or changed
			adds = append(adds, change{'+', fmt.Sprintf("%s packages of group %s: %s", word, g.Name, strings.Join(add, ", ")),
				func(ctx context.Context, c *clients, book groupBook) error {
					_, err := c.reg.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: idOr(book, g.Name), Manager: m.manager, Packages: add})
					return err
				}})
		}
		for _, p := range m.have {
			if !slices.Contains(m.got, p) {
				dels = append(dels, change{'-', fmt.Sprintf("%s package %s of group %s", word, p, g.Name), func(ctx context.Context, c *clients, book groupBook) error {
					_, err := c.reg.RemoveGroupPackage(ctx, &guardv1.RemoveGroupPackageRequest{Group: idOr(book, g.Name), Manager: m.manager, Package: p})
					return err
				}})
			}
		}
	}
	return adds, dels
}
