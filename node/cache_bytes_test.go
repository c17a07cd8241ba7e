package node

import (
	"fmt"
	"testing"
)

// TestCacheFilterBytes: the cache's reported bytes count its filters
// (the doorkeeper and the filter of held keys) besides its entries, even
// empty, and stay within its reported bound once full: the filters'
// bytes are set aside from the entries'. Without the filters counted,
// an empty cache reports 0 bytes.
func TestCacheFilterBytes(t *testing.T) {
	h, err := newAnswerCache(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	filters := int64(8 * (len(h.door) + len(h.held.Load().words)))
	if st := h.status(); st.Bytes != filters || filters < 16<<10 {
		t.Fatalf("an empty cache: %d bytes, want its filters' %d", st.Bytes, filters)
	}
	v := &version{name: "1"}
	value := make([]byte, 100)
	for i := range 100_000 {
		key := fmt.Appendf(nil, "key-%d", i)
		kh := h.hash(key)
		for !h.admit(kh) {
		}
		res := Result{Found: true, Value: value}
		h.put(v, kh, key, false, &res, h.epochNow())
	}
	h.c.CleanUp()
	st := h.status()
	if st.Bytes > st.MaxBytes || st.Bytes < st.MaxBytes*9/10 {
		t.Errorf("a full cache: %d bytes, bound %d", st.Bytes, st.MaxBytes)
	}
	if st.MaxBytes != entryBound(4<<20, gcPercent()) {
		t.Errorf("bound %d, want entryBound's %d", st.MaxBytes, entryBound(4<<20, gcPercent()))
	}
	t.Logf("%+v, filters %d", *st, h.filterBytes())
}
