;; big_memory.wat: asks for 1000 pages (62.5 MiB) of memory at start.
(module
  (memory (export "memory") 1000)
  (func (export "spangle_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "spangle_partition") (param i32 i32 i32) (result i32) (i32.const 0)))
