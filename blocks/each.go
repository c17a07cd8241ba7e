package blocks

// Each calls fn with every record of partition p in rg, in key order,
// and returns the first error: fn's (which ends the walk), a value's or
// the iterator's (ErrCorrupt on a damaged page or block), or
// ErrPartitionNotHeld. key and value are valid only during the call: fn
// copies what it keeps. It is Iter's loop, for the callers that read
// every record; the iterator it uses is the View's and ends with it, on
// every path (fn's error or panic included), as Iter's do.
func (r *Reader) Each(p int, rg Range, fn func(key, value []byte) error) error {
	it, err := r.Iter(p, rg)
	if err != nil {
		return err
	}
	for it.Next() {
		val, err := it.Value()
		if err != nil {
			return err
		}
		if err := fn(it.Key(), val); err != nil {
			return err
		}
	}
	return it.Err()
}
