package node

import (
	"context"
	"io"
)

// download opens a version's source file for a build.
func (n *Node) download(ctx context.Context, db, version string, f SourceFile) (io.ReadCloser, error) {
	return n.source.Open(ctx, db, version, f.Name)
}
