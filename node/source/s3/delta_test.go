package s3_test

import (
	"testing"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestNodeDelta: a delta version in S3 (_BASE, a data file of upserts,
// _DELETES) is built over the version the node serves. The full version
// before it has no _BASE nor _DIGEST: S3's NoSuchKey answers tell the
// node they are absent (without that, v1 fails to build).
func TestNodeDelta(t *testing.T) {
	f := startS3(t)
	const p, keys = "spangle/", 30
	f.putVersion(t, p, "db", "v1", 3, keys)
	n := startNode(t, f.source(t, p), nil)
	waitServing(t, n, "db", "v1", "v1", keys)

	f.put(t, p+"db/v2/part-00000", seqFile(t, [][2]string{{"key-1", "v2:1"}, {"new", "v2:new"}}))
	f.put(t, p+"db/v2/"+blocks.DeletesFileName, nodetest.Deletes(t, "key-2"))
	f.put(t, p+"db/v2/"+blocks.BaseFileName, []byte("v1\n"))
	f.put(t, p+"db/v2/_SUCCESS", nil)
	waitFor(t, "v2", func() bool {
		_, v, _ := get(n, "db", "key-0")
		return v == "v2"
	})
	for key, want := range map[string]string{"key-1": "v2:1", "new": "v2:new", "key-3": "v1:3", "key-2": ""} {
		val, _, err := get(n, "db", key)
		if want == "" {
			if err != errMissing {
				t.Errorf("deleted %s: %q, %v", key, val, err)
			}
			continue
		}
		if err != nil || val != want {
			t.Errorf("%s = %q, %v; want %q", key, val, err, want)
		}
	}
}
