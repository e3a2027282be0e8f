package docker

import (
	"context"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/errdefs"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// pruneGroupImages removes a group's images older than version, now that
// version is built: each config change builds a new image, and without this
// they pile up in Docker. An image a container still uses (running, or
// stopped and kept) is left: Docker refuses to remove it, and the next
// build tries again. Failures are logged, never a failed build.
func (r *Runtime) pruneGroupImages(ctx context.Context, groupID string, version int64) {
	imgs, err := r.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", rt.LabelGroup+"="+groupID))})
	if err != nil {
		r.log.Warn("list old group images", "group", groupID, "err", err)
		return
	}
	prefix := "clawguard-agent-" + groupID + ":"
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			v, ok := strings.CutPrefix(tag, prefix)
			if !ok {
				continue
			}
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n >= version {
				continue // the new one, a newer one, or not a version tag
			}
			_, err := r.cli.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true})
			switch {
			case err == nil:
				r.log.Info("old group image removed", "group", groupID, "image", tag)
			case errdefs.IsConflict(err):
				r.log.Debug("old group image kept: a container uses it", "group", groupID, "image", tag)
			case !errdefs.IsNotFound(err):
				r.log.Warn("remove old group image", "group", groupID, "image", tag, "err", err)
			}
		}
	}
}
