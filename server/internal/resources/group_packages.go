package resources

import (
	"context"
	"slices"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/pkgname"
	"github.com/clawguard/clawguard/server/internal/store"
)

func packageList(c *GroupConfig, m guardv1.PackageManager) (*[]string, func(string) bool, error) {
	switch m {
	case guardv1.PackageManager_PACKAGE_MANAGER_APT:
		return &c.Apt, pkgname.Apt, nil
	case guardv1.PackageManager_PACKAGE_MANAGER_NPM:
		return &c.Npm, pkgname.Npm, nil
	case guardv1.PackageManager_PACKAGE_MANAGER_UNSPECIFIED:
		return nil, nil, invalid("manager", "required: apt or npm")
	}
	return nil, nil, invalid("manager", "unknown value %d (want apt or npm)", m)
}

// AddGroupPackage adds packages to the group's image: validated names, no
// duplicates; anything new bumps the version and rebuilds.
func (s *Service) AddGroupPackage(ctx context.Context, req *guardv1.AddGroupPackageRequest) (_ *guardv1.AddGroupPackageResponse, err error) {
	defer store.Faulted(&err, "group package")
	if err := checkAddGroupPackage(req); err != nil {
		return nil, err
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *GroupConfig) (configChange, error) {
		list, _, _ := packageList(c, req.GetManager())
		added := false
		for _, p := range req.GetPackages() {
			if !slices.Contains(*list, p) {
				*list = append(*list, p)
				added = true
			}
		}
		return configChange{container: added, reason: "packages added", rebuild: true}, nil
	})
	if err != nil {
		return nil, err
	}
	cfg, err := out.proto()
	if err != nil {
		return nil, err
	}
	return &guardv1.AddGroupPackageResponse{Config: cfg}, nil
}

// RemoveGroupPackage removes a package; one the group does not have is NotFound.
func (s *Service) RemoveGroupPackage(ctx context.Context, req *guardv1.RemoveGroupPackageRequest) (_ *guardv1.RemoveGroupPackageResponse, err error) {
	defer store.Faulted(&err, "group package")
	if err := checkRemoveGroupPackage(req); err != nil {
		return nil, err
	}
	out, err := s.changeConfig(ctx, req.GetGroup(), func(c *GroupConfig) (configChange, error) {
		list, _, _ := packageList(c, req.GetManager())
		i := slices.Index(*list, req.GetPackage())
		if i < 0 {
			return configChange{}, notFound("group %q has no package %q", req.GetGroup(), req.GetPackage())
		}
		*list = slices.Delete(*list, i, i+1)
		return configChange{container: true, reason: "package removed", rebuild: true}, nil
	})
	if err != nil {
		return nil, err
	}
	cfg, err := out.proto()
	if err != nil {
		return nil, err
	}
	return &guardv1.RemoveGroupPackageResponse{Config: cfg}, nil
}
