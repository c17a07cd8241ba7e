package seqfile

// Hadoop's variable-length integers (org.apache.hadoop.io.WritableUtils).
//
// A value in [-112, 127] is one byte. Otherwise the first byte gives the sign
// and the number of bytes that follow (1 to 8), and the magnitude follows
// big-endian; negative values store the one's complement.

// maxVIntLen is the longest encoding of a VLong: a prefix byte and 8 bytes.
const maxVIntLen = 9

// appendVLong appends the WritableUtils.writeVLong encoding of v to b.
func appendVLong(b []byte, v int64) []byte {
	if v >= -112 && v <= 127 {
		return append(b, byte(v))
	}
	prefix := int64(-112)
	if v < 0 {
		v = ^v
		prefix = -120
	}
	n := 0
	for tmp := v; tmp != 0; tmp >>= 8 {
		n++
	}
	b = append(b, byte(prefix-int64(n)))
	for i := n; i > 0; i-- {
		b = append(b, byte(v>>(uint(i-1)*8)))
	}
	return b
}

// vintSize returns the total length of the encoding whose first byte is b,
// like WritableUtils.decodeVIntSize.
func vintSize(b byte) int {
	v := int8(b)
	switch {
	case v >= -112:
		return 1
	case v < -120:
		return -119 - int(v)
	default:
		return -111 - int(v)
	}
}

// decodeVLong decodes the encoding at the start of b. It returns the value
// and the number of bytes used, or n == 0 if b is too short.
func decodeVLong(b []byte) (v int64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	first := int8(b[0])
	if first >= -112 {
		return int64(first), 1
	}
	n = vintSize(b[0])
	if len(b) < n {
		return 0, 0
	}
	var u uint64
	for _, c := range b[1:n] {
		u = u<<8 | uint64(c)
	}
	v = int64(u)
	if first < -120 {
		v = ^v
	}
	return v, n
}
