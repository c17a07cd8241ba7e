;; echo.wat: a decoder that returns the value unchanged, as text/plain.
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "text/plain; charset=utf-8")
  (global $heap (mut i32) (i32.const 1024))

  (func (export "spangle_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $need i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (if (i32.gt_u (local.get $end) (i32.const 0x7fff0000)) (then (return (i32.const 0))))
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16))
                              (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1))
        (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; spangle_decode returns (val_ptr << 32) | val_len: the value itself.
  (func (export "spangle_decode") (param $p i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
            (i64.extend_i32_u (local.get $len))))

  (func (export "spangle_content_type") (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 25))))
