package blocks

import (
	"bytes"
	"slices"
	"testing"
)

// TestDeltaKeys: a delta build keeps the keys it added, changed and
// deleted (not a key upserted with its value, nor the deletion of a key
// the base lacks), for every compression's merge; none past
// Options.DeltaKeys, and none for a full build.
func TestDeltaKeys(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd, CompressionS2Blocks} {
		t.Run(string(comp), func(t *testing.T) {
			base := makeDataset(t, datasetOpts{files: 4, perFile: 2000, repetitive: true, seed: 1})
			d := makeDelta(t, base, 2)
			var want []string
			for k, v := range base.want {
				if nv, ok := d.full.want[k]; !ok || !bytes.Equal(nv, v) {
					want = append(want, k)
				}
			}
			for k := range d.full.want {
				if _, ok := base.want[k]; !ok {
					want = append(want, k)
				}
			}
			slices.Sort(want)
			for _, keep := range []int{len(want), len(want) - 1} {
				s := openTestStore(t, t.TempDir(), Options{DeltaKeys: keep})
				v1 := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: base.files(t), Compression: comp})
				if _, ok := v1.DeltaKeys(); ok {
					t.Errorf("a full build has delta keys")
				}
				v2 := build(t, s, d.spec(t, v1, "v2"))
				keys, ok := v2.DeltaKeys()
				if keep < len(want) {
					if ok {
						t.Errorf("keep %d of %d changed keys: %d kept", keep, len(want), len(keys))
					}
					continue
				}
				var got []string
				for _, k := range keys {
					got = append(got, string(k))
				}
				slices.Sort(got)
				if !ok || !slices.Equal(got, want) {
					t.Errorf("delta keys %d (%v), want %d: %q", len(got), ok, len(want), got[:min(len(got), 5)])
				}
			}
		})
	}
}
