package blocks

import "syscall"

// unmapPages takes the pages of b, a read-only shared file mapping, out
// of the process's resident set: the walk of buildBlockIndex touched
// every page of the file, and kept mapped they would count in its RSS
// before any Get asked for them (520 against 391 MiB of peak RSS in
// spangle-bench's start, the build's heap not yet returned). The pages
// stay in the page cache: a Get's first read of one maps it again (a
// minor fault), as before the index.
func unmapPages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }
