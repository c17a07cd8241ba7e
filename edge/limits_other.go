//go:build !unix

package edge

// defaultMaxConns is Config.MaxConns' default where the open-file limit
// is not known.
func defaultMaxConns() int { return 1024 }
