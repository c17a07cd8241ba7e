;; start.wat: a partitioner with a start section, so the host keeps
;; wazero's goroutine per call. spangle_partition returns 0 once the start
;; section has run, and loops forever when n is 7.
(module
  (memory (export "memory") 1)
  (global $started (mut i32) (i32.const 0))
  (func $start (global.set $started (i32.const 1)))
  (start $start)
  (func (export "spangle_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "spangle_partition") (param i32 i32 i32) (result i32)
    (if (i32.eq (local.get 2) (i32.const 7))
      (then (loop $forever (br $forever))))
    (i32.sub (i32.const 1) (global.get $started))))
