;; init_loop.wat: a reactor whose _initialize never returns.
(module
  (memory (export "memory") 1)
  (func (export "_initialize") (loop $forever (br $forever)))
  (func (export "spangle_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "spangle_partition") (param i32 i32 i32) (result i32) (i32.const 0)))
